//! A private map kept by one pointer in slots (slotted.rs), run by the interpreter
//! (crate::bpf::interp) through set, read, delete and take probes in turn, against the
//! same map kept as a hash: a key claims its free slot, a key whose slot another holds
//! is spilled, a delete releases the slot, and a key the full spill refuses is counted.

use super::slotted::{slot_index, LOCK, SLOT_BYTES, SPILLED, TAG, VALUE};
use super::tests::{asm, lowered_named, user_map};
use super::Lowered;
use crate::bpf::interp::{HashSpec, Machine, World};
use crate::compile::Options;
use crate::gobin::fake::Fake;
use crate::plan::{Counter, MapKind, MapRole, Refusal};

const SCRIPT: &str = "
on entry main.set { @_t[r] = v }
on entry main.get { @got[1] = @_t[r] }
on entry main.del { delete(@_t[r]) }
on entry main.take { @took[1] = take(@_t[r]) }";

pub(super) fn target() -> Fake {
    Fake::new()
        .structure("main.Req", &[("A", "int", 0)], 0x4a1000)
        .function("main.set", &[("r", "*main.Req"), ("v", "int")], &[])
        .function("main.get", &[("r", "*main.Req")], &[])
        .function("main.del", &[("r", "*main.Req")], &[])
        .function("main.take", &[("r", "*main.Req")], &[])
}

/// The script lowered as a library's with `@_t` of `size` keys, every hit and refusal
/// counted.
fn lower(size: u32) -> Lowered {
    let mut opts = Options::default();
    opts.lowering.accounting = true;
    opts.lowering.map_sizes.maps.push(("_t".into(), size));
    lowered_named(&target(), LIBRARY, SCRIPT, &opts).1
}

/// The name a library's file has.
pub(super) const LIBRARY: &str = "stdlib/slots.gt";

/// The world of `l`'s programs: the slots and the counters as arrays, the hashes as
/// hashes of their plan's shapes, every other map one zeroed value.
pub(super) fn world(l: &Lowered) -> World {
    // Each hit counted at a slot past the counters (the cookie's): not among the refusals.
    let past = l.plan.accounting.slots.len() as u64;
    let mut world = World { cookie: past << crate::plan::COOKIE_SLOT_SHIFT, ..World::default() };
    for m in &l.plan.maps {
        let bytes = (m.value_size.next_multiple_of(8) * m.max_entries.min(4096)) as usize;
        world.maps.push((m.object_name.clone(), vec![0; bytes.max(4096)]));
        match m.kind {
            MapKind::Hash => {
                let spec = HashSpec {
                    key_size: m.key_size,
                    value_size: m.value_size,
                    max_entries: m.max_entries,
                    per_cpu: false,
                };
                world.hashes.push((m.object_name.clone(), spec));
            }
            MapKind::Array | MapKind::PercpuArray if m.max_entries > 1 => {
                world.arrays.push((m.object_name.clone(), m.value_size.next_multiple_of(8)))
            }
            _ => {}
        }
    }
    world
}

