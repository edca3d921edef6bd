//! Each attach point of a plan against the binary it would attach to: its file offset
//! is its address's in this file, and its address is a site gtrace itself chooses for
//! the function the point names, recomputed here by the code that chose it for the
//! compiler (check/probes.rs, check/lineprobe.rs over gobin/): the entry after the
//! stack check or a RET of that function (from the function table and the machine code,
//! with or without DWARF), an inlined call's entry site (the pclntab's inline trees), a
//! start of the line an `on line` probe names (DWARF's line table; without DWARF, an
//! instruction start of the function or of one inlined into it that the function
//! table's line table puts on that line), or the ELF entry point
//! (the load-bias program). A uprobe must be allowed there, as the checker requires.

use super::Refused;
use crate::gobin::{InlinedSite, LineSite, Target};
use crate::plan::{AttachPoint, Plan, ProbeAttach, ProbeSpec};
use std::collections::{HashMap, HashSet};

/// Refuses the first attach point of `plan` that is not a site gtrace chooses in
/// `target`.
pub fn check(plan: &Plan, target: &Target) -> Result<(), Refused> {
    pie_base(plan, target)?;
    let entry = target.entry_point();
    let trap_kinds = &plan.trap_kinds;
    let inlined = target.find_inlined_each(&named(plan));
    let mut chosen = Chosen { target, entry, functions: HashMap::new(), inlined, lines: HashMap::new(), trap_kinds };
    for probe in &plan.probes {
        let ProbeAttach::Uprobe(points) = &probe.attach else { continue };
        let line = line_of(&probe.describe);
        for pt in points {
            judge(&mut chosen, pt, line.as_ref()).map_err(|problem| refused(probe, pt, problem))?;
        }
    }
    Ok(())
}

fn refused(probe: &ProbeSpec, pt: &AttachPoint, problem: String) -> Refused {
    Refused::Site {
        program: probe.program.clone(),
        function: pt.function.clone(),
        address: pt.address,
        file_offset: pt.file_offset,
        problem,
    }
}

/// Each function the plan's attach points name, once.
fn named(plan: &Plan) -> Vec<&str> {
    let points = plan.probes.iter().filter_map(|p| match &p.attach {
        ProbeAttach::Uprobe(points) => Some(points),
        _ => None,
    });
    let names: HashSet<&str> = points.flatten().map(|pt| pt.function.as_str()).collect();
    names.into_iter().collect()
}

/// The file and line of an `on line "FILE:LINE"` probe, from its header.
fn line_of(describe: &str) -> Option<(String, u32)> {
    let spec = describe.strip_prefix("on line \"")?.strip_suffix('"')?;
    let (file, line) = spec.rsplit_once(':')?;
    Some((file.to_string(), line.parse().ok()?))
}

/// The sites gtrace chooses, computed once per function and per line.
struct Chosen<'t> {
    target: &'t Target,
    /// The ELF entry point.
    entry: Option<u64>,
    functions: HashMap<String, HashSet<u64>>,
    /// Where each function the plan names was inlined (`find_inlined` of its name),
    /// found for them all at once.
    inlined: HashMap<String, Vec<InlinedSite>>,
    lines: HashMap<(String, u32), Vec<LineSite>>,
    /// The plan's trap kinds, by attach address.
    trap_kinds: &'t std::collections::BTreeMap<u64, crate::arch::trap::TrapKind>,
}

impl Chosen<'_> {
    /// The entry after the stack check and every RET of each function named `name`,
    /// every place it was inlined, and the ELF entry point when it is there.
    fn of_function(&mut self, name: &str) -> &HashSet<u64> {
        let (target, elf_entry, inlined) = (self.target, self.entry, &self.inlined);
        self.functions.entry(name.to_string()).or_insert_with(|| {
            let mut sites = HashSet::new();
            for f in target.find(name).into_iter().filter(|f| f.name == name) {
                if let Ok(s) = target.probe_sites(f) {
                    sites.insert(s.entry);
                    sites.extend(s.returns);
                }
            }
            sites.extend(inlined.get(name).into_iter().flatten().filter(|s| s.callee == name).map(|s| s.addr));
            if let Some(entry) = elf_entry {
                let at = target.function_at(entry).map_or("the entry point", |f| f.name.as_str());
                if at == name {
                    sites.insert(entry);
                }
            }
            sites
        })
    }

    /// The sites where `file:line` starts (none when it cannot be found).
    fn of_line(&mut self, file: &str, line: u32) -> &[LineSite] {
        let target = self.target;
        self.lines.entry((file.to_string(), line)).or_insert_with(|| target.line_sites(file, line).unwrap_or_default())
    }
}

