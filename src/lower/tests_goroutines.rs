//! Goroutines' records keyed by (g, process), run by the interpreter (crate::bpf::interp):
//! two processes of one binary can have a goroutine at the same g (-b, a heap at a fixed
//! address), and neither finds, pops nor claims the other's record, deep frame, carried
//! parameters or `self` variables.

use super::layout::{F_FUNC, F_REL, F_TIME, INLINE, KEY, R_FRAMES, R_G, R_TGID, R_TOP, SLOT_BITS, SLOT_HASH};

use super::maps::{CARRIED, FRAMES, GOROUTINES, GOROUTINES_SPILL, SELF_VARS};
use super::tests::{asm, lowered, user_map};
use super::Lowered;
use crate::bpf::interp::{run_probe, HashSpec, Machine, Run, World};
use crate::gobin::fake::Fake;
use crate::plan::{Counter, Refusal};

/// Every register holds this: the g register and the stack pointer alike.
const G: u64 = 0x7000;
/// Two processes; each runs on a thread of its own id + 1.
const P: u32 = 4242;
const Q: u32 = 5151;
/// When the entry was, and now.
const T0: u64 = 1_000_000;
const NOW: u64 = 1_000_700;

fn target() -> Fake {
    Fake::new().function("main.add", &[("a", "int"), ("b", "int")], &[("~r0", "int")])
}

/// The key of a goroutine's own things: g, an index, the process.
fn key(index: u32, tgid: u32) -> Vec<u8> {
    let mut k = G.to_le_bytes().to_vec();
    k.extend(index.to_le_bytes());
    k.extend(tgid.to_le_bytes());
    assert_eq!(k.len() as u32, KEY);
    k
}

/// A record of `size` bytes tagged (G, `tgid`) with one frame of main.add in flight,
/// entered at `t0` where every register holds G (base 0: its position is G).
fn record(size: u32, tagged: Option<u32>, t0: u64) -> Vec<u8> {
    let mut r = vec![0u8; size as usize];
    if let Some(tgid) = tagged {
        r[R_G as usize..][..8].copy_from_slice(&G.to_le_bytes());
        r[R_TGID as usize..][..4].copy_from_slice(&tgid.to_le_bytes());
    }
    r[R_TOP as usize..][..4].copy_from_slice(&1u32.to_le_bytes());
    let f = R_FRAMES as usize;
    r[f + F_TIME as usize..][..8].copy_from_slice(&t0.to_le_bytes());
    r[f + F_REL as usize..][..8].copy_from_slice(&G.to_le_bytes());
    r[f + F_FUNC as usize..][..8].copy_from_slice(&0u64.to_le_bytes());
    r
}

fn u32_at(bytes: &[u8], at: i16) -> u32 {
    u32::from_le_bytes(bytes[at as usize..][..4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..][..8].try_into().expect("8 bytes"))
}

/// The value size of the map of object name `object`.
fn size_of(l: &Lowered, object: &str) -> u32 {
    l.plan.maps.iter().find(|m| m.object_name == object).map_or(4096, |m| m.value_size.max(8))
}

