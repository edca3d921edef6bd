//! The target's DWARF (gimli), read lazily: the sections are decompressed on first use,
//! each compile unit is indexed (its top-level functions and types by name) only when a
//! lookup needs it (`index`), only the types a script reaches are parsed into the `Types`
//! arena (`types`), and locations are evaluated at an address (`locations`, with the
//! expression evaluator `eval`). This file:
//! the units and reading one DIE.
//!
//! Go-specific DWARF: `DW_AT_go_kind` (0x2900) holds the reflect.Kind of a type,
//! `DW_AT_go_key` (0x2901) the key of a map, `DW_AT_go_elem` (0x2902) the element of a
//! slice, map or chan. Strings and slices are
//! structures named `string` and `[]T`; interfaces, maps, chans and funcs are typedefs of
//! runtime structures; results are formal parameters with `DW_AT_variable_parameter`.

use crate::gobin::{elf, TargetError};
use crate::gotypes::TypeId;
use gimli::{constants as dw, AttributeValue, DebugInfoOffset, DwAt, DwTag, Reader, UnitOffset};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

pub(crate) mod eval;
mod globals;
mod index;
mod inflating;
mod lines;
mod locations;
mod memo;
mod query;
mod scopes;
pub(crate) mod types;
mod units;
mod variables;

pub use globals::{NoVariable, Variable};
pub(crate) use inflating::Inflating;
pub(crate) use lines::LineTable;
pub(crate) use locations::DwarfLocation;
use locations::Lists;
pub(crate) use query::DwarfState;
pub(crate) use scopes::{ScopeKind, Scopes};
pub use units::{crc32, DwarfSeed, StoredUnits, UnitBytes};

type R = gimli::EndianArcSlice<gimli::LittleEndian>;
type Entry = gimli::DebuggingInformationEntry<R>;

const DW_AT_GO_KIND: DwAt = DwAt(0x2900);
/// `DW_AT_go_embedded_field`: set on a struct member that is an embedded field.
const DW_AT_GO_EMBEDDED_FIELD: DwAt = DwAt(0x2903);
const DW_AT_GO_KEY: DwAt = DwAt(0x2901);
const DW_AT_GO_ELEM: DwAt = DwAt(0x2902);
/// `DW_AT_go_runtime_type`: the address of the type's runtime descriptor.
const DW_AT_GO_RUNTIME_TYPE: DwAt = DwAt(0x2904);

/// reflect.Kind values that DW_AT_go_kind holds.
mod kind {
    pub const CHAN: u64 = 18;
    pub const FUNC: u64 = 19;
    pub const INTERFACE: u64 = 20;
    pub const MAP: u64 = 21;
    pub const SLICE: u64 = 23;
    pub const STRING: u64 = 24;
}

/// How many typedefs of typedefs are followed before giving up (a cycle in bad DWARF).
const TYPEDEF_DEPTH: usize = 16;

/// A map by a name or an offset of the binary's: hashed by foldhash (hashbrown's), not
/// SipHash (`-l '*'` hashes 150,000 names and offsets on Caddy).
type FastMap<K, V> = hashbrown::HashMap<K, V>;

/// Top-level named DIEs of one compile unit.
#[derive(Default)]
struct UnitIndex {
    functions: FastMap<String, UnitOffset>,
    types: FastMap<String, UnitOffset>,
    /// Package-level variables (`DW_TAG_variable` at the top of the unit).
    variables: FastMap<String, UnitOffset>,
    /// Types by their runtime descriptor: its link-time address, or (Go writes this
    /// since 1.2x) its offset from `runtime.types`.
    runtime_types: FastMap<u64, UnitOffset>,
    /// The out-of-line copy of a function also inlined elsewhere: a subprogram without a
    /// name whose abstract origin is the named one, by the named one's offset.
    concrete: FastMap<DebugInfoOffset, UnitOffset>,
    /// The same key by the type's name (pointer types too: `*context.valueCtx`), and
    /// whether it is an address (`DW_FORM_addr`).
    runtime_type_names: FastMap<String, (u64, bool)>,
}

/// One compile unit: where it is in `.debug_info`, its package, and, once a question
/// reaches it, its header and abbreviations (`units.rs`).
struct UnitSlot {
    start: DebugInfoOffset,
    /// Its length in bytes, header included.
    len: u64,
    /// The compile unit's name: the Go package path.
    name: String,
    parsed: std::cell::OnceCell<units::Parsed>,
    /// Its index, once complete; until then, what walks made only as far as a lookup
    /// needed have found (`index.rs`).
    index: Option<Arc<UnitIndex>>,
    partial: Option<Partial>,
}

/// A unit's index made so far, and the last top-level DIE added (the walk goes on after
/// it).
#[derive(Default)]
struct Partial {
    index: UnitIndex,
    resume: Option<UnitOffset>,
}

