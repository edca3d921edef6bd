//! Every fact of the binary that lowering needs, asked of it once, when checking ends:
//! what the plan names it by, the runtime's layouts, the file offset of every address a
//! program attaches to, the runtime functions gtrace's own programs probe and the ELF
//! entry point. Lowering and the plan it builds read these, never a `GoBinary`.

use super::{Builtin, Checked, InstanceKind, Name, Ty};
use crate::arch::abi::Location;
use crate::arch::Refusal;
use crate::gobin::{AesGlobals, GLayout, GoBinary, MapLayout, OtelContext, PanicLayout};
use crate::gotypes::TypeKind;
use std::collections::{BTreeMap, HashMap};

/// What lowering knows of the binary (see the module's comment).
#[derive(Clone, Debug, Default)]
pub struct BinaryFacts {
    /// Its path, build ids and architecture, as the plan names it.
    pub binary: crate::plan::Binary,
    pub is_pie: bool,
    /// Only when a program reads the goroutine's id or keeps timed calls' frames.
    pub g_layout: Option<GLayout>,
    /// Only when a body reads a Go value (a map among them, maybe).
    pub map_layout: Option<MapLayout>,
    /// The fallback map hash uses wyhash's constants (Go 1.17 to 1.22).
    pub memhash_constants: bool,
    /// The runtime's map hash keys, when some body reads `m[k]` and gtrace hashes as the
    /// runtime does.
    pub aes: Option<AesGlobals>,
    /// Only when a call is timed (`elapsed`, carried parameters, `on panic`).
    pub panic_layout: Option<PanicLayout>,
    /// The dictionaries of the shape functions whose `func` carries one, by address.
    pub dictionaries: BTreeMap<u64, String>,
    /// The file offset of every address a program may attach to.
    pub file_offsets: HashMap<u64, u64>,
    /// How the kernel runs the instruction at each of them under a uprobe.
    pub trap_kinds: HashMap<u64, crate::arch::trap::TrapKind>,
    /// The runtime functions gtrace's own programs attach to (`RUNTIME_FUNCTIONS`),
    /// those the binary has and whose entry was found, by name.
    pub runtime: BTreeMap<String, RuntimeFunction>,
    /// The ELF entry point, when a PIE's package variables are read.
    pub entry_point: Option<EntryPoint>,
    /// Where the OpenTelemetry SDK keeps a context's span, when a span's function has a
    /// `context.Context` parameter (`span()`).
    pub otel: Option<OtelContext>,
    /// The types an interface in a printed value may hold (`Plan::dynamic_types`), when
    /// a printed value holds an interface.
    pub dynamic_types: BTreeMap<u64, crate::plan::DynamicType>,
}

/// A runtime function one of gtrace's own programs attaches to.
#[derive(Clone, Debug)]
pub struct RuntimeFunction {
    pub name: String,
    /// Where its entry probe goes (after the stack check).
    pub entry: u64,
    /// Where its first `RUNTIME_ARGS` pointer-sized arguments are at the entry.
    pub args: Vec<Location>,
    /// Why a uprobe cannot go at its entry, if it cannot.
    pub refusal: Option<Refusal>,
}

/// The first instruction a process runs.
#[derive(Clone, Debug)]
pub struct EntryPoint {
    pub addr: u64,
    pub refusal: Option<Refusal>,
    /// The function that holds it, when the binary names one there.
    pub function: Option<String>,
}

/// The runtime functions that keep timed calls' frames true (lower/runtime_programs.rs).
pub const TIMING_FUNCTIONS: [&str; 6] = [
    "runtime.copystack",
    "runtime.recovery",
    "runtime.preprintpanics",
    "runtime.fatalpanic",
    "runtime.gopanic",
    "runtime.Goexit",
];
/// Where a goroutine's `self` variables are freed (and, with trace contexts, its frames
/// forgotten): every goroutine's end.
pub const GOEXIT0: &str = "runtime.goexit0";
/// The most pointer-sized arguments a program reads of a runtime function.
pub const RUNTIME_ARGS: usize = 2;