/// Ok when `pt` is at a site gtrace chooses, else why not.
fn judge(chosen: &mut Chosen<'_>, pt: &AttachPoint, line: Option<&(String, u32)>) -> Result<(), String> {
    let target = chosen.target;
    match target.file_offset(pt.address) {
        Some(offset) if offset == pt.file_offset => {}
        Some(offset) => return Err(format!("that address is at file offset {offset:#x} in this binary")),
        None => return Err("that address is in no segment of this binary's file".into()),
    }
    // The ELF entry point, whatever the plan names it (`_start` where the binary that
    // made the plan had a symbol table, `the entry point` where it had none).
    let site = chosen.entry == Some(pt.address)
        || chosen.of_function(&pt.function).contains(&pt.address)
        || match line {
            Some((file, n)) if target.has_dwarf() => {
                chosen.of_line(file, *n).iter().any(|s| s.addr == pt.address && s.frame == pt.function)
            }
            Some((_, n)) => line_without_dwarf(chosen, &pt.function, pt.address, *n),
            None => false,
        };
    if !site {
        return Err(not_a_site(chosen, pt, line));
    }
    if let Some(refusal) = target.uprobe_refusal(pt.address) {
        return Err(format!("gtrace never probes there: {refusal}"));
    }
    // The trap kind the trace prices the site at (none given: single-stepped, the dearest).
    match chosen.trap_kinds.get(&pt.address) {
        Some(kind) if *kind != target.trap_kind_at(pt.address) => Err(format!(
            "the plan gives its instruction the trap kind {kind:?}; in this binary it is {:?}",
            target.trap_kind_at(pt.address)
        )),
        _ => Ok(()),
    }
}

/// Without DWARF, a line's site: an instruction start of `function`, or of the function
/// `function` was inlined into, at `addr`, that the function table puts on `line` (its
/// own line, or the line of an inlined call it is part of).
fn line_without_dwarf(chosen: &Chosen<'_>, function: &str, addr: u64, line: u32) -> bool {
    let target = chosen.target;
    let Some(f) = target.function_containing(addr) else { return false };
    let mut inlined = chosen.inlined.get(function).into_iter().flatten();
    let holds = f.name == function || inlined.any(|s| s.caller == f.name);
    holds && target.cfg_of(f).is_some_and(|g| g.insn_at(addr).is_some()) && target.pc_lines(addr).contains(&line)
}

/// Why `pt` is no site: no such function, outside its code, not an instruction start,
/// or an instruction gtrace does not choose.
fn not_a_site(chosen: &mut Chosen<'_>, pt: &AttachPoint, line: Option<&(String, u32)>) -> String {
    let target = chosen.target;
    let sites = chosen.of_function(&pt.function).len();
    let named: Vec<_> = target.find(&pt.function).into_iter().filter(|f| f.name == pt.function).collect();
    if named.is_empty() && sites == 0 && line.is_none() {
        return format!("this binary has no function `{}`", pt.function);
    }
    let containing = target.function_containing(pt.address);
    let Some(f) = containing else { return "that address is in no function of this binary".into() };
    if !target.cfg_of(f).is_some_and(|g| g.insn_at(pt.address).is_some()) {
        return format!("{:#x} is not the start of an instruction of `{}` (moved?)", pt.address, f.name);
    }
    let mut what = "the entry after its stack check, a RET, or a place it was inlined".to_string();
    if let Some((file, n)) = line {
        what = format!("{what}, or a start of line {file}:{n}");
    }
    format!("an instruction of `{}`, but not where gtrace probes `{}` ({what})", f.name, pt.function)
}

#[cfg(test)]
mod tests {
    use super::line_of;

    #[test]
    fn a_line_probe_names_its_line() {
        assert_eq!(line_of("on line \"dir/main.go:42\""), Some(("dir/main.go".into(), 42)));
        assert_eq!(line_of("on line \"C:/x.go:7\""), Some(("C:/x.go".into(), 7)));
        assert_eq!(line_of("on entry main.f"), None);
        assert_eq!(line_of("on line \"main.go:x\""), None);
    }
}

/// A PIE's link base, which the trace reads from the plan instead of the binary, as this
/// binary has it.
fn pie_base(plan: &Plan, target: &Target) -> Result<(), Refused> {
    let pie_base = if target.is_pie() { target.vaddr_of_file_offset(0) } else { None };
    if plan.binary.link_base != pie_base {
        return Err(Refused::Plan {
            problem: format!(
                "says the file's first byte is linked at {:?}; in this binary: {:?}",
                plan.binary.link_base, pie_base
            ),
        });
    }
    Ok(())
}
