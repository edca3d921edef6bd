//! The Go values a probe can name: the parameters and results of the probed function
//! with their ABI locations and script types (or why they cannot be read there), and
//! whether a probe body reads any at all.

use super::ty::Ty;
use super::unreadable::{InlinedWhy, Unreadable};
use super::InstanceKind;
use crate::arch::abi::{self, Location};
use crate::check::Builtin;
use crate::gobin::{GoBinary, InlinedSite, Param, TargetError, ValueLocation};
use crate::gotypes::{TypeId, TypeKind, Types};
use crate::syntax::ast::*;

/// A Go value the probe can read by name.
#[derive(Clone, Debug, PartialEq)]
pub struct GoValue {
    pub name: String,
    pub type_id: TypeId,
    pub ty: Result<Ty, Unreadable>,
    /// Where it is at the probe, or with `at_entry`, at the function's entry.
    pub location: Location,
    pub is_result: bool,
    /// A parameter in a return probe: read at the entry of the same call, where
    /// `location` is, and carried to the return by gtrace (its value at entry).
    pub at_entry: bool,
    /// A local whose address is taken (moved to the heap): `location` holds a pointer
    /// to it (DWARF's `&name`), read through when the value is.
    pub escaped: bool,
}

/// The default number of bytes read of a Go string (`--string-limit`).
pub const STRING_LIMIT: u32 = 64;

/// Parameters and results of `function` with their ABI locations.
pub fn go_values(
    target: &dyn GoBinary,
    function: &str,
    kind: InstanceKind,
    limit: u32,
) -> Result<Vec<GoValue>, TargetError> {
    let params: Vec<Param> = match target.params(function)? {
        Some(p) => p,
        None if !target.has_dwarf() => return Ok(positional(target, function, kind)),
        None => return Ok(Vec::new()),
    };
    // Go 1.17's DWARF leaves unnamed results out: there, a function that lists none is
    // offered `ret0` … as machine words from the register ABI's result registers.
    let go117 = target.go_version().is_some_and(|v| v == "go1.17" || v.starts_with("go1.17."));
    let guessed_results =
        (kind == InstanceKind::Return && go117 && !params.iter().any(|p| p.is_result)).then(|| target.word_type());
    let types = &*target.types();
    let (ins, outs): (Vec<&Param>, Vec<&Param>) = params.iter().partition(|p| !p.is_result);
    let layout = abi::assign_call(
        target.go_conv(),
        &ins.iter().map(|p| p.ty).collect::<Vec<_>>(),
        &outs.iter().map(|p| p.ty).collect::<Vec<_>>(),
        types,
    );
    let (in_locs, out_locs) = (layout.params, layout.results);
    let mut values = Vec::new();
    for (p, loc) in ins.iter().zip(in_locs) {
        if p.name.starts_with('.') {
            // The hidden dictionary of generic code: placed by the ABI, never named.
            continue;
        }
        // At a RET the parameters' registers hold results or garbage: a return probe
        // reads what the entry of the same call carried (`at_entry`).
        let ty = Ok(go_ty(types, p.ty, limit));
        let at_entry = kind == InstanceKind::Return;
        values.push(GoValue {
            name: p.name.clone(),
            type_id: p.ty,
            ty,
            location: loc,
            is_result: false,
            at_entry,
            escaped: false,
        });
    }
    if kind == InstanceKind::Return {
        for (p, loc) in outs.iter().zip(out_locs) {
            values.push(GoValue {
                name: p.name.clone(),
                type_id: p.ty,
                ty: Ok(go_ty(types, p.ty, limit)),
                location: loc,
                is_result: true,
                at_entry: false,
                escaped: false,
            });
        }
        if let Some(word) = guessed_results {
            // As many words as the register ABI has result registers, where Go puts them.
            let ins: Vec<TypeId> = ins.iter().map(|p| p.ty).collect();
            let words = vec![word; target.arch().int_arg_regs().len()];
            let guessed = abi::assign_results(target.go_conv(), &ins, &words, types);
            for (i, location) in guessed.into_iter().enumerate() {
                values.push(GoValue {
                    name: format!("ret{i}"),
                    type_id: word,
                    ty: Ok(Ty::Int { size: 8, signed: true }),
                    location,
                    is_result: true,
                    at_entry: false,
                    escaped: false,
                });
            }
        }
    }
    Ok(values)
}

