//! A plan's own consistency, and its maps within what the lowering makes: names gtrace
//! could have given, attach cookies that name the point's function, events and keys
//! that fit their records, gtrace's accounting maps sized by what they count, and each
//! map's kind, key and value sizes and entries as src/lower sizes a map of its role
//! (lower/maps.rs, accounting.rs, globals.rs, scope.rs, runtime_programs.rs).

use super::Refused;
use crate::lower::maps::{EVENTS_BYTES, EVENTS_BYTES_UNUSED, MAX_MAP_SIZE, USER_MAP_ENTRIES};
use crate::lower::{globals, layout};
use crate::plan::{
    Agg, Counter, MapKind, MapRole, MapSpec, MapValue, Plan, ProbeAttach, COOKIE_GEN_SHIFT, COOKIE_SLOT_MASK,
    COOKIE_SLOT_SHIFT, LHIST_MAX_BUCKETS, MAX_INTERVAL_PROBES,
};
use std::collections::{HashMap, HashSet};

/// The largest map value (or event record) a plan may have: above anything gtrace's
/// bounds make (`--string-limit` 400, `lhist` 1,000 buckets, whole values bounded by
/// `--depth`, `--max-fields`, `--max-elems`), and finite so that reading it is.
pub const MAX_VALUE: u32 = 1 << 20;
/// The largest map key a plan may have (keys are a few values of a record each).
pub const MAX_KEY: u32 = 1 << 16;
/// The longest name of a map or program (gtrace's are a word and an index).
const MAX_NAME: usize = 64;

fn map_refused(map: &str, problem: impl Into<String>) -> Refused {
    Refused::Map { map: map.to_string(), problem: problem.into() }
}

fn plan_refused(problem: impl Into<String>) -> Refused {
    Refused::Plan { problem: problem.into() }
}

/// Refuses the first thing of `plan` that gtrace's lowering would not have made.
pub fn check(plan: &Plan) -> Result<(), Refused> {
    names(plan)?;
    probes(plan)?;
    for m in &plan.maps {
        map(plan, m)?;
        fields(m)?;
    }
    accounting(plan)?;
    events(plan)
}

/// Names as gtrace gives them: a word (letters, digits, `_`), each once; a program in
/// the section `uprobe/NAME`.
fn names(plan: &Plan) -> Result<(), Refused> {
    let word =
        |n: &str| !n.is_empty() && n.len() <= MAX_NAME && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let mut seen = HashSet::new();
    for m in &plan.maps {
        if !word(&m.object_name) || !seen.insert(m.object_name.as_str()) {
            return Err(plan_refused(format!(
                "names a map {:?}, not a name gtrace gives (a word, once)",
                m.object_name
            )));
        }
    }
    for p in &plan.probes {
        if !word(&p.program) || !seen.insert(p.program.as_str()) {
            return Err(plan_refused(format!(
                "names a program {:?}, not a name gtrace gives (a word, once)",
                p.program
            )));
        }
        if p.section != format!("uprobe/{}", p.program) {
            let problem = format!("is in section {:?}, not `uprobe/{}`", p.section, p.program);
            return Err(Refused::Program { program: p.program.clone(), problem });
        }
    }
    Ok(())
}

