//! The plan fuzzer: mutants of real plans (attach offsets, file offsets, helper numbers,
//! map specs with and without an object rewritten to match, counters, cookies, events,
//! the object's bytes), each judged by `validate` against the real binary. No mutant may
//! panic it; each refusal must name what was mutated; what it accepts must be what
//! gtrace could have written; a few accepted mutants run for real.

use super::{calls, fuzz_bases, set_helper};
use crate::support::rng::Rng;
use gtrace::gobin::Target;
use gtrace::gotypes::TypeId;
use gtrace::object::{write, BpfObject, MapDef, LICENSE};
use gtrace::plan::validate::{self, EMITTED_HELPERS};
use gtrace::plan::{Bundle, EventKind, MapKind, MapRole, ProbeAttach, ValueType};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A mutant, what kind it is, and the texts one of which its refusal must contain.
struct Mutant {
    bundle: Bundle,
    kind: &'static str,
    names: Vec<String>,
    /// Whether validate may accept it (the mutation left it something gtrace writes).
    may_pass: bool,
    /// An attach point moved: its function and new address, which validate may accept
    /// only where gtrace probes that function.
    moved: Option<(String, u64)>,
}

const KINDS: [&str; 8] = ["offset", "file offset", "helper", "map", "counters", "cookie", "event", "bytes"];
const SIZES: [u32; 10] = [0, 1, 3, 7, 9, 4097, 1 << 20, (1 << 20) + 1, u32::MAX - 1, u32::MAX];

/// The object rewritten by gtrace's writer for the (mutated) plan's maps: what a
/// careful attacker would do so that only the plan's checks stand in the way.
pub(super) fn rewrite(b: &mut Bundle) {
    let Ok(programs) = validate::programs(&b.object, &b.plan) else { return };
    let object = BpfObject { license: LICENSE.into(), maps: b.plan.maps.iter().map(MapDef::from).collect(), programs };
    if let Ok(bytes) = write(&object) {
        b.object = bytes;
    }
}

fn uprobe_points(b: &Bundle) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (i, p) in b.plan.probes.iter().enumerate() {
        if let ProbeAttach::Uprobe(points) = &p.attach {
            out.extend((0..points.len()).map(|k| (i, k)));
        }
    }
    out
}

fn mutate(rng: &mut Rng, base: &Bundle) -> Mutant {
    let mut b = base.clone();
    let kind = rng.pick(&KINDS);
    let mut m = Mutant { bundle: b.clone(), kind, names: Vec::new(), may_pass: false, moved: None };
    let mutated = match kind {
        "offset" | "file offset" | "cookie" => move_point(rng, &mut b, &mut m),
        "helper" => change_helper(rng, &mut b, &mut m),
        "map" => change_map(rng, &mut b, &mut m),
        "counters" => change_counters(rng, &mut b, &mut m),
        "event" => change_event(rng, &mut b, &mut m),
        _ => change_bytes(rng, &mut b, &mut m),
    };
    // A kind the plan has nothing of (no helper call, counters or events): another.
    if !mutated {
        return mutate(rng, base);
    }
    // A mutation that changed nothing (a size set to what it was) leaves a plan gtrace wrote.
    m.may_pass |= b.object == base.object && b.to_json() == base.to_json();
    m.bundle = b;
    m
}

/// An attach point's address and file offset moved together (`offset`), its file
/// offset alone, or its cookie changed.
fn move_point(rng: &mut Rng, b: &mut Bundle, m: &mut Mutant) -> bool {
    let (i, k) = rng.pick(&uprobe_points(&b));
    let program = b.plan.probes[i].program.clone();
    let ProbeAttach::Uprobe(points) = &mut b.plan.probes[i].attach else { unreachable!() };
    let pt = &mut points[k];
    let delta = rng.pick(&[1i64, 2, 3, 4, 5, 6, 7, -1, -2, -3, -4, 8, -8, 16, -16, 33, -64]);
    match m.kind {
        "cookie" => pt.cookie ^= 1 << rng.below(64),
        "offset" => {
            pt.address = pt.address.wrapping_add_signed(delta);
            pt.file_offset = pt.file_offset.wrapping_add_signed(delta);
            m.may_pass = true; // if it lands on another site of the function
            m.moved = Some((pt.function.clone(), pt.address));
        }
        _ => pt.file_offset = pt.file_offset.wrapping_add_signed(delta),
    }
    m.names = vec![format!("`{program}`")];
    if m.kind != "cookie" {
        m.names = vec![format!("probe `{program}` attaches to `{}` at {:#x}", pt.function, pt.address)];
    }
    true
}