/// The machine words a register-ABI function receives (`arg0` …, in its integer registers)
/// or, at a return, returns (`ret0` …): what can be said without DWARF. A function of
/// the stack ABI (assembly; Go code on arm64 before Go 1.18) takes its words on the
/// stack, from 8(SP), and where its results are depends on its unknown arguments.
pub fn positional(target: &dyn GoBinary, function: &str, kind: InstanceKind) -> Vec<GoValue> {
    let word = target.word_type();
    let conv = target.find(function).first().map_or(target.go_conv(), |f| target.conv_of(f));
    let stack = !conv.registers;
    let mut values = Vec::new();
    for (i, reg) in target.arch().int_arg_regs().iter().enumerate() {
        let location = if stack {
            Location::Stack { offset: (target.arch().stack_args_offset() + 8 * i as u64) as i64 }
        } else {
            Location::Regs(vec![abi::RegPiece { reg: *reg, offset: 0, size: 8 }])
        };
        values.push(GoValue {
            name: format!("arg{i}"),
            type_id: word,
            ty: Ok(Ty::Int { size: 8, signed: true }),
            location: location.clone(),
            is_result: false,
            at_entry: kind == InstanceKind::Return,
            escaped: false,
        });
        if kind == InstanceKind::Return {
            let ty = if stack {
                Err(Unreadable::StackResult { name: format!("ret{i}"), function: function.to_string() })
            } else {
                Ok(Ty::Int { size: 8, signed: true })
            };
            values.push(GoValue {
                name: format!("ret{i}"),
                type_id: word,
                ty,
                location,
                is_result: true,
                at_entry: false,
                escaped: false,
            });
        }
    }
    values
}

/// Where a function was inlined, its parameters are wherever the caller's code keeps
/// them, not in ABI registers: read where DWARF locates them (registers, stack slots) at
/// the site's probe address, refused with the reason otherwise.
pub fn inlined_values(target: &dyn GoBinary, site: &InlinedSite, limit: u32) -> Vec<GoValue> {
    let function = site.callee.as_str();
    let unreadable = |name: &str, why: InlinedWhy| Unreadable::Inlined {
        name: name.to_string(),
        function: function.to_string(),
        why,
    };
    // Where DWARF says the inlined call keeps each parameter at the probe's address.
    if let Some(located) = target.inlined_params(site).ok().flatten() {
        // Every parameter the function declares; one the inlined call does not list was
        // optimized away there.
        let declared: Vec<Param> = match target.params(function) {
            Ok(Some(p)) => p.into_iter().filter(|p| !p.is_result && !p.name.starts_with('.')).collect(),
            _ => located.iter().map(|(p, _)| p.clone()).filter(|p| !p.is_result).collect(),
        };
        let types = &*target.types();
        return declared
            .into_iter()
            .map(|p| {
                let (ty, location) = match located.iter().find(|(l, _)| l.name == p.name) {
                    Some((_, ValueLocation::At(loc))) => (Ok(go_ty(types, p.ty, limit)), loc.clone()),
                    Some((_, ValueLocation::Unsupported(why))) => {
                        (Err(unreadable(&p.name, InlinedWhy::Location { why: why.clone() })), Location::Empty)
                    }
                    Some((_, ValueLocation::Nowhere)) => {
                        (Err(unreadable(&p.name, InlinedWhy::NowhereHere)), Location::Empty)
                    }
                    None => (Err(unreadable(&p.name, InlinedWhy::NotKept)), Location::Empty),
                };
                GoValue {
                    name: p.name.clone(),
                    type_id: p.ty,
                    ty,
                    location,
                    is_result: false,
                    at_entry: false,
                    escaped: false,
                }
            })
            .collect();
    }
    let Ok(Some(params)) = target.params(function) else { return Vec::new() };
    params
        .iter()
        .filter(|p| !p.is_result && !p.name.starts_with('.'))
        .map(|p| GoValue {
            name: p.name.clone(),
            type_id: p.ty,
            ty: Err(unreadable(&p.name, InlinedWhy::Undescribed)),
            location: Location::Empty,
            is_result: false,
            at_entry: false,
            escaped: false,
        })
        .collect()
}

/// The script type of a Go value: a scalar the script computes with, or `Ty::Go` for
/// one it can only print, store or walk into.
pub fn go_ty(types: &Types, id: crate::gotypes::TypeId, limit: u32) -> Ty {
    let t = types.get(id);
    if let Some(value) = atomic_value(types, id) {
        // An atomic integer, bool or pointer reads as the value it holds.
        return go_ty(types, value, limit);
    }
    match &t.kind {
        TypeKind::Int { .. } if t.name == "time.Duration" => Ty::Duration,
        TypeKind::Int { signed } => Ty::Int { size: t.size as u8, signed: *signed },
        TypeKind::Bool => Ty::Bool,
        TypeKind::Pointer { elem } => Ty::Pointer { elem: Some(*elem) },
        TypeKind::UnsafePointer => Ty::Pointer { elem: None },
        TypeKind::String => Ty::Str { max: limit },
        TypeKind::Interface { .. } => Ty::Interface,
        // A float in memory is read as its bits; one in a float register is refused
        // where its location says so (`Location::Unreadable`).
        TypeKind::Float if t.size == 4 || t.size == 8 => Ty::Float { size: t.size as u8 },
        _ => Ty::Go(id),
    }
}