/// Asks `target` what lowering `checked` needs.
pub fn facts(target: &dyn GoBinary, checked: &Checked) -> BinaryFacts {
    let path = target.path().to_path_buf();
    let module = target.module_path().map(str::to_string);
    let link_base = if target.is_pie() { target.link_base() } else { None };
    let build_ids = target.build_ids().clone();
    let binary = crate::plan::Binary { path, build_ids, arch: target.arch(), module, link_base };
    let contexts = checked.instances.iter().any(|i| i.reads_context());
    let timed = contexts || checked.instances.iter().any(|i| i.needs_entry() || i.kind == InstanceKind::Panic);
    let mut names: Vec<&str> = if timed { TIMING_FUNCTIONS.to_vec() } else { Vec::new() };
    // Where self variables are freed, and a trace context's frames forgotten.
    if !checked.self_vars.is_empty() || contexts {
        names.push(GOEXIT0);
    }
    let runtime: BTreeMap<String, RuntimeFunction> =
        names.into_iter().filter_map(|n| runtime_function(target, n)).map(|f| (f.name.clone(), f)).collect();
    // Every PIE's processes learn their load bias there (lower/programs.rs); where a
    // probe reads package variables, they must.
    let entry_point = target.is_pie().then(|| entry_point(target)).flatten();
    // The runtime's layouts come from DWARF where there is some: asked only when a
    // program will read them, so a script that reads no Go value reads no DWARF.
    let goid = checked.instances.iter().any(|i| i.facts.names.values().any(|n| *n == Name::Builtin(Builtin::Goid)));
    let go_values = checked.instances.iter().any(|i| {
        i.facts.map_index
            || !i.facts.go_types.is_empty()
            || !i.facts.args.is_empty()
            || i.facts.names.values().any(|n| matches!(n, Name::GoValue { .. } | Name::Global { .. }))
    });
    let span_contexts = checked
        .instances
        .iter()
        .any(|i| (i.facts.spans_calls() && i.facts.span_ctx.is_some()) || i.facts.spans.values().any(|s| s.parent_ctx));
    let mut facts = BinaryFacts {
        binary,
        is_pie: target.is_pie(),
        g_layout: if timed || goid { target.g_layout() } else { None },
        map_layout: if go_values { target.map_layout() } else { None },
        memhash_constants: target.memhash_has_constants(),
        aes: if checked.instances.iter().any(|i| i.facts.map_index) { target.aes_globals() } else { None },
        panic_layout: if timed { target.panic_layout() } else { None },
        dictionaries: dictionaries(checked, target),
        file_offsets: HashMap::new(),
        trap_kinds: HashMap::new(),
        runtime,
        entry_point,
        otel: if span_contexts { target.otel_context() } else { None },
        dynamic_types: if prints_interfaces(checked, target) { dynamic_types(target) } else { BTreeMap::new() },
    };
    let sites = checked.instances.iter().flat_map(|i| &i.functions);
    let addrs = (sites.flat_map(|f| std::iter::once(f.entry).chain(f.returns.iter().copied())))
        .chain(facts.runtime.values().map(|f| f.entry))
        .chain(facts.entry_point.iter().map(|e| e.addr));
    for addr in addrs {
        if let Some(offset) = target.file_offset(addr) {
            facts.file_offsets.insert(addr, offset);
            facts.trap_kinds.insert(addr, target.trap_kind_at(addr));
        }
    }
    facts
}

fn runtime_function(target: &dyn GoBinary, name: &str) -> Option<RuntimeFunction> {
    let f = target.find(name).first().map(|f| (*f).clone())?;
    let entry = target.probe_sites(&f).ok()?.entry;
    let words = vec![target.word_type(); RUNTIME_ARGS];
    let args = crate::arch::abi::assign(target.conv_of(&f), &words, &target.types());
    Some(RuntimeFunction { name: f.name.to_string(), entry, args, refusal: target.uprobe_refusal(entry) })
}

fn entry_point(target: &dyn GoBinary) -> Option<EntryPoint> {
    let addr = target.entry_point()?;
    let function = target.function_at(addr).map(|f| f.name.to_string());
    Some(EntryPoint { addr, refusal: target.uprobe_refusal(addr), function })
}

/// The dictionaries of the shape functions whose `func` carries one, by address.
fn dictionaries(checked: &Checked, target: &dyn GoBinary) -> BTreeMap<u64, String> {
    let shapes: Vec<&str> = (checked.instances.iter().filter(|i| i.dictionary.is_some()))
        .flat_map(|i| i.functions.iter().map(|f| f.name.as_str()))
        .collect();
    if shapes.is_empty() {
        return Default::default();
    }
    let all = target.dictionaries();
    (all.into_iter())
        .filter(|d| shapes.iter().any(|s| crate::gobin::instantiation(s, &d.symbol).is_some()))
        .map(|d| (d.addr, d.symbol))
        .collect()
}

/// Whether a value some probe copies holds an interface (whose dynamic type is only
/// known at run time).
fn prints_interfaces(checked: &Checked, target: &dyn GoBinary) -> bool {
    // A panic's value and a span's error status are interfaces too.
    let panics_or_spans = checked.instances.iter().any(|i| {
        i.kind == InstanceKind::Panic
            || !i.facts.spans.is_empty()
            || i.facts.names.values().any(|n| *n == Name::Builtin(Builtin::Panic))
    });
    if panics_or_spans {
        return true;
    }
    // Only what is printed is copied whole: a value only read through (`c` of
    // `c.remoteAddr`) holds interfaces no probe copies.
    let mut todo: Vec<crate::gotypes::TypeId> = Vec::new();
    for facts in checked.instances.iter().map(|i| &i.facts) {
        for id in &facts.printed {
            match facts.ty(*id) {
                Ty::Interface => return true,
                Ty::Go(t) | Ty::Pointer { elem: Some(t) } => todo.push(*t),
                Ty::Args => todo.extend(facts.args.iter().map(|a| a.type_id)),
                _ => {}
            }
        }
    }
    let types = target.types();
    let mut seen = std::collections::HashSet::new();
    while let Some(id) = todo.pop() {
        if (id.0 as usize) >= types.items.len() || !seen.insert(id) {
            continue;
        }
        match &types.get(id).kind {
            TypeKind::Interface { .. } => return true,
            TypeKind::Pointer { elem } | TypeKind::Slice { elem } | TypeKind::Array { elem, .. } => todo.push(*elem),
            TypeKind::Struct { fields } => todo.extend(fields.iter().map(|f| f.ty)),
            TypeKind::Map { key, elem } => todo.extend(key.iter().chain(elem).copied()),
            _ => {}
        }
    }
    false
}

/// The types an interface may hold, with the layouts printing needs, from DWARF.
fn dynamic_types(target: &dyn GoBinary) -> BTreeMap<u64, crate::plan::DynamicType> {
    let found = target.runtime_types();
    let types = found.into_iter().map(|t| (t.addr, crate::plan::DynamicType { name: t.name, layout: t.layout }));
    types.collect()
}
