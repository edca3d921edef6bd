//! Generic code by instantiation. Go compiles a generic function once per GC shape
//! (`main.Sum[go.shape.int]` serves `Sum[int]` and `Sum[MyInt]`) and passes each call a
//! dictionary, a read-only symbol named for the instantiation (`main..dict.Sum[int]`; a
//! method of a generic type gets its type's, `main..dict.Stack[int]`). Here: the
//! dictionaries of the symbol table, the instantiation a dictionary names for a shape
//! function (`main.(*Stack[int]).Push`), and which shape a dictionary may belong to, for
//! listings (from the kinds of its type arguments' runtime type descriptors, which the
//! dictionary points at).

use crate::gobin::elf::symbols;
use crate::gobin::Target;
use object::{Object, ObjectSymbol};

/// What a dictionary symbol's name starts with after its package path.
const DICT: &str = "..dict.";

/// A generic dictionary of the binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dictionary {
    /// Its link-time address.
    pub addr: u64,
    /// Its symbol: `main..dict.Sum[int]`.
    pub symbol: String,
}

/// The generic function or type a shape function was made from, and its type arguments:
/// (`main.Sum`, `[go.shape.int]`) for `main.Sum[go.shape.int]`, (`main.Stack`,
/// `[go.shape.int]`) for `main.(*Stack[go.shape.int]).Push`. The arguments are at
/// `args` in `name`.
fn generic_of(name: &str) -> Option<(String, std::ops::Range<usize>)> {
    let package = symbols::package_of(name);
    let rest_at = package.len() + 1;
    let rest = name.get(rest_at..)?;
    let open = rest_at + rest.find('[')?;
    let end = symbols::type_args_end(name.as_bytes(), open)?;
    let ident = name[rest_at..open].trim_start_matches("(*").trim_start_matches('(');
    Some((format!("{package}.{ident}"), open..end))
}

/// `name` with its first type-argument list made `[...]` (the pattern of every
/// instantiation): `main.(*Stack[...]).Push` for `main.(*Stack[int]).Push`.
pub fn any_type_args(name: &str) -> Option<String> {
    let (_, args) = generic_of(name)?;
    Some(format!("{}[...]{}", &name[..args.start], &name[args.end..]))
}

/// What a dictionary symbol names after its package, and its type arguments:
/// (`main.Sum[int]`, `[int]`) for `main..dict.Sum[int]`, and (`main.(*Stack[int]).Push`,
/// `[int]`) for a method's own dictionary (Go 1.18 and 1.19 made one per method).
fn dictionary_parts(symbol: &str) -> Option<(String, &str)> {
    let at = symbol.find(DICT)?;
    let (package, rest) = (&symbol[..at], &symbol[at + DICT.len()..]);
    let open = rest.find('[')?;
    let end = symbols::type_args_end(rest.as_bytes(), open)?;
    Some((format!("{package}.{rest}"), &rest[open..end]))
}

/// The instantiation that the dictionary `symbol` makes of the shape function `shape`:
/// `main.Sum[int]` for `main.Sum[go.shape.int]` and `main..dict.Sum[int]`,
/// `main.(*Stack[int]).Push` for `main.(*Stack[go.shape.int]).Push` and the dictionary of
/// `Stack[int]` (or, Go 1.18, of `(*Stack[int]).Push`); None when the dictionary is not
/// one of that generic code's.
pub fn instantiation(shape: &str, symbol: &str) -> Option<String> {
    let (generic, args) = generic_of(shape)?;
    made_by(shape, (&generic, args), symbol)
}

