//! Where values are at an address: location expressions and lists (DWARF 4 and 5 forms),
//! code ranges, and the parameters of an inlined call at a probe's address.

use super::eval;
use super::*;
use crate::gobin::elf::symbols;
use crate::gobin::Param;
use crate::gotypes::Types;

/// The sections that say where values are at a given address (DWARF 4 and 5 forms).
pub(crate) struct Lists {
    locations: gimli::LocationLists<R>,
    ranges: gimli::RangeLists<R>,
    debug_addr: gimli::DebugAddr<R>,
}

/// What a compile unit's root says about address encodings.
#[derive(Clone, Copy)]
pub(super) struct UnitBase {
    pub(super) encoding: gimli::Encoding,
    pub(super) base_address: u64,
    pub(super) addr_base: gimli::DebugAddrBase,
}

/// Where DWARF says a value is at one address.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum DwarfLocation {
    /// In these pieces (registers, memory, some perhaps missing).
    Pieces(Vec<eval::Piece>),
    /// Nowhere: its location list does not cover the address (optimized away there).
    Nowhere,
    /// Somewhere gtrace cannot follow, and why (a computed value, a dereference).
    Unsupported(String),
}

/// A parameter of an inlined call, and where DWARF puts it at one address.
pub(crate) struct InlinedParam {
    pub param: Param,
    pub location: DwarfLocation,
}

impl DwarfInfo {
    pub(super) fn lists(&mut self, data: &[u8]) -> Result<&Lists, TargetError> {
        if self.lists.is_none() {
            let path = self.path.clone();
            let section = |name: &str| -> Result<R, TargetError> {
                Ok(match elf::section(&path, data, name)? {
                    Some(bytes) => R::new(Arc::from(&*bytes), gimli::LittleEndian),
                    None => R::new(Arc::from(&[][..]), gimli::LittleEndian),
                })
            };
            self.lists = Some(Lists {
                locations: gimli::LocationLists::new(
                    gimli::DebugLoc::from(section(".debug_loc")?),
                    gimli::DebugLocLists::from(section(".debug_loclists")?),
                ),
                ranges: gimli::RangeLists::new(
                    gimli::DebugRanges::from(section(".debug_ranges")?),
                    gimli::DebugRngLists::from(section(".debug_rnglists")?),
                ),
                debug_addr: gimli::DebugAddr::from(section(".debug_addr")?),
            });
        }
        Ok(self.lists.as_ref().expect("set above"))
    }

    pub(super) fn unit_base(&self, u: usize) -> Result<UnitBase, TargetError> {
        let slot = self.unit(u)?;
        let mut base =
            UnitBase { encoding: slot.header.encoding(), base_address: 0, addr_base: gimli::DebugAddrBase(0) };
        let mut entries = slot.header.entries(&slot.abbrevs);
        if let Some(root) = entries.next_dfs().map_err(|e| self.bad(e))? {
            if let Some(AttributeValue::Addr(a)) = root.attr_value(dw::DW_AT_low_pc) {
                base.base_address = a;
            }
            if let Some(AttributeValue::DebugAddrBase(b)) = root.attr_value(dw::DW_AT_addr_base) {
                base.addr_base = b;
            }
        }
        Ok(base)
    }

    /// Whether the DIE's code (low_pc/high_pc or ranges) holds `addr`.
    fn covers(&self, entry: &Entry, addr: u64, base: &UnitBase, lists: &Lists) -> Result<bool, TargetError> {
        Ok(self.ranges_of(entry, base, lists)?.iter().any(|(lo, hi)| *lo <= addr && addr < *hi))
    }

    /// The address ranges `[lo, hi)` of the DIE's code (low_pc/high_pc or ranges).
    pub(super) fn ranges_of(
        &self,
        entry: &Entry,
        base: &UnitBase,
        lists: &Lists,
    ) -> Result<Vec<(u64, u64)>, TargetError> {
        if let Some(AttributeValue::Addr(low)) = entry.attr_value(dw::DW_AT_low_pc) {
            let high = match entry.attr_value(dw::DW_AT_high_pc) {
                Some(AttributeValue::Addr(h)) => h,
                Some(v) => low + v.udata_value().unwrap_or(0),
                None => low + 1,
            };
            return Ok(vec![(low, high)]);
        }
        let mut out = Vec::new();
        if let Some(AttributeValue::RangeListsRef(raw)) = entry.attr_value(dw::DW_AT_ranges) {
            let offset = gimli::RangeListsOffset(raw.0);
            let mut ranges = lists
                .ranges
                .ranges(offset, base.encoding, base.base_address, &lists.debug_addr, base.addr_base)
                .map_err(|e| self.bad(e))?;
            while let Some(r) = ranges.next().map_err(|e| self.bad(e))? {
                if r.begin < r.end {
                    out.push((r.begin, r.end));
                }
            }
        }
        Ok(out)
    }

