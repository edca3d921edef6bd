//! One program from many files: the probes of every file in order, and one table of the
//! names that files define (`fn` helpers and `param` settings). A name defined twice,
//! in one file or in two, is an error that points at both; so is a name the language
//! already gives a meaning (a builtin or an aggregation).

use super::resolve::File;
use crate::check::builtins;
use crate::diag::Diagnostic;
use crate::syntax::ast::{FnDef, Ident, Item, Param, Probe};
use std::collections::HashMap;

/// The functions a script calls that are part of the language.
pub(super) const BUILTIN_CALLS: &[&str] = &[
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "stats",
    "hist",
    "lhist",
    "print",
    "printf",
    "exit",
    "delete",
    "take",
    "clear",
    "len",
    "cap",
    "defined",
    "hasPrefix",
    // Conversions (check::typeck::conversion).
    "int",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "uintptr",
    "byte",
    "rune",
    "duration",
    "float32",
    "float64",
];

/// Every file's items, merged.
pub(super) struct Program {
    pub probes: Vec<Probe>,
    pub fns: HashMap<String, FnDef>,
    pub params: Vec<Param>,
}

pub(super) fn merge(files: Vec<File>) -> Result<Program, Vec<Diagnostic>> {
    let mut program = Program { probes: Vec::new(), fns: HashMap::new(), params: Vec::new() };
    let mut defined: HashMap<String, (Ident, &'static str)> = HashMap::new();
    let mut diags = Vec::new();
    let mut define = |name: &Ident, what: &'static str, diags: &mut Vec<Diagnostic>| -> bool {
        if let Some(reason) = reserved(&name.name) {
            diags.push(
                Diagnostic::error(name.span, format!("`{}` is {reason}", name.name))
                    .label(format!("cannot name a {what}"))
                    .hint(format!("rename it, e.g. `my_{}`", name.name)),
            );
            return false;
        }
        if let Some((first, first_what)) = defined.get(&name.name) {
            diags.push(
                Diagnostic::error(name.span, format!("`{}` is defined twice", name.name))
                    .label(format!("a second {what} `{}`", name.name))
                    .related(first.span, format!("first defined here, as a {first_what}"))
                    .hint("helpers and params of every file and library share one set of names; rename one"),
            );
            return false;
        }
        defined.insert(name.name.clone(), (name.clone(), what));
        true
    };
    for file in files {
        for p in file.script.params {
            if define(&p.name, "param", &mut diags) {
                program.params.push(p);
            }
        }
        for item in file.script.items {
            match item {
                Item::Use(_) => {}
                Item::Fn(f) => {
                    if define(&f.name, "helper", &mut diags) {
                        program.fns.insert(f.name.name.clone(), f);
                    }
                }
                Item::Probe(p) => program.probes.push(p),
            }
        }
    }
    if diags.is_empty() {
        Ok(program)
    } else {
        Err(diags)
    }
}

/// Why `name` cannot be defined, if it cannot.
fn reserved(name: &str) -> Option<&'static str> {
    if BUILTIN_CALLS.contains(&name) {
        Some("a builtin function")
    } else if builtins::NAMES.contains(&name)
        || name == "arg"
        || name.starts_with("ret") && name[3..].bytes().all(|b| b.is_ascii_digit())
    {
        Some("a builtin name")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_conversion_is_a_reserved_name() {
        for name in ["int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64"] {
            assert!(crate::check::typeck::conversion(name).is_some(), "{name}");
            assert!(super::BUILTIN_CALLS.contains(&name), "{name}");
        }
        for name in ["uintptr", "byte", "rune", "duration"] {
            assert!(crate::check::typeck::conversion(name).is_some() && super::BUILTIN_CALLS.contains(&name));
        }
    }
}
