//! Whole Go values copied at the probe: what of a value is copied into an event record,
//! and where, bounded as delve's LoadConfig bounds a loaded value (`Bounds`: depth,
//! fields, elements, string bytes). The layout (`Capture`, a tree of `Node`s with their
//! offsets in the record) is computed once from the Go types; lowering generates the
//! copies from it (lower/capture.rs) and the output decodes the record with it
//! (output/gofmt.rs), so both agree by construction. It travels in the plan.
//!
//! What is copied follows what Go's fmt prints: a value's own bytes; the bytes of the
//! strings, slice elements and interface values in it; the value a top-level pointer
//! points at (fmt prints `&{...}` only at the top: a pointer inside a value prints as its
//! address, so nothing behind it is read); a map's length and up to `max_elems` of its
//! entries (lower/mapcapture.rs). Composite values nested deeper than `depth` are cut
//! (printed `{...}`, `[...]`).

use crate::gotypes::{TypeId, TypeKind, Types};
use serde::{Deserialize, Serialize};

/// How much of a value is copied (`--depth`, `--max-fields`, `--max-elems`,
/// `--string-limit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounds {
    /// Composite values (structs, arrays, slices, maps, interfaces' values) nested more
    /// levels than this below the printed value are cut.
    pub depth: u32,
    /// Fields of a struct shown; the rest are cut.
    pub max_fields: u32,
    /// Elements of an array, slice or map shown; the rest are cut.
    pub max_elems: u32,
    /// Bytes of a string copied.
    pub string_limit: u32,
}

/// The defaults (docs/language.md says why).
pub const DEFAULT_BOUNDS: Bounds = Bounds { depth: 2, max_fields: 32, max_elems: 16, string_limit: 64 };

/// Bytes copied from where an interface's data word points (its dynamic value, or the
/// start of it).
pub const IFACE_DATA: u32 = 64;

impl Default for Bounds {
    fn default() -> Bounds {
        DEFAULT_BOUNDS
    }
}

/// The layout of one copied value in a record: `size` bytes from the field's offset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Capture {
    pub root: Node,
    pub size: u32,
    /// Parts cut (printed `{...}`, `[...]`) because the record had no more room, not
    /// for the bounds: said when the script is compiled.
    #[serde(default)]
    pub cut_for_room: u32,
}

/// One value in the record: its type, where its own bytes are (relative to the
/// capture's start), and what more of it was copied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub ty: TypeId,
    pub at: u32,
    /// Read through an unexported field (fmt does not call its methods).
    pub hidden: bool,
    pub kind: NodeKind,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum NodeKind {
    /// Its bytes say it all: numbers, bools, pointers inside a value (addresses),
    /// channels, unsafe pointers.
    Bytes,
    /// Nested deeper than `depth`: printed `{...}`, `[...]`, `map[...]`.
    Cut,
    Struct {
        /// The first `max_fields` fields.
        fields: Vec<Node>,
    },
    /// The first elements (the array's length is in its type).
    Array { elems: Vec<Node> },
    /// A string header at `at`; `max` bytes of it copied at `bytes`.
    Str { bytes: u32, max: u32 },
    /// A slice header at `at`; up to `elems.len()` elements copied at `elems_at`.
    Slice { elems_at: u32, elems: Vec<Node> },
    /// A top-level pointer: what it points at, copied, when fmt prints it (`&{...}`).
    Pointer { pointee: Option<Box<Node>> },
    /// A func value: the code address its closure points at, copied at `code`.
    Func { code: u32 },
    /// An interface at `at` (type or itab word, data word): its dynamic type's
    /// descriptor at `type_at`, `IFACE_DATA` bytes at its data at `data_at`, and a
    /// string's bytes at `str_at` when the value is a string (or the first field of what
    /// the data points at is one: the message of the standard error types). `elems`:
    /// where the elements go when the dynamic value is a slice of interfaces.
    Iface {
        empty: bool,
        type_at: u32,
        data_at: u32,
        str_at: u32,
        max: u32,
        #[serde(default)]
        elems: Option<IfaceElems>,
    },
    /// A map at `at` (its header's address): its length at `len_at`, how many entries
    /// the probe found and copied at `n_at`, and the entries at `entries_at`, `entry`
    /// bytes each: the key, then the element at `elem_off` (lower/mapcapture.rs).
    Map { len_at: u32, n_at: u32, entries_at: u32, entry: u32, elem_off: u32, entries: Vec<(Node, Node)> },
}

