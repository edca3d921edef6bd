//! Reads of the target's memory, run by the interpreter (crate::bpf::interp) on a made-up
//! target: near fields of one object read in one `bpf_probe_read_user` (coalesce.rs),
//! each getting its value, and a failed read of them counted as a read per field was.

use super::tests::{asm, lowered, lowered_with, user_map};
use super::Lowered;
use crate::bpf::interp::{run_probe, Run, World};
use crate::compile::Options;
use crate::gobin::fake::Fake;

/// A target whose `main.finish(w *W)` reaches a `Req` through `w.req`.
fn target() -> Fake {
    Fake::new()
        .structure(
            "main.Req",
            &[("A", "int", 0), ("B", "int32", 8), ("Name", "string", 16), ("Far", "int", 400)],
            0x4a1000,
        )
        .structure("main.W", &[("n", "int", 0), ("req", "*main.Req", 8)], 0x4a2000)
        .function("main.finish", &[("w", "*main.W")], &[])
}

const W: u64 = 0x7000;
const REQ: u64 = 0x8000;

fn words(ws: &[u64]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Runs program p0 of `l` with every register holding `W`, the target's memory `user`.
fn run(l: &Lowered, user: Vec<(u64, Vec<u8>)>) -> Run {
    let (_, prog) = l.programs.iter().find(|(n, _)| n == "p0").expect("p0");
    let maps = (prog.relocations.iter().map(|r| r.map.clone()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|m| (m, vec![0u8; 4096]))
        .collect();
    let world = World { maps, user, unmapped_fails: true, ..World::default() };
    run_probe(prog, &world, &words(&[W; 32])).unwrap_or_else(|e| panic!("{e}\n{}", asm(l, "p0")))
}

/// The first word of a map's value after the run (a sum without keys; the counters).
fn word(run: &Run, object: &str) -> u64 {
    let bytes = &run.maps.iter().find(|(n, _)| n == object).unwrap_or_else(|| panic!("no map {object}")).1;
    u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
}

fn sum(l: &Lowered, run: &Run, name: &str) -> u64 {
    word(run, &user_map(l, name).0.object_name)
}

/// `Req` at REQ: A = 5, B = -3 (an int32, then 4 bytes of padding set), Name = 7 bytes
/// at 0x9000, Far = 1000.
fn req_bytes() -> Vec<u8> {
    let mut bytes = words(&[5, 0xffff_ffff_ffff_fffd, 0x9000, 7]);
    bytes.resize(408, 0);
    bytes[400..408].copy_from_slice(&1000u64.to_le_bytes());
    bytes
}

#[test]
fn near_fields_of_one_object_are_read_in_one_read() {
    let script =
        "on entry main.finish { @a = sum(w.req.A); @b = sum(w.req.B); @n = sum(len(w.req.Name)); @f = sum(w.req.Far) }";
    let (_, l) = lowered(&target(), script);
    let r = run(&l, vec![(W, words(&[1, REQ])), (REQ, req_bytes())]);
    // w.req alone (w.n is not read); A, B and Name's header in one read of 32 bytes;
    // Far, 400 bytes on, in its own.
    assert_eq!(r.reads, vec![(W + 8, 8), (REQ, 32), (REQ + 400, 8)], "\n{}", asm(&l, "p0"));
    let got: Vec<i64> = ["a", "b", "n", "f"].iter().map(|m| sum(&l, &r, m) as i64).collect();
    assert_eq!(got, [5, -3, 7, 1000], "\n{}", asm(&l, "p0"));
}

#[test]
fn fields_taken_from_a_failed_read_count_as_their_own_failed_reads() {
    let script = "on entry main.finish { @a = sum(w.req.A); @b = sum(w.req.B) }";
    let mut opts = Options::default();
    opts.lowering.accounting = true;
    let (_, l) = lowered_with(&target(), script, &opts);
    let counters = |r: &Run| word(r, "counters");
    let good = run(&l, vec![(W, words(&[1, REQ])), (REQ, req_bytes())]);
    assert_eq!(good.reads, vec![(W + 8, 8), (REQ, 12)], "\n{}", asm(&l, "p0"));
    assert_eq!((sum(&l, &good, "a") as i64, sum(&l, &good, "b") as i64), (5, -3));
    // A (8 bytes) and B (an int32) in one read of 12. Every counter of this world is
    // one word: the hit, and each failed read.
    let hit = counters(&good);
    // Req's memory is not there: A and B each a failed read, as two reads were; zero.
    let failed = run(&l, vec![(W, words(&[1, REQ]))]);
    assert_eq!(failed.reads, vec![(W + 8, 8), (REQ, 12)]);
    assert_eq!(counters(&failed) - hit, 2, "\n{}", asm(&l, "p0"));
    assert_eq!((sum(&l, &failed, "a"), sum(&l, &failed, "b")), (0, 0));
    // A nil w.req: the reads fail in the nil page, which Go's own reads fault on: not
    // counted.
    let nil = run(&l, vec![(W, words(&[1, 0]))]);
    assert_eq!(counters(&nil), hit);
    assert_eq!((sum(&l, &nil, "a"), sum(&l, &nil, "b")), (0, 0));
}

/// Spans take at most `MAX_SPANS_STACK` bytes of a program's stack: two spans of 120
/// bytes are more than that, so the second object's fields are read one by one.
#[test]
fn spans_past_their_stack_share_are_read_field_by_field() {
    let fields = [("a", "int", 0), ("b", "int", 112), ("c", "int", 200), ("d", "int", 312)];
    let bin = Fake::new().structure("main.Big", &fields, 0x4a3000).function("main.big", &[("w", "*main.Big")], &[]);
    let (_, l) = lowered(&bin, "on entry main.big { @s = sum(w.a + w.b + w.c + w.d) }");
    // a = 1, b = 2, c = 3, d = 4 at their offsets.
    let mut big = vec![0u64; 40];
    (big[0], big[14], big[25], big[39]) = (1, 2, 3, 4);
    let big = words(&big);
    let r = run(&l, vec![(W, big)]);
    assert_eq!(r.reads, vec![(W, 120), (W + 200, 8), (W + 312, 8)], "\n{}", asm(&l, "p0"));
    assert_eq!(sum(&l, &r, "s"), 1 + 2 + 3 + 4, "\n{}", asm(&l, "p0"));
}
