//! Names for what the traced process reports as addresses: interface types and stack
//! frames, looked up in the target binary. Run-time addresses in a PIE are moved back by
//! its load bias (known once the traced process has mapped it; unknown with -b, where
//! every process has its own).

use crate::gobin::Target;
use crate::output;
use crate::runtime;
use std::cell::RefCell;
use std::collections::HashMap;

pub struct TargetSymbols<'a> {
    pub target: &'a Target,
    pub bias: Option<u64>,
    /// The traced process, when there is one (-p, -c).
    pub pid: Option<u32>,
    /// Go types looked up by name, each once.
    pub layouts: RefCell<HashMap<String, Option<Layout>>>,
}

type Layout = (std::sync::Arc<crate::gotypes::Types>, crate::gotypes::TypeId);

impl<'a> TargetSymbols<'a> {
    pub fn new(target: &'a Target, bias: Option<u64>, pid: Option<u32>) -> TargetSymbols<'a> {
        TargetSymbols { target, bias, pid, layouts: RefCell::new(HashMap::new()) }
    }
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
    fn source_frames(&self, pc: u64) -> Vec<crate::gobin::SourceFrame> {
        self.link(pc).map(|at| self.target.source_frames(at)).unwrap_or_default()
    }
    fn go_type_at(&self, addr: u64) -> Option<Layout> {
        let key = format!("{addr:#x}");
        if let Some(known) = self.layouts.borrow().get(&key) {
            return known.clone();
        }
        let found = self.target.type_of_runtime_type(self.link(addr)?).map(|id| {
            let types = self.target.types().clone();
            let id = match types.get(id).kind {
                crate::gotypes::TypeKind::Pointer { elem } => elem,
                _ => id,
            };
            (std::sync::Arc::new(types), id)
        });
        self.layouts.borrow_mut().insert(key, found.clone());
        found
    }
    fn go_type(&self, name: &str) -> Option<Layout> {
        if let Some(known) = self.layouts.borrow().get(name) {
            return known.clone();
        }
        let found = self.target.type_by_name(name).map(|id| (std::sync::Arc::new(self.target.types().clone()), id));
        self.layouts.borrow_mut().insert(name.to_string(), found.clone());
        found
    }
}
