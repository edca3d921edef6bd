//! Finding DIEs by name: each compile unit's top-level functions and types are indexed
//! by one walk of its DIEs, made only as far as a lookup needs (`find_in`), to its end
//! when a question needs the whole index; lookups try the unit of the name's package
//! first.

use super::*;

impl DwarfInfo {
    /// The index of unit `u`, complete: its walk (begun by `find_in`, or now) ended.
    pub(super) fn index(&mut self, u: usize) -> Result<Arc<UnitIndex>, TargetError> {
        if let Some(index) = &self.units[u].index {
            return Ok(index.clone());
        }
        self.index_until(u, &|_| false)?;
        Ok(self.units[u].index.clone().expect("a walk to the unit's end completes its index"))
    }

    /// Where `name` is in the map `pick` chooses of unit `u`'s index: the first DIE of
    /// that name in the unit, as the complete index answers, found by walking the unit
    /// only as far as that DIE (the walk resumes there for the next name: the unit of
    /// runtime's types is megabytes, and a script asks for a few of its types).
    pub(super) fn find_in<V: Copy>(
        &mut self,
        u: usize,
        name: &str,
        pick: fn(&UnitIndex) -> &FastMap<String, V>,
    ) -> Result<Option<V>, TargetError> {
        if self.units[u].index.is_none() {
            self.index_until(u, &|i| pick(i).contains_key(name))?;
        }
        let slot = &self.units[u];
        let index = slot.index.as_deref().or(slot.partial.as_ref().map(|p| &p.index));
        Ok(index.and_then(|i| pick(i).get(name).copied()))
    }

    /// Walks unit `u`'s top-level DIEs from where an earlier walk stopped, adding each
    /// to the unit's partial index, until `enough` holds of it after a DIE or the unit
    /// ends (the index is then complete).
    fn index_until(&mut self, u: usize, enough: &dyn Fn(&UnitIndex) -> bool) -> Result<(), TargetError> {
        let Partial { mut index, resume } = self.units[u].partial.take().unwrap_or_default();
        let mut stopped = None;
        {
            let unit = self.unit(u)?;
            // From the root, its children are at depth 1; from a top-level DIE (the last
            // one the earlier walk added, skipped), at depth 0. Deeper DIEs are skipped
            // over, their attributes not read.
            let mut raw = unit.header.entries_raw(&unit.abbrevs, resume).map_err(|e| self.bad(e))?;
            let top = if resume.is_some() { 0 } else { 1 };
            let mut skip = resume.is_some();
            let mut entry = Entry::null();
            while !raw.is_empty() {
                if raw.next_depth() != top || std::mem::take(&mut skip) {
                    if let Some(abbrev) = raw.read_abbreviation().map_err(|e| self.bad(e))? {
                        raw.skip_attributes(abbrev.attributes()).map_err(|e| self.bad(e))?;
                    }
                    continue;
                }
                if !raw.read_entry(&mut entry).map_err(|e| self.bad(e))? {
                    continue;
                }
                if self.add(u, &entry, &mut index)? && enough(&index) {
                    stopped = Some(entry.offset());
                    break;
                }
            }
        }
        match stopped {
            Some(at) => self.units[u].partial = Some(Partial { index, resume: Some(at) }),
            None => self.units[u].index = Some(Arc::new(index)),
        }
        Ok(())
    }

    /// Adds the top-level DIE `entry` of unit `u` to `index`; whether it added a name.
    fn add(&self, u: usize, entry: &Entry, index: &mut UnitIndex) -> Result<bool, TargetError> {
        // An address (older releases) or an offset from `runtime.types`; 0 is neither
        // (Go writes it for a type the linker kept no descriptor of: a thousand types
        // of a small program, whose names and layouts would all claim `runtime.types`).
        let runtime_type = match entry.attr_value(DW_AT_GO_RUNTIME_TYPE) {
            Some(AttributeValue::Addr(addr)) => Some((addr, true)),
            Some(value) => value.udata_value().map(|k| (k, false)),
            None => None,
        };
        let runtime_type = runtime_type.filter(|(key, _)| *key != 0);
        let mut added = false;
        if let Some((key, is_addr)) = runtime_type {
            index.runtime_types.insert(key, entry.offset());
            if let Some(value) = entry.attr_value(dw::DW_AT_name) {
                if let Some(name) = string(&self.debug_str, value).map_err(|e| self.bad(e))? {
                    index.runtime_type_names.entry(name).or_insert((key, is_addr));
                    added = true;
                }
            }
        }
        if entry.tag() == dw::DW_TAG_subprogram {
            let origin = entry.attr_value(dw::DW_AT_abstract_origin).and_then(|v| self.reference(u, v));
            if let Some(origin) = origin {
                index.concrete.insert(origin, entry.offset());
            }
        }
        let map = match entry.tag() {
            dw::DW_TAG_subprogram => &mut index.functions,
            dw::DW_TAG_structure_type | dw::DW_TAG_typedef => &mut index.types,
            dw::DW_TAG_variable => &mut index.variables,
            _ => return Ok(added),
        };
        let Some(value) = entry.attr_value(dw::DW_AT_name) else { return Ok(added) };
        let Some(name) = string(&self.debug_str, value).map_err(|e| self.bad(e))? else { return Ok(added) };
        map.entry(name).or_insert(entry.offset());
        Ok(true)
    }