/// Intervals as `on interval` allows them, and attach cookies that name each point's
/// function (and its hit counter when sites count hits) with no generation set.
fn probes(plan: &Plan) -> Result<(), Refused> {
    let intervals = plan.probes.iter().filter(|p| matches!(p.attach, ProbeAttach::Interval { .. })).count();
    if intervals > MAX_INTERVAL_PROBES {
        return Err(plan_refused(format!("has {intervals} interval probes, more than {MAX_INTERVAL_PROBES}")));
    }
    // Each site's hit counter, by (program, function): one pass, not one per point.
    let slots: HashMap<(&str, &str), usize> = (plan.accounting.slots.iter().enumerate())
        .filter_map(|(i, c)| match c {
            Counter::Hits { program, function } => Some(((program.as_str(), function.as_str()), i)),
            _ => None,
        })
        .rev()
        .collect();
    for p in &plan.probes {
        let bad = |problem: String| Refused::Program { program: p.program.clone(), problem };
        let points = match &p.attach {
            ProbeAttach::Interval { nanos } if *nanos < 1_000_000 => {
                return Err(bad(format!("runs every {nanos}ns; an interval is at least 1ms")))
            }
            ProbeAttach::Uprobe(points) => points,
            _ => continue,
        };
        for pt in points {
            let index = (pt.cookie & 0xffff_ffff) as usize;
            let slot = (pt.cookie >> COOKIE_SLOT_SHIFT) & COOKIE_SLOT_MASK;
            let hits = slots.get(&(p.program.as_str(), pt.function.as_str()));
            let slot_ok = match (plan.accounting.hits, hits) {
                // Counted by the kernel (`kernel_hits`): no counter of its own.
                (true, None) if plan.accounting.hits_by_kernel(&p.program) => slot == 0,
                (true, Some(h)) => slot == *h as u64 && !plan.accounting.hits_by_kernel(&p.program),
                (true, None) => false,
                (false, _) => slot == 0,
            };
            let at = format!("its cookie {:#x} at {:?} ({:#x})", pt.cookie, pt.function, pt.address);
            if plan.functions.get(index) != Some(&pt.function) {
                return Err(bad(format!("{at} does not name that function")));
            }
            if !slot_ok || pt.cookie >> COOKIE_GEN_SHIFT != 0 {
                return Err(bad(format!("{at} has a counter or generation gtrace would not give it")));
            }
        }
    }
    Ok(())
}

/// One map against what the lowering makes for its role.
fn map(plan: &Plan, m: &MapSpec) -> Result<(), Refused> {
    let shape = (m.kind, m.key_size, m.value_size, m.max_entries);
    let value = |v: u32, min: u32| (min..=MAX_VALUE).contains(&v);
    let entries = |n: u32| (1..=MAX_MAP_SIZE).contains(&n);
    let ok = match &m.role {
        // At its least only where no program emits an event.
        MapRole::Events => {
            shape == (MapKind::Ringbuf, 0, 0, EVENTS_BYTES)
                || (shape == (MapKind::Ringbuf, 0, 0, EVENTS_BYTES_UNUSED) && plan.events.is_empty())
        }
        // The tables of calls in flight: hashes by (g, depth, process), of any size
        // --map-size allows (how many entries gtrace gives them follows what they must
        // hold).
        MapRole::Goroutines => match shape {
            (MapKind::Array, 4, v, n) => value(v, layout::RECORD) && n == 1 << layout::SLOT_BITS,
            (MapKind::LruHash | MapKind::Hash, k, v, n) => k == layout::KEY && value(v, layout::RECORD) && entries(n),
            _ => false,
        },
        MapRole::Frames => {
            matches!(shape, (MapKind::LruHash | MapKind::Hash, k, v, n) if k == layout::KEY && v == layout::FRAME as u32 && entries(n))
        }
        MapRole::Carried => {
            matches!(shape, (MapKind::LruHash | MapKind::Hash, k, v, n) if k == layout::KEY && value(v, 8) && entries(n))
        }
        MapRole::SelfVars => matches!(shape, (MapKind::Hash, k, v, n) if k == layout::KEY && value(v, 8) && entries(n)),
        MapRole::LoadBias => shape == (MapKind::LruHash, 4, 8, globals::LOAD_BIAS_ENTRIES),
        MapRole::PanicFunctions { functions } => {
            let known = functions.iter().all(|f| (*f as usize) < plan.functions.len());
            known && shape == (MapKind::Hash, 4, 4, functions.len().max(1) as u32)
        }
        MapRole::AesTables => {
            let tables = crate::lower::aeshash::aes_tables_map();
            shape == (tables.kind, tables.key_size, tables.value_size, tables.max_entries)
        }
        MapRole::Scratch => scratch(plan, m),
        MapRole::Slots { of } => slots(plan, m, of),
        MapRole::Exemplars { of } => {
            let hist = |u: &MapSpec| {
                u.object_name == *of
                    && matches!(
                        &u.role,
                        MapRole::User { value: crate::plan::MapValue::Agg { agg: crate::plan::Agg::Hist, .. }, .. }
                    )
            };
            let key = plan.maps.iter().find(|u| hist(u)).map(|u| {
                if u.kind == MapKind::PercpuArray {
                    4
                } else {
                    u.key_size.max(1)
                }
            });
            matches!(shape, (MapKind::Hash, k, v, n) if Some(k) == key && v == layout::EXEMPLAR && entries(n))
        }
        MapRole::User { value: v, .. } => return user(plan, m, v),
    };
    if ok {
        Ok(())
    } else {
        Err(map_refused(&m.object_name, format!("{}, which gtrace never makes for a map of its role", describe(m))))
    }
}

