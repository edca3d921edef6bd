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
    /// The plan's types an interface may hold (`Plan::dynamic_types`), with the arena
    /// their layouts index: asked before the binary, which a stripped build leaves
    /// without names or layouts.
    pub planned: Option<Planned>,
    /// Dynamic types printed without what printing them needs, by name (`(type
    /// 0x...)` for one with no name), with how many values: said at exit.
    pub missing: RefCell<std::collections::BTreeMap<String, u64>>,
}

/// The plan's dynamic types, shared.
#[derive(Clone)]
pub struct Planned {
    pub types: std::sync::Arc<crate::gotypes::Types>,
    pub dynamic: std::sync::Arc<std::collections::BTreeMap<u64, crate::plan::DynamicType>>,
}

impl Planned {
    pub fn of(plan: &crate::plan::Plan) -> Option<Planned> {
        (!plan.dynamic_types.is_empty())
            .then(|| Planned { types: plan.go_types.clone(), dynamic: std::sync::Arc::new(plan.dynamic_types.clone()) })
    }
}

type Layout = (std::sync::Arc<crate::gotypes::Types>, crate::gotypes::TypeId);

impl<'a> TargetSymbols<'a> {
    pub fn new(target: &'a Target, bias: Option<u64>, pid: Option<u32>) -> TargetSymbols<'a> {
        let (layouts, missing) = (RefCell::new(HashMap::new()), RefCell::default());
        TargetSymbols { target, bias, pid, layouts, planned: None, missing }
    }

    /// Names and layouts of dynamic types from the plan first.
    pub fn with_plan(mut self, plan: &crate::plan::Plan) -> Self {
        self.planned = Planned::of(plan);
        self
    }

    fn planned(&self, addr: u64) -> Option<&crate::plan::DynamicType> {
        self.planned.as_ref()?.dynamic.get(&self.link(addr)?)
    }

    /// What was printed without a name or a layout: one line, or none.
    pub fn missing_line(&self) -> Option<String> {
        let missing = self.missing.borrow();
        let total: u64 = missing.values().sum();
        if total == 0 {
            return None;
        }
        let types: Vec<String> = missing.iter().map(|(t, n)| format!("{t} ({n})")).collect();
        Some(format!(
            "gtrace: {total} value{} held in interfaces printed as addresses or {{...}}: neither the plan nor the binary has what printing needs: {}",
            if total == 1 { "" } else { "s" },
            types.join(", ")
        ))
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
        if let Some(t) = self.planned(addr) {
            return Some(t.name.clone());
        }
        let name = self.link(addr).and_then(|at| self.target.runtime_type_name(at));
        if name.is_none() {
            *self.missing.borrow_mut().entry(format!("type {addr:#x} without a name")).or_default() += 1;
        }
        name
    }
    fn function(&self, pc: u64) -> Option<(String, u64)> {
        let bias = pc - self.link(pc)?;
        self.target.function_containing(pc - bias).map(|f| (f.name.clone(), f.addr + bias))
    }
    fn source_frames(&self, pc: u64) -> Vec<crate::gobin::SourceFrame> {
        self.link(pc).map(|at| self.target.source_frames(at)).unwrap_or_default()
    }
    fn go_type_at(&self, addr: u64) -> Option<Layout> {
        if let (Some(p), Some(t)) = (&self.planned, self.planned(addr)) {
            if let Some(id) = t.layout {
                return Some((p.types.clone(), id));
            }
        }
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
    fn unprintable(&self, name: &str) {
        *self.missing.borrow_mut().entry(format!("{name} without a layout")).or_default() += 1;
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