/// The packages of Go's atomic types (`atomic.Int64`, `atomic.Uint64`, ...): the
/// public one, and the runtime's own before and after Go 1.23 moved it.
const ATOMIC_PACKAGES: [&str; 3] = ["sync/atomic.", "runtime/internal/atomic.", "internal/runtime/atomic."];

/// The type of the value an atomic type holds (`v` of `sync/atomic.Int64`, `value` of
/// the runtime's `atomic.Uint64`): its one field that takes room, at offset 0, when
/// that is a scalar.
pub fn atomic_value(types: &Types, id: TypeId) -> Option<TypeId> {
    let t = types.get(id);
    let TypeKind::Struct { fields } = &t.kind else { return None };
    if !ATOMIC_PACKAGES.iter().any(|p| t.name.starts_with(p)) {
        return None;
    }
    let mut sized = fields.iter().filter(|f| types.get(f.ty).size > 0);
    let value = sized.next()?;
    if sized.next().is_some() || value.offset != 0 || types.get(value.ty).size != t.size {
        return None;
    }
    match types.get(value.ty).kind {
        TypeKind::Int { .. }
        | TypeKind::Bool
        | TypeKind::Float
        | TypeKind::Pointer { .. }
        | TypeKind::UnsafePointer => Some(value.ty),
        _ => None,
    }
}

/// Whether checking `script` may read the binary's DWARF: a probe at a line or at a
/// panic, or a body that reads a Go value, times a call or names the goroutine or its
/// panic. A guess made before the binary is opened, for what may start early
/// (`Target::open_inflating`): wrong either way, it costs only time.
pub fn may_read_dwarf(script: &Script) -> bool {
    const DWARF_BUILTINS: [&str; 4] = ["elapsed", "goid", "panic", "recovered"];
    let names_one = |block: &Block| {
        let mut found = false;
        block.walk_stmts(&mut |s| {
            for e in s.exprs() {
                e.walk(&mut |x| found |= matches!(&x.kind, ExprKind::Name(n) if DWARF_BUILTINS.contains(&n.as_str())));
            }
        });
        found
    };
    script.items.iter().any(|item| match item {
        Item::Probe(p) => {
            matches!(p.kind, ProbeKind::Line(_) | ProbeKind::Panic(_)) || reads_go_values(&p.body) || names_one(&p.body)
        }
        Item::Use(_) | Item::Fn(_) => false,
    })
}

/// Does the body name anything that is not a builtin or a local (so a Go value)?
pub fn reads_go_values(block: &Block) -> bool {
    let mut locals: Vec<&str> = Vec::new();
    let mut found = false;
    block.walk_stmts(&mut |s| {
        for e in s.exprs() {
            e.walk(&mut |x| match &x.kind {
                ExprKind::Name(n) => {
                    found |= !locals.contains(&n.as_str()) && Builtin::from_name(n).is_none() && n != "ustack";
                }
                // A span of the call reads the function's `error` result.
                ExprKind::Call { func, names, .. } => found |= func.name == "span" && !super::spans_from_start(names),
                _ => {}
            });
        }
        if let StmtKind::Let { name, .. } = &s.kind {
            locals.push(&name.name);
        }
    });
    found
}

#[cfg(test)]
mod tests {
    use super::may_read_dwarf;

    fn guess(text: &str) -> bool {
        may_read_dwarf(&crate::syntax::parse(text, 0, &mut 0).expect("parses"))
    }

    #[test]
    fn the_early_guess_of_dwarf_reads_what_may_need_it() {
        // What reads a Go value, times a call, names the goroutine or probes a line or
        // a panic may read DWARF.
        for text in [
            "on entry main.f { @s = sum(a) }",
            "on return main.f { @r[ret] = count() }",
            "on entry main.f { print(args) }",
            "on entry main.f { @x = count(); if x.y > 1 { @z = count() } }",
            "on return main.f { @h = hist(elapsed) }",
            "on entry main.f { @g[goid] = count() }",
            "on panic main.f { @p[panic] = count() }",
            "on line \"main.go:12\" { @c = count() }",
            "on entry main.f { n := 1; @c[n] = count() } on entry main.g { @v = sum(v) }",
        ] {
            assert!(guess(text), "{text}");
        }
        // Counts, the function's name, stacks, locals and maps alone read none.
        for text in [
            "on entry main.main { @c = count() }",
            "on entry \"main.*\" { @c[func, pid, tid, comm] = count(); @t = max(nsecs) }",
            "on entry main.f { @s[ustack] = count() } on interval 1s { print(@s) } on end { clear(@s) }",
            "on entry main.f { n := 2; @c[n] = sum(n) }",
        ] {
            assert!(!guess(text), "{text}");
        }
    }
}