/// The elements of a slice of interfaces (`[]any`, `[]error`) an `any` holds, as a
/// direct `[]any` value's are copied: the probe finds at run time, from the runtime's
/// type descriptors, whether the dynamic type is one. `head_at`: how many elements were
/// copied (0 when it is no such slice), then a word the probe uses (whether the
/// elements are empty interfaces); `elems_at`: the elements' own 16 bytes each, then
/// what each points at, as `elems` (interfaces with no `elems` of their own) lay out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IfaceElems {
    pub head_at: u32,
    pub elems_at: u32,
    pub elems: Vec<Node>,
}

/// Plans the copy of a value of type `root` within `bounds`, in at most `room` bytes:
/// what does not fit (depth first, the first fields get room first) is cut and counted.
pub fn plan(types: &Types, root: TypeId, bounds: Bounds, room: u32) -> Capture {
    let mut p = Planner { types, bounds, end: 0, room, cut: 0 };
    let size = types.get(root).size as u32;
    let at = p.alloc(size);
    let root = p.node(root, at, 0, true, false);
    Capture { root, size: p.end, cut_for_room: p.cut }
}

struct Planner<'t> {
    types: &'t Types,
    bounds: Bounds,
    /// The end of the record so far.
    end: u32,
    /// The most bytes the value may take.
    room: u32,
    /// Parts cut for want of room.
    cut: u32,
}

impl Planner<'_> {
    /// Room for `size` bytes, 8-aligned.
    fn alloc(&mut self, size: u32) -> u32 {
        let at = self.end;
        self.end = self.end.saturating_add(size.saturating_add(7) / 8 * 8);
        at
    }

    /// Whether `size` more bytes fit the room; counts a cut when they do not.
    fn fits(&mut self, size: u32) -> bool {
        let fits = self.end.saturating_add(size.saturating_add(7) / 8 * 8) <= self.room;
        if !fits {
            self.cut += 1;
        }
        fits
    }

    /// How many of `n` items of `size` bytes fit the room (0 counts a cut).
    fn fitting(&mut self, size: u32, n: u32) -> u32 {
        let left = self.room.saturating_sub(self.end);
        let n = if size == 0 { n } else { n.min(left / size.max(1)) };
        if n == 0 {
            self.cut += 1;
        }
        n
    }

    /// The node of a value of type `id` whose bytes are at `at`, `level` levels below
    /// the printed value (`top`: the printed value itself).
    fn node(&mut self, id: TypeId, at: u32, level: u32, top: bool, hidden: bool) -> Node {
        let t = self.types.get(id);
        let composite = matches!(
            t.kind,
            TypeKind::Struct { .. }
                | TypeKind::Array { .. }
                | TypeKind::Slice { .. }
                | TypeKind::Map { .. }
                | TypeKind::Interface { .. }
        );
        let kind = if composite && level > self.bounds.depth {
            NodeKind::Cut
        } else {
            match &t.kind {
                TypeKind::Struct { fields } => {
                    let fields = fields
                        .iter()
                        .take(self.bounds.max_fields as usize)
                        .map(|f| {
                            let hidden = hidden || !exported(&f.name);
                            self.node(f.ty, at + f.offset as u32, level + 1, false, hidden)
                        })
                        .collect();
                    NodeKind::Struct { fields }
                }
                TypeKind::Array { elem, len } => {
                    let size = self.types.get(*elem).size as u32;
                    let n = (*len).min(u64::from(self.bounds.max_elems)) as u32;
                    let elems = (0..n).map(|i| self.node(*elem, at + i * size, level + 1, false, hidden)).collect();
                    NodeKind::Array { elems }
                }
                TypeKind::String if !self.fits(self.bounds.string_limit) => NodeKind::Cut,
                TypeKind::String => {
                    let max = self.bounds.string_limit;
                    NodeKind::Str { bytes: self.alloc(max), max }
                }
                TypeKind::Slice { elem } => {
                    let size = self.types.get(*elem).size as u32;
                    let n = self.fitting(size, self.bounds.max_elems);
                    if n == 0 {
                        return Node { ty: id, at, hidden, kind: NodeKind::Cut };
                    }
                    let elems_at = self.alloc(size.saturating_mul(n));
                    let elems =
                        (0..n).map(|i| self.node(*elem, elems_at + i * size, level + 1, false, hidden)).collect();
                    NodeKind::Slice { elems_at, elems }
                }
                TypeKind::Pointer { elem }
                    if top && pointee_printed(self.types, *elem) && self.fits(self.types.get(*elem).size as u32) =>
                {
                    let size = self.types.get(*elem).size as u32;
                    let pointee_at = self.alloc(size);
                    // `&` adds no level: `print(p)` shows as much as `print(*p)`.
                    NodeKind::Pointer { pointee: Some(Box::new(self.node(*elem, pointee_at, level, false, hidden))) }
                }
                TypeKind::Map { key: Some(key), elem: Some(elem) } => self.map(*key, *elem, level, hidden),
                TypeKind::Func if !self.fits(8) => NodeKind::Cut,
                TypeKind::Func => NodeKind::Func { code: self.alloc(8) },
                TypeKind::Interface { .. } if !self.fits(8 + IFACE_DATA + self.bounds.string_limit) => NodeKind::Cut,
                TypeKind::Interface { empty } => {
                    let (type_at, data_at, str_at, max) = self.iface_parts();
                    // Only the empty interface holds an unnamed slice (it has no methods).
                    let elems = match *empty && level < self.bounds.depth {
                        true => self.iface_elems(id, hidden),
                        false => None,
                    };
                    NodeKind::Iface { empty: *empty, type_at, data_at, str_at, max, elems }
                }
                _ => NodeKind::Bytes,
            }
        };
        Node { ty: id, at, hidden, kind }
    }
}

