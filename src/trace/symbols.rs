//! The one symbolizer of a trace: names for what the traced process reports as
//! addresses (interface types and their layouts, stack frames, source lines), shared by
//! the trace loop, the pictures and the exporters' threads. Interfaces' dynamic types
//! come from the plan first (`Plan::dynamic_types`, read from DWARF when it was
//! compiled), then from the binary the trace opened (with `--debug-file` when given);
//! functions and lines from its `.gopclntab`. Run-time addresses in a PIE are moved
//! back by its load bias (the plan's link base against where the traced process mapped
//! the file; unknown with -b, where every process has its own). What cannot be printed
//! whole for want of a name or a layout is counted and said at exit. Once the file is
//! known to have changed in place (-b, `runtime::file_guard`), nothing more is read from
//! it (`distrust`): its bytes are no longer the build the process ran.

use crate::gobin::Target;
use crate::gotypes::{TypeId, Types};
use crate::output;
use crate::plan::{DynamicType, Plan};
use crate::runtime;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

type Layout = (Arc<Types>, TypeId);

pub struct TargetSymbols {
    /// The binary, opened once for the trace (read-only). Never freed: a trace ends
    /// with the process, and freeing a big binary's function table name by name was
    /// half of what a Ctrl-C cost gtrace's CPU (Caddy's 71,580 names: about 5 ms).
    target: std::mem::ManuallyDrop<Mutex<Target>>,
    /// The file the traced process maps (its load bias is read from its memory map).
    path: PathBuf,
    /// A PIE's link-time address of its first byte (`plan::Binary::link_base`).
    link_base: Option<u64>,
    bias: Mutex<Option<u64>>,
    /// The traced process, when there is one (-p, -c).
    pid: Option<u32>,
    /// Go types looked up in the binary, each once.
    layouts: Mutex<HashMap<String, Option<Layout>>>,
    /// The plan's dynamic types, with the arena their layouts index.
    planned: Arc<BTreeMap<u64, DynamicType>>,
    types: Arc<Types>,
    /// Dynamic types printed without what printing them needs, with how many values.
    missing: Mutex<BTreeMap<String, u64>>,
    /// The file changed in place: nothing more is read from it.
    distrusted: std::sync::atomic::AtomicBool,
}

/// A lock that a panicking holder left is still the data: names are read-only facts.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl TargetSymbols {
    pub fn new(target: Target, plan: &Plan, pid: Option<u32>) -> TargetSymbols {
        TargetSymbols {
            path: target.path().to_path_buf(),
            target: std::mem::ManuallyDrop::new(Mutex::new(target)),
            link_base: plan.binary.link_base,
            bias: Mutex::new(None),
            pid,
            layouts: Mutex::default(),
            planned: Arc::new(plan.dynamic_types.clone()),
            types: plan.go_types.clone(),
            missing: Mutex::default(),
            distrusted: Default::default(),
        }
    }

    /// The file changed in place since the trace opened it: names are no longer read
    /// from it (addresses print instead, counted in `missing_line`).
    pub fn distrust(&self) {
        self.distrusted.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The binary when it may still be read; else counts `what` as printed without it.
    fn readable(&self, what: &str) -> Option<MutexGuard<'_, Target>> {
        if self.distrusted.load(std::sync::atomic::Ordering::SeqCst) {
            self.count_missing(format!("{what} not read from the file changed in place"));
            return None;
        }
        Some(self.target())
    }

    /// The binary (held while the guard lives: not across a wait).
    pub fn target(&self) -> MutexGuard<'_, Target> {
        lock(&self.target)
    }

    pub fn is_pie(&self) -> bool {
        self.link_base.is_some()
    }

    /// A PIE's load bias in the traced process, once known.
    pub fn bias(&self) -> Option<u64> {
        *lock(&self.bias)
    }

    /// Learns the bias of a PIE from the traced process's memory map, or else from what
    /// the entry-point probe stored for it (`stored`, by pid): a short -c command can
    /// run and end between two looks at its map, and an ended one has none.
    pub fn learn_bias(&self, stored: impl FnOnce(u32) -> Option<u64>) {
        let mut bias = lock(&self.bias);
        let (None, Some(link), Some(pid)) = (*bias, self.link_base, self.pid) else { return };
        *bias = runtime::mapping_start(pid, &self.path).map(|start| start.wrapping_sub(link)).or_else(|| stored(pid));
    }

    fn link(&self, addr: u64) -> Option<u64> {
        if self.is_pie() {
            addr.checked_sub(self.bias()?)
        } else {
            Some(addr)
        }
    }

    fn planned(&self, addr: u64) -> Option<&DynamicType> {
        self.planned.get(&self.link(addr)?)
    }

    fn count_missing(&self, what: String) {
        *lock(&self.missing).entry(what).or_default() += 1;
    }

    /// What was printed without a name or a layout: one line, or none.
    pub fn missing_line(&self) -> Option<String> {
        let missing = lock(&self.missing);
        let total: u64 = missing.values().sum();
        if total == 0 {
            return None;
        }
        let types: Vec<String> = missing.iter().map(|(t, n)| format!("{t} ({n})")).collect();
        Some(format!(
            "gtrace: {total} value{} (held in interfaces, or stack frames) printed as addresses or {{...}}: neither the plan nor the binary has what printing needs: {}",
            if total == 1 { "" } else { "s" },
            types.join(", ")
        ))
    }

    /// A layout looked up in the binary by `key`, each once.
    fn cached(&self, key: String, find: impl FnOnce(&Target) -> Option<TypeId>) -> Option<Layout> {
        if let Some(known) = lock(&self.layouts).get(&key) {
            return known.clone();
        }
        let found = {
            let Some(target) = self.readable("type layouts") else { return None };
            find(&target).map(|id| (Arc::new(target.types().clone()), id))
        };
        lock(&self.layouts).insert(key, found.clone());
        found
    }
}

impl output::Symbols for TargetSymbols {
    fn type_name(&self, addr: u64) -> Option<String> {
        if let Some(t) = self.planned(addr) {
            return Some(t.name.clone());
        }
        let target = self.readable("type names")?;
        let name = self.link(addr).and_then(|at| target.runtime_type_name(at));
        if name.is_none() {
            self.count_missing(format!("type {addr:#x} without a name"));
        }
        name
    }
    fn function(&self, pc: u64) -> Option<(String, u64)> {
        let bias = pc - self.link(pc)?;
        self.readable("function names")?.function_containing(pc - bias).map(|f| (f.name.to_string(), f.addr + bias))
    }
    fn source_frames(&self, pc: u64) -> Vec<crate::gobin::SourceFrame> {
        let at = self.link(pc);
        at.and_then(|at| Some(self.readable("source lines")?.source_frames(at))).unwrap_or_default()
    }
    fn go_type_at(&self, addr: u64) -> Option<Layout> {
        if let Some(id) = self.planned(addr).and_then(|t| t.layout) {
            return Some((self.types.clone(), id));
        }
        let link = self.link(addr)?;
        self.cached(format!("{addr:#x}"), |target| {
            let id = target.type_of_runtime_type(link)?;
            Some(match target.types().get(id).kind {
                crate::gotypes::TypeKind::Pointer { elem } => elem,
                _ => id,
            })
        })
    }
    fn go_type(&self, name: &str) -> Option<Layout> {
        self.cached(name.to_string(), |target| target.type_by_name(name))
    }
    fn unprintable(&self, name: &str) {
        self.count_missing(format!("{name} without a layout"));
    }
}

/// The exporters' threads share it with the trace loop.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<TargetSymbols>();
};
