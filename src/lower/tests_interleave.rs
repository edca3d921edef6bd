//! One slotted map's operations run at once on two CPUs (slotted.rs), interleaved one
//! instruction at a time by the interpreter (`Machine::step`): every schedule of the
//! two programs' accesses to the slots and the spill, up to a number of switches from
//! one CPU to the other while it could go on, and each outcome checked against the same
//! operations done one at a time on a plain map, in some order that keeps each CPU's
//! order and every operation that ended before another began before it (what a hash's
//! operations give). The schedules include the review's races of the lock-free slots: a
//! set delayed between its tag test and its value while the key is taken and its slot
//! claimed by another, a read delayed the same way, two sets of one key of which one
//! spills while the other claims.

use super::slotted::{busy_why, slot_index, LOCK, SLOT_BYTES, SPILLED, TAG, TRIES, VALUE};
use super::tests::{lowered_named, user_map};
use super::tests_slotted::{colliding, regs, slots_of, word, world, LIBRARY};
use super::Lowered;
use crate::bpf::interp::{Cpu, Machine, World};
use crate::compile::Options;
use crate::gobin::fake::Fake;
use crate::plan::Counter;
use std::collections::BTreeMap;

/// Each operation's result kept under its own key (the second argument), so that two
/// probes' outputs never share an element.
const SCRIPT: &str = "
on entry main.set { @_t[r] = v }
on entry main.get { @got[v] = @_t[r] }
on entry main.del { delete(@_t[r]) }
on entry main.take { @took[v] = take(@_t[r]) }";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Set(u64, u64),
    Get(u64),
    Del(u64),
    Take(u64),
}

/// An operation done: by which CPU, its place in that CPU's list, the first and last
/// of the schedule's steps it made, what it gave (a read's or take's value), and
/// whether it ended skipped (its slot held through every try).
#[derive(Clone, Debug)]
struct Done {
    cpu: usize,
    op: Op,
    start: usize,
    end: usize,
    got: u64,
    skipped: bool,
}

/// Every probed function takes the key and a value (the set's, or an output's key).
fn target() -> Fake {
    let args = [("r", "*main.Req"), ("v", "int")];
    let fake = Fake::new().structure("main.Req", &[("A", "int", 0)], 0x4a1000);
    ["main.set", "main.get", "main.del", "main.take"].iter().fold(fake, |f, name| f.function(name, &args, &[]))
}

fn lower(size: u32) -> Lowered {
    let mut opts = Options::default();
    opts.lowering.accounting = true;
    opts.lowering.map_sizes.maps.push(("_t".into(), size));
    lowered_named(&target(), LIBRARY, SCRIPT, &opts).1
}

/// The operations of every CPU and how far each has got.
#[derive(Clone)]
struct State<'w, 'l> {
    m: Machine<'w>,
    /// Each CPU's next operation, and the program running it (once started), its first
    /// step and whether it has stored to the slots (taken a lock: else it is skipped).
    next: Vec<usize>,
    running: Vec<Option<(Cpu<'l>, usize, bool)>>,
    steps: usize,
    done: Vec<Done>,
}

struct Explorer<'l> {
    l: &'l Lowered,
    ops: Vec<Vec<Op>>,
    slots: String,
    spill: String,
    bits: u32,
    schedules: usize,
}

impl<'l> Explorer<'l> {
    fn program(&self, op: Op) -> (&'l crate::bpf::builder::Program, Vec<u8>) {
        let (name, a, b) = match op {
            Op::Set(k, v) => ("p0", k, v),
            Op::Get(k) => ("p1", k, op_id(op)),
            Op::Del(k) => ("p2", k, 0),
            Op::Take(k) => ("p3", k, op_id(op)),
        };
        let (_, prog) = self.l.programs.iter().find(|(n, _)| n == name).expect("the program");
        (prog, regs(a, b))
    }

    /// The skipped hits counted so far, of every program.
    fn skips(&self, m: &Machine) -> u64 {
        let acct = &self.l.plan.accounting;
        let counters = m.map(&acct.counters);
        (acct.slots.iter().enumerate())
            .filter(|(_, c)| matches!(c, Counter::Skipped { why, .. } if *why == busy_why("_t")))
            .map(|(i, _)| word(counters, 8 * i))
            .sum()
    }