    /// Finds a top-level DIE by name, looking first in the units of `package` (where Go
    /// puts it), then in every other unit. `kind` names `pick` in the memo a cache keeps.
    pub(super) fn lookup(
        &mut self,
        kind: &str,
        package: &str,
        name: &str,
        pick: fn(&UnitIndex) -> &FastMap<String, UnitOffset>,
    ) -> Result<Option<DebugInfoOffset>, TargetError> {
        match self.memo.recall(kind, name) {
            None => {}
            Some(None) => return Ok(None),
            Some(Some([at, _])) if self.names(DebugInfoOffset(at as usize), kind, name) => {
                return Ok(Some(DebugInfoOffset(at as usize)));
            }
            // An answer (from a cache) that is not a DIE of that name: asked again, and
            // the cache written again.
            Some(Some(_)) => self.seed_was_wrong(),
        }
        let mut found = None;
        // The package's own units first (and runtime's for a type): the others are walked
        // only when it is not there.
        let first = self.first_units(package, kind == "t");
        'search: for phase in 0..2 {
            if phase == 1 && self.everywhere.contains_key(kind) {
                found = self.found_everywhere(kind, name, &first, pick);
                break;
            }
            let units = if phase == 0 { first.clone() } else { self.other_units(&first) };
            for u in units {
                if let Some(off) = self.find_in(u, name, pick)? {
                    found = Some(self.at(u, off));
                    break 'search;
                }
            }
        }
        // Kept in place of a wrong answer from a cache, if there was one.
        self.memo.keep(found.map(|at| [at.0 as u64, 0]));
        if found.is_none() && !self.everywhere.contains_key(kind) && self.units.iter().all(|s| s.index.is_some()) {
            let names = self.units.iter().flat_map(|s| s.index.iter().map(|i| pick(i).len())).sum();
            let mut all: HashMap<u64, Vec<u32>> = HashMap::with_capacity(names);
            for (u, slot) in self.units.iter().enumerate() {
                for name in slot.index.iter().flat_map(|i| pick(i).keys()) {
                    all.entry(name_hash(name)).or_default().push(u as u32);
                }
            }
            self.everywhere.insert(kind.to_string(), all);
        }
        Ok(found)
    }

    /// Whether the DIE at `at` is one `lookup` of `kind` finds by `name`: that name, and
    /// a tag its index keeps under that kind. Its attributes are read up to its name,
    /// which is compared where it is (a cached `-l '*'` asks this of every function).
    fn names(&self, at: DebugInfoOffset, kind: &str, name: &str) -> bool {
        let Some((u, off)) = self.locate(at) else { return false };
        let Ok(unit) = self.unit(u) else { return false };
        let Ok(mut raw) = unit.header.entries_raw(&unit.abbrevs, Some(off)) else { return false };
        let Ok(Some(abbrev)) = raw.read_abbreviation() else { return false };
        let tag = match kind {
            "f" => abbrev.tag() == dw::DW_TAG_subprogram,
            "t" => matches!(abbrev.tag(), dw::DW_TAG_structure_type | dw::DW_TAG_typedef),
            "v" => abbrev.tag() == dw::DW_TAG_variable,
            _ => true,
        };
        if !tag {
            return false;
        }
        for spec in abbrev.attributes() {
            let Ok(attr) = raw.read_attribute(*spec) else { return false };
            if attr.name() == dw::DW_AT_name {
                return self.is_string(attr.value(), name);
            }
        }
        false
    }

    /// Whether the string attribute `value` is `name` (as `string` reads it: a name not
    /// in UTF-8 is compared as its lossy form).
    fn is_string(&self, value: AttributeValue<R>, name: &str) -> bool {
        let r = match value {
            AttributeValue::String(r) => r,
            AttributeValue::DebugStrRef(off) => match self.debug_str.get_str(off) {
                Ok(r) => r,
                Err(_) => return false,
            },
            _ => return false,
        };
        match std::str::from_utf8(r.bytes()) {
            Ok(s) => s == name,
            Err(_) => r.to_string_lossy().is_ok_and(|s| s == name),
        }
    }

    /// What the walk of every unit but `first` finds, from `everywhere`: the first unit
    /// in order that has `name`.
    fn found_everywhere(
        &self,
        kind: &str,
        name: &str,
        first: &[usize],
        pick: fn(&UnitIndex) -> &FastMap<String, UnitOffset>,
    ) -> Option<DebugInfoOffset> {
        let units = self.everywhere.get(kind)?.get(&name_hash(name))?;
        // Another name of the same hash may have put a unit in the list.
        let has = |u: usize| self.units[u].index.as_ref().and_then(|i| pick(i).get(name).copied());
        let (u, off) =
            units.iter().map(|u| *u as usize).filter(|u| !first.contains(u)).find_map(|u| Some((u, has(u)?)))?;
        Some(self.at(u, off))
    }

    /// The out-of-line copy of the function whose (abstract) DIE is at `at`, when it is
    /// also inlined elsewhere: Go lists its results only there.
    pub(super) fn concrete_of(&mut self, at: DebugInfoOffset) -> Result<Option<DebugInfoOffset>, TargetError> {
        if let Some(found) = self.memo.recall("c", at.0) {
            return Ok(found.map(|[c, _]| DebugInfoOffset(c as usize)));
        }
        let Some((u, _)) = self.locate(at) else { return Ok(None) };
        let index = self.index(u)?;
        let found = index.concrete.get(&at).map(|c| self.at(u, *c));
        self.memo.keep(found.map(|c| [c.0 as u64, 0]));
        Ok(found)
    }

    /// A reference attribute as a `.debug_info` offset.
    pub(super) fn reference(&self, u: usize, value: AttributeValue<R>) -> Option<DebugInfoOffset> {
        match value {
            AttributeValue::UnitRef(off) => Some(self.at(u, off)),
            AttributeValue::DebugInfoRef(off) => Some(off),
            _ => None,
        }
    }
}

fn name_hash(name: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    h.finish()
}