/// `instantiation` with the shape's generic code and arguments found once (`-l '*'` asks
/// it of every dictionary of a shape's package): nothing is allocated for a dictionary
/// that is not one of that generic code's.
fn made_by(shape: &str, (generic, args): (&str, std::ops::Range<usize>), symbol: &str) -> Option<String> {
    let at = symbol.find(DICT)?;
    let (package, rest) = (&symbol[..at], &symbol[at + DICT.len()..]);
    let open = rest.find('[')?;
    let dict_args = &rest[open..symbols::type_args_end(rest.as_bytes(), open)?];
    // What the dictionary names is `package.rest`.
    let named = [package, ".", rest];
    let (head, tail) = (&shape[..args.start], &shape[args.end..]);
    if !same_text(&named, &[generic, dict_args]) && !same_text(&named, &[head, dict_args, tail]) {
        return None;
    }
    if split_args(&shape[args]).len() != split_args(dict_args).len() {
        return None;
    }
    Some(format!("{head}{dict_args}{tail}"))
}

/// Whether the pieces of `a` put end to end are the text of `b`'s.
fn same_text(a: &[&str], b: &[&str]) -> bool {
    let len = |p: &[&str]| p.iter().map(|s| s.len()).sum::<usize>();
    len(a) == len(b) && a.iter().flat_map(|s| s.bytes()).eq(b.iter().flat_map(|s| s.bytes()))
}

/// A shape's name without `go.shape.` and without the `_0`, `_1` … that Go 1.18 and 1.19
/// add: `int` for `go.shape.int_0`.
fn bare_shape(shape: &str) -> &str {
    let s = shape.trim_start_matches("go.shape.");
    match s.rsplit_once('_') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => s,
    }
}

/// The type arguments of a list `[a,b[c,d]]`: `a`, `b[c,d]`.
fn split_args(list: &str) -> Vec<&str> {
    let inner = list.strip_prefix('[').and_then(|l| l.strip_suffix(']')).unwrap_or(list);
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&inner[start..]);
    out
}

/// The shape names (after `go.shape.`) a runtime type of kind `kind` may have: its
/// basic type's name, `*uint8` for every pointer (Go 1.18 named pointer shapes after
/// the pointer type itself), and for composite kinds the prefix of their type literal.
fn shapes_of_kind(kind: u8) -> &'static [&'static str] {
    #[rustfmt::skip]
    const BASIC: [&str; 27] = [
        "", "bool", "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "uintptr",
        "float32", "float64", "complex64", "complex128", "[", "chan", "func", "interface", "map[", "*", "[]", "string",
        "struct", "unsafe.Pointer",
    ];
    match kind {
        0..=16 | 18..=21 | 23..=26 => std::slice::from_ref(&BASIC[kind as usize]),
        17 => &["["],
        22 => &["*uint8", "*"],
        _ => &[],
    }
}

/// Whether a type argument `arg` (as a dictionary names it) may have the shape `shape`
/// (without `go.shape.`): the same name, a pointer and `*uint8`, or a kind that fits.
fn may_have_shape(arg: &str, kind: Option<u8>, shape: &str) -> bool {
    if arg == shape || (shape == "*uint8" && arg.starts_with('*')) {
        return true;
    }
    match kind {
        Some(k) => shapes_of_kind(k).iter().any(|s| {
            if s.ends_with(['[', '*']) || matches!(*s, "chan" | "func" | "interface" | "struct") {
                shape.starts_with(s)
            } else {
                shape == *s
            }
        }),
        // Not found in the dictionary: a named type whose shape cannot be told.
        None => arg.contains('.'),
    }
}

/// The dictionaries of `all` by the generic code they may instantiate, as its name
/// (`main.Stack` for `main..dict.Stack[int]` and Go 1.18's `main..dict.(*Stack[int]).Push`;
/// `generic_name` of a shape function), as indexes in `all` in their order: the only
/// ones whose instantiation `instantiations_among` can find for a shape function of
/// that code (a listing asks of 1,130 shapes on Caddy, each of which was matched with
/// every dictionary of its package).
pub fn dictionaries_by_generic(all: &[Dictionary]) -> std::collections::HashMap<String, Vec<usize>> {
    let mut by: std::collections::HashMap<String, Vec<usize>> = std::collections::HashMap::new();
    for (i, d) in all.iter().enumerate() {
        let Some(at) = d.symbol.find(DICT) else { continue };
        let (package, rest) = (&d.symbol[..at], &d.symbol[at + DICT.len()..]);
        let Some(open) = rest.find('[') else { continue };
        // As `generic_of` takes a shape function's name apart.
        let ident = rest[..open].trim_start_matches("(*").trim_start_matches('(');
        by.entry(format!("{package}.{ident}")).or_default().push(i);
    }
    by
}