/// A hash map of `l`'s plan by object name, and the elements it holds before a run.
type Held = (&'static str, Vec<(Vec<u8>, Vec<u8>)>);

/// Runs `program` of `l` in process `tgid`, every register G, with the maps its
/// relocations name (zeros of their value size, or `given`); the maps of `hashes` are
/// hashes of their plan's shape holding the elements given.
fn run(l: &Lowered, program: &str, tgid: u32, given: &[(&str, Vec<u8>)], hashes: &[Held]) -> Run {
    let (prog, world) = world(l, program, tgid, given, hashes);
    let regs: Vec<u8> = [G; 32].iter().flat_map(|w| w.to_le_bytes()).collect();
    run_probe(prog, &world, &regs).unwrap_or_else(|e| panic!("{e}\n{}", asm(l, program)))
}

/// `program` of `l`, and the world `run` runs it in.
fn world<'l>(
    l: &'l Lowered,
    program: &str,
    tgid: u32,
    given: &[(&str, Vec<u8>)],
    hashes: &[Held],
) -> (&'l crate::bpf::builder::Program, World) {
    let (_, prog) = l.programs.iter().find(|(n, _)| n == program).unwrap_or_else(|| panic!("no {program}"));
    let names = prog.relocations.iter().map(|r| r.map.clone()).collect::<std::collections::BTreeSet<_>>();
    let maps = (names.into_iter())
        .map(|m| {
            let value = given.iter().find(|(n, _)| *n == m).map(|(_, v)| v.clone());
            let size = size_of(l, &m);
            (m, value.unwrap_or_else(|| vec![0u8; size as usize]))
        })
        .collect();
    let pid_tgid = u64::from(tgid) << 32 | u64::from(tgid + 1);
    let mut world = World { maps, pid_tgid, now: NOW, ..World::default() };
    for (name, elements) in hashes {
        let m = l.plan.maps.iter().find(|m| m.object_name == *name).unwrap_or_else(|| panic!("no map {name}"));
        assert_eq!(m.key_size, KEY, "{name} keyed by (g, index, process)");
        let per_cpu = m.kind == crate::plan::MapKind::PercpuHash;
        let spec = HashSpec { key_size: m.key_size, value_size: m.value_size, max_entries: m.max_entries, per_cpu };
        world.hashes.push((name.to_string(), spec));
        world.held.extend(elements.iter().map(|(k, v)| (name.to_string(), k.clone(), v.clone())));
    }
    (prog, world)
}

fn map_after<'r>(run: &'r Run, object: &str) -> &'r [u8] {
    &run.maps.iter().find(|(n, _)| n == object).unwrap_or_else(|| panic!("no map {object}")).1
}

/// Hash map `object`'s elements after `run` (key, value).
fn hash_after<'r>(run: &'r Run, object: &str) -> &'r [(Vec<u8>, Vec<u8>)] {
    &run.hashes.iter().find(|(n, _)| n == object).unwrap_or_else(|| panic!("no hash {object}")).1
}

/// The value of `key` in hash map `object` after `run`.
fn element_after<'r>(run: &'r Run, object: &str, key: &[u8]) -> &'r [u8] {
    let found = hash_after(run, object).iter().find(|(k, _)| k == key);
    &found.unwrap_or_else(|| panic!("{object} holds no {key:?}")).1
}

/// The program attached at main.add's returns (p0) and the one at its entry.
fn programs(l: &Lowered) -> (String, String) {
    let ret = l.plan.probes.iter().find(|p| p.describe.starts_with("on return")).expect("the return").program.clone();
    let entry = (l.plan.probes.iter())
        .find(|p| p.program != ret && l.programs.iter().any(|(n, pr)| *n == p.program && !pr.relocations.is_empty()))
        .filter(|p| !p.describe.starts_with("on return"))
        .map(|p| p.program.clone());
    (ret, entry.unwrap_or_default())
}

#[test]
fn a_return_pops_only_its_own_process_s_frame_of_a_shared_g() {
    let (_, l) = lowered(&target(), "on return main.add { @n = count(); @e = sum(elapsed) }");
    let (ret, _) = programs(&l);
    let size = size_of(&l, GOROUTINES);
    let slot = ((G ^ u64::from(P)).wrapping_mul(SLOT_HASH) >> (64 - SLOT_BITS)) as u32;
    let (count, elapsed) = (&user_map(&l, "n").0.object_name, &user_map(&l, "e").0.object_name);
    let array = [(GOROUTINES, record(size, Some(P), T0))];
    // Its own process's: found in the array slot of (g xor tgid), popped, timed.
    let own = run(&l, &ret, P, &array, &[(GOROUTINES_SPILL, vec![])]);
    let looked = own.lookups.iter().find(|(m, _)| m == GOROUTINES).expect("the array looked up");
    assert_eq!(looked.1, slot.to_le_bytes(), "{}", asm(&l, &ret));
    assert_eq!((u64_at(map_after(&own, count), 0), u64_at(map_after(&own, elapsed), 0)), (1, NOW - T0));
    assert_eq!(u32_at(map_after(&own, GOROUTINES), R_TOP), 0);
    assert!(!own.lookups.iter().any(|(m, _)| m == GOROUTINES_SPILL), "{:?}", own.lookups);
    // Another process's goroutine at the same g: the array's record is not its own, and
    // it has no spilled one: nothing popped, nothing counted.
    let other = run(&l, &ret, Q, &array, &[(GOROUTINES_SPILL, vec![])]);
    assert!(other.lookups.contains(&(GOROUTINES_SPILL.to_string(), key(0, Q))), "{:?}", other.lookups);
    assert_eq!(u32_at(map_after(&other, GOROUTINES), R_TOP), 1, "the other process's frame stays");
    assert_eq!(u64_at(map_after(&other, count), 0), 0);
    // With its own spilled record (entered at NOW - 300): that one is popped.
    let spilled = [(GOROUTINES_SPILL, vec![(key(0, Q), record(size, None, NOW - 300))])];
    let other = run(&l, &ret, Q, &array, &spilled);
    assert_eq!((u64_at(map_after(&other, count), 0), u64_at(map_after(&other, elapsed), 0)), (1, 300));
    assert_eq!(u32_at(element_after(&other, GOROUTINES_SPILL, &key(0, Q)), R_TOP), 0);
    assert_eq!(u32_at(map_after(&other, GOROUTINES), R_TOP), 1, "the other process's frame stays");
}

