//! Where probes go in the code: the entry after the stack check and every RET (through
//! `arch`), the instruction an inlined call's entry probe goes to (`cfg`, `inlentry`,
//! `inlined`), where a source line starts (`lines`, `linesites`), and where a value is at
//! such a site (`frame`: CFA − SP from the function table; `slots`: a stack slot only
//! where every path wrote it). This file: the entry and returns, and whether a uprobe may
//! go at an address.

pub(crate) mod cfg;
mod frame;
mod inlentry;
mod inlined;
mod lines;
mod linesites;
mod slots;

pub use frame::ValueLocation;
pub use inlentry::{InlinedEntry, Placement};
pub use inlined::InlinedSite;
pub(crate) use inlined::InlinedTable;
pub use lines::{LineError, LineSite, Local, LocalState};

use super::{Function, ProbeSites, Target, TargetError};

impl Target {
    /// Where the probes of `f` go: the entry after its stack check and every RET.
    pub fn probe_sites(&self, f: &Function) -> Result<ProbeSites, TargetError> {
        let code = self.code(f).ok_or_else(|| TargetError::CodeNotInFile {
            function: f.name.to_string(),
            size: f.size,
            addr: f.addr,
        })?;
        self.arch
            .probe_sites(f.addr, code, |a| self.function_at(a).map(|f| f.name.as_str()))
            .map_err(|source| TargetError::Disassembly { function: f.name.to_string(), source })
    }

    /// How the kernel runs the instruction at `addr` under a uprobe (`Arch::trap_kind`):
    /// single-stepped when it is in no function's code.
    pub fn trap_kind_at(&self, addr: u64) -> crate::arch::trap::TrapKind {
        let code = self.function_containing(addr).and_then(|f| Some((f.addr, self.code(f)?)));
        match code {
            Some((start, code)) => code
                .get((addr - start) as usize..)
                .map_or(crate::arch::trap::TrapKind::Step, |code| self.arch.trap_kind(code)),
            None => crate::arch::trap::TrapKind::Step,
        }
    }

    /// Why a uprobe must not go at `addr` (see `Arch::uprobe_refusal`), judged from the
    /// instruction the file holds there and the code of its function before it; None
    /// when it may.
    pub fn uprobe_refusal(&self, addr: u64) -> Option<crate::arch::Refusal> {
        let max = self.arch.max_insn_bytes() as u64;
        // The instruction's bytes, as many as the segment holds (up to the longest).
        let code = (1..=max).rev().find_map(|len| self.bytes_at(addr, len)).unwrap_or(&[]);
        let start = self.function_containing(addr).map_or(addr, |f| f.addr);
        let from = start.max(addr.saturating_sub(self.arch.refusal_context_bytes() as u64));
        let before = self.bytes_at(from, addr - from).unwrap_or(&[]);
        self.arch.uprobe_refusal(before, code)
    }
}
