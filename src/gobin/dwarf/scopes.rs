//! The scopes of one function: its body, the calls inlined into it (and into those),
//! and their lexical blocks, each with the address ranges of its code and the variables
//! and parameters declared in it (an inlined call's own name them through their
//! abstract origin). What a line probe's locals are, and where they are at an address.

use super::eval;
use super::locations::{DwarfLocation, UnitBase};
use super::*;
use crate::gobin::elf::symbols;

/// What a scope is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ScopeKind {
    /// The function's own body.
    Function,
    /// A call inlined here: the function called, and where the call is in its caller
    /// (a file of the line table, and a line).
    Inlined { name: String, call_file: Option<u32>, call_line: u32 },
    /// A lexical block: a `{ }`, a loop's or an `if`'s body.
    Block,
}

/// One scope, with what is declared directly in it.
#[derive(Clone, Debug)]
pub(crate) struct Scope {
    pub kind: ScopeKind,
    pub parent: Option<usize>,
    /// The code's address ranges `[lo, hi)`.
    pub ranges: Vec<(u64, u64)>,
    pub vars: Vec<Var>,
}

impl Scope {
    pub fn holds(&self, pc: u64) -> bool {
        self.ranges.iter().any(|(lo, hi)| *lo <= pc && pc < *hi)
    }
}

/// A variable or parameter (DW_TAG_variable, DW_TAG_formal_parameter).
#[derive(Clone, Debug)]
pub(crate) struct Var {
    pub name: String,
    pub decl_line: Option<u32>,
    pub ty: Option<DebugInfoOffset>,
    pub location: Option<AttributeValue<R>>,
    pub is_param: bool,
}

/// The scopes of one function; `scopes[0]` is its body.
pub(crate) struct Scopes {
    pub scopes: Vec<Scope>,
    frame_base: eval::FrameBase,
    base: UnitBase,
}

impl Scopes {
    /// The function and the inlined calls whose code holds `pc`, outermost first: the
    /// innermost is the one whose source the instruction is.
    pub fn frames_at(&self, pc: u64) -> Vec<usize> {
        let mut chain = vec![0];
        loop {
            let last = *chain.last().expect("starts with the function");
            let inner = (0..self.scopes.len()).find(|i| {
                self.scopes[*i].parent.is_some_and(|p| self.frame_of(p) == last)
                    && matches!(self.scopes[*i].kind, ScopeKind::Inlined { .. })
                    && self.scopes[*i].holds(pc)
            });
            match inner {
                Some(i) => chain.push(i),
                None => return chain,
            }
        }
    }

    /// The function or inlined call a scope belongs to (itself, for those).
    pub fn frame_of(&self, mut scope: usize) -> usize {
        while let (ScopeKind::Block, Some(p)) = (&self.scopes[scope].kind, self.scopes[scope].parent) {
            scope = p;
        }
        scope
    }
}

impl DwarfInfo {
    /// The scopes of function `name` (its DWARF subprogram); None when DWARF has none.
    pub(crate) fn scopes(&mut self, data: &[u8], name: &str) -> Result<Option<Arc<Scopes>>, TargetError> {
        if let Some(s) = self.scopes_cache.get(name) {
            return Ok(Some(s.clone()));
        }
        let Some(at) = self.lookup("f", symbols::package_of(name), name, |i| &i.functions)? else { return Ok(None) };
        let (u, off) = self.locate(at).ok_or_else(|| self.bad_ref("reference outside .debug_info", at))?;
        let table = self.line_table(data)?;
        let base = self.unit_base(u)?;
        self.lists(data)?;
        let lists = self.lists.take().expect("loaded above");
        let walked = self.walk_scopes(u, off, &base, &lists, &table);
        self.lists = Some(lists);
        let (frame_base, scopes) = walked?;
        let scopes = Arc::new(Scopes { scopes, frame_base, base });
        self.scopes_cache.insert(name.to_string(), scopes.clone());
        Ok(Some(scopes))
    }

