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
    let by_package = crate::gobin::dictionaries_by_package(&dictionaries);
    let mut out = String::new();
    for name in &names {
        out.push_str(&function(target, name));
        out.push('\n');
        // Go 1.18's function table (all a stripped build has) writes shapes `[...]`.
        if crate::gobin::dictionary_position(name).is_some() || name.contains("[...]") {
            out.push_str(&instantiations(target, name, &dictionaries, &by_package));
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
    dictionaries: &[crate::gobin::Dictionary],
    by_package: &std::collections::HashMap<&str, Vec<usize>>,
) -> String {
    if target.is_stripped() {
        return "    instantiations: unknown (stripped: no symbol table names the dictionaries)\n".to_string();
    }
    let mine = by_package.get(crate::gobin::package_of(shape)).map_or(&[][..], |v| v.as_slice());
    let made = target.instantiations_among(shape, dictionaries, mine.iter().copied());
    let names: Vec<String> = made.into_iter().map(|(_, n)| n).collect();
    if names.is_empty() {
        return "    instantiations: none with a dictionary in the symbol table\n".to_string();
    }
    format!("    instantiations: {}\n", names.join(", "))
}

fn function(target: &Target, name: &str) -> String {
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
            return format!("{name}  (no DWARF: parameters by position, {words})");
        }
        Ok(None) => return format!("{name}  (no DWARF for this function: parameters unknown)"),
        Err(e) => return format!("{name}  ({e})"),
    };
    let types = target.types();
    let (ins, outs): (Vec<&Param>, Vec<&Param>) = params.iter().partition(|p| !p.is_result);
    let layout = abi::assign_call(
        target.go_conv(),
        &ins.iter().map(|p| p.ty).collect::<Vec<_>>(),
        &outs.iter().map(|p| p.ty).collect::<Vec<_>>(),
        &types,
    );
    let show = |ps: &[&Param], locs: &[Location]| -> String {
        ps.iter()
            .zip(locs)
            .map(|(p, l)| format!("{} {} {}", p.name, types.get(p.ty).name, location(l)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut line = format!("{name}({})", show(&ins, &layout.params));
    if !outs.is_empty() {
        line.push_str(&format!(" ({})", show(&outs, &layout.results)));
    }
    line
}

pub(super) fn location(l: &Location) -> String {
    match l {
        Location::Regs(pieces) => format!("[{}]", pieces.iter().map(|p| p.reg.name()).collect::<Vec<_>>().join(" ")),
        Location::Stack { offset } => format!("[{offset}(SP)]"),
        Location::Pieces(pieces) => {
            let at = |p: &crate::arch::abi::Piece| match &p.at {
                crate::arch::abi::PieceAt::Reg(r) => r.name().to_string(),
                crate::arch::abi::PieceAt::Stack { offset } => format!("{offset}(SP)"),
                crate::arch::abi::PieceAt::Missing => "-".to_string(),
            };
            format!("[{}]", pieces.iter().map(at).collect::<Vec<_>>().join(" "))
        }
        Location::Unreadable { reason } => format!("[unreadable: {reason}]"),
        Location::Empty => "[empty]".into(),
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