    /// Runs CPU `c` to its next step that touches the slots or the spill (starting its
    /// next operation first, if none is running), or to its operation's end. Whether
    /// that step changed nothing shared (a try of a held lock).
    fn advance(&self, s: &mut State<'_, 'l>, c: usize) -> bool {
        if s.running[c].is_none() {
            let (prog, regs) = self.program(self.ops[c][s.next[c]]);
            s.running[c] = Some((s.m.start(prog, &regs), s.steps, false));
        }
        let (mut cpu, start, mut locked) = s.running[c].take().expect("running");
        let mut idle = false;
        for _ in 0..100_000 {
            let touched = s.m.step(&mut cpu).unwrap_or_else(|e| panic!("{e}"));
            if let Some(_r0) = cpu.exited {
                let op = self.ops[c][s.next[c]];
                let got = match op {
                    Op::Get(_) => self.output(&s.m, "got", op_id(op)),
                    Op::Take(_) => self.output(&s.m, "took", op_id(op)),
                    _ => 0,
                };
                s.done.push(Done { cpu: c, op, start, end: s.steps, got, skipped: !locked });
                s.next[c] += 1;
                return false;
            }
            let shared: Vec<bool> =
                touched.iter().filter(|(n, _)| *n == self.slots || *n == self.spill).map(|(_, w)| *w).collect();
            locked |= touched.iter().any(|(n, w)| *n == self.slots && *w);
            if !shared.is_empty() {
                idle = !shared.contains(&true);
                s.steps += 1;
                break;
            }
        }
        s.running[c] = Some((cpu, start, locked));
        idle
    }

    /// The value of key `id` of the plain map `@name` (0 when absent).
    fn output(&self, m: &Machine, name: &str, id: u64) -> u64 {
        let object = &user_map(self.l, name).0.object_name;
        let got = m.hash(object);
        got.iter().find(|(k, _)| k[..8] == id.to_le_bytes()).map_or(0, |(_, v)| word(v, 0))
    }

    /// Every schedule from `s` with at most `switches` more switches away from a CPU that
    /// could go on (`last` the CPU that made the last step; `idle` whether it tried a
    /// held lock: its next tries are made at once, not one switch each).
    fn explore(
        &mut self,
        s: State<'_, 'l>,
        last: Option<usize>,
        idle: bool,
        switches: usize,
        pre: &BTreeMap<u64, u64>,
    ) {
        let lens: Vec<usize> = self.ops.iter().map(Vec::len).collect();
        let live = |s: &State, c: usize| s.next[c] < lens[c];
        if (0..lens.len()).all(|c| !live(&s, c)) {
            self.schedules += 1;
            self.check(&s, pre);
            return;
        }
        for c in (0..lens.len()).filter(|c| live(&s, *c)) {
            let switch = last.is_some_and(|p| p != c && live(&s, p));
            if switch && switches == 0 {
                continue;
            }
            let mut next = s.clone();
            let mut now_idle = self.advance(&mut next, c);
            // A held lock's tries after the first are made at once: the schedules
            // between them differ only in how many tries are left.
            while now_idle && idle && last == Some(c) && next.running[c].is_some() {
                now_idle = self.advance(&mut next, c);
            }
            self.explore(next, Some(c), now_idle, switches - usize::from(switch), pre);
        }
    }

    /// The outcome of one schedule: the slots and spill consistent, and the results and
    /// the map's contents those of the operations in some order a hash allows.
    fn check(&self, s: &State, pre: &BTreeMap<u64, u64>) {
        let slots = s.m.map(&self.slots);
        let spill: Vec<(u64, u64)> = s.m.hash(&self.spill).iter().map(|(k, v)| (word(k, 0), word(v, 0))).collect();
        let mut held = BTreeMap::new();
        for i in 0..(1u32 << self.bits) {
            let at = (i * SLOT_BYTES) as usize;
            let field = |off: i16| word(slots, at + off as usize);
            assert_eq!(field(LOCK), 0, "slot {i} left locked: {:?}", s.done);
            let spilled = spill.iter().filter(|(k, _)| slot_index(*k, self.bits) == i).count() as u64;
            assert_eq!(field(SPILLED), spilled, "slot {i}'s count of spilled keys: {:?}", s.done);
            if field(TAG) != 0 {
                held.insert(field(TAG), field(VALUE));
            }
        }
        for (k, v) in &spill {
            assert!(held.insert(*k, *v).is_none(), "key {k:#x} in its slot and the spill: {:?}", s.done);
        }
        let skipped = s.done.iter().filter(|d| d.skipped).count() as u64;
        assert_eq!(self.skips(&s.m), skipped, "skips counted: {:?}", s.done);
        let done: Vec<&Done> = s.done.iter().filter(|d| !d.skipped).collect();
        assert!(
            orders(&done)
                .iter()
                .any(|order| replay(pre, order) == (held.clone(), order.iter().map(|d| d.got).collect())),
            "no order of the operations gives this outcome: map {held:x?}, done {:#?}",
            s.done
        );
    }
}

