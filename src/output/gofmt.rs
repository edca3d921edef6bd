//! Whole Go values as Go's fmt prints them (`%v`, `%+v`, `%#v`), from the bytes a probe
//! copied (`capture::Capture`) and the Go types the plan carries. It follows fmt's
//! printValue (fmt/print.go): structs `{1 x}`, `{Port:1 Name:x}`, `main.T{Port:1,
//! Name:"x"}`; a pointer at the top as `&{...}`, inside a value as its address
//! (`0xc000012345`, `(*main.T)(0xc000012345)`); slices `[1 2]`, `[]int{1, 2}`,
//! `[]int(nil)`; interfaces by their dynamic value; reflect's type names (`url.URL` for
//! DWARF's `net/url.URL`). fmt calls a value's `String`/`Error` methods; gtrace cannot
//! run the program's code, so it does what those methods do for the standard ones only
//! (`time.Duration`, the errors of `errors.New` and `fmt.Errorf`), where fmt would call
//! them (an exported field, not `%#v`). What the capture cut prints as `...`.

use super::gonames::{basic, duration_string, type_string, ERROR_TYPES};
use super::quote::Strings;
use crate::capture::{Capture, Node, NodeKind};
use crate::gotypes::{TypeId, TypeKind, Types};
use std::collections::HashMap;
use std::sync::Arc;

/// Which of fmt's `%v` forms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    V,
    /// `%+v`: field names.
    Plus,
    /// `%#v`: Go syntax.
    Sharp,
}

/// A copied value with what it takes to print it.
#[derive(Clone, Debug)]
pub struct GoValue {
    pub capture: Capture,
    pub bytes: Vec<u8>,
    pub types: Arc<Types>,
    /// The interfaces' dynamic types, by their descriptor's run-time address.
    pub dynamic: HashMap<u64, Dynamic>,
}

/// An interface's dynamic type: its name, and its layout when the binary's DWARF has it
/// (for a pointer type, the layout of what it points at).
#[derive(Clone, Debug)]
pub struct Dynamic {
    pub name: String,
    pub layout: Option<(Arc<Types>, TypeId)>,
}

impl PartialEq for GoValue {
    /// The same bytes copied the same way (the types are the plan's).
    fn eq(&self, other: &GoValue) -> bool {
        let names = |v: &GoValue| v.dynamic.iter().map(|(k, d)| (*k, d.name.clone())).collect::<HashMap<_, _>>();
        self.capture == other.capture && self.bytes == other.bytes && names(self) == names(other)
    }
}

impl GoValue {
    /// The descriptor addresses of the dynamic types of the interfaces in it.
    pub fn dynamic_types(&self) -> Vec<u64> {
        let mut out = Vec::new();
        walk(&self.capture.root, &mut |n| {
            if let NodeKind::Iface { type_at, .. } = n.kind {
                let t = word(&self.bytes, type_at);
                if t != 0 {
                    out.push(t);
                }
            }
        });
        out
    }

    /// The value as `%v`, `%+v` or `%#v` prints it, its strings as `strings` says (`%#v`
    /// quotes them).
    pub fn render(&self, form: Form, strings: Strings) -> String {
        let mut p = Printer {
            bytes: &self.bytes,
            types: &self.types,
            dynamic: &self.dynamic,
            form,
            strings,
            out: String::new(),
        };
        p.value(&self.capture.root, 0);
        p.out
    }
}

fn walk(node: &Node, f: &mut dyn FnMut(&Node)) {
    f(node);
    match &node.kind {
        NodeKind::Struct { fields } => fields.iter().for_each(|n| walk(n, f)),
        NodeKind::Array { elems } | NodeKind::Slice { elems, .. } => elems.iter().for_each(|n| walk(n, f)),
        NodeKind::Pointer { pointee: Some(p) } => walk(p, f),
        NodeKind::Map { entries, .. } => entries.iter().for_each(|(k, v)| {
            walk(k, f);
            walk(v, f)
        }),
        NodeKind::Iface { elems: Some(e), .. } => e.elems.iter().for_each(|n| walk(n, f)),
        _ => {}
    }
}

