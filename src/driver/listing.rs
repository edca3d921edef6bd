//! Listings for people: `-l PATTERN` (each function as a Go signature with where the ABI
//! puts each value) and `--emit asm` (every program with where it attaches and the
//! script lines it was compiled from).

use crate::arch::abi::{self, Location};
use crate::compile::Compiled;
use crate::gobin::{Param, Target};
use crate::plan::ProbeAttach;

/// `-l PATTERN`: each matching function, a line each.
pub fn functions(target: &Target, pattern: &str) -> String {
    let mut out = String::new();
    functions_to(target, pattern, &mut |lines| {
        out.push_str(lines);
        true
    });
    out
}

/// `-l PATTERN` as it goes: `emit` is given the listing in pieces of a few kilobytes,
/// each function's DWARF read only when its line is written; it returns false to stop
/// (the output was closed). Returns how many functions matched.
pub fn functions_to(target: &Target, pattern: &str, emit: &mut dyn FnMut(&str) -> bool) -> usize {
    let names: Vec<&str> = target.find(pattern).iter().map(|f| f.name.as_str()).collect();
    let generic = names.iter().any(|n| crate::gobin::dictionary_position(n).is_some());
    let dictionaries = if generic { target.dictionaries() } else { Vec::new() };
    let by_generic = crate::gobin::dictionaries_by_generic(&dictionaries);
    let mut kinds = crate::gobin::ArgumentKinds::default();
    let mut out = String::new();
    for name in &names {
        function(&mut out, target, name);
        out.push('\n');
        // Go 1.18's function table (all a stripped build has) writes shapes `[...]`.
        if name.contains('[') && (crate::gobin::dictionary_position(name).is_some() || name.contains("[...]")) {
            out.push_str(&instantiations(target, name, (&dictionaries, &by_generic), &mut kinds));
        }
        if out.len() >= 16 << 10 {
            if !emit(&out) {
                return names.len();
            }
            out.clear();
        }
    }
    if !out.is_empty() {
        emit(&out);
    }
    names.len()
}

/// Under a shape function, the instantiations the binary has dictionaries for (what
/// `func` names at its probes).
fn instantiations(
    target: &Target,
    shape: &str,
    (dictionaries, by_generic): (&[crate::gobin::Dictionary], &std::collections::HashMap<String, Vec<usize>>),
    kinds: &mut crate::gobin::ArgumentKinds,
) -> String {
    if target.is_stripped() {
        return "    instantiations: unknown (stripped: no symbol table names the dictionaries)\n".to_string();
    }
    let generic = crate::gobin::generic_name(shape);
    let mine = generic.and_then(|g| by_generic.get(&g)).map_or(&[][..], |v| v.as_slice());
    let made = target.instantiations_kept(shape, dictionaries, mine.iter().copied(), kinds);
    let names: Vec<String> = made.into_iter().map(|(_, n)| n).collect();
    if names.is_empty() {
        return "    instantiations: none with a dictionary in the symbol table\n".to_string();
    }
    format!("    instantiations: {}\n", names.join(", "))
}

/// Function `name`'s line (no newline) at the end of `out`: written there, not made of
/// a string a parameter (`-l '*'` writes 72,707 of them on Caddy).
fn function(out: &mut String, target: &Target, name: &str) {
    use std::fmt::Write;
    let params = match target.params(name) {
        Ok(Some(p)) => p,
        Ok(None) if !target.has_dwarf() => {
            let conv = target.find(name).first().map_or(target.go_conv(), |f| target.conv_of(f));
            let regs = target.arch().int_arg_regs();
            let words = if !conv.registers {
                "arg0 … as words at 8(SP), 16(SP), …".to_string()
            } else {
                let names: Vec<&str> = regs.iter().map(|r| r.name()).collect();
                format!("arg0 … arg{} as words in {}", regs.len() - 1, names.join(" "))
            };
            let _ = write!(out, "{name}  (no DWARF: parameters by position, {words})");
            return;
        }
        Ok(None) => {
            let _ = write!(out, "{name}  (no DWARF for this function: parameters unknown)");
            return;
        }
        Err(e) => {
            let _ = write!(out, "{name}  ({e})");
            return;
        }
    };
    let types = target.types();
    let (ins, outs): (Vec<&Param>, Vec<&Param>) = params.iter().partition(|p| !p.is_result);
    let layout = abi::assign_call(
        target.go_conv(),
        &ins.iter().map(|p| p.ty).collect::<Vec<_>>(),
        &outs.iter().map(|p| p.ty).collect::<Vec<_>>(),
        &types,
    );
    // `a T [where], b U [where]`
    let show = |out: &mut String, ps: &[&Param], locs: &[Location]| {
        for (i, (p, l)) in ps.iter().zip(locs).enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{} {} ", p.name, types.get(p.ty).name);
            location_to(out, l);
        }
    };
    out.push_str(name);
    out.push('(');
    show(out, &ins, &layout.params);
    out.push(')');
    if !outs.is_empty() {
        out.push_str(" (");
        show(out, &outs, &layout.results);
        out.push(')');
    }
}

pub(super) fn location(l: &Location) -> String {
    let mut out = String::new();
    location_to(&mut out, l);
    out
}

/// Where a value is, `[AX BX]`, at the end of `out`.
fn location_to(out: &mut String, l: &Location) {
    use std::fmt::Write;
    match l {
        Location::Regs(pieces) => {
            out.push('[');
            for (i, p) in pieces.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(p.reg.name());
            }
            out.push(']');
        }
        Location::Stack { offset } => {
            let _ = write!(out, "[{offset}(SP)]");
        }
        Location::Pieces(pieces) => {
            out.push('[');
            for (i, p) in pieces.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                match &p.at {
                    crate::arch::abi::PieceAt::Reg(r) => out.push_str(r.name()),
                    crate::arch::abi::PieceAt::Stack { offset } => {
                        let _ = write!(out, "{offset}(SP)");
                    }
                    crate::arch::abi::PieceAt::Missing => out.push('-'),
                }
            }
            out.push(']');
        }
        Location::Unreadable { reason } => {
            let _ = write!(out, "[unreadable: {reason}]");
        }
        Location::Empty => out.push_str("[empty]"),
    }
}

/// `--emit asm`: every program with where it attaches and its source lines.
pub fn assembly(compiled: &Compiled) -> String {
    let mut out = String::new();
    for (name, program) in &compiled.programs {
        let spec = compiled.plan.probes.iter().find(|p| p.program == *name);
        out.push_str(&format!("; program {name}: {}\n", spec.map(|s| s.describe.as_str()).unwrap_or("")));
        if let Some(ProbeAttach::Uprobe(points)) = spec.map(|s| &s.attach) {
            for p in points {
                out.push_str(&format!(
                    ";   attached at {} at {:#x} (file offset {:#x})\n",
                    p.function, p.address, p.file_offset
                ));
            }
        }
        out.push_str(&crate::bpf::disasm::disasm(program));
        out.push('\n');
    }
    out
}