/// The output key of a read or take: its key and kind, distinct per operation.
fn op_id(op: Op) -> u64 {
    match op {
        Op::Get(k) => k ^ 1,
        Op::Take(k) => k ^ 2,
        _ => 0,
    }
}

/// The operations done one at a time on a plain map holding `pre`: what it holds after,
/// and each operation's result.
fn replay(pre: &BTreeMap<u64, u64>, order: &[&Done]) -> (BTreeMap<u64, u64>, Vec<u64>) {
    let mut map = pre.clone();
    let mut got = Vec::new();
    for d in order {
        got.push(match d.op {
            Op::Set(k, v) => {
                map.insert(k, v);
                0
            }
            Op::Get(k) => map.get(&k).copied().unwrap_or(0),
            Op::Del(k) => {
                map.remove(&k);
                0
            }
            Op::Take(k) => map.remove(&k).unwrap_or(0),
        });
    }
    (map, got)
}

/// Every order of `done` that keeps each CPU's order and puts an operation that ended
/// before another began before it.
fn orders<'d>(done: &[&'d Done]) -> Vec<Vec<&'d Done>> {
    if done.is_empty() {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for (i, d) in done.iter().enumerate() {
        let first_of_cpu = done[..i].iter().all(|e| e.cpu != d.cpu);
        let nothing_before = done.iter().all(|e| e.end > d.start || std::ptr::eq(*e, *d));
        if first_of_cpu && nothing_before {
            let rest: Vec<&Done> = done.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, e)| *e).collect();
            for mut tail in orders(&rest) {
                tail.insert(0, d);
                out.push(tail);
            }
        }
    }
    out
}

/// Explores every schedule of `ops` (one list per CPU) with at most `switches` switches,
/// after `pre` is set one key at a time; how many schedules ran.
fn explore(l: &Lowered, pre: &[(u64, u64)], ops: Vec<Vec<Op>>, switches: usize) -> usize {
    let w: World = world(l);
    let (slots, bits) = slots_of(l);
    let spill = user_map(l, "_t").0.object_name.clone();
    let mut ex =
        Explorer { l, ops: vec![pre.iter().map(|(k, v)| Op::Set(*k, *v)).collect()], slots, spill, bits, schedules: 0 };
    // The keys set before, alone.
    let mut s = State { m: Machine::new(&w), next: vec![0], running: vec![None], steps: 0, done: Vec::new() };
    while s.next[0] < ex.ops[0].len() {
        ex.advance(&mut s, 0);
    }
    let n = ops.len();
    ex.ops = ops;
    let s = State { m: s.m, next: vec![0; n], running: vec![None; n], steps: 0, done: Vec::new() };
    let pre: BTreeMap<u64, u64> = pre.iter().copied().collect();
    ex.explore(s, None, false, switches, &pre);
    ex.schedules
}

#[test]
fn two_operations_of_one_key_at_once_in_every_schedule() {
    let l = lower(4);
    let (_, bits) = slots_of(&l);
    let [k, j] = colliding(bits, 2, 2)[..] else { unreachable!() };
    type Case = (Vec<(u64, u64)>, Op, Op);
    let cases: Vec<Case> = vec![
        (vec![], Op::Set(k, 1), Op::Set(k, 2)),
        (vec![(k, 1)], Op::Set(k, 2), Op::Take(k)),
        (vec![(k, 1)], Op::Take(k), Op::Take(k)),
        (vec![(k, 1)], Op::Get(k), Op::Take(k)),
        (vec![(k, 1)], Op::Get(k), Op::Set(k, 2)),
        (vec![(k, 1)], Op::Set(k, 2), Op::Del(k)),
        // k's slot held by j: k spilled.
        (vec![(j, 9)], Op::Set(k, 1), Op::Set(k, 2)),
        (vec![(j, 9), (k, 1)], Op::Take(k), Op::Take(k)),
        (vec![(j, 9), (k, 1)], Op::Get(k), Op::Del(j)),
        (vec![(j, 9)], Op::Set(k, 1), Op::Take(j)),
    ];
    for (pre, a, b) in cases {
        let n = explore(&l, &pre, vec![vec![a], vec![b]], usize::MAX);
        assert!(n > 2, "{a:?} and {b:?}: {n} schedules");
    }
}

