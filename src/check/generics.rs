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

use super::probes::PassedOver;
use super::{FuncSite, InstanceKind};
use crate::arch::abi::{self, Location, RegPiece};
use crate::diag::Diagnostic;
use crate::gobin::GoBinary;
use crate::syntax::ast::{Block, ExprKind, Span, StmtKind, SymbolPattern};

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
pub fn takes_dictionary(target: &dyn GoBinary, f: &FuncSite, kind: InstanceKind) -> bool {
    matches!(kind, InstanceKind::Entry | InstanceKind::Return)
        && f.inlined.is_none()
        && f.line.is_none()
        && !target.is_stripped()
        && crate::gobin::dictionary_position(&f.name).is_some()
}

/// Where the dictionary of the shape function `function` is at its entry: the hidden
/// argument DWARF's parameters place (see `dictionary_position`), or without DWARF the
/// first integer register (a function) or the second (a method with a pointer
/// receiver). None when it cannot be told (a value receiver without DWARF).
pub fn dictionary_location(target: &dyn GoBinary, function: &str) -> Option<Location> {
    let at = crate::gobin::dictionary_position(function)?;
    let conv = target.find(function).first().map_or(target.go_conv(), |f| target.conv_of(f));
    if let Ok(Some(params)) = target.params(function) {
        let ins: Vec<_> = params.iter().filter(|p| !p.is_result).collect();
        let tys: Vec<_> = ins.iter().map(|p| p.ty).collect();
        let layout = abi::assign_call(conv, &tys, &[], &target.types());
        let i = ins.iter().position(|p| p.name == CARRIED_DICTIONARY)?;
        return layout.params.get(i).cloned();
    }
    let pointer_receiver = function.get(crate::gobin::package_of(function).len() + 1..)?.starts_with("(*");
    if !conv.registers || (at == 1 && !pointer_receiver) {
        return None;
    }
    let reg = *target.arch().int_arg_regs().get(at)?;
    Some(Location::Regs(vec![RegPiece { reg, offset: 0, size: 8 }]))
}

/// The message said once when `func` is used at shape functions of a stripped binary.
pub const STRIPPED: &str = "`func` names shape functions (`pkg.F[go.shape.int]`), not their instantiations";

/// A probe of one instantiation at a shape function whose dictionary cannot be found
/// (a method with a value receiver, without DWARF).
pub fn no_dictionary_here(span: Span, shape: &str) -> Diagnostic {
    Diagnostic::error(span, format!("where `{shape}` gets its dictionary cannot be told without DWARF"))
        .label("its receiver is a value, whose size decides the register after it")
        .hint("probe every instantiation (`[...]`), or trace a build with DWARF")
}

/// Said (once) when `func` is used at shape functions of a stripped binary.
pub fn stripped_warning(span: Span, shape: &str) -> Diagnostic {
    Diagnostic::warning(span, STRIPPED)
        .label(format!("the binary is stripped: no symbol table names the dictionaries `{shape}` is called with"))
        .hint("each instantiation of the same shape counts under the shape's name; trace an unstripped build to tell them apart")
}