#[test]
fn an_entry_claims_a_free_slot_with_its_process_and_spills_beside_another_s() {
    let (_, l) = lowered(&target(), "on return main.add { @n = count(); @e = sum(elapsed) }");
    let (_, entry) = programs(&l);
    let size = size_of(&l, GOROUTINES);
    // A free slot: claimed with g and the process, the frame pushed in it.
    let free = run(&l, &entry, P, &[], &[(GOROUTINES_SPILL, vec![])]);
    let rec = map_after(&free, GOROUTINES);
    assert_eq!((u64_at(rec, R_G as usize), u32_at(rec, R_TGID), u32_at(rec, R_TOP)), (G, P, 1), "{}", asm(&l, &entry));
    assert_eq!(u64_at(rec, (R_FRAMES + F_TIME) as usize), NOW);
    // The slot held by the same g of another process: a record of its own, spilled
    // under (g, 0, tgid); the other's record untouched.
    let held = record(size, Some(P), T0);
    let beside = run(&l, &entry, Q, &[(GOROUTINES, held.clone())], &[(GOROUTINES_SPILL, vec![])]);
    assert_eq!(map_after(&beside, GOROUTINES), &held[..]);
    let keys = hash_after(&beside, GOROUTINES_SPILL).iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(keys, vec![key(0, Q)]);
    let rec = element_after(&beside, GOROUTINES_SPILL, &key(0, Q));
    assert_eq!((u32_at(rec, R_TOP), u64_at(rec, (R_FRAMES + F_TIME) as usize)), (1, NOW));
}

#[test]
fn carried_parameters_and_self_variables_are_kept_by_g_index_and_process() {
    let text = "on entry main.add { self.t = 5 } on return main.add { @s = sum(a); @v = sum(self.t) }";
    let (_, l) = lowered(&target(), text);
    let (ret, _) = programs(&l);
    let size = size_of(&l, GOROUTINES);
    let maps = [(GOROUTINES, record(size, Some(Q), T0))];
    // The carried record found (the program ends without it), then `self.t` looked up.
    let carried = vec![(key(0, Q), vec![0u8; size_of(&l, CARRIED) as usize])];
    let r = run(&l, &ret, Q, &maps, &[(CARRIED, carried), (SELF_VARS, vec![]), (GOROUTINES_SPILL, vec![])]);
    let keys = |map: &str| r.lookups.iter().filter(|(m, _)| m == map).map(|(_, k)| k.clone()).collect::<Vec<_>>();
    // The call's frame is number 0 of its goroutine; `t` is self variable 0.
    assert_eq!(keys(CARRIED), vec![key(0, Q)], "{}", asm(&l, &ret));
    assert_eq!(keys(SELF_VARS), vec![key(0, Q)], "{}", asm(&l, &ret));
}