    /// Where a location attribute (an expression, or a list) places the value at
    /// `addr`, with `frame_base` for `DW_OP_fbreg`.
    pub(super) fn location_at(
        &self,
        value: AttributeValue<R>,
        addr: u64,
        base: &UnitBase,
        lists: &Lists,
        frame_base: eval::FrameBase,
    ) -> Result<DwarfLocation, TargetError> {
        let expr = match value {
            AttributeValue::Exprloc(e) => Some(e),
            AttributeValue::LocationListsRef(offset) => {
                let mut locs = lists
                    .locations
                    .locations(offset, base.encoding, base.base_address, &lists.debug_addr, base.addr_base)
                    .map_err(|e| self.bad(e))?;
                let mut found = None;
                while let Some(entry) = locs.next().map_err(|e| self.bad(e))? {
                    if entry.range.begin <= addr && addr < entry.range.end {
                        found = Some(entry.data);
                        break;
                    }
                }
                found
            }
            _ => return Ok(DwarfLocation::Unsupported("a location DWARF gives in an unknown form".to_string())),
        };
        let Some(expr) = expr else { return Ok(DwarfLocation::Nowhere) };
        Ok(match eval::evaluate(expr, base.encoding, frame_base) {
            Ok(pieces) => DwarfLocation::Pieces(pieces),
            Err(why) => DwarfLocation::Unsupported(why),
        })
    }

    /// The frame base (`DW_AT_frame_base`) of a subprogram DIE, for `DW_OP_fbreg`.
    pub(super) fn frame_base_of(&self, entry: &Entry, base: &UnitBase) -> eval::FrameBase {
        match entry.attr_value(dw::DW_AT_frame_base) {
            Some(AttributeValue::Exprloc(e)) => eval::frame_base(e, base.encoding).ok(),
            _ => None,
        }
    }

    /// The parameters of the call of `callee` inlined into `caller` whose code holds
    /// `body`, each with the registers DWARF puts it in at `at` (the probe's address,
    /// which may be outside the body). None when DWARF has no such inlined call.
    pub(crate) fn inlined_params(
        &mut self,
        data: &[u8],
        callee: &str,
        caller: &str,
        body: u64,
        at: u64,
        types: &mut Types,
    ) -> Result<Option<Vec<InlinedParam>>, TargetError> {
        let Some(origin) = self.lookup("f", symbols::package_of(callee), callee, |i| &i.functions)? else {
            return Ok(None);
        };
        let Some(outer) = self.lookup("f", symbols::package_of(caller), caller, |i| &i.functions)? else {
            return Ok(None);
        };
        let (u, off) = self.locate(outer).ok_or_else(|| self.bad_ref("reference outside .debug_info", outer))?;
        let base = self.unit_base(u)?;
        self.lists(data)?;
        let lists = self.lists.take().expect("loaded above");
        let found = self.find_inlined(u, off, origin, body, &base, &lists);
        let (frame_base, raw) = match found {
            Ok(Some(found)) => found,
            Ok(None) => {
                self.lists = Some(lists);
                return Ok(None);
            }
            Err(e) => {
                self.lists = Some(lists);
                return Err(e);
            }
        };
        let mut located = Vec::new();
        for (param_origin, location) in raw {
            let location = match location {
                Some(v) => self.location_at(v, at, &base, &lists, frame_base),
                None => Ok(DwarfLocation::Nowhere),
            };
            match location {
                Ok(l) => located.push((param_origin, l)),
                Err(e) => {
                    self.lists = Some(lists);
                    return Err(e);
                }
            }
        }
        self.lists = Some(lists);
        let mut out = Vec::new();
        for (param_origin, location) in located {
            let (die, _) = self.die_with_children(param_origin)?;
            let Some(ty) = die.ty else { continue };
            let ty = self.type_id(ty, types)?;
            let name = die.name.unwrap_or_else(|| "_".to_string());
            out.push(InlinedParam { param: Param { name, ty, is_result: die.variable_parameter }, location });
        }
        Ok(Some(out))
    }

    /// In the subtree of the subprogram DIE at `off`, the inlined call of `origin`
    /// covering `addr`: the subprogram's frame base, and the call's formal parameters'
    /// abstract origins and location attributes.
    #[allow(clippy::type_complexity)]
    fn find_inlined(
        &self,
        u: usize,
        off: UnitOffset,
        origin: DebugInfoOffset,
        addr: u64,
        base: &UnitBase,
        lists: &Lists,
    ) -> Result<Option<(eval::FrameBase, Vec<(DebugInfoOffset, Option<AttributeValue<R>>)>)>, TargetError> {
        let slot = self.unit(u)?;
        let mut entries = slot.header.entries_at_offset(&slot.abbrevs, off).map_err(|e| self.bad(e))?;
        let Some(first) = entries.next_dfs().map_err(|e| self.bad(e))? else { return Ok(None) };
        let top = first.depth();
        let frame_base = self.frame_base_of(first, base);
        let mut inside: Option<isize> = None;
        let mut params = Vec::new();
        while let Some(entry) = entries.next_dfs().map_err(|e| self.bad(e))? {
            let depth = entry.depth() - top;
            if depth <= 0 {
                break;
            }
            if let Some(d) = inside {
                if depth <= d {
                    break;
                }
                if depth == d + 1 && entry.tag() == dw::DW_TAG_formal_parameter {
                    if let Some(p) = entry.attr_value(dw::DW_AT_abstract_origin).and_then(|v| self.reference(u, v)) {
                        params.push((p, entry.attr_value(dw::DW_AT_location)));
                    }
                }
                continue;
            }
            if entry.tag() == dw::DW_TAG_inlined_subroutine
                && entry.attr_value(dw::DW_AT_abstract_origin).and_then(|v| self.reference(u, v)) == Some(origin)
                && self.covers(entry, addr, base, lists)?
            {
                inside = Some(depth);
            }
        }
        Ok(inside.map(|_| (frame_base, params)))
    }
}