/// The generic code shape function `shape` was made from, as `dictionaries_by_generic`
/// names it: `main.Stack` for `main.(*Stack[go.shape.int]).Push`.
pub fn generic_name(shape: &str) -> Option<String> {
    generic_of(shape).map(|(generic, _)| generic)
}

/// The names and kinds of the runtime types a dictionary's words point at, by the
/// words' span, as `instantiations_kept` read them.
#[derive(Default)]
pub struct ArgumentKinds(std::collections::HashMap<(u64, u64), std::collections::HashMap<String, u8>>);

/// Offset of the kind byte in a runtime type descriptor (Go 1.17 to 1.26).
const KIND: u64 = 23;
/// The most words of a dictionary searched for its type arguments' descriptors.
const DICT_WORDS: u64 = 64;

impl Target {
    /// Every generic dictionary in the symbol table (none when it is stripped).
    pub fn dictionaries(&self) -> Vec<Dictionary> {
        let Ok(file) = object::File::parse(&*self.data) else { return Vec::new() };
        let mut out: Vec<Dictionary> = file
            .symbols()
            .filter_map(|s| {
                let name = s.name().ok()?;
                name.contains(DICT).then(|| Dictionary { addr: s.address(), symbol: name.to_string() })
            })
            .collect();
        out.sort_by_key(|d| d.addr);
        out
    }

    /// The dictionaries that may be passed to the shape function `shape`, with the
    /// instantiation each makes: those of its generic code whose type arguments may have
    /// its shapes (told from the kinds of the runtime types the dictionary points at).
    pub fn instantiations_of(&self, shape: &str, all: &[Dictionary]) -> Vec<(Dictionary, String)> {
        self.instantiations_among(shape, all, 0..all.len())
    }

    /// `instantiations_of` among the dictionaries at `candidates` in `all` (those of the
    /// shape's generic code, `dictionaries_by_generic`, when a listing asks of many
    /// shapes).
    pub fn instantiations_among(
        &self,
        shape: &str,
        all: &[Dictionary],
        candidates: impl IntoIterator<Item = usize>,
    ) -> Vec<(Dictionary, String)> {
        self.instantiations_kept(shape, all, candidates, &mut ArgumentKinds::default())
    }

    /// `instantiations_among`, the kinds of each dictionary's type arguments read once
    /// into `kinds` for every shape asked of it.
    pub fn instantiations_kept(
        &self,
        shape: &str,
        all: &[Dictionary],
        candidates: impl IntoIterator<Item = usize>,
        kinds: &mut ArgumentKinds,
    ) -> Vec<(Dictionary, String)> {
        let Some((generic, range)) = generic_of(shape) else { return Vec::new() };
        let shapes: Vec<&str> = split_args(&shape[range.clone()]).into_iter().map(bare_shape).collect();
        // Only the dictionaries of the shape's package can make it (a prefix compared
        // before any name is taken apart: `-l '*'` asks this of every shape function).
        let mine = format!("{}{DICT}", symbols::package_of(shape));
        let mut out = Vec::new();
        for i in candidates {
            let Some(d) = all.get(i) else { continue };
            if !d.symbol.starts_with(&mine) {
                continue;
            }
            let Some(name) = made_by(shape, (&generic, range.clone()), &d.symbol) else { continue };
            let Some((_, args)) = dictionary_parts(&d.symbol) else { continue };
            let end = all.get(i + 1).map_or(d.addr + 8 * DICT_WORDS, |n| n.addr.min(d.addr + 8 * DICT_WORDS));
            let kinds = kinds.0.entry((d.addr, end)).or_insert_with(|| self.argument_kinds(d.addr, end));
            let fits = split_args(args).iter().zip(&shapes).all(|(a, s)| may_have_shape(a, kinds.get(*a).copied(), s));
            if fits {
                out.push((d.clone(), name));
            }
        }
        out
    }