/// The slots of a private user map (`of`): an array of (key, value, spilled) of the
/// size the lowering gives that map (`lower::slotted::slot_bits` of its size), for a
/// hash of one 8-byte key and 8-byte plain values whose name says it is private.
fn slots(plan: &Plan, m: &MapSpec, of: &str) -> bool {
    use crate::lower::slotted::{slot_bits, SLOT_BYTES};
    let owner = plan.maps.iter().find(|u| u.object_name == of);
    let Some(u) = owner else { return false };
    let private = matches!(&u.role, MapRole::User { name, keys, value: crate::plan::MapValue::Plain(_), .. }
        if name.starts_with('_') && keys.len() == 1);
    let slotted_by = plan.maps.iter().filter(|s| matches!(&s.role, MapRole::Slots { of: o } if o == of)).count();
    private
        && slotted_by == 1
        && (u.kind, u.key_size, u.value_size) == (MapKind::Hash, 8, 8)
        && (m.kind, m.key_size, m.value_size, m.max_entries)
            == (MapKind::Array, 4, SLOT_BYTES, 1 << slot_bits(u.max_entries))
}

fn describe(m: &MapSpec) -> String {
    format!(
        "a {:?} map of {}-byte keys, {}-byte values and {} entries",
        m.kind, m.key_size, m.value_size, m.max_entries
    )
}

/// gtrace's arrays: its counters, generations and rate buckets sized by what they
/// count, the cgroup array of `--cgroup`, per-CPU scratch memory of one element.
fn scratch(plan: &Plan, m: &MapSpec) -> bool {
    let acct = &plan.accounting;
    let shape = (m.kind, m.key_size, m.value_size, m.max_entries);
    let name = m.object_name.as_str();
    if name == acct.counters {
        shape == (MapKind::PercpuArray, 4, 8, acct.slots.len().max(1) as u32)
    } else if name == acct.generations {
        // Indexed like the counters: a generation at each function's hit slot.
        shape == (MapKind::Array, 4, 8, acct.slots.len().max(1) as u32)
    } else if name == acct.handovers {
        shape == (MapKind::Hash, 8, 8, crate::lower::accounting::HANDOVER_TASKS)
    } else if name == acct.rate_map {
        matches!(shape, (MapKind::Array, 4, 8, n) if n as usize <= plan.probes.len().max(1))
    } else if name == plan.cgroup {
        shape == (MapKind::CgroupArray, 4, 4, 1)
    } else {
        matches!(shape, (MapKind::PercpuArray, 4, v, 1) if (8..=MAX_VALUE).contains(&v))
    }
}