impl Planner<'_> {
    /// Room for an interface's dynamic type, data and string: (type_at, data_at,
    /// str_at, max).
    fn iface_parts(&mut self) -> (u32, u32, u32, u32) {
        let type_at = self.alloc(8);
        let data_at = self.alloc(IFACE_DATA);
        let max = self.bounds.string_limit;
        (type_at, data_at, self.alloc(max), max)
    }

    /// Room for the elements of a slice of interfaces the interface `id` may hold,
    /// `max_elems` of them as far as the room goes (none: not copied, said as a cut).
    fn iface_elems(&mut self, id: TypeId, hidden: bool) -> Option<IfaceElems> {
        let each = 16 + 8 + IFACE_DATA + self.bounds.string_limit;
        if !self.fits(16 + each) {
            return None;
        }
        let head_at = self.alloc(16);
        let n = self.fitting(each, self.bounds.max_elems);
        let elems_at = self.alloc(16 * n);
        let elems = (0..n)
            .map(|i| {
                let (type_at, data_at, str_at, max) = self.iface_parts();
                let kind = NodeKind::Iface { empty: true, type_at, data_at, str_at, max, elems: None };
                Node { ty: id, at: elems_at + 16 * i, hidden, kind }
            })
            .collect();
        Some(IfaceElems { head_at, elems_at, elems })
    }

    /// A map's entries: `max_elems` of them, key and element side by side. Keys or
    /// elements the runtime keeps behind a pointer (over 128 bytes) are not copied.
    fn map(&mut self, key: TypeId, elem: TypeId, level: u32, hidden: bool) -> NodeKind {
        let (ks, es) = (self.types.get(key).size as u32, self.types.get(elem).size as u32);
        if ks > MAP_INLINE || es > MAP_INLINE {
            return NodeKind::Cut;
        }
        let elem_off = ks.next_multiple_of(8);
        let entry = elem_off + es.next_multiple_of(8);
        if !self.fits(16 + entry) {
            return NodeKind::Cut;
        }
        let (len_at, n_at) = (self.alloc(8), self.alloc(8));
        let n = self.fitting(entry, self.bounds.max_elems);
        let entries_at = self.alloc(entry.saturating_mul(n));
        let entries = (0..n)
            .map(|i| {
                let at = entries_at + i * entry;
                let k = self.node(key, at, level + 1, false, hidden);
                (k, self.node(elem, at + elem_off, level + 1, false, hidden))
            })
            .collect();
        NodeKind::Map { len_at, n_at, entries_at, entry, elem_off, entries }
    }
}

