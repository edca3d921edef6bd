//! `func` in shape-instantiated generic code names the instantiation, not the shape: a
//! probe whose body uses `func` (or a bare aggregation, keyed by it) reads, at the entry
//! of a shape function (`main.Sum[go.shape.int]`), the dictionary its caller passed, and
//! the name is found from its address in user space (`Plan::function_name`). A return
//! probe reads it at the entry of the same call and carries it like a parameter. Such a
//! function gets a program of its own (the dictionary is where its ABI puts it).
//!
//! Not at inlined calls and line probes (the register is not the dictionary there), and
//! not in a stripped binary (no symbol table names the dictionaries): `func` names the
//! shape there, said once (`stripped_warning`).

use super::{FuncSite, InstanceKind};
use crate::arch::abi::{self, Location, RegPiece};
use crate::diag::Diagnostic;
use crate::syntax::ast::{Block, ExprKind, Span, StmtKind};
use crate::target::Target;

/// The name a carried dictionary has among a return probe's carried parameters (no
/// script can write it).
pub const CARRIED_DICTIONARY: &str = ".dict";

/// Whether the body uses `func`: by name, or through a bare aggregation (`count()`,
/// keyed by the probed function).
pub fn uses_func(block: &Block) -> bool {
    let mut found = false;
    block.walk_stmts(&mut |s| {
        if let StmtKind::Expr(e) = &s.kind {
            if let ExprKind::Call { func, .. } = &e.kind {
                found |= super::typeck::agg_of(&func.name).is_some();
            }
        }
        for e in s.exprs() {
            e.walk(&mut |x| found |= matches!(&x.kind, ExprKind::Name(n) if n == "func"));
        }
    });
    found
}

/// Whether `f` is a site where `func` reads a dictionary: the entry or a return of a
/// shape function itself (not an inlined copy, not a line), in a binary whose symbol
/// table names dictionaries.
pub fn takes_dictionary(target: &Target, f: &FuncSite, kind: InstanceKind) -> bool {
    matches!(kind, InstanceKind::Entry | InstanceKind::Return)
        && f.inlined.is_none()
        && f.line.is_none()
        && !target.is_stripped()
        && crate::target::dictionary_position(&f.name).is_some()
}

/// Where the dictionary of the shape function `function` is at its entry: the hidden
/// argument DWARF's parameters place (see `dictionary_position`), or without DWARF the
/// first integer register (a function) or the second (a method with a pointer
/// receiver). None when it cannot be told (a value receiver without DWARF).
pub fn dictionary_location(target: &Target, function: &str) -> Option<Location> {
    let at = crate::target::dictionary_position(function)?;
    let conv = target.find(function).first().map_or(target.go_conv(), |f| target.conv_of(f));
    if let Ok(Some(params)) = target.params(function) {
        let ins: Vec<_> = params.iter().filter(|p| !p.is_result).collect();
        let tys: Vec<_> = ins.iter().map(|p| p.ty).collect();
        let layout = abi::assign_call(conv, &tys, &[], &target.types());
        let i = ins.iter().position(|p| p.name == CARRIED_DICTIONARY)?;
        return layout.params.get(i).cloned();
    }
    let pointer_receiver = function.get(crate::target::package_of(function).len() + 1..)?.starts_with("(*");
    if !conv.registers || (at == 1 && !pointer_receiver) {
        return None;
    }
    let reg = *target.arch().int_arg_regs().get(at)?;
    Some(Location::Regs(vec![RegPiece { reg, offset: 0, size: 8 }]))
}

/// The message said once when `func` is used at shape functions of a stripped binary.
pub const STRIPPED: &str = "`func` names shape functions (`pkg.F[go.shape.int]`), not their instantiations";

/// Said (once) when `func` is used at shape functions of a stripped binary.
pub fn stripped_warning(span: Span, shape: &str) -> Diagnostic {
    Diagnostic::warning(span, STRIPPED)
        .label(format!("the binary is stripped: no symbol table names the dictionaries `{shape}` is called with"))
        .hint("each instantiation of the same shape counts under the shape's name; trace an unstripped build to tell them apart")
}

/// When a probe names an instantiation (`main.Sum[int]`) that the binary has as a shape
/// function: the error, with the shapes the binary has for it.
pub fn instantiation_error(target: &Target, span: Span, name: &str) -> Option<Diagnostic> {
    if name.contains("go.shape.") || crate::target::symbols_is_pattern(name) {
        return None;
    }
    let any = crate::target::any_type_args(name)?;
    let shapes: Vec<String> =
        (target.find(&any).iter()).filter(|f| f.name.contains("[go.shape.")).map(|f| format!("`{}`", f.name)).collect();
    if shapes.is_empty() {
        return None;
    }
    Some(
        Diagnostic::error(span, format!("`{name}` is an instantiation of generic code, not a function of the binary"))
            .label(format!("Go compiles it once per shape: {}", shapes.join(", ")))
            .hint(format!(
                "probe `{any}` (every instantiation) and key by `func`, which names each: `@[func] = count()`"
            )),
    )
}