/// A user map: a hash of at most `MAX_MAP_SIZE` keys (`--map-size`), or a per-CPU array
/// with one element per function; an aggregation's value exactly its size.
fn user(plan: &Plan, m: &MapSpec, value: &MapValue) -> Result<(), Refused> {
    let refuse = |problem: String| Err(map_refused(&m.object_name, problem));
    let shape_ok = match m.kind {
        MapKind::Hash | MapKind::PercpuHash => {
            (8..=MAX_KEY).contains(&m.key_size) && (1..=MAX_MAP_SIZE).contains(&m.max_entries)
        }
        MapKind::PercpuArray => {
            let single = matches!(&m.role, MapRole::User { keys, .. } if keys.is_empty());
            m.key_size == 4 && m.max_entries == if single { 1 } else { plan.functions.len().max(1) as u32 }
        }
        _ => false,
    };
    if !shape_ok {
        return refuse(format!("{}, which gtrace never makes for a user map (at most {MAX_MAP_SIZE} keys; {USER_MAP_ENTRIES} unless --map-size)", describe(m)));
    }
    if let MapRole::User { preallocated: true, .. } = &m.role {
        // Preallocated, a per-CPU map takes all of its memory at once: no more than
        // gtrace would preallocate on this host.
        // A plain hash, no more than PREALLOC_BYTES whole.
        let cpus = crate::runtime::possible_cpus().map_or(0, |n| n as u32);
        let fits = crate::lower::maps::preallocated_keys(m.value_size, cpus);
        let plain_fits = crate::lower::maps::hash_preallocated(m.key_size, m.value_size, m.max_entries);
        if m.kind == MapKind::Hash && !plain_fits {
            return refuse(format!(
                "{}, preallocated: more than gtrace preallocates ({} MiB whole); give it a smaller --map-size",
                describe(m),
                crate::lower::maps::PREALLOC_BYTES >> 20
            ));
        }
        if m.kind == MapKind::PercpuArray || (m.kind == MapKind::PercpuHash && u64::from(m.max_entries) > fits) {
            return refuse(format!(
                "{}, preallocated: more than gtrace preallocates here ({fits} keys of per-CPU values of {} bytes on {cpus} CPUs, within {} MiB); compile the plan on this host, or give it a smaller --map-size",
                describe(m),
                m.value_size,
                crate::lower::maps::PREALLOC_BYTES >> 20
            ));
        }
    }
    match value {
        MapValue::Agg { agg, .. } => {
            let buckets = agg.buckets();
            // hist()'s are fixed (hist::BUCKETS); an lhist's come from the plan.
            if matches!(agg, Agg::Lhist { .. }) && buckets > LHIST_MAX_BUCKETS + 1 {
                return refuse(format!("an lhist of {buckets} buckets, more than {LHIST_MAX_BUCKETS}"));
            }
            if m.kind == MapKind::Hash || m.value_size != agg.value_size() {
                return refuse(format!(
                    "a {} of {} bytes in a {:?} map; gtrace makes it {} bytes, per CPU",
                    agg.name(),
                    m.value_size,
                    m.kind,
                    agg.value_size()
                ));
            }
        }
        MapValue::Plain(ty) => {
            if m.kind != MapKind::Hash || !(ty.size().max(1)..=MAX_VALUE).contains(&m.value_size) {
                return refuse(format!(
                    "a value of {} bytes in a {:?} map, not what gtrace makes for it",
                    m.value_size, m.kind
                ));
            }
        }
    }
    Ok(())
}

/// A user map's key fields inside its key, its value inside its value.
fn fields(m: &MapSpec) -> Result<(), Refused> {
    let MapRole::User { keys, key_names, value, .. } = &m.role else { return Ok(()) };
    let key_room = if m.kind == MapKind::PercpuArray { 8 } else { m.key_size };
    let outside = keys.iter().any(|f| f.offset.checked_add(f.ty.size()).is_none_or(|end| end > key_room));
    if outside || key_names.len() > keys.len() {
        return Err(map_refused(&m.object_name, "keys laid out beyond the map's key"));
    }
    let size = match value {
        MapValue::Plain(ty) => ty.size(),
        MapValue::Agg { of, .. } => of.size().min(m.value_size),
    };
    if size > m.value_size {
        return Err(map_refused(&m.object_name, "a value larger than the map's value"));
    }
    Ok(())
}

