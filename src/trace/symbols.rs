//! Names for what the traced process reports as addresses: interface types and stack
//! frames, looked up in the target binary. Run-time addresses in a PIE are moved back by
//! its load bias (known once the traced process has mapped it; unknown with -b, where
//! every process has its own).

use crate::output;
use crate::runtime;
use crate::target::Target;

pub struct TargetSymbols<'a> {
    pub target: &'a Target,
    pub bias: Option<u64>,
    /// The traced process, when there is one (-p, -c).
    pub pid: Option<u32>,
}

impl TargetSymbols<'_> {
    fn link(&self, addr: u64) -> Option<u64> {
        if self.target.is_pie() {
            addr.checked_sub(self.bias?)
        } else {
            Some(addr)
        }
    }

    /// Learns the bias of a PIE from the traced process's memory map.
    pub fn learn_bias(&mut self) {
        if self.bias.is_some() || !self.target.is_pie() {
            return;
        }
        let (Some(pid), Some(link)) = (self.pid, self.target.vaddr_of_file_offset(0)) else { return };
        self.bias = runtime::mapping_start(pid, self.target.path()).map(|start| start.wrapping_sub(link));
    }
}

impl output::Symbols for TargetSymbols<'_> {
    fn type_name(&self, addr: u64) -> Option<String> {
        self.target.runtime_type_name(self.link(addr)?)
    }
    fn function(&self, pc: u64) -> Option<(String, u64)> {
        let bias = pc - self.link(pc)?;
        self.target.function_containing(pc - bias).map(|f| (f.name.clone(), f.addr + bias))
    }
}