fn word(bytes: &[u8], at: u32) -> u64 {
    uint(bytes, at, 8)
}

fn uint(bytes: &[u8], at: u32, size: u64) -> u64 {
    let mut b = [0u8; 8];
    let at = at as usize;
    let n = (size as usize).min(8);
    if let Some(src) = bytes.get(at..at + n) {
        b[..n].copy_from_slice(src);
    }
    u64::from_le_bytes(b)
}

/// A map key as fmt orders it.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum MapKey {
    Int(i128),
    Str(Vec<u8>),
    /// A key fmt orders in ways not copied here: kept where it was found.
    Found,
}

struct Printer<'v> {
    bytes: &'v [u8],
    types: &'v Types,
    dynamic: &'v HashMap<u64, Dynamic>,
    form: Form,
    strings: Strings,
    out: String,
}

impl Printer<'_> {
    fn ty(&self, id: TypeId) -> &crate::gotypes::GoType {
        self.types.get(id)
    }

    fn name(&self, id: TypeId) -> String {
        type_string(&self.ty(id).name)
    }

    /// fmt's printValue of the value `node` at `depth`.
    fn value(&mut self, node: &Node, depth: u32) {
        let t = self.ty(node.ty).clone();
        let sharp = self.form == Form::Sharp;
        // fmt calls String() on an accessible time.Duration inside a value (not for %#v).
        if t.name == "time.Duration" && depth > 0 && !node.hidden && !sharp {
            let d = uint(&self.bytes, node.at, 8) as i64;
            self.out.push_str(&duration_string(d));
            return;
        }
        match (&t.kind, &node.kind) {
            (_, NodeKind::Cut) => self.cut(node.ty),
            (TypeKind::Struct { fields }, NodeKind::Struct { fields: shown }) => {
                if sharp {
                    self.out.push_str(&self.name(node.ty));
                }
                self.out.push('{');
                for (i, (f, n)) in fields.iter().zip(shown).enumerate() {
                    if i > 0 {
                        self.out.push_str(if sharp { ", " } else { " " });
                    }
                    if self.form != Form::V {
                        self.out.push_str(&f.name);
                        self.out.push(':');
                    }
                    self.value(n, depth + 1);
                }
                if shown.len() < fields.len() {
                    self.out.push_str(if sharp { ", ..." } else { " ..." });
                }
                self.out.push('}');
            }
            (TypeKind::Array { len, .. }, NodeKind::Array { elems }) => {
                self.list(node.ty, elems, *len, depth, false);
            }
            (TypeKind::Slice { .. }, NodeKind::Slice { elems, .. }) => {
                let (ptr, len) = (word(&self.bytes, node.at), word(&self.bytes, node.at + 8));
                if sharp && ptr == 0 {
                    self.out.push_str(&format!("{}(nil)", self.name(node.ty)));
                    return;
                }
                let n = (len as usize).min(elems.len());
                self.list(node.ty, &elems[..n], len, depth, true);
            }
            (TypeKind::String, NodeKind::Str { bytes, max }) => {
                let len = word(&self.bytes, node.at + 8);
                self.string(*bytes, len, *max);
            }
            (TypeKind::Pointer { .. }, NodeKind::Pointer { pointee: Some(p) }) if word(&self.bytes, node.at) != 0 => {
                self.out.push('&');
                self.value(p, depth + 1);
            }
            (TypeKind::Func, NodeKind::Func { code }) => {
                let u = if word(&self.bytes, node.at) == 0 { 0 } else { word(&self.bytes, *code) };
                self.pointer(node.ty, u);
            }
            (TypeKind::Interface { .. }, NodeKind::Iface { .. }) => self.interface(node, depth),
            (TypeKind::Pointer { .. } | TypeKind::Chan | TypeKind::UnsafePointer, _) => {
                let u = word(&self.bytes, node.at);
                self.pointer(node.ty, u);
            }
            (TypeKind::Map { .. }, NodeKind::Map { len_at, n_at, entries, .. }) => {
                let (ptr, len, n) = (word(&self.bytes, node.at), word(&self.bytes, *len_at), word(&self.bytes, *n_at));
                self.map(node.ty, ptr, len, &entries[..(n as usize).min(entries.len())], depth);
            }
            (TypeKind::Map { .. }, _) => {
                if sharp {
                    self.out.push_str(&format!("{}{{...}}", self.name(node.ty)));
                } else {
                    self.out.push_str("map[...]");
                }
            }
            _ => self.scalar(node.ty, node.at),
        }
    }

    /// What the capture cut: `{...}`, `[...]`, `map[...]`, `...` (a string, `"..."`
    /// with %#v); with %#v after the type.
    fn cut(&mut self, id: TypeId) {
        let t = self.ty(id);
        let shape = match t.kind {
            TypeKind::String if self.form == Form::Sharp => "\"...\"",
            TypeKind::String => "...",
            TypeKind::Struct { .. } => "{...}",
            TypeKind::Map { .. } if self.form != Form::Sharp => "map[...]",
            TypeKind::Interface { .. } => "...",
            _ if self.form == Form::Sharp => "{...}",
            _ => "[...]",
        };
        if self.form == Form::Sharp && !matches!(t.kind, TypeKind::Interface { .. } | TypeKind::String) {
            self.out.push_str(&self.name(id));
        }
        self.out.push_str(shape);
    }

    /// Elements of an array or slice (`len` in all; `elems` those copied).
    fn list(&mut self, id: TypeId, elems: &[Node], len: u64, depth: u32, _slice: bool) {
        let sharp = self.form == Form::Sharp;
        if sharp {
            self.out.push_str(&self.name(id));
            self.out.push('{');
        } else {
            self.out.push('[');
        }
        for (i, e) in elems.iter().enumerate() {
            if i > 0 {
                self.out.push_str(if sharp { ", " } else { " " });
            }
            self.value(e, depth + 1);
        }
        if (elems.len() as u64) < len {
            if !elems.is_empty() {
                self.out.push_str(if sharp { ", " } else { " " });
            }
            self.out.push_str("...");
        }
        self.out.push(if sharp { '}' } else { ']' });
    }

    /// fmt's map: `map[k:v k:v]` sorted by key (%#v: `map[K]V{k:v, k:v}`; nil:
    /// `map[]`, `map[K]V(nil)`), of the entries copied, `...` when the map has more.
    fn map(&mut self, id: TypeId, ptr: u64, len: u64, entries: &[(Node, Node)], depth: u32) {
        let sharp = self.form == Form::Sharp;
        if sharp && ptr == 0 {
            self.out.push_str(&format!("{}(nil)", self.name(id)));
            return;
        }
        let mut order: Vec<&(Node, Node)> = entries.iter().collect();
        order.sort_by(|a, b| self.map_key(&a.0).cmp(&self.map_key(&b.0)));
        if sharp {
            self.out.push_str(&self.name(id));
            self.out.push('{');
        } else {
            self.out.push_str("map[");
        }
        for (i, (k, v)) in order.iter().enumerate() {
            if i > 0 {
                self.out.push_str(if sharp { ", " } else { " " });
            }
            self.value(k, depth + 1);
            self.out.push(':');
            self.value(v, depth + 1);
        }
        if (entries.len() as u64) < len {
            if !entries.is_empty() {
                self.out.push_str(if sharp { ", " } else { " " });
            }
            self.out.push_str("...");
        }
        self.out.push(if sharp { '}' } else { ']' });
    }

    /// How fmt (internal/fmtsort) orders a map's keys, for integers, bools and strings;
    /// other keys keep the order the probe found them in.
    fn map_key(&self, key: &Node) -> MapKey {
        let t = self.ty(key.ty);
        let raw = uint(&self.bytes, key.at, t.size);
        match (&t.kind, &key.kind) {
            (TypeKind::Int { signed: true }, _) => {
                let shift = 64 - 8 * t.size.clamp(1, 8) as u32;
                MapKey::Int(i128::from(((raw << shift) as i64) >> shift))
            }
            (TypeKind::Int { signed: false } | TypeKind::Bool, _) => MapKey::Int(i128::from(raw)),
            (TypeKind::String, NodeKind::Str { bytes, max }) => {
                let n = (word(&self.bytes, key.at + 8) as usize).min(*max as usize);
                let start = *bytes as usize;
                MapKey::Str(self.bytes.get(start..start + n).unwrap_or_default().to_vec())
            }
            _ => MapKey::Found,
        }
    }

    fn string(&mut self, at: u32, len: u64, max: u32) {
        let n = (len as usize).min(max as usize);
        let start = at as usize;
        let s = self.bytes.get(start..start + n).unwrap_or_default();
        if self.form == Form::Sharp {
            self.out.push_str(&super::quote::quote(s));
        } else {
            self.out.push_str(&self.strings.write(s));
        }
        if len > u64::from(max) {
            self.out.push_str("...");
        }
    }

    /// fmt's fmtPointer with `%v`: `0xc000012345` or `<nil>`; `%#v`: `(*T)(0x...)`.
    fn pointer(&mut self, id: TypeId, u: u64) {
        if self.form == Form::Sharp {
            let v = if u == 0 { "nil".to_string() } else { format!("{u:#x}") };
            self.out.push_str(&format!("({})({v})", self.name(id)));
        } else if u == 0 {
            self.out.push_str("<nil>");
        } else {
            self.out.push_str(&format!("{u:#x}"));
        }
    }

    /// Numbers, bools, floats, complex numbers.
    fn scalar(&mut self, id: TypeId, at: u32) {
        let t = self.ty(id).clone();
        let raw = uint(&self.bytes, at, t.size);
        let s = match t.kind {
            TypeKind::Bool => (raw & 0xff != 0).to_string(),
            TypeKind::Int { signed: true } => {
                let shift = 64 - 8 * t.size.clamp(1, 8) as u32;
                (((raw << shift) as i64) >> shift).to_string()
            }
            // %#v prints unsigned integers in hex, as Go syntax.
            TypeKind::Int { signed: false } if self.form == Form::Sharp => format!("{raw:#x}"),
            TypeKind::Int { signed: false } => raw.to_string(),
            TypeKind::Float => super::float::format(raw, t.size as u8, super::float::Spec::v()),
            TypeKind::Complex => {
                let half = (t.size / 2) as u8;
                let re = uint(&self.bytes, at, u64::from(half));
                let im = uint(&self.bytes, at + u32::from(half), u64::from(half));
                let plus = super::float::Spec { plus: true, ..super::float::Spec::v() };
                format!(
                    "({}{}i)",
                    super::float::format(re, half, super::float::Spec::v()),
                    super::float::format(im, half, plus)
                )
            }
            _ => format!("{raw:#x}"),
        };
        self.out.push_str(&s);
    }

    /// An interface: nil, or its dynamic value as fmt prints it (at the top, `depth`
    /// 0, as the argument itself: a pointer to a struct as `&{...}`).
    fn interface(&mut self, node: &Node, depth: u32) {
        let NodeKind::Iface { type_at, data_at, str_at, max, ref elems, .. } = node.kind else { return };
        let sharp = self.form == Form::Sharp;
        let tab = word(self.bytes, node.at);
        if tab == 0 {
            if sharp && depth > 0 {
                self.out.push_str(&format!("{}(nil)", self.name(node.ty)));
            } else {
                self.out.push_str("<nil>");
            }
            return;
        }
        let desc = word(self.bytes, type_at);
        let data = word(self.bytes, node.at + 8);
        let Some(dynamic) = self.dynamic.get(&desc).cloned() else {
            // Without the type's name (a stripped binary): its addresses.
            self.out.push_str(&format!("(type {desc:#x})({data:#x})"));
            return;
        };
        let name = dynamic.name.as_str();
        let text_len = word(self.bytes, data_at + 8);
        let shown = type_string(name);
        if name == "string" || (ERROR_TYPES.contains(&name) && !node.hidden && !sharp) {
            self.string(str_at, text_len, max);
        } else if let Some(s) = basic(name, uint(self.bytes, data_at, 8), sharp) {
            self.out.push_str(&s);
        } else if let Some(elems) = elems.as_ref().filter(|_| slice_of_interfaces(&dynamic)) {
            self.iface_slice(&shown, data_at, elems, depth);
        } else if let Some(s) = name.strip_prefix('*') {
            match &dynamic.layout {
                // fmt prints what a pointer at the top points at; here its first bytes.
                Some((types, id)) if depth == 0 && crate::capture::pointee_printed(types, *id) => {
                    self.out.push('&');
                    self.raw(types, *id, data_at, (str_at, max));
                }
                _ if sharp => self.out.push_str(&format!("(*{})({data:#x})", type_string(s))),
                _ => self.out.push_str(&format!("{data:#x}")),
            }
        } else if name.starts_with("map[") || name.starts_with("chan ") || name.starts_with("func(") {
            if sharp {
                self.out.push_str(&format!("({shown})({data:#x})"));
            } else {
                self.out.push_str(&format!("{data:#x}"));
            }
        } else if let Some((types, id)) = &dynamic.layout {
            self.raw(types, *id, data_at, (str_at, max));
        } else {
            self.out.push_str(&format!("{}{{...}}", if sharp { shown.as_str() } else { "" }));
        }
    }

    /// A slice of interfaces an interface holds (`[]any`), its elements as copied: as
    /// fmt prints a slice, `[1 two]`, `[]interface {}{1, "two"}`, `...` for the rest.
    fn iface_slice(&mut self, shown: &str, data_at: u32, e: &crate::capture::IfaceElems, depth: u32) {
        let (ptr, len) = (word(self.bytes, data_at), word(self.bytes, data_at + 8));
        let sharp = self.form == Form::Sharp;
        if sharp && ptr == 0 {
            self.out.push_str(&format!("{shown}(nil)"));
            return;
        }
        let n = (word(self.bytes, e.head_at) as usize).min(e.elems.len());
        if sharp {
            self.out.push_str(shown);
        }
        self.out.push(if sharp { '{' } else { '[' });
        for (i, el) in e.elems[..n].iter().enumerate() {
            if i > 0 {
                self.out.push_str(if sharp { ", " } else { " " });
            }
            self.value(el, depth + 1);
        }
        if (n as u64) < len {
            self.out.push_str(if n > 0 {
                if sharp {
                    ", ..."
                } else {
                    " ..."
                }
            } else {
                "..."
            });
        }
        self.out.push(if sharp { '}' } else { ']' });
    }

    /// A value of type `id` (in `types`) from the bytes an interface's copy holds at `at`.
    fn raw(&mut self, types: &Types, id: TypeId, at: u32, text: (u32, u32)) {
        let node = crate::capture::plan_raw(types, id, at, crate::capture::IFACE_DATA, text);
        let mut p = Printer {
            bytes: self.bytes,
            types,
            dynamic: self.dynamic,
            form: self.form,
            strings: self.strings,
            out: String::new(),
        };
        p.value(&node, 1);
        self.out.push_str(&p.out);
    }
}

/// Whether an interface's dynamic type is a slice of interfaces (by its layout).
fn slice_of_interfaces(d: &Dynamic) -> bool {
    let Some((types, id)) = &d.layout else { return false };
    let TypeKind::Slice { elem } = types.get(*id).kind else { return false };
    matches!(types.get(elem).kind, TypeKind::Interface { .. })
}
