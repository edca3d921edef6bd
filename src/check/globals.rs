//! The package-level variables a probe body names, resolved against the target before
//! it is typed (looking one up may parse DWARF types, which typing only reads):
//!
//! - `pkg.Name` (bare) is the variable `pkg.Name` when `pkg` is not a local, a parameter
//!   or result, a builtin or `arg`: `main.config.Port` is field `Port` of `main.config`;
//! - a quoted name followed by a field or an index is always one: the variable itself
//!   (`"net/http.DefaultClient".Timeout`), or with the field, a package path then the
//!   variable (`"net/http".DefaultClient`, as delve writes it). A quoted name alone is a
//!   string literal.

use super::builtins::{self, Builtin};
use super::govalues::GoValue;
use crate::diag::closest;
use crate::gobin::{GoBinary, NoVariable};
use crate::gotypes::TypeId;
use crate::syntax::ast::*;
use std::collections::HashMap;

/// A package-level variable: its name, link-time address and Go type.
#[derive(Clone, Debug, PartialEq)]
pub struct Global {
    pub name: String,
    pub addr: u64,
    pub ty: TypeId,
}

/// Why a named variable cannot be read: the message, and a hint.
#[derive(Clone, Debug, PartialEq)]
pub struct GlobalError {
    pub message: String,
    pub hint: Option<String>,
}

/// Every package-level variable the body may name, by name; an absent name is not one
/// (a bare `x.y` whose `x` is no package: an unknown name, said by the typing).
pub type Globals = HashMap<String, Result<Global, GlobalError>>;

/// Whether a bare `name.field` names a local, parameter or builtin first.
pub fn shadowed(name: &str, locals: &[&str], values: &[GoValue]) -> bool {
    Builtin::from_name(name).is_some()
        || builtins::NAMES.contains(&name)
        || ["arg", "nil"].contains(&name)
        || locals.contains(&name)
        || values.iter().any(|v| v.name == name)
}

/// Resolves every name in `body` that may be a package-level variable.
pub fn resolve(body: &Block, target: &dyn GoBinary, values: &[GoValue]) -> Globals {
    let mut locals: Vec<&str> = Vec::new();
    body.walk_stmts(&mut |s| {
        if let StmtKind::Let { name, .. } = &s.kind {
            locals.push(&name.name);
        }
    });
    let mut bare = Vec::new();
    let mut quoted = Vec::new();
    body.walk_exprs(&mut |e| match &e.kind {
        ExprKind::Field { base, field } => match &base.kind {
            ExprKind::Name(n) if !shadowed(n, &locals, values) => bare.push(format!("{n}.{}", field.name)),
            ExprKind::Str(s) => {
                quoted.push(s.clone());
                quoted.push(format!("{s}.{}", field.name));
            }
            _ => {}
        },
        ExprKind::Index { base, .. } => {
            if let ExprKind::Str(s) = &base.kind {
                quoted.push(s.clone());
            }
        }
        _ => {}
    });
    let mut globals = Globals::new();
    for (name, is_quoted) in bare.into_iter().map(|n| (n, false)).chain(quoted.into_iter().map(|n| (n, true))) {
        if globals.contains_key(&name) {
            continue;
        }
        if let Some(found) = lookup(target, &name, is_quoted) {
            globals.insert(name, found);
        }
    }
    globals
}

/// One variable; None when `name` is bare and its package has no variables (so it is
/// not a package-qualified name at all), or quoted and merely the path of a package.
fn lookup(target: &dyn GoBinary, name: &str, quoted: bool) -> Option<Result<Global, GlobalError>> {
    let err = |message: String, hint: Option<String>| Some(Err(GlobalError { message, hint }));
    match target.variable(name) {
        Ok(Ok(v)) => Some(Ok(Global { name: v.name, addr: v.addr, ty: v.ty })),
        Ok(Err(NoVariable::NoDwarf { in_symtab })) => {
            let package = name.rsplit_once('.').map_or(name, |(p, _)| p);
            if !quoted && !in_symtab && !target.is_package(package) {
                return None;
            }
            let why = if in_symtab {
                format!("`{name}` is in the symbol table, but without DWARF its type is not known")
            } else {
                format!("`{name}` cannot be found: this binary has no symbol table and no DWARF (stripped)")
            };
            err(
                why,
                Some("give its DWARF kept aside with --debug-file, or compile the script against the unstripped build (--emit plan) and trace this one with `gtrace run`".into()),
            )
        }
        Ok(Err(NoVariable::Unknown { same_package })) => {
            if same_package.is_empty() {
                return None;
            }
            // Compared without the package, which they share.
            let short = |n: &str| n.rsplit_once('.').map_or(n, |(_, v)| v).to_string();
            let shorts: Vec<String> = same_package.iter().map(|n| short(n)).collect();
            let close = closest(&short(name), shorts.iter().map(String::as_str), 1);
            let package = name.rsplit_once('.').map_or("", |(p, _)| p);
            let hint = match close.first() {
                Some(c) => format!("did you mean `{package}.{c}`?"),
                None => format!(
                    "the package's variables include {}",
                    same_package.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
                ),
            };
            err(format!("no package-level variable `{name}`"), Some(hint))
        }
        Err(e) => err(format!("`{name}` cannot be read: {e}"), None),
    }
}