/// A helper call's number changed; false when the probe's program calls none.
fn change_helper(rng: &mut Rng, b: &mut Bundle, m: &mut Mutant) -> bool {
    let i = rng.below(b.plan.probes.len());
    let probe = b.plan.probes[i].clone();
    let found = calls(&b.object, &probe.section);
    if found.is_empty() {
        return false;
    }
    let (index, at) = rng.pick(&found);
    let (any, wild) = (rng.below(212) as i32, rng.next() as i32);
    let id = rng.pick(&[109, 36, 58, 12, 117, 6, 27, 113, 114, 131, 1, 2, 5, 112, any, wild]);
    set_helper(b, at, id);
    m.may_pass = EMITTED_HELPERS.contains(&id);
    m.names = vec![format!("program `{}`, instruction {index}: calls helper", probe.program)];
    true
}

/// A map's key size, value size, entries or kind changed, the object rewritten to match
/// half the time.
fn change_map(rng: &mut Rng, b: &mut Bundle, m: &mut Mutant) -> bool {
    let j = rng.below(b.plan.maps.len());
    let (size, field) = (rng.pick(&SIZES), rng.below(4));
    let kinds = [
        MapKind::Hash,
        MapKind::PercpuHash,
        MapKind::LruHash,
        MapKind::Array,
        MapKind::PercpuArray,
        MapKind::Ringbuf,
        MapKind::CgroupArray,
    ];
    let kind = rng.pick(&kinds);
    let map = &mut b.plan.maps[j];
    let entries =
        [0, 1, map.max_entries.saturating_add(1), map.max_entries.saturating_mul(2), 1 << 26, (1 << 26) + 1, u32::MAX];
    match field {
        0 => map.key_size = size,
        1 => map.value_size = size,
        2 => map.max_entries = entries[size as usize % entries.len()],
        _ => map.kind = kind,
    }
    m.names = vec![format!("map `{}`", map.object_name), "section \"maps\"".into()];
    if rng.below(2) == 0 {
        rewrite(b);
        m.may_pass = true; // a user map's size within --map-size's bound is a plan gtrace writes
    }
    true
}

/// The counters' slots or their map's size changed; false without accounting.
fn change_counters(rng: &mut Rng, b: &mut Bundle, m: &mut Mutant) -> bool {
    if b.plan.accounting.counters.is_empty() {
        return false;
    }
    let counters = b.plan.accounting.counters.clone();
    match rng.below(3) {
        0 => drop(b.plan.accounting.slots.pop()),
        1 => b.plan.accounting.slots.extend(b.plan.accounting.slots.clone()),
        _ => {
            let map = b.plan.maps.iter_mut().find(|m| m.object_name == counters).unwrap();
            map.max_entries = [u32::MAX, u32::MAX - 1, map.max_entries + 1][rng.below(3)];
        }
    }
    rewrite(b);
    m.names = vec![format!("map `{counters}`"), "counters".into(), "its cookie".into()];
    true
}

/// An event's field offset, Go type, format or size changed; false without events.
fn change_event(rng: &mut Rng, b: &mut Bundle, m: &mut Mutant) -> bool {
    if b.plan.events.is_empty() {
        return false;
    }
    let i = rng.below(b.plan.events.len());
    let (size, what, types) = (rng.pick(&SIZES), rng.below(4), b.plan.go_types.items.len() as u32);
    let e = &mut b.plan.events[i];
    m.names = vec![format!("event {i}")];
    match (what, e.fields.first_mut(), &mut e.kind) {
        (0, Some(f), _) => f.offset = size,
        (1, Some(f), _) if matches!(f.ty, ValueType::Go { .. }) => {
            let ValueType::Go { capture } = &mut f.ty else { unreachable!() };
            capture.root.ty = TypeId(types + size % 3);
        }
        (2, _, EventKind::Printf { format }) => format.push('%'),
        _ => {
            e.size = size;
            m.may_pass = true; // a larger record still holds its fields
        }
    }
    true
}

