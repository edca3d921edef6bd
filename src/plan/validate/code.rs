//! A plan's programs instruction by instruction: each calls only the helpers gtrace's
//! lowering emits (nothing that writes to the target, signals it, changes what a
//! function returns or jumps to other programs), calls no BPF function, calls kfuncs
//! only through a relocation naming one gtrace calls (the preemption guards), and
//! loads a 64-bit value only as gtrace does: a constant, or a map through a relocation
//! against one of the plan's maps. The rest of what a program may do to BPF memory is
//! the kernel verifier's to judge when it loads.

use super::Refused;
use crate::bpf::helpers::*;
use crate::bpf::insn::{class, op, Insn, BPF_CALL, BPF_DW, BPF_IMM, BPF_JMP, BPF_JMP32, BPF_LD, BPF_PSEUDO_MAP_FD};
use crate::bpf::kfuncs::kfunc_call;
use crate::object::ProgramCode;

/// The helpers src/lower emits, and so the only ones a plan's program may call. A test
/// (tests/plantrust.rs) checks that every helper named under src/lower is here.
pub const EMITTED_HELPERS: &[i32] = &[
    BPF_FUNC_map_lookup_elem,
    BPF_FUNC_map_update_elem,
    BPF_FUNC_map_delete_elem,
    BPF_FUNC_ktime_get_ns,
    BPF_FUNC_get_smp_processor_id,
    BPF_FUNC_get_current_pid_tgid,
    BPF_FUNC_get_current_comm,
    BPF_FUNC_current_task_under_cgroup,
    BPF_FUNC_probe_read_user,
    BPF_FUNC_ringbuf_output,
    BPF_FUNC_ringbuf_query,
    BPF_FUNC_get_attach_cookie,
    BPF_FUNC_get_prandom_u32,
];

/// The most instructions a program may have (the builder's bound).
const MAX_INSNS: usize = crate::bpf::builder::MAX_INSNS;

/// Refuses the first instruction of `code` that gtrace would not have written.
pub fn check(code: &ProgramCode) -> Result<(), Refused> {
    let insns = &code.program.insns;
    let program = || code.name.clone();
    if insns.len() > MAX_INSNS {
        return Err(Refused::Program {
            program: program(),
            problem: format!("has {} instructions, more than {MAX_INSNS}", insns.len()),
        });
    }
    let relocations: std::collections::HashSet<usize> = code.program.relocations.iter().map(|r| r.insn_index).collect();
    let relocated = |i: usize| relocations.contains(&i);
    let kfuncs: std::collections::HashSet<usize> = code.program.kfunc_calls.iter().map(|k| k.insn_index).collect();
    let mut i = 0;
    while i < insns.len() {
        let bad = |problem: String| Refused::Instruction { program: program(), index: i, problem };
        let insn = &insns[i];
        if class(insn.code) == BPF_LD {
            wide_load(insns, i, relocated(i)).map_err(bad)?;
            i += 2;
            continue;
        }
        if relocated(i) {
            return Err(bad("a map relocation at an instruction that loads no map".into()));
        }
        if kfuncs.contains(&i) {
            if *insn != kfunc_call() {
                return Err(bad("a kfunc relocation at an instruction that is not a kfunc call".into()));
            }
        } else if matches!(class(insn.code), BPF_JMP | BPF_JMP32) && op(insn.code) == BPF_CALL {
            call(insn).map_err(|e| match e {
                CallError::Helper(id) => Refused::Helper { program: program(), index: i, helper: helper_name(id), id },
                CallError::Other(problem) => bad(problem),
            })?;
        }
        i += 1;
    }
    Ok(())
}

/// `bpf_NAME` for a helper number, as the kernel names it.
fn helper_name(id: i32) -> String {
    match crate::bpf::helper_ids::kernel_name(id) {
        Some(name) => format!("bpf_{name}"),
        None => "unknown to this gtrace".to_string(),
    }
}

enum CallError {
    Helper(i32),
    Other(String),
}

/// A call: of a helper gtrace emits, and nothing else (no BPF-to-BPF call, no kfunc).
fn call(insn: &Insn) -> Result<(), CallError> {
    if insn.code != BPF_JMP | BPF_CALL || insn.dst != 0 || insn.off != 0 {
        return Err(CallError::Other(format!("a call encoded as gtrace never does (code {:#04x})", insn.code)));
    }
    if insn.src != 0 {
        let what = if insn.src == 1 {
            "a call of a BPF function"
        } else {
            "a call of a kernel function (kfunc) without a relocation naming it"
        };
        return Err(CallError::Other(format!("{what}, which gtrace never emits")));
    }
    if EMITTED_HELPERS.contains(&insn.imm) {
        Ok(())
    } else {
        Err(CallError::Helper(insn.imm))
    }
}