    /// Reads the subprogram at `off` of unit `u` and every scope under it.
    fn walk_scopes(
        &self,
        u: usize,
        off: UnitOffset,
        base: &UnitBase,
        lists: &locations::Lists,
        table: &LineTable,
    ) -> Result<(eval::FrameBase, Vec<Scope>), TargetError> {
        let slot = self.unit(u)?;
        let mut entries = slot.header.entries_at_offset(&slot.abbrevs, off).map_err(|e| self.bad(e))?;
        let first =
            entries.next_dfs().map_err(|e| self.bad(e))?.ok_or_else(|| self.bad_ref("no DIE", self.at(u, off)))?;
        let top = first.depth();
        let frame_base = self.frame_base_of(first, base);
        let mut scopes = vec![Scope {
            kind: ScopeKind::Function,
            parent: None,
            ranges: self.ranges_of(first, base, lists)?,
            vars: vec![],
        }];
        // The scope open at each depth below the function.
        let mut open: Vec<(isize, usize)> = vec![(0, 0)];
        while let Some(entry) = entries.next_dfs().map_err(|e| self.bad(e))? {
            let depth = entry.depth() - top;
            if depth <= 0 {
                break;
            }
            while open.last().is_some_and(|(d, _)| *d >= depth) {
                open.pop();
            }
            let Some(&(_, parent)) = open.last() else { break };
            let kind = match entry.tag() {
                dw::DW_TAG_variable | dw::DW_TAG_formal_parameter => {
                    if let Some(var) = self.var(u, entry)? {
                        scopes[parent].vars.push(var);
                    }
                    continue;
                }
                dw::DW_TAG_lexical_block => ScopeKind::Block,
                dw::DW_TAG_inlined_subroutine => {
                    let origin = entry.attr_value(dw::DW_AT_abstract_origin).and_then(|v| self.reference(u, v));
                    let name = match origin {
                        Some(o) => self.die(o)?.name.unwrap_or_default(),
                        None => String::new(),
                    };
                    // gimli gives a file attribute as a `FileIndex`, which `udata_value`
                    // does not read: without it no inlined code was on its call's line.
                    let call_file = entry
                        .attr_value(dw::DW_AT_call_file)
                        .and_then(|v| match v {
                            AttributeValue::FileIndex(f) => Some(f),
                            v => v.udata_value(),
                        })
                        .and_then(|f| table.unit_files.get(u)?.get(&f).copied());
                    let call_line =
                        entry.attr_value(dw::DW_AT_call_line).and_then(|v| v.udata_value()).unwrap_or(0) as u32;
                    ScopeKind::Inlined { name, call_file, call_line }
                }
                _ => continue,
            };
            scopes.push(Scope {
                kind,
                parent: Some(parent),
                ranges: self.ranges_of(entry, base, lists)?,
                vars: vec![],
            });
            open.push((depth, scopes.len() - 1));
        }
        Ok((frame_base, scopes))
    }

    /// A variable DIE: its own attributes, or those of its abstract origin (a variable of
    /// an inlined call). None for compiler temporaries (`~r0`, `.autotmp`, `&x`...).
    fn var(&self, u: usize, entry: &Entry) -> Result<Option<Var>, TargetError> {
        let own = self.read_die(u, entry)?;
        let origin = match entry.attr_value(dw::DW_AT_abstract_origin).and_then(|v| self.reference(u, v)) {
            Some(o) => Some(self.die(o)?),
            None => None,
        };
        let pick = origin.as_ref().unwrap_or(&own);
        let Some(name) = own.name.clone().or(pick.name.clone()) else { return Ok(None) };
        // Go's own names, and `&name`: a local moved to the heap, held by its address
        // (check/locals.rs reads it through); not `~r0` and the like.
        let bare = name.strip_prefix('&').unwrap_or(&name);
        if !bare.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_') {
            return Ok(None);
        }
        Ok(Some(Var {
            name,
            decl_line: own.decl_line.or(pick.decl_line).and_then(|l| u32::try_from(l).ok()),
            ty: own.ty.or(pick.ty),
            location: entry.attr_value(dw::DW_AT_location),
            is_param: entry.tag() == dw::DW_TAG_formal_parameter,
        }))
    }

    /// Where `var` of `scopes` is at `pc`.
    pub(crate) fn var_location(
        &mut self,
        data: &[u8],
        scopes: &Scopes,
        var: &Var,
        pc: u64,
    ) -> Result<DwarfLocation, TargetError> {
        let Some(value) = var.location.clone() else { return Ok(DwarfLocation::Nowhere) };
        self.lists(data)?;
        let lists = self.lists.take().expect("loaded above");
        let found = self.location_at(value, pc, &scopes.base, &lists, scopes.frame_base);
        self.lists = Some(lists);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(kind: ScopeKind, parent: Option<usize>, lo: u64, hi: u64) -> Scope {
        Scope { kind, parent, ranges: vec![(lo, hi)], vars: vec![] }
    }

    fn inlined(name: &str) -> ScopeKind {
        ScopeKind::Inlined { name: name.into(), call_file: None, call_line: 1 }
    }

    #[test]
    fn frames_nest_through_blocks() {
        let scopes = Scopes {
            scopes: vec![
                scope(ScopeKind::Function, None, 0, 100),
                scope(ScopeKind::Block, Some(0), 10, 50),
                scope(inlined("f"), Some(1), 20, 40),
                scope(ScopeKind::Block, Some(2), 25, 35),
                scope(inlined("g"), Some(3), 30, 32),
                scope(inlined("h"), Some(0), 60, 70),
            ],
            frame_base: None,
            base: UnitBase {
                encoding: gimli::Encoding { address_size: 8, format: gimli::Format::Dwarf32, version: 4 },
                base_address: 0,
                addr_base: gimli::DebugAddrBase(0),
            },
        };
        assert_eq!(scopes.frames_at(5), vec![0]);
        assert_eq!(scopes.frames_at(21), vec![0, 2]);
        assert_eq!(scopes.frames_at(31), vec![0, 2, 4]);
        assert_eq!(scopes.frames_at(65), vec![0, 5]);
        assert_eq!(scopes.frame_of(3), 2);
    }
}