#[test]
fn the_reviews_races_in_every_schedule_of_three_switches() {
    let l = lower(4);
    let (_, bits) = slots_of(&l);
    let [k, j] = colliding(bits, 1, 2)[..] else { unreachable!() };
    // A set of k delayed while k is taken and j claims the slot.
    explore(&l, &[(k, 1)], vec![vec![Op::Set(k, 5)], vec![Op::Take(k), Op::Set(j, 7), Op::Get(j)]], 3);
    // A read of k delayed the same way.
    explore(&l, &[(k, 1)], vec![vec![Op::Get(k)], vec![Op::Take(k), Op::Set(j, 7)]], 3);
    // Two sets of k, one spilling (j holds the slot) while the other claims it freed.
    explore(&l, &[(j, 9)], vec![vec![Op::Set(k, 1)], vec![Op::Take(j), Op::Set(k, 2), Op::Get(k)]], 3);
}

/// A probe whose slot another holds through all its tries ends its hit counted as
/// skipped, the map unchanged; the holder then finishes as if alone.
#[test]
fn a_slot_held_through_every_try_skips_the_hit_counted() {
    let l = lower(4);
    let (_, bits) = slots_of(&l);
    let [k] = colliding(bits, 0, 1)[..] else { unreachable!() };
    let w = world(&l);
    let (slots, _) = slots_of(&l);
    let spill = user_map(&l, "_t").0.object_name.clone();
    let ex = Explorer { l: &l, ops: vec![vec![Op::Set(k, 1)], vec![Op::Take(k)]], slots, spill, bits, schedules: 0 };
    let mut s = State { m: Machine::new(&w), next: vec![0, 0], running: vec![None, None], steps: 0, done: Vec::new() };
    // CPU 0 takes the lock (its first step on the slot) and stops there.
    ex.advance(&mut s, 0);
    assert_eq!(word(s.m.map(&ex.slots), 0), 1, "CPU 0 holds the lock");
    // CPU 1 tries TRIES times and ends.
    let mut tries = 0;
    while s.next[1] == 0 {
        ex.advance(&mut s, 1);
        tries += 1;
    }
    assert_eq!(tries, TRIES as usize + 1, "one step a try, then the end");
    assert!(s.done[0].skipped && s.done[0].got == 0, "{:?}", s.done);
    assert_eq!(ex.skips(&s.m), 1);
    while s.next[0] == 0 {
        ex.advance(&mut s, 0);
    }
    let at = (slot_index(k, bits) * SLOT_BYTES) as usize;
    assert_eq!((word(s.m.map(&ex.slots), at + TAG as usize), word(s.m.map(&ex.slots), at)), (k, 0), "set, released");
}

/// A lock freed while another operation is in its rounds of tries is taken by the try
/// after, in the middle of a round: the round's later tries find it held (by that
/// operation) and change nothing, the operation holds it once, does its work and frees
/// it, not skipped; so for a release after each try of the first two rounds.
#[test]
fn a_lock_freed_in_the_middle_of_a_round_is_taken_once_by_the_next_try() {
    let l = lower(4);
    let (slots, bits) = slots_of(&l);
    let [k] = colliding(bits, 0, 1)[..] else { unreachable!() };
    let w = world(&l);
    let spill = user_map(&l, "_t").0.object_name.clone();
    let at = (slot_index(k, bits) * SLOT_BYTES) as usize;
    for held_for in 1..=(1 + 2 * super::slotted::ROUND_TRIES as usize) {
        let ops = vec![vec![Op::Set(k, 1)], vec![Op::Set(k, 2)]];
        let ex = Explorer { l: &l, ops, slots: slots.clone(), spill: spill.clone(), bits, schedules: 0 };
        let mut s =
            State { m: Machine::new(&w), next: vec![0, 0], running: vec![None, None], steps: 0, done: Vec::new() };
        // CPU 0 takes the lock; CPU 1 tries `held_for` times meanwhile.
        ex.advance(&mut s, 0);
        for _ in 0..held_for {
            assert!(ex.advance(&mut s, 1), "a try of a held lock changes nothing");
        }
        while s.next[0] == 0 {
            ex.advance(&mut s, 0);
        }
        assert_eq!(word(s.m.map(&ex.slots), at + LOCK as usize), 0, "CPU 0 freed the lock");
        // CPU 1's next try takes it, its round's later tries change nothing.
        assert!(!ex.advance(&mut s, 1), "the next try takes the lock");
        assert_eq!(word(s.m.map(&ex.slots), at + LOCK as usize), 1);
        while s.next[1] == 0 {
            ex.advance(&mut s, 1);
        }
        assert!(s.done.iter().all(|d| !d.skipped), "after {held_for} tries: {:?}", s.done);
        let slot = |off: i16| word(s.m.map(&ex.slots), at + off as usize);
        assert_eq!((slot(LOCK), slot(TAG), slot(VALUE)), (0, k, 2), "after {held_for} tries: the second set, freed");
        assert_eq!(ex.skips(&s.m), 0);
    }
}