/// The object's bytes truncated, extended or flipped.
fn change_bytes(rng: &mut Rng, b: &mut Bundle, m: &mut Mutant) -> bool {
    let n = b.object.len();
    match rng.below(4) {
        0 => b.object.truncate(rng.below(n)),
        1 => b.object.extend((0..1 + rng.below(16)).map(|_| rng.next() as u8)),
        _ => {
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(n);
                b.object[at] ^= 1 + rng.below(255) as u8;
            }
        }
    }
    m.names = vec!["the plan's object".into(), "program `".into()];
    m.may_pass = true; // a changed operand of an instruction: the verifier's to judge
    true
}

/// What the fuzzer saw: mutants by kind, refused and accepted; the accepted ones kept.
#[derive(Default)]
struct Outcome {
    refused: BTreeMap<&'static str, usize>,
    accepted: BTreeMap<&'static str, usize>,
    kept: Vec<(&'static str, Bundle)>,
}

/// `count` mutants of `base` with `seed`, each judged on `target`; panics on a panic, an
/// unnamed refusal or an acceptance that should not be.
fn fuzz(base: &Bundle, target: &Target, seed: u64, count: usize, out: &mut Outcome) {
    let mut rng = Rng(seed);
    for n in 0..count {
        let m = mutate(&mut rng, base);
        let judged = catch_unwind(AssertUnwindSafe(|| validate::validate(&m.bundle, target)));
        let judged = judged.unwrap_or_else(|_| panic!("seed {seed}, mutant {n} ({}): validate panicked", m.kind));
        match judged {
            Err(e) => {
                let text = e.to_string();
                let named = m.names.iter().any(|name| text.contains(name.as_str()));
                assert!(named, "seed {seed}, mutant {n} ({}): the refusal names none of {:?}: {text}", m.kind, m.names);
                *out.refused.entry(m.kind).or_default() += 1;
            }
            Ok(()) => {
                assert!(m.may_pass, "seed {seed}, mutant {n} ({}) was accepted", m.kind);
                if let Some((function, addr)) = &m.moved {
                    assert!(probed_at(target, function, *addr), "seed {seed}, mutant {n}: {function} at {addr:#x}");
                }
                *out.accepted.entry(m.kind).or_default() += 1;
                out.kept.push((m.kind, m.bundle));
            }
        }
    }
}

/// Whether gtrace's checker places a probe of `function` at `addr`: its entry or a RET,
/// or (inlined) where `-l`'s sites say.
fn probed_at(target: &Target, function: &str, addr: u64) -> bool {
    let own =
        target.find(function).into_iter().filter(|f| f.name == function).filter_map(|f| target.probe_sites(f).ok());
    let inlined = target.find_inlined(function).into_iter().filter(|s| s.callee == function).map(|s| s.addr);
    own.flat_map(|s| std::iter::once(s.entry).chain(s.returns)).chain(inlined).any(|a| a == addr)
}

#[test]
fn mutated_plans_are_refused_by_name_or_are_plans_gtrace_writes() {
    let start = std::time::Instant::now();
    let mut out = Outcome::default();
    let bases = fuzz_bases();
    for (i, (base, bin)) in bases.iter().enumerate() {
        let target = Target::open(bin).unwrap();
        validate::validate(base, &target).expect("the unmutated plan passes");
        fuzz(base, &target, 0x9e37_79b9_7f4a_7c15 ^ i as u64, 240, &mut out);
    }
    let refused: usize = out.refused.values().sum();
    let accepted: usize = out.accepted.values().sum();
    eprintln!(
        "plan fuzz: {refused} refused {:?}, {accepted} accepted {:?}, in {:?}",
        out.refused,
        out.accepted,
        start.elapsed()
    );
    assert_eq!(refused + accepted, 240 * bases.len());
    for kind in KINDS {
        assert!(out.refused.get(kind).copied().unwrap_or(0) > 0, "no {kind} mutant was refused");
    }
}

/// The object's bytes alone, many times: what the validator accepts aya-obj parses
/// without a panic, and what would panic aya-obj is refused first (counted, to show the
/// check is what stands between the two).
#[test]
fn objects_that_would_panic_aya_obj_never_pass() {
    let bases = fuzz_bases();
    let previous = std::panic::take_hook();
    // Quiet only aya-obj's own panics (expected here); any other still prints.
    std::panic::set_hook(Box::new(move |info| {
        if !info.location().is_some_and(|l| l.file().contains("aya-obj")) {
            previous(info)
        }
    }));
    let (mut aya_panics, mut accepted) = (0, 0);
    let mut rng = Rng(0x5eed);
    for n in 0..2000 {
        let (base, _) = &bases[n % bases.len()];
        let mut b = base.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(b.object.len());
            b.object[at] ^= 1 + rng.below(255) as u8;
        }
        let panics = catch_unwind(|| drop(aya_obj::Object::parse(&b.object))).is_err();
        let judged = catch_unwind(AssertUnwindSafe(|| validate::validate_object(&b)));
        let judged = judged.unwrap_or_else(|_| panic!("mutant {n}: validate panicked"));
        assert!(!(panics && judged.is_ok()), "mutant {n}: accepted, and aya-obj panics on it");
        aya_panics += usize::from(panics);
        accepted += usize::from(judged.is_ok());
    }
    let _ = std::panic::take_hook();
    eprintln!("object fuzz: 2000 mutants, {accepted} accepted, {aya_panics} would have panicked aya-obj (all refused)");
}