#[test]
fn in_one_process_the_key_holds_process_0_without_a_helper_call() {
    let mut opts = crate::compile::Options::default();
    opts.lowering.one_process = true;
    let text = "on return main.add { @n = count(); @e = sum(elapsed); @p = sum(pid) }";
    let (_, l) = super::tests::lowered_with(&target(), text, &opts);
    let (ret, _) = programs(&l);
    let size = size_of(&l, GOROUTINES);
    let slot = (G.wrapping_mul(SLOT_HASH) >> (64 - SLOT_BITS)) as u32;
    // The record as a program of one process claims it: g, process 0.
    let r = run(&l, &ret, P, &[(GOROUTINES, record(size, Some(0), T0))], &[(GOROUTINES_SPILL, vec![])]);
    let looked = r.lookups.iter().find(|(m, _)| m == GOROUTINES).expect("the array looked up");
    assert_eq!(looked.1, slot.to_le_bytes());
    let (count, elapsed) = (&user_map(&l, "n").0.object_name, &user_map(&l, "e").0.object_name);
    assert_eq!((u64_at(map_after(&r, count), 0), u64_at(map_after(&r, elapsed), 0)), (1, NOW - T0));
    // Only `pid` asks the kernel for the process.
    let text = asm(&l, &ret);
    assert_eq!(text.matches("get_current_pid_tgid").count(), 1, "{text}");
    assert_eq!(u64_at(map_after(&r, &user_map(&l, "p").0.object_name), 0), u64::from(P));
}

/// A goroutine `INLINE` calls deep: its next frame goes to the `frames` hash. When that
/// frame, just inserted, is not found by the lookup after it (another CPU deleted it),
/// the call is not followed, and that is counted as a refusal of `frames` with no
/// errno, as every lost frame is; untouched, the frame is there and nothing counted.
#[test]
fn a_deep_frame_lost_right_after_its_insert_is_counted() {
    let mut opts = crate::compile::Options::default();
    opts.lowering.accounting = true;
    let (_, l) = super::tests::lowered_with(&target(), "on return main.add { @e = sum(elapsed) }", &opts);
    let (_, entry) = programs(&l);
    let mut rec = record(size_of(&l, GOROUTINES), Some(P), T0);
    rec[R_TOP as usize..][..4].copy_from_slice(&(INLINE as u32).to_le_bytes());
    // Each caller's frame above this call (its position higher), the outermost highest.
    for i in 0..INLINE as usize {
        let rel = G + 0x100 * (INLINE as u64 - i as u64);
        rec[R_FRAMES as usize + i * super::layout::FRAME as usize + F_REL as usize..][..8]
            .copy_from_slice(&rel.to_le_bytes());
    }
    let acct = &l.plan.accounting;
    let lost = Counter::Refused { program: entry.clone(), map: FRAMES.into(), why: Refusal::Other };
    let slot = acct.slots.iter().position(|c| *c == lost).unwrap_or_else(|| panic!("no {lost:?}: {:?}", acct.slots));
    let counters = vec![0u8; 8 * acct.slots.len()];
    let given = [(GOROUTINES, rec), (acct.counters.as_str(), counters)];
    let hashes = [(GOROUTINES_SPILL, vec![]), (FRAMES, vec![])];
    let (prog, mut world) = world(&l, &entry, P, &given, &hashes);
    world.arrays.push((acct.counters.clone(), 8));
    let regs: Vec<u8> = [G; 32].iter().flat_map(|w| w.to_le_bytes()).collect();
    for delete in [false, true] {
        let mut m = Machine::new(&world);
        let mut cpu = m.start(prog, &regs);
        let mut deleted = false;
        while cpu.exited.is_none() {
            let touched = m.step(&mut cpu).unwrap_or_else(|e| panic!("{e}\n{}", asm(&l, &entry)));
            if delete && !deleted && touched.contains(&(FRAMES.to_string(), true)) {
                deleted = m.remove(FRAMES, &key(INLINE as u32, P));
                assert!(deleted, "the frame inserted under (g, {INLINE}, process)\n{}", asm(&l, &entry));
            }
        }
        let counted = u64_at(m.map(&acct.counters), 8 * slot);
        assert_eq!(counted, u64::from(delete), "deleted: {delete}\n{}", asm(&l, &entry));
        assert_eq!(m.hash(FRAMES).len(), usize::from(!delete), "deleted: {delete}");
    }
}
