//! Package-level variables: `DW_TAG_variable` DIEs at the top of a compile unit, named
//! with their package (`main.config`, `net/http.DefaultClient`), placed at a fixed
//! address by `DW_OP_addr` (the link-time address: a PIE adds its load bias).

use super::*;
use crate::gotypes::Types;

/// A package-level variable: its link-time address and its type.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DwarfVariable {
    pub addr: u64,
    pub ty: TypeId,
}

impl DwarfInfo {
    /// The package-level variable `name` (`main.config`); None when DWARF has none, or
    /// places it other than at a fixed address.
    pub(crate) fn variable(&mut self, name: &str, types: &mut Types) -> Result<Option<DwarfVariable>, TargetError> {
        let package = crate::gobin::package_of(name);
        let Some(at) = self.lookup("v", package, name, |i| &i.variables)? else { return Ok(None) };
        let (u, off) = self.locate(at).ok_or_else(|| self.bad_ref("reference outside .debug_info", at))?;
        let (ty, location) = {
            let slot = self.unit(u)?;
            let entry = slot.header.entry(&slot.abbrevs, off).map_err(|e| self.bad(e))?;
            let ty = entry.attr_value(dw::DW_AT_type).and_then(|v| self.reference(u, v));
            let location = match entry.attr_value(dw::DW_AT_location) {
                Some(AttributeValue::Exprloc(e)) => Some(e.0.to_slice().map_err(|e| self.bad(e))?.into_owned()),
                _ => None,
            };
            (ty, location)
        };
        let Some(addr) = location.as_deref().and_then(fixed_address) else { return Ok(None) };
        let Some(ty) = ty else { return Err(self.bad_ref("variable without a type", at)) };
        Ok(Some(DwarfVariable { addr, ty: self.type_id(ty, types)? }))
    }

    /// The type DWARF names `name` (`main.Point`, `net/url.URL`), parsed into `types`.
    pub(crate) fn type_named(&mut self, name: &str, types: &mut Types) -> Result<Option<TypeId>, TargetError> {
        let package = crate::gobin::package_of(name);
        match self.lookup("t", package, name, |i| &i.types)? {
            Some(at) => Ok(Some(self.type_id(at, types)?)),
            None => Ok(None),
        }
    }

    /// The type whose runtime descriptor is at `keys` (its link-time address, its
    /// offset from `runtime.types`): exact where names are not (a runtime type name says
    /// `mysql.Error` for every package named mysql).
    pub(crate) fn type_of_runtime_type(
        &mut self,
        keys: &[u64],
        types: &mut Types,
    ) -> Result<Option<TypeId>, TargetError> {
        let found = match self.memo.recall("r", format_args!("{keys:?}")) {
            Some(found) => found.map(|[at, _]| DebugInfoOffset(at as usize)),
            None => {
                let mut found = None;
                for u in 0..self.units.len() {
                    let index = self.index(u)?;
                    if let Some(o) = keys.iter().find_map(|k| index.runtime_types.get(k)) {
                        found = Some(self.at(u, *o));
                        break;
                    }
                }
                self.memo.keep(found.map(|at| [at.0 as u64, 0]));
                found
            }
        };
        match found {
            Some(at) => Ok(Some(self.type_id(at, types)?)),
            None => Ok(None),
        }
    }

    /// The runtime descriptor of the type DWARF names `name` (pointer types too): its
    /// key, and whether that is an address (else an offset from `runtime.types`).
    pub(crate) fn runtime_type_named(&mut self, name: &str) -> Result<Option<(u64, bool)>, TargetError> {
        if let Some(found) = self.memo.recall("n", name) {
            return Ok(found.map(|[k, is_addr]| (k, is_addr != 0)));
        }
        let package = crate::gobin::symbols::package_of(name.trim_start_matches('*'));
        let mut found = None;
        let first = self.first_units(package, true);
        'search: for phase in 0..2 {
            let units = if phase == 0 { first.clone() } else { self.other_units(&first) };
            for u in units {
                if let Some(f) = self.find_in(u, name, |i| &i.runtime_type_names)? {
                    found = Some(f);
                    break 'search;
                }
            }
        }
        self.memo.keep(found.map(|(k, is_addr)| [k, is_addr as u64]));
        Ok(found)
    }

    /// The names of the package-level variables of `package`, for suggestions.
    pub(crate) fn variables_of(&mut self, package: &str) -> Result<Vec<String>, TargetError> {
        let mut names = Vec::new();
        for u in self.first_units(package, false) {
            names.extend(self.index(u)?.variables.keys().cloned());
        }
        names.sort();
        Ok(names)
    }
}

/// The address of a location expression that is exactly `DW_OP_addr ADDR` (what Go
/// writes for a package-level variable).
fn fixed_address(expr: &[u8]) -> Option<u64> {
    match expr {
        [0x03, rest @ ..] if rest.len() == 8 => Some(u64::from_le_bytes(rest.try_into().ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_bare_address_is_fixed() {
        assert_eq!(super::fixed_address(&[0x03, 0xe0, 0x17, 0x76, 0, 0, 0, 0, 0]), Some(0x7617e0));
        assert_eq!(super::fixed_address(&[0x03, 1, 2]), None);
        assert_eq!(super::fixed_address(&[0x91, 0x08]), None);
    }
}

impl DwarfInfo {
    /// Every type with a runtime descriptor (`DW_AT_go_runtime_type`): its key (an
    /// address, or an offset from `runtime.types`: the bool says which), its DWARF name,
    /// and its layout parsed into `types` when `wants` says the name needs one.
    ///
    /// Parsing a layout numbers its types (`TypeId`s, which the plan carries), so the
    /// types are taken in the order DWARF has them, never in a hash map's (which
    /// changes from run to run, and with it the plan).
    pub(crate) fn runtime_types(
        &mut self,
        wants: fn(&str) -> bool,
        types: &mut Types,
    ) -> Result<Vec<(u64, bool, String, Option<TypeId>)>, TargetError> {
        let mut out = Vec::new();
        for u in 0..self.units.len() {
            let index = self.index(u)?;
            let mut named: Vec<(Option<UnitOffset>, &String, u64, bool)> = (index.runtime_type_names.iter())
                .map(|(name, (key, is_addr))| (index.runtime_types.get(key).copied(), name, *key, *is_addr))
                .collect();
            named.sort_unstable_by_key(|(off, name, _, _)| (off.map(|o| o.0), *name));
            for (off, name, key, is_addr) in named {
                let layout = match off {
                    Some(off) if wants(name) => Some(self.type_id(self.at(u, off), types)?),
                    _ => None,
                };
                out.push((key, is_addr, name.clone(), layout));
            }
        }
        Ok(out)
    }
}