/// Keys and elements larger than this are kept behind a pointer in a map's slots.
pub const MAP_INLINE: u32 = 128;

/// The layout of a value of type `id` whose bytes are the `limit` bytes at `at` and
/// nothing more (an interface's dynamic value, copied without knowing its type): what
/// lies beyond, or needs another read, is cut, but for a string at offset 0, whose
/// bytes the interface's copy holds at `text` (`max` of them).
pub fn plan_raw(types: &Types, id: TypeId, at: u32, limit: u32, text: (u32, u32)) -> Node {
    raw_node(types, id, at, at + limit, 0, text)
}

fn raw_node(types: &Types, id: TypeId, at: u32, end: u32, offset: u32, text: (u32, u32)) -> Node {
    let t = types.get(id);
    let fits = at.saturating_add(t.size as u32) <= end;
    let kind = match &t.kind {
        _ if !fits => NodeKind::Cut,
        TypeKind::Struct { fields } => NodeKind::Struct {
            fields: fields
                .iter()
                .map(|f| raw_node(types, f.ty, at + f.offset as u32, end, offset + f.offset as u32, text))
                .collect(),
        },
        TypeKind::Array { elem, len } => {
            let size = types.get(*elem).size as u32;
            NodeKind::Array {
                elems: (0..*len as u32)
                    .map(|i| raw_node(types, *elem, at + i * size, end, offset + i * size, text))
                    .collect(),
            }
        }
        TypeKind::String if offset == 0 => NodeKind::Str { bytes: text.0, max: text.1 },
        TypeKind::String
        | TypeKind::Slice { .. }
        | TypeKind::Map { .. }
        | TypeKind::Interface { .. }
        | TypeKind::Func => NodeKind::Cut,
        _ => NodeKind::Bytes,
    };
    Node { ty: id, at, hidden: false, kind }
}

/// Whether fmt prints what a top-level pointer to this points at (`&{...}`, `&[...]`,
/// `&map[...]`): structs, arrays, slices and maps.
pub fn pointee_printed(types: &Types, elem: TypeId) -> bool {
    matches!(
        types.get(elem).kind,
        TypeKind::Struct { .. } | TypeKind::Array { .. } | TypeKind::Slice { .. } | TypeKind::Map { .. }
    )
}