/// The attributes of one DIE that gtrace uses, read once into owned values.
#[derive(Default)]
struct Die {
    tag: Option<DwTag>,
    name: Option<String>,
    ty: Option<DebugInfoOffset>,
    byte_size: Option<u64>,
    encoding: Option<gimli::DwAte>,
    go_kind: Option<u64>,
    go_key: Option<DebugInfoOffset>,
    go_elem: Option<DebugInfoOffset>,
    variable_parameter: bool,
    member_offset: Option<u64>,
    /// DW_AT_go_embedded_field: a struct member written as a type alone (`sync.Mutex`).
    embedded: bool,
    count: Option<u64>,
    upper_bound: Option<u64>,
    decl_line: Option<u64>,
    /// DW_AT_abstract_origin: the DIE that names and types this one.
    origin: Option<DebugInfoOffset>,
}

/// The DWARF of one target, with what has been indexed and parsed so far.
pub(crate) struct DwarfInfo {
    path: PathBuf,
    debug_str: gimli::DebugStr<R>,
    /// `.debug_info` and `.debug_abbrev`, and the units a cache brought (`units.rs`).
    sections: units::Sections,
    /// Location and range lists, decompressed on first use (inlined calls only).
    lists: Option<Lists>,
    /// The line table, read on first use (line probes only).
    lines: Option<Arc<LineTable>>,
    /// The scopes of the functions line probes asked about, by name.
    scopes_cache: HashMap<String, Arc<Scopes>>,
    units: Vec<UnitSlot>,
    /// The units of each package (Go writes one a package).
    by_package: HashMap<String, Vec<usize>>,
    /// The answers of lookups that may walk every unit (`index.rs`), kept for a cache.
    memo: memo::Memo,
    type_ids: FastMap<DebugInfoOffset, TypeId>,
    unsafe_pointer: Option<TypeId>,
    /// How many units and lookups the seed brought (`grew`).
    seeded: (usize, usize),
    /// Once a lookup of a kind has walked every unit (every unit is indexed), each name
    /// of that kind (by its hash: the names stay in the units' indexes) with the units
    /// that have it, in order: a later lookup outside its package's units asks one map,
    /// not each unit's (`-l '*'` asks it thousands of times).
    everywhere: HashMap<String, HashMap<u64, Vec<u32>>>,
    /// A CRC-32 of `.debug_info` as the file holds it (what a seed is checked against),
    /// computed at load only when a seed was to be checked.
    info_crc: Option<u32>,
}

/// A string attribute: inline (`DW_FORM_string`, what Go writes) or in `.debug_str`;
/// None for forms that need a unit's string-offsets table, which Go does not use.
fn string(debug_str: &gimli::DebugStr<R>, value: AttributeValue<R>) -> gimli::Result<Option<String>> {
    let r = match value {
        AttributeValue::String(r) => r,
        AttributeValue::DebugStrRef(off) => debug_str.get_str(off)?,
        _ => return Ok(None),
    };
    Ok(Some(r.to_string_lossy()?.into_owned()))
}

impl DwarfInfo {
    fn bad(&self, e: gimli::Error) -> TargetError {
        TargetError::Dwarf { path: self.path.clone(), source: e }
    }

    fn bad_ref(&self, what: &'static str, at: DebugInfoOffset) -> TargetError {
        TargetError::DwarfReference { path: self.path.clone(), what, offset: at.0 }
    }

    fn read_die(&self, u: usize, entry: &Entry) -> Result<Die, TargetError> {
        self.read_die_attrs(u, entry.tag(), entry.attrs())
    }

    /// `read_die` of a DIE with tag `tag` and attributes `attrs`.
    fn read_die_attrs(&self, u: usize, tag: DwTag, attrs: &[gimli::Attribute<R>]) -> Result<Die, TargetError> {
        let mut die = Die { tag: Some(tag), ..Die::default() };
        for attr in attrs {
            let value = attr.value();
            match attr.name() {
                dw::DW_AT_name => {
                    die.name = string(&self.debug_str, value).map_err(|e| self.bad(e))?;
                }
                dw::DW_AT_type => die.ty = self.reference(u, value),
                DW_AT_GO_KEY => die.go_key = self.reference(u, value),
                DW_AT_GO_ELEM => die.go_elem = self.reference(u, value),
                dw::DW_AT_byte_size => die.byte_size = value.udata_value(),
                dw::DW_AT_encoding => {
                    if let AttributeValue::Encoding(e) = value {
                        die.encoding = Some(e);
                    } else {
                        die.encoding = value.u8_value().map(gimli::DwAte);
                    }
                }
                DW_AT_GO_KIND => die.go_kind = value.udata_value(),
                DW_AT_GO_EMBEDDED_FIELD => {
                    die.embedded = match value {
                        AttributeValue::Flag(f) => f,
                        other => other.udata_value().is_some_and(|v| v != 0),
                    }
                }
                dw::DW_AT_variable_parameter => {
                    die.variable_parameter = match value {
                        AttributeValue::Flag(f) => f,
                        other => other.udata_value().is_some_and(|v| v != 0),
                    }
                }
                dw::DW_AT_data_member_location => die.member_offset = value.udata_value(),
                dw::DW_AT_count => die.count = value.udata_value(),
                dw::DW_AT_upper_bound => die.upper_bound = value.udata_value(),
                dw::DW_AT_decl_line => die.decl_line = value.udata_value(),
                dw::DW_AT_abstract_origin => die.origin = self.reference(u, value),
                _ => {}
            }
        }
        Ok(die)
    }

