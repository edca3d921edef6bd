//! The kernel functions (kfuncs) gtrace's programs call. A kfunc call is a `BPF_CALL`
//! with `src = BPF_PSEUDO_KFUNC_CALL` whose `imm` is the function's BTF id in the
//! running kernel's vmlinux BTF, known only where the program loads: gtrace's object
//! carries each call as `imm = 0` with an `R_BPF_64_32` relocation against an undefined
//! symbol of the function's name (as clang writes a call of an `extern ... __ksym`
//! function), and the runtime writes the id in before loading (runtime/kfuncs.rs).

use super::insn::{Insn, BPF_CALL, BPF_JMP};

/// `src` of a `BPF_CALL` to a kernel function (imm = its BTF id).
pub const BPF_PSEUDO_KFUNC_CALL: u8 = 2;

/// A kernel function gtrace calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kfunc {
    /// `bpf_preempt_disable` (Linux 6.10): what follows runs with preemption off.
    PreemptDisable,
    /// `bpf_preempt_enable`: balances `bpf_preempt_disable` (the verifier checks that
    /// every exit is reached with them balanced).
    PreemptEnable,
}

impl Kfunc {
    pub const ALL: [Kfunc; 2] = [Kfunc::PreemptDisable, Kfunc::PreemptEnable];

    /// The function's name in the kernel (and the object's symbol for it).
    pub const fn name(self) -> &'static str {
        match self {
            Kfunc::PreemptDisable => "bpf_preempt_disable",
            Kfunc::PreemptEnable => "bpf_preempt_enable",
        }
    }

    pub fn by_name(name: &str) -> Option<Kfunc> {
        Kfunc::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether a kernel without the function may run the program with the call left
    /// out (replaced by a no-op): true of the preemption guards, whose absence costs
    /// only the protection they give (said by the runtime where it matters).
    pub const fn optional(self) -> bool {
        matches!(self, Kfunc::PreemptDisable | Kfunc::PreemptEnable)
    }
}

/// `call KFUNC` as the object holds it before the loader writes the BTF id in.
pub fn kfunc_call() -> Insn {
    Insn::new(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_KFUNC_CALL, 0, 0)
}

/// A call of a kfunc in a program: where, and which.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KfuncCall {
    pub insn_index: usize,
    pub kfunc: Kfunc,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in Kfunc::ALL {
            assert_eq!(Kfunc::by_name(k.name()), Some(k));
        }
        assert_eq!(Kfunc::by_name("bpf_rcu_read_lock"), None);
    }

    #[test]
    fn the_call_is_encoded_as_the_kernel_reads_it() {
        let i = kfunc_call();
        assert_eq!((i.code, i.dst, i.src, i.off, i.imm), (0x85, 0, 2, 0, 0));
    }
}