/// A Go name that other packages can use (an upper-case first letter); an embedded
/// field is named after its type (`sync.Mutex` → `Mutex`).
pub fn exported(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name).trim_start_matches('*');
    last.chars().next().is_some_and(char::is_uppercase)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gotypes::{GoType, StructField};

    fn arena() -> (Types, TypeId, TypeId) {
        let mut t = Types::default();
        let int = t.add(GoType { name: "int".into(), size: 8, kind: TypeKind::Int { signed: true } });
        let string = t.add(GoType { name: "string".into(), size: 16, kind: TypeKind::String });
        let strings = t.add(GoType { name: "[]string".into(), size: 24, kind: TypeKind::Slice { elem: string } });
        let fields = vec![
            StructField { name: "Port".into(), ty: int, offset: 0, embedded: false },
            StructField { name: "name".into(), ty: string, offset: 8, embedded: false },
            StructField { name: "Tags".into(), ty: strings, offset: 24, embedded: false },
        ];
        let config = t.add(GoType { name: "main.Config".into(), size: 48, kind: TypeKind::Struct { fields } });
        let ptr = t.add(GoType { name: "*main.Config".into(), size: 8, kind: TypeKind::Pointer { elem: config } });
        (t, config, ptr)
    }

    #[test]
    fn what_does_not_fit_the_room_is_cut_and_counted() {
        let (t, config, _) = arena();
        let whole = plan(&t, config, DEFAULT_BOUNDS, u32::MAX);
        assert_eq!(whole.cut_for_room, 0);
        // Room for the struct and its string, not for 16 strings of the slice.
        let room = 48 + 64 + 3 * 16;
        let c = plan(&t, config, DEFAULT_BOUNDS, room);
        assert!(c.size <= room, "{} > {room}", c.size);
        let NodeKind::Struct { fields } = &c.root.kind else { panic!("{c:?}") };
        assert!(matches!(fields[1].kind, NodeKind::Str { .. }), "{:?}", fields[1]);
        let NodeKind::Slice { elems, .. } = &fields[2].kind else { panic!("{:?}", fields[2]) };
        // Three string headers fit; their bytes do not: each is cut.
        assert_eq!(elems.len(), 3);
        assert!(elems.iter().all(|e| e.kind == NodeKind::Cut), "{elems:?}");
        assert_eq!(c.cut_for_room, 3);
    }

    #[test]
    fn strings_and_elements_get_room_of_their_own() {
        let (t, config, _) = arena();
        let bounds = Bounds { depth: 2, max_fields: 8, max_elems: 2, string_limit: 16 };
        let c = plan(&t, config, bounds, u32::MAX);
        let NodeKind::Struct { fields } = &c.root.kind else { panic!() };
        assert_eq!(fields[0].kind, NodeKind::Bytes);
        assert!(fields[1].hidden && matches!(fields[1].kind, NodeKind::Str { bytes: 48, max: 16 }));
        let NodeKind::Slice { elems_at, elems } = &fields[2].kind else { panic!() };
        assert_eq!((*elems_at, elems.len()), (64, 2));
        assert!(matches!(elems[1].kind, NodeKind::Str { .. }) && elems[1].at == 64 + 16);
        // 48 of the struct, 16 of a string, 2 × 16 of headers, 2 × 16 of their bytes.
        assert_eq!(c.size, 48 + 16 + 32 + 32);
    }

    #[test]
    fn an_any_has_room_for_a_slice_of_interfaces_an_error_none() {
        let mut t = Types::default();
        let any = t.add(GoType { name: "interface {}".into(), size: 16, kind: TypeKind::Interface { empty: true } });
        let error = t.add(GoType { name: "error".into(), size: 16, kind: TypeKind::Interface { empty: false } });
        let bounds = Bounds { max_elems: 3, ..DEFAULT_BOUNDS };
        let c = plan(&t, any, bounds, u32::MAX);
        let NodeKind::Iface { elems: Some(e), .. } = &c.root.kind else { panic!("{c:?}") };
        assert_eq!(e.elems.len(), 3);
        // Each element: its 16 bytes side by side, then its own type, data and string.
        assert_eq!((e.elems[1].at, e.elems[2].at), (e.elems_at + 16, e.elems_at + 32));
        assert!(e.elems.iter().all(|n| matches!(n.kind, NodeKind::Iface { elems: None, .. })));
        let c = plan(&t, error, bounds, u32::MAX);
        assert!(matches!(c.root.kind, NodeKind::Iface { elems: None, .. }), "{c:?}");
        // At --depth 0 nothing below the interface is copied.
        let c = plan(&t, any, Bounds { depth: 0, ..bounds }, u32::MAX);
        assert!(matches!(c.root.kind, NodeKind::Iface { elems: None, .. }), "{c:?}");
    }

    #[test]
    fn a_top_level_pointer_is_followed_and_deep_values_cut() {
        let (t, _, ptr) = arena();
        let c = plan(&t, ptr, Bounds { depth: 0, ..DEFAULT_BOUNDS }, u32::MAX);
        let NodeKind::Pointer { pointee: Some(p) } = &c.root.kind else { panic!() };
        let NodeKind::Struct { fields } = &p.kind else { panic!() };
        assert_eq!(fields[2].kind, NodeKind::Cut, "the slice is one level down");
    }
}