    /// The DIE at `at` and its direct children. Deeper DIEs (a function's variables,
    /// scopes and inlined calls: most of a big function's DIEs) are skipped over, their
    /// attributes not read (`-l '*'` asks this of every function).
    fn die_with_children(&self, at: DebugInfoOffset) -> Result<(Die, Vec<Die>), TargetError> {
        self.die_with_children_of(at, &|_| true)
    }

    /// `die_with_children` with only the children whose tag `keep` takes read (the rest
    /// skipped over like deeper DIEs: a function's parameters, not its variables).
    fn die_with_children_of(
        &self,
        at: DebugInfoOffset,
        keep: &dyn Fn(DwTag) -> bool,
    ) -> Result<(Die, Vec<Die>), TargetError> {
        let (u, off) = self.locate(at).ok_or_else(|| self.bad_ref("reference outside .debug_info", at))?;
        let unit = self.unit(u)?;
        let mut raw = unit.header.entries_raw(&unit.abbrevs, Some(off)).map_err(|e| self.bad(e))?;
        let mut entry = Entry::null();
        // A null entry first is no DIE (what `next_dfs` would have skipped to is not this
        // DIE's).
        if !raw.read_entry(&mut entry).map_err(|e| self.bad(e))? {
            return Err(self.bad_ref("no DIE", at));
        }
        let die = self.read_die(u, &entry)?;
        let children = if entry.has_children() { self.children(u, &mut raw, keep)? } else { Vec::new() };
        Ok((die, children))
    }

    /// The children of the DIE at `at` whose tag `keep` takes, as `die_with_children_of`
    /// reads them; the DIE's own attributes skipped over, not read (`-l '*'` asks for
    /// every function's parameters).
    fn children_of(&self, at: DebugInfoOffset, keep: &dyn Fn(DwTag) -> bool) -> Result<Vec<Die>, TargetError> {
        let (u, off) = self.locate(at).ok_or_else(|| self.bad_ref("reference outside .debug_info", at))?;
        let unit = self.unit(u)?;
        let mut raw = unit.header.entries_raw(&unit.abbrevs, Some(off)).map_err(|e| self.bad(e))?;
        let Some(abbrev) = raw.read_abbreviation().map_err(|e| self.bad(e))? else {
            return Err(self.bad_ref("no DIE", at));
        };
        raw.skip_attributes(abbrev.attributes()).map_err(|e| self.bad(e))?;
        if !abbrev.has_children() {
            return Ok(Vec::new());
        }
        self.children(u, &mut raw, keep)
    }

    /// The children `keep` takes of the DIE `raw` has just read (it has children):
    /// read; theirs and the rest skipped over.
    fn children(
        &self,
        u: usize,
        raw: &mut gimli::EntriesRaw<'_, R>,
        keep: &dyn Fn(DwTag) -> bool,
    ) -> Result<Vec<Die>, TargetError> {
        let (mut children, mut attrs) = (Vec::new(), Vec::new());
        // Depth 1: the DIE's children; deeper: theirs; 0: past the DIE's last child.
        while raw.next_depth() > 0 && !raw.is_empty() {
            let child = raw.next_depth() == 1;
            let Some(abbrev) = raw.read_abbreviation().map_err(|e| self.bad(e))? else { continue };
            if child && keep(abbrev.tag()) {
                raw.read_attributes(abbrev.attributes(), &mut attrs).map_err(|e| self.bad(e))?;
                children.push(self.read_die_attrs(u, abbrev.tag(), &attrs)?);
            } else {
                raw.skip_attributes(abbrev.attributes()).map_err(|e| self.bad(e))?;
            }
        }
        Ok(children)
    }

    fn die(&self, at: DebugInfoOffset) -> Result<Die, TargetError> {
        let (u, off) = self.locate(at).ok_or_else(|| self.bad_ref("reference outside .debug_info", at))?;
        let unit = self.unit(u)?;
        let entry = unit.header.entry(&unit.abbrevs, off).map_err(|e| self.bad(e))?;
        self.read_die(u, &entry)
    }
}
