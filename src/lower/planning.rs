//! The plan around a script's programs (programs.rs lowers them): the maps they will
//! use, decided before any is lowered; the functions whose calls are kept as frames;
//! the plan's head (the binary, the probed functions) and its tail once every program
//! is lowered (the maps' sizes, the accounting, the events and their Go types).

use super::accounting::{Layout, Settings};
use super::carry::EntryRecords;
use super::maps::Maps;
use super::programs::reads_globals;
use crate::check::binary::BinaryFacts;
use crate::check::{Checked, InstanceKind};
use crate::plan::{Plan, PLAN_VERSION};
use crate::syntax::ast::{Script, Span};

/// Whether the binary's ELF entry point can hold a uprobe.
fn entry_takes_uprobe(binary: &BinaryFacts) -> bool {
    binary.entry_point.as_ref().is_some_and(|at| at.refusal.is_none())
}

/// The maps the programs will use, before any is lowered: the script's, the slots of
/// its goroutine-keyed ones, the frames of timed calls, exemplars, carried parameters,
/// `self` variables, panics' functions, aeshash's tables and the load bias. Also whether
/// programs add a PIE's load bias to the package variables they read, and whether the
/// plan learns the bias at the entry point.
pub(super) fn plan_maps(
    script: &Script,
    checked: &Checked,
    settings: &Settings,
    (timed, records, plan): (&[((String, u64), Span)], &EntryRecords, &Plan),
) -> (Maps, bool, bool) {
    let panics = checked.instances.iter().any(|i| i.kind == InstanceKind::Panic);
    let record = if panics { super::layout::RECORD_WITH_PANICS } else { super::layout::RECORD };
    let mut maps = Maps::new(&checked.maps, (!timed.is_empty()).then_some(record), plan.functions.len());
    maps.add_slots(&checked.maps, &settings.map_sizes);
    for name in super::spans::exemplar_maps(script, checked, records) {
        maps.add_exemplars(&name);
    }
    if records.carrying().next().is_some() {
        maps.add_carried(records.size);
    }
    if !checked.self_vars.is_empty() {
        maps.add_self_vars(checked.self_vars.values().map(|v| v.ty.record_size()).max().unwrap_or(8));
    }
    maps.specs.extend(super::maps::panic_functions_maps(checked, &plan.functions));
    let binary = &checked.binary;
    let aes = binary.aes;
    if aes.is_some() {
        maps.specs.push(super::aeshash::aes_tables_map());
    }
    let biased = binary.is_pie && checked.instances.iter().any(|i| reads_globals(i, aes.is_some()));
    // Every PIE learns its processes' biases at the entry point, whether or not a probe
    // reads a package variable: printing names a type or a frame by it, and a short -c
    // command can end before its memory map is read.
    let learns_bias = biased || (binary.is_pie && entry_takes_uprobe(binary));
    if learns_bias {
        maps.specs.push(super::globals::load_bias_map());
    }
    (maps, biased, learns_bias)
}

/// The plan's head: the binary it was compiled for, what was passed over, the probed
/// functions in order, and the generic dictionaries.
pub(super) fn new_plan(checked: &Checked) -> Plan {
    let binary = checked.binary.binary.clone();
    let mut plan = Plan { version: PLAN_VERSION, binary, skipped: checked.skipped.clone(), ..Plan::default() };
    // In order, each once (a set: a wildcard lists thousands).
    let mut seen = std::collections::HashSet::new();
    for f in checked.instances.iter().flat_map(|i| &i.functions) {
        if seen.insert(f.name.as_str()) {
            plan.functions.push(f.name.clone());
        }
    }
    plan.dictionaries = checked.binary.dictionaries.clone();
    plan
}

/// The plan's tail, once every program is lowered: the maps with their sizes (the
/// scratch one fits the largest event), the accounting layout, the cgroup filter, the
/// events and the Go types their whole values are decoded with.
pub(super) fn finish_plan(
    plan: &mut Plan,
    mut maps: Maps,
    layout: Layout,
    events: Vec<crate::plan::EventSpec>,
    settings: &Settings,
    checked: &Checked,
) {
    maps.add_scratch(events.iter().map(|e| e.size).max().unwrap_or(8));
    if events.is_empty() {
        maps.shrink_events();
    }
    maps.apply_sizes(&settings.map_sizes, plan.functions.len(), settings.cpus);
    plan.accounting = layout.finish(&mut maps);
    if settings.cgroup {
        maps.specs.push(super::scope::map_spec());
        plan.cgroup = super::scope::CGROUP.to_string();
    }
    plan.maps = maps.specs;
    // Whole Go values in events are decoded with the types the checker reached.
    // So are the interfaces' dynamic types (map keys too), whose layouts index them.
    let whole = events.iter().flat_map(|e| &e.fields).any(|f| matches!(f.ty, crate::plan::ValueType::Go { .. }));
    if whole || !checked.binary.dynamic_types.is_empty() {
        plan.go_types = std::sync::Arc::new(checked.types.clone());
        plan.dynamic_types = checked.binary.dynamic_types.clone();
    }
    plan.events = events;
}

/// Functions whose calls are kept as frames from their entries (`on return` probes that
/// use `elapsed` or parameters, and `on panic`), each with the span of the first probe
/// that needs it.
pub(super) fn timed_functions(checked: &Checked) -> Vec<((String, u64), Span)> {
    let mut timed: Vec<((String, u64), Span)> = Vec::new();
    for inst in
        checked.instances.iter().filter(|i| i.needs_entry() || i.kind == InstanceKind::Panic || i.reads_context())
    {
        for f in &inst.functions {
            if !timed.iter().any(|((n, _), _)| *n == f.name) {
                timed.push(((f.name.clone(), f.entry), inst.span));
            }
        }
    }
    timed
}
