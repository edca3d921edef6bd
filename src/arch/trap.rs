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

/// One number per kind of trap: trap time by kind, or the factor each kind's calibrated
/// cost is corrected by.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ByKind {
    pub step: f64,
    pub push: f64,
    pub branch: f64,
}

impl ByKind {
    /// Every kind at 1: the calibrated cost, uncorrected.
    pub const ONE: ByKind = ByKind::all(1.0);

    pub const fn all(v: f64) -> ByKind {
        ByKind { step: v, push: v, branch: v }
    }

    pub fn of(&self, kind: TrapKind) -> f64 {
        match kind {
            TrapKind::Step => self.step,
            TrapKind::Push => self.push,
            TrapKind::Branch => self.branch,
        }
    }

    pub fn add(&mut self, kind: TrapKind, v: f64) {
        match kind {
            TrapKind::Step => self.step += v,
            TrapKind::Push => self.push += v,
            TrapKind::Branch => self.branch += v,
        }
    }

    /// Each kind through `f`.
    pub fn map(&self, f: impl Fn(f64) -> f64) -> ByKind {
        ByKind { step: f(self.step), push: f(self.push), branch: f(self.branch) }
    }

    /// Each kind of `self` plus that of `other`.
    pub fn plus(&self, other: &ByKind) -> ByKind {
        ByKind { step: self.step + other.step, push: self.push + other.push, branch: self.branch + other.branch }
    }

    /// Each kind of `self` minus that of `earlier`.
    pub fn minus(&self, earlier: &ByKind) -> ByKind {
        ByKind { step: self.step - earlier.step, push: self.push - earlier.push, branch: self.branch - earlier.branch }
    }

    /// The sum over the kinds of `self` (times) by `scale` of that kind.
    pub fn scaled(&self, scale: &ByKind) -> f64 {
        self.step * scale.step + self.push * scale.push + self.branch * scale.branch
    }

    pub fn sum(&self) -> f64 {
        self.step + self.push + self.branch
    }
}