/// pt_regs (amd64) with the first integer argument (RAX) `a` and the second (RBX) `b`.
pub(super) fn regs(a: u64, b: u64) -> Vec<u8> {
    let mut words = [0u64; 21];
    (words[10], words[5]) = (a, b);
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

struct Run<'l, 'w> {
    l: &'l Lowered,
    m: Machine<'w>,
}

impl Run<'_, '_> {
    fn probe(&mut self, program: &str, a: u64, b: u64) {
        let (_, prog) = self.l.programs.iter().find(|(n, _)| n == program).expect("the program");
        self.m.run_probe(prog, &regs(a, b)).unwrap_or_else(|e| panic!("{e}\n{}", asm(self.l, program)));
    }

    fn set(&mut self, r: u64, v: u64) {
        self.probe("p0", r, v);
    }

    /// `@_t[r]` as a probe reads it.
    fn get(&mut self, r: u64) -> u64 {
        self.probe("p1", r, 0);
        self.plain("got")
    }

    fn del(&mut self, r: u64) {
        self.probe("p2", r, 0);
    }

    fn take(&mut self, r: u64) -> u64 {
        self.probe("p3", r, 0);
        self.plain("took")
    }

    /// The value of key 1 of the plain map `@name`.
    fn plain(&self, name: &str) -> u64 {
        let object = &user_map(self.l, name).0.object_name;
        let got = self.m.hash(object);
        got.iter().find(|(k, _)| k[..8] == 1u64.to_le_bytes()).map_or(0, |(_, v)| word(v, 0))
    }

    /// The slot `i` of `@_t`: (tag, value, spilled); its lock released.
    fn slot(&self, i: u32) -> (u64, u64, u64) {
        let bytes = self.m.map(&slots_of(self.l).0);
        let at = (i * SLOT_BYTES) as usize;
        let field = |off: i16| word(bytes, at + off as usize);
        assert_eq!(field(LOCK), 0, "slot {i} left locked");
        (field(TAG), field(VALUE), field(SPILLED))
    }

    /// `@_t`'s spill: its keys and values.
    fn spill(&self) -> Vec<(u64, u64)> {
        let object = &user_map(self.l, "_t").0.object_name;
        self.m.hash(object).iter().map(|(k, v)| (word(k, 0), word(v, 0))).collect()
    }

    /// The updates of `@_t` refused as full, by every program.
    fn refused_full(&self) -> u64 {
        let object = &user_map(self.l, "_t").0.object_name;
        let acct = &self.l.plan.accounting;
        let counters = self.m.map(&acct.counters);
        (acct.slots.iter().enumerate())
            .filter(|(_, c)| matches!(c, Counter::Refused { map, why: Refusal::Full, .. } if map == object))
            .map(|(i, _)| word(counters, 8 * i))
            .sum()
    }
}

pub(super) fn word(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// The object name and size in bits of `@_t`'s slots.
pub(super) fn slots_of(l: &Lowered) -> (String, u32) {
    let object = &user_map(l, "_t").0.object_name;
    let m =
        (l.plan.maps.iter()).find(|m| matches!(&m.role, MapRole::Slots { of } if of == object)).expect("@_t has slots");
    (m.object_name.clone(), m.max_entries.trailing_zeros())
}

/// `n` addresses (8-aligned, as Go's objects are) whose slot is `slot`.
pub(super) fn colliding(bits: u32, slot: u32, n: usize) -> Vec<u64> {
    (1..).map(|i: u64| 0xc000_0000_0000 + 8 * i).filter(|a| slot_index(*a, bits) == slot).take(n).collect()
}

#[test]
fn a_key_claims_its_free_slot_and_a_delete_releases_it() {
    let l = lower(4);
    let w = world(&l);
    let mut run = Run { l: &l, m: Machine::new(&w) };
    let (_, bits) = slots_of(&l);
    assert_eq!(bits, 2, "4 keys: 4 slots");
    let [k] = colliding(bits, 1, 1)[..] else { unreachable!() };
    assert_eq!(run.get(k), 0, "absent before it is set");
    run.set(k, 7);
    assert_eq!(run.slot(1), (k, 7, 0), "claimed");
    assert!(run.spill().is_empty());
    assert_eq!(run.get(k), 7);
    run.set(k, 8);
    assert_eq!(run.slot(1), (k, 8, 0), "set again in place");
    run.del(k);
    assert_eq!(run.slot(1), (0, 8, 0), "released: its tag freed (a claim writes its value)");
    assert_eq!(run.get(k), 0, "absent once deleted");
    run.set(k, 9);
    assert_eq!(run.take(k), 9, "taken");
    assert_eq!(run.slot(1), (0, 9, 0), "released by the take");
    assert_eq!(run.take(k), 0, "taken once");
    assert!(run.spill().is_empty(), "never in the hash");
}

#[test]
fn a_key_whose_slot_another_holds_is_spilled_and_found_there() {
    let l = lower(4);
    let w = world(&l);
    let mut run = Run { l: &l, m: Machine::new(&w) };
    let (_, bits) = slots_of(&l);
    let [a, b, c] = colliding(bits, 3, 3)[..] else { unreachable!() };
    run.set(a, 1);
    run.set(b, 2);
    assert_eq!(run.slot(3), (a, 1, 1), "b spilled, counted in a's slot");
    assert_eq!(run.spill(), vec![(b, 2)]);
    assert_eq!((run.get(a), run.get(b), run.get(c)), (1, 2, 0));
    // a's slot freed while b is spilled: c (not in the spill) claims it, b (in the
    // spill) is set there in place (a key is never in its slot and the spill both).
    run.del(a);
    assert_eq!(run.slot(3), (0, 1, 1));
    run.set(c, 3);
    assert_eq!(run.slot(3), (c, 3, 1));
    assert_eq!((run.get(a), run.get(b), run.get(c)), (0, 2, 3));
    run.del(c);
    run.set(b, 4);
    assert_eq!(run.slot(3), (0, 3, 1), "in place in the spill, not counted twice");
    assert_eq!(run.spill(), vec![(b, 4)]);
    assert_eq!(run.take(b), 4);
    assert_eq!(run.slot(3), (0, 3, 0), "nothing spilled");
    assert!(run.spill().is_empty());
    // The slot is claimed again.
    run.set(c, 5);
    assert_eq!(run.slot(3), (c, 5, 0));
    assert_eq!(run.refused_full(), 0);
}

#[test]
fn a_key_the_full_spill_refuses_is_counted() {
    let l = lower(2);
    let w = world(&l);
    let mut run = Run { l: &l, m: Machine::new(&w) };
    let (_, bits) = slots_of(&l);
    assert_eq!(bits, 1);
    let keys = colliding(bits, 0, 4);
    for (i, k) in keys.iter().enumerate() {
        run.set(*k, 10 + i as u64);
    }
    // One in the slot, two in the spill (its size, --map-size @_t=2), the fourth refused.
    assert_eq!(run.slot(0), (keys[0], 10, 2));
    assert_eq!(run.spill().len(), 2);
    assert_eq!(run.refused_full(), 1);
    assert_eq!(run.get(keys[3]), 0, "the refused key is absent");
    assert_eq!((run.get(keys[1]), run.get(keys[2])), (11, 12));
    // Room again once one is deleted.
    run.del(keys[1]);
    assert_eq!(run.slot(0).2, 1);
    run.set(keys[3], 13);
    assert_eq!((run.get(keys[3]), run.refused_full()), (13, 1));
}

#[test]
fn keys_that_can_hold_no_slot_and_maps_named_whole_use_the_hash() {
    let l = lower(4);
    let w = world(&l);
    let mut run = Run { l: &l, m: Machine::new(&w) };
    // nil: never a slot's tag (0 is a free slot's).
    run.set(0, 5);
    assert_eq!(run.spill(), vec![(0, 5)]);
    assert_eq!(run.get(0), 5);
    assert_eq!(run.take(0), 5);
    assert!(run.spill().is_empty());
    assert_eq!(run.slot(0).2, 0, "its count back to 0");
    // A private map printed whole, a shown map, and one keyed by a string: hashes; the
    // slotted script as a user's (an -e script, a file) is slotted as a library's is.
    let mut opts = Options::default();
    opts.lowering.accounting = true;
    let slotted = |name: &str, script: &str| {
        let (_, l) = lowered_named(&target(), name, script, &opts);
        l.plan.maps.iter().any(|m| matches!(m.role, MapRole::Slots { .. }))
    };
    for script in [
        "on entry main.set { @_t[r] = v } on entry main.get { print(@_t) }",
        "on entry main.set { @t[r] = v }",
        "on entry main.set { @_t[\"x\"] = v }",
    ] {
        assert!(!slotted(LIBRARY, script), "{script}");
    }
    assert!(slotted(LIBRARY, SCRIPT));
    assert!(slotted("<-e>", SCRIPT), "a user's script's map");
    assert!(slotted("/home/u/t.gt", SCRIPT), "a user's file's map");
}
