//! What a uprobe trap costs depends on the instruction under it: the kernel emulates a
//! few instructions in the trap handler and single-steps a copy of every other one out
//! of line, which takes a second trap (under a hypervisor that can cost ten times more).
//! `Arch::trap_kind` tells them apart from the bytes at a probe site. gtrace's
//! calibration functions, one of each kind for the host's instruction set, are defined in
//! assembly in the architecture's folder; the runtime times calls of them with and
//! without an empty uprobe on their first instruction (`runtime::calibrate_trap`).

/// How the kernel runs the instruction a uprobe replaced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum TrapKind {
    /// Single-stepped out of line (most instructions).
    #[default]
    Step,
    /// PUSH of a register: emulated by newer x86-64 kernels, single-stepped by older ones.
    Push,
    /// A relative jump or call, or a NOP: emulated.
    Branch,
}

impl TrapKind {
    pub const ALL: [TrapKind; 3] = [TrapKind::Step, TrapKind::Push, TrapKind::Branch];

    /// gtrace's calibration function whose first instruction is of this kind.
    pub fn calibration_symbol(self) -> &'static str {
        match self {
            TrapKind::Step => "gtrace_calibrate_step",
            TrapKind::Push => "gtrace_calibrate_push",
            TrapKind::Branch => "gtrace_calibrate_branch",
        }
    }
}