    /// The names and kinds of the runtime types the words in `[from, to)` point at.
    fn argument_kinds(&self, from: u64, to: u64) -> std::collections::HashMap<String, u8> {
        let mut kinds = std::collections::HashMap::new();
        let image = self.image();
        for at in (from..to).step_by(8) {
            let Some(word) = image.u64(at) else { break };
            let Some(name) = self.runtime_type_name(word) else { continue };
            if let Some(kind) = self.bytes_at(word + KIND, 1) {
                kinds.insert(name, kind[0] & 0x1f);
            }
        }
        kinds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instantiations_replace_the_shape_arguments() {
        assert_eq!(
            instantiation("main.Sum[go.shape.int]", "main..dict.Sum[main.MyInt]").unwrap(),
            "main.Sum[main.MyInt]"
        );
        assert_eq!(
            instantiation("main.(*Stack[go.shape.*uint8]).Push", "main..dict.Stack[*int]").unwrap(),
            "main.(*Stack[*int]).Push"
        );
        assert_eq!(
            instantiation("main.Pair[go.shape.int,go.shape.string]", "main..dict.Pair[int,string]").unwrap(),
            "main.Pair[int,string]"
        );
        assert_eq!(
            instantiation(
                "example.com/a/b.Map[go.shape.string,go.shape.[]int]",
                "example.com/a/b..dict.Map[string,[]int]"
            )
            .unwrap(),
            "example.com/a/b.Map[string,[]int]"
        );
        assert_eq!(instantiation("main.Sum[go.shape.int]", "main..dict.Sumx[int]"), None);
        assert_eq!(instantiation("main.Sum[go.shape.int]", "main..dict.Sum[int,string]"), None);
        assert_eq!(instantiation("main.Sum[go.shape.int]", "other..dict.Sum[int]"), None);
        // Go 1.18: numbered shapes, a dictionary per method.
        assert_eq!(instantiation("main.Sum[go.shape.int_0]", "main..dict.Sum[int]").unwrap(), "main.Sum[int]");
        let push = "main.(*Stack[go.shape.*uint8_0]).Push";
        assert_eq!(instantiation(push, "main..dict.(*Stack[*int]).Push").unwrap(), "main.(*Stack[*int]).Push");
        assert_eq!(instantiation(push, "main..dict.(*Stack[*int]).Pop"), None);
        assert_eq!(bare_shape("go.shape.*uint8_0"), "*uint8");
        assert_eq!(bare_shape("go.shape.struct { a_1 int }"), "struct { a_1 int }");
    }

    #[test]
    fn arguments_split_at_top_level_commas() {
        assert_eq!(
            split_args("[int,map[string]int,struct { a int; b int }]"),
            vec!["int", "map[string]int", "struct { a int; b int }"]
        );
        assert_eq!(split_args("[func(int, string) bool]"), vec!["func(int, string) bool"]);
    }

    #[test]
    fn shapes_fit_kinds() {
        assert!(may_have_shape("main.MyInt", Some(2), "int"));
        assert!(!may_have_shape("main.MyInt", Some(2), "string"));
        assert!(may_have_shape("*main.T", None, "*uint8"));
        assert!(may_have_shape("main.Point", Some(25), "struct { X int; Y int }"));
        assert!(!may_have_shape("int", None, "string"));
        assert!(may_have_shape("main.Unknown", None, "string"));
    }
}