/// The sites of a probe that names an instantiation (`"main.Sum[int]"`, which is no
/// function of the binary): the shape functions its dictionary is passed to, each
/// filtered to the calls that pass it. None when the pattern is no instantiation of
/// generic code the binary has; an error when it is one that cannot be probed so (in a
/// stripped binary, in `on panic`, an instantiation with no dictionary). A `*` in the
/// type arguments is a pointer first (`"main.(*Stack[*int]).Push"`): the caller tries
/// this before reading it as a wildcard.
pub fn instantiation_sites(
    target: &dyn GoBinary,
    pattern: &SymbolPattern,
    kind: InstanceKind,
    passed_over: &mut Vec<PassedOver>,
) -> Option<Result<(Vec<FuncSite>, Option<Diagnostic>), Diagnostic>> {
    let name = pattern.text.as_str();
    if name.contains("go.shape.") || name.contains("[...]") {
        return None;
    }
    let any = crate::gobin::any_type_args(name)?;
    let shapes: Vec<&crate::gobin::Function> =
        (target.find(&any).into_iter()).filter(|f| crate::gobin::dictionary_position(&f.name).is_some()).collect();
    // Inlined copies pass no dictionary: the inline tree names their shape.
    let inlined = (target.find_inlined(&any).iter())
        .filter(|s| crate::gobin::dictionary_position(&s.callee).is_some() || s.callee.contains("[...]"))
        .count();
    let error = |why: &str| {
        let list: Vec<String> = shapes.iter().map(|f| format!("`{}`", f.name)).collect();
        let label = match list.is_empty() {
            true => format!("every call of it is inlined ({inlined} places), where no dictionary tells them apart"),
            false => format!("Go compiles it once per shape: {}", list.join(", ")),
        };
        Diagnostic::error(pattern.span, format!("`{name}` cannot be probed by its instantiation here: {why}"))
            .label(label)
            .hint(if target.is_stripped() || kind == InstanceKind::Panic || shapes.is_empty() {
                format!("probe `{any}`: every instantiation, under its shape's name")
            } else {
                format!("probe `{any}` (every instantiation) and key by `func`, which names each: `@[func] = count()`")
            })
    };
    if shapes.is_empty() {
        return (inlined > 0).then(|| Err(error("it has no function of its own")));
    }
    if target.is_stripped() {
        return Some(Err(error("the binary is stripped, and no symbol table names its dictionaries")));
    }
    if !matches!(kind, InstanceKind::Entry | InstanceKind::Return) {
        return Some(Err(error("only `on entry` and `on return` tell the instantiations of a shape apart")));
    }
    let picked = pick_dictionaries(target, &shapes, name);
    if picked.is_empty() {
        return Some(Err(error("the binary has no dictionary for it (`gtrace -l` lists the instantiations it has)")));
    }
    let sites = picked.into_iter().filter_map(|(f, addr)| {
        let site = super::probes::function_site(f, kind, target, passed_over)?;
        Some(FuncSite { dictionary: Some(addr), ..site })
    });
    let warning = (inlined > 0 && kind == InstanceKind::Entry).then(|| {
        Diagnostic::warning(pattern.span, format!("`{name}` is also inlined, at {inlined} places of its generic code"))
            .label("inlined calls pass no dictionary: those are not probed")
            .hint(format!("`{any}` probes them too, under the shape's name"))
    });
    Some(Ok((sites.collect(), warning)))
}

/// The shape functions the dictionary of instantiation `name` is passed to, with its
/// address: those its type arguments' kinds allow, or when they tell none, every shape
/// of the generic code (the probe compares the dictionary anyway).
fn pick_dictionaries<'t>(
    target: &dyn GoBinary,
    shapes: &[&'t crate::gobin::Function],
    name: &str,
) -> Vec<(&'t crate::gobin::Function, u64)> {
    let all = target.dictionaries();
    let mut picked = Vec::new();
    for f in shapes {
        let made = target.instantiations_of(&f.name, &all);
        picked.extend(made.iter().filter(|(_, n)| n == name).map(|(d, _)| (*f, d.addr)));
    }
    if picked.is_empty() {
        for f in shapes {
            let made = all.iter().filter(|d| crate::gobin::instantiation(&f.name, &d.symbol).as_deref() == Some(name));
            picked.extend(made.map(|d| (*f, d.addr)));
        }
    }
    picked
}

/// Adds `site` to a probe's sites unless it is there: a site of every call of a function
/// holds those of its instantiations (`"main.Sum[...]", "main.Sum[int]"` probes each call
/// once).
pub fn add_site(sites: &mut Vec<FuncSite>, site: FuncSite) {
    let same = |f: &FuncSite| f.name == site.name && f.entry == site.entry && f.inlined == site.inlined;
    if site.dictionary.is_none() {
        sites.retain(|f| !(same(f) && f.dictionary.is_some()));
    }
    if !sites.iter().any(|f| same(f) && (f.dictionary.is_none() || f.dictionary == site.dictionary)) {
        sites.push(site);
    }
}