/// A few mutants the validator accepts, run for real with `gtrace run` on tests/go/e2e:
/// the target's own output is whole, whether the kernel loaded them or gtrace said why
/// not.
#[test]
fn accepted_mutants_leave_the_target_intact() {
    if !support_privileged() {
        return;
    }
    let (base, bin) = fuzz_bases().remove(0);
    let target = Target::open(&bin).unwrap();
    let mut out = Outcome::default();
    fuzz(&base, &target, 7, 200, &mut out);
    let mut picked: Vec<(&str, Bundle)> = Vec::new();
    for kind in ["map", "offset", "bytes", "helper", "event"] {
        if let Some(k) = out.kept.iter().find(|(k, _)| *k == kind) {
            picked.push(k.clone());
        }
    }
    // And one that surely loads: a user map with keys (a hash: a map without keys is an
    // array of one element, which gtrace never makes larger) one key larger, its object
    // rewritten to match.
    let mut larger = base.clone();
    let keyed = larger.plan.maps.iter().position(|m| {
        matches!(m.role, MapRole::User { .. })
            && m.key_size > 0
            && matches!(m.kind, MapKind::Hash | MapKind::PercpuHash)
    });
    larger.plan.maps[keyed.expect("a user map with keys in the base plan")].max_entries += 1;
    rewrite(&mut larger);
    validate::validate(&larger, &target).expect("a user map of 16,385 keys is a plan gtrace writes");
    picked.push(("larger map", larger));
    let dir = super::support::unique_tmp(&super::support::root().join("target"), "plantrust-run");
    std::fs::create_dir_all(&dir).unwrap();
    let mut whole = 0;
    for (i, (kind, b)) in picked.iter().enumerate() {
        let file = dir.join(format!("mutant{i}.json"));
        std::fs::write(&file, b.to_json()).unwrap();
        let command = format!("{} add 3000", bin.display());
        let r = super::support::gtrace(&["run", file.to_str().unwrap(), "-c", &command]);
        eprintln!("{kind} mutant: gtrace run exited {}: {}", r.code, r.stderr.lines().next().unwrap_or(""));
        assert!(!r.stderr.contains("panicked"), "{kind}: {}", r.stderr);
        if r.code == 0 {
            assert!(
                r.stdout.contains("calls=3000 sum_a=4498500"),
                "{kind}: the target's output:\n{}\n{}",
                r.stdout,
                r.stderr
            );
            whole += 1;
        } else {
            assert!(!r.stdout.contains("calls="), "{kind}: gtrace failed after the target ran: {}", r.stderr);
            assert!(r.stderr.starts_with("error:"), "{kind}: {}", r.stderr);
        }
    }
    assert!(whole >= 1, "no accepted mutant ran its target to the end");
    std::fs::remove_dir_all(&dir).ok();
}

fn support_privileged() -> bool {
    super::support::privileged("accepted_mutants_leave_the_target_intact")
}
