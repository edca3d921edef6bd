//! Why a probe site cannot hold a uprobe, whatever the architecture: each port's own
//! reasons (`x86_64::uprobe::Refusal`, `arm64::uprobe::Refusal`) under one type that the
//! checker, the plan and the messages carry.

use super::{arm64, x86_64};
use std::fmt;

/// Why a uprobe must not go on an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Refusal {
    X86(x86_64::uprobe::Refusal),
    Arm64(arm64::uprobe::Refusal),
}

impl Refusal {
    /// What the refused instruction is, for one or (`plural`) several.
    pub fn describe(&self, plural: bool) -> String {
        let (one, many) = match self {
            Refusal::X86(r) => r.phrases(),
            Refusal::Arm64(r) => r.phrases(),
        };
        if plural {
            many
        } else {
            one
        }
    }

    /// Who refuses it, as the subject of "… the instruction there": `x86 uprobes refuse`,
    /// or for a site the kernel would accept but where a uprobe would harm the program,
    /// `gtrace does not probe`.
    pub fn who(&self) -> &'static str {
        match self {
            Refusal::X86(_) => "x86 uprobes refuse",
            Refusal::Arm64(r) if r.by_kernel() => "arm64 uprobes refuse",
            Refusal::Arm64(_) => "gtrace does not probe",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(false))
    }
}