/// The 16-byte load at `i`: a constant, or (with a relocation) a map, as `ld_imm64` and
/// `ld_map_fd` write them; no other instruction of the LD class.
fn wide_load(insns: &[Insn], i: usize, relocated: bool) -> Result<(), String> {
    let insn = &insns[i];
    if insn.code != BPF_LD | BPF_IMM | BPF_DW {
        return Err(format!("a load of the LD class gtrace never emits (code {:#04x})", insn.code));
    }
    let Some(second) = insns.get(i + 1) else { return Err("a 64-bit load without its second half".into()) };
    if second.code != 0 || second.dst != 0 || second.src != 0 || second.off != 0 {
        return Err("a 64-bit load whose second half is not one".into());
    }
    match (insn.src, relocated) {
        (0, false) => Ok(()),
        (0, true) => Err("a map relocation at a constant load".into()),
        (BPF_PSEUDO_MAP_FD, true) if insn.imm == 0 && second.imm == 0 && insn.off == 0 => Ok(()),
        (BPF_PSEUDO_MAP_FD, true) => Err("a map load with a value of its own (gtrace leaves it to the loader)".into()),
        (BPF_PSEUDO_MAP_FD, false) => {
            Err("a map load by a raw file descriptor, without a relocation to a map of the plan".into())
        }
        (src, _) => {
            Err(format!("a 64-bit load of kind {src} (a map value, a BTF id or a function), which gtrace never emits"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::builder::{Program, Relocation};
    use crate::bpf::insn::{call as call_insn, exit, ld_imm64, ld_map_fd, mov64_imm, R0, R1, R2};

    fn code(insns: Vec<Insn>, relocations: Vec<Relocation>) -> ProgramCode {
        ProgramCode {
            name: "p0".into(),
            section: "uprobe/p0".into(),
            program: Program { insns, relocations, kfunc_calls: Vec::new(), comments: Vec::new() },
        }
    }

    #[test]
    fn what_gtrace_emits_passes() {
        let mut insns = ld_map_fd(R1).to_vec();
        insns.extend(ld_imm64(R2, u64::MAX));
        insns.extend([call_insn(BPF_FUNC_map_lookup_elem), mov64_imm(R0, 0), exit()]);
        let c = code(insns, vec![Relocation { insn_index: 0, map: "m0".into() }]);
        assert!(check(&c).is_ok());
    }

    #[test]
    fn the_preemption_guards_pass_with_their_relocations() {
        use crate::bpf::kfuncs::{Kfunc, KfuncCall};
        let mut c = code(vec![kfunc_call(), kfunc_call(), mov64_imm(R0, 0), exit()], Vec::new());
        c.program.kfunc_calls = vec![
            KfuncCall { insn_index: 0, kfunc: Kfunc::PreemptDisable },
            KfuncCall { insn_index: 1, kfunc: Kfunc::PreemptEnable },
        ];
        assert!(check(&c).is_ok());
        c.program.kfunc_calls[1].insn_index = 2;
        assert!(check(&c).unwrap_err().to_string().contains("instruction 1: a call of a kernel function"));
    }

    #[test]
    fn a_helper_gtrace_never_emits_is_refused_by_name_and_place() {
        let c = code(vec![mov64_imm(R1, 9), call_insn(109), exit()], Vec::new());
        let e = check(&c).unwrap_err().to_string();
        assert_eq!(e, "program `p0`, instruction 1: calls helper bpf_send_signal (109), which gtrace never emits");
        let c = code(vec![call_insn(36), exit()], Vec::new());
        assert!(check(&c).unwrap_err().to_string().contains("bpf_probe_write_user (36)"));
        let c = code(vec![call_insn(100_000), exit()], Vec::new());
        assert!(check(&c).unwrap_err().to_string().contains("helper unknown to this gtrace (100000)"));
    }

    #[test]
    fn map_loads_without_relocations_and_other_calls_are_refused() {
        let raw_fd = code([ld_map_fd(R1).as_slice(), &[exit()]].concat(), Vec::new());
        assert!(check(&raw_fd).unwrap_err().to_string().contains("raw file descriptor"));
        let bpf_call = code(vec![Insn::new(BPF_JMP | BPF_CALL, 0, 1, 0, 3), exit()], Vec::new());
        assert!(check(&bpf_call).unwrap_err().to_string().contains("instruction 0: a call of a BPF function"));
        let kfunc = code(vec![kfunc_call(), exit()], Vec::new());
        assert!(check(&kfunc).unwrap_err().to_string().contains("kfunc) without a relocation naming it"));
        let half = code(vec![exit(), ld_imm64(R1, 1)[0]], Vec::new());
        assert!(check(&half).unwrap_err().to_string().contains("instruction 1: a 64-bit load without its second half"));
        let stray = code(vec![mov64_imm(R1, 0), exit()], vec![Relocation { insn_index: 0, map: "m0".into() }]);
        assert!(check(&stray).unwrap_err().to_string().contains("loads no map"));
    }
}