/// gtrace's accounting: its counters and generations are maps of the plan, the programs
/// it names are programs of the plan.
fn accounting(plan: &Plan) -> Result<(), Refused> {
    let acct = &plan.accounting;
    let is_map = |name: &str| name.is_empty() || plan.maps.iter().any(|m| m.object_name == name);
    for name in [&acct.counters, &acct.generations, &acct.handovers, &acct.rate_map, &plan.cgroup] {
        if !is_map(name) {
            return Err(plan_refused(format!("names {name:?} for gtrace's own use, which is no map of the plan")));
        }
    }
    if acct.generations.is_empty() != acct.handovers.is_empty() {
        return Err(plan_refused("has generations without handovers, or handovers without generations"));
    }
    if acct.counters.is_empty() && !acct.slots.is_empty() || acct.slots.len() > crate::lower::accounting::MAX_SLOTS {
        return Err(plan_refused(format!("has {} counters, not what gtrace makes", acct.slots.len())));
    }
    let program = |p: &str| plan.probes.iter().any(|q| q.program == p);
    let tied = acct.ties.iter().flatten().map(|s| s.program.as_str());
    if let Some(p) = acct.generation_programs.iter().map(String::as_str).chain(tied).find(|p| !program(p)) {
        return Err(plan_refused(format!("governs a program {p:?} that it does not have")));
    }
    if plan.maps.iter().any(|m| m.kind == MapKind::CgroupArray && m.object_name != plan.cgroup) {
        return Err(plan_refused("has a cgroup array that is not its --cgroup's"));
    }
    kernel_hits(plan)
}

/// The programs whose hits are their runs as the kernel counts them: only where a run is
/// one hit of one function, or the hits read would be wrong (several functions' hits as
/// one, other cgroups' runs as hits, the runs a generation check turns away).
fn kernel_hits(plan: &Plan) -> Result<(), Refused> {
    let acct = &plan.accounting;
    for name in &acct.kernel_hits {
        let bad = |problem: &str| Err(Refused::Program { program: name.clone(), problem: problem.to_string() });
        if !acct.hits || !plan.cgroup.is_empty() || acct.checks_generations(name) {
            return bad("takes its hits from the kernel's run count where a run is not one hit (no accounting, --cgroup, or a generation check)");
        }
        let Some(probe) = plan.probes.iter().find(|p| p.program == *name) else {
            return bad("has its hits counted by the kernel, but the plan has no such program");
        };
        let ProbeAttach::Uprobe(points) = &probe.attach else {
            return bad("has its hits counted by the kernel, but is attached to no function");
        };
        if points.first().is_none_or(|first| points.iter().any(|pt| pt.function != first.function)) {
            return bad("takes its hits from the kernel's run count, which cannot tell its functions apart");
        }
        if acct.slots.iter().any(|c| matches!(c, Counter::Hits { program, .. } if program == name)) {
            return bad("has its hits both counted by the kernel and in a counter");
        }
    }
    Ok(())
}

/// Event records of a bounded size, their fields inside them; the maps events print or
/// clear are user maps of the plan.
fn events(plan: &Plan) -> Result<(), Refused> {
    use crate::plan::EventKind;
    for (i, e) in plan.events.iter().enumerate() {
        let bad = |problem: &str| Refused::Event { index: i, problem: problem.to_string() };
        if !(8..=MAX_VALUE).contains(&e.size) {
            return Err(bad(&format!("a record of {} bytes, not what gtrace makes", e.size)));
        }
        if e.fields.iter().any(|f| f.offset < 8 || f.offset.checked_add(f.ty.size()).is_none_or(|end| end > e.size)) {
            return Err(bad("fields outside its record"));
        }
        if let EventKind::PrintMap { map } | EventKind::ClearMap { map } = &e.kind {
            let user = plan.maps.iter().any(|m| m.object_name == *map && matches!(m.role, MapRole::User { .. }));
            if !user {
                return Err(bad(&format!("prints or clears {map:?}, which is no user map of the plan")));
            }
        }
    }
    Ok(())
}
