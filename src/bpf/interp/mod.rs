//! Runs a program's instructions without a kernel, for tests of what the lowering
//! computes (tests/aeshash.rs: the runtime's map hash against a Go program's own). It
//! knows what such code uses: 64- and 32-bit ALU operations, loads and stores of every
//! width, jumps, `ld_imm64` (a map reference gives that map's value address), and the
//! helpers `map_lookup_elem` (an array map's one value, or its element by index when
//! the world says its elements' size, or a hash map's element by key),
//! `map_update_elem` and `map_delete_elem` of hash maps (with the kernel's errnos: full,
//! present under BPF_NOEXIST, absent under BPF_EXIST or at a delete; an update of a
//! key held puts a new element in, as the kernel's does, but a per-CPU hash's writes the
//! one held in place, as the kernel's does; a hash may hold elements before the run), `map_update_elem` of an array map's one value,
//! `probe_read_user` (from the regions given as the target's memory),
//! `get_attach_cookie` (the world's, 0 unless set),
//! `get_current_pid_tgid` and `ktime_get_ns` (the world's), the atomic add, fetch-add,
//! exchange and compare-and-exchange; kfunc calls do nothing. A `Machine` keeps the maps
//! between runs (several probes in turn), or runs several programs at once, one
//! instruction of one CPU at a time, saying which maps each touched (the interleavings
//! of lower/tests_interleave.rs). `run_probe` runs a
//! probe's program on given registers and says what it read of the target and what its
//! maps hold after (src/lower/paths.rs's tests: a pointer path read once). Memory is a few
//! regions at made-up addresses; an access outside them, an unknown instruction, a
//! failed read (unless the world says reads of what it was not given fail, as the
//! kernel's do) or too many steps is an error, never a guess.
//!
//! Here the world, the machine, its CPUs and the runs; memory.rs holds the regions,
//! step.rs runs one instruction, helpers.rs the helpers.

mod helpers;
mod memory;
mod step;

use super::builder::Program;
use memory::Memory;
use step::step;
use thiserror::Error;

/// Where the stack's 512 bytes end (R10), and where map values start.
const STACK_TOP: u64 = 0x1000_0000;
const STACK_SIZE: u64 = 512;
const MAPS: u64 = 0x2000_0000;
/// How far apart the maps' values are: room for `(CTX - MAPS) / MAP_SPAN` maps.
const MAP_SPAN: u64 = 0x100_0000;
/// Where hash maps' elements are put, one region each, this far apart.
const ELEMENTS: u64 = 0x4000_0000;
const ELEMENT_SPAN: u64 = 0x1000;
/// At most this many instructions run (the programs tested loop a few times at most).
const MAX_STEPS: usize = 1_000_000;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum InterpError {
    #[error("instruction {pc} ({code:#04x}) is not one the interpreter knows")]
    Unknown { pc: usize, code: u8 },
    #[error("instruction {pc} touches {len} bytes at {addr:#x}, outside every region")]
    Fault { pc: usize, addr: u64, len: u64 },
    #[error("instruction {pc} reads {len} bytes of the target at {addr:#x}, which it was not given")]
    UserFault { pc: usize, addr: u64, len: u64 },
    #[error("instruction {pc} references map {name}, which was not given")]
    NoMap { pc: usize, name: String },
    #[error("more than {MAX_STEPS} instructions ran")]
    TooLong,
}

/// What a program runs against: its maps' one value each (by name), and the target's
/// memory (address, bytes); with `unmapped_fails`, a read of memory not given fails as
/// the kernel's does (-EFAULT, the destination zeroed) instead of stopping the run.
/// A map not named in `arrays` or `hashes` is an array of one value whatever the key.
/// `pid_tgid` and `now` are what the helpers return.
#[derive(Clone, Default)]
pub struct World {
    pub maps: Vec<(String, Vec<u8>)>,
    pub user: Vec<(u64, Vec<u8>)>,
    pub unmapped_fails: bool,
    pub pid_tgid: u64,
    pub now: u64,
    /// Maps of `maps` that are arrays of elements of this many bytes, looked up by index
    /// (the others give their one value whatever the key).
    pub arrays: Vec<(String, u32)>,
    /// Maps of `maps` that are hashes (their bytes unused): found, updated and deleted
    /// by key, as the kernel's are.
    pub hashes: Vec<(String, HashSpec)>,
    /// Elements of `hashes` there before the run: the map, a key, its value.
    pub held: Vec<(String, Vec<u8>, Vec<u8>)>,
    /// What `get_attach_cookie` returns.
    pub cookie: u64,
}

/// A hash map's shape: its key's and value's sizes, how many elements it holds, and
/// whether it is per-CPU (`BPF_MAP_TYPE_PERCPU_HASH`: an update of a key it holds writes
/// the element in place, as the kernel's `__htab_percpu_map_update_elem` does; a plain
/// hash's links a new element in).
#[derive(Clone, Copy, Debug)]
pub struct HashSpec {
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub per_cpu: bool,
}

/// A world whose maps live on from one run to the next (probes run in turn, or at once
/// on several CPUs an instruction at a time: `start`, `step`).
#[derive(Clone)]
pub struct Machine<'w> {
    world: &'w World,
    mem: Memory,
}

impl<'w> Machine<'w> {
    pub fn new(world: &'w World) -> Machine<'w> {
        Machine { world, mem: Memory::new(world) }
    }

    /// Runs `prog` with R1 pointing at `regs`; the maps keep what it did.
    pub fn run_probe(&mut self, prog: &Program, regs: &[u8]) -> Result<u64, InterpError> {
        self.mem.regions.push((CTX, regs.to_vec()));
        let r0 = execute(prog, self.world, CTX, &mut self.mem, &mut Vec::new());
        self.mem.regions.retain(|(base, _)| *base != CTX);
        r0
    }

    /// `prog` ready to run on a CPU of its own with R1 pointing at `regs`.
    pub fn start<'p>(&self, prog: &'p Program, regs: &[u8]) -> Cpu<'p> {
        let mut r = [0u64; 11];
        (r[1], r[10]) = (CTX, STACK_TOP);
        Cpu { prog, r, pc: 0, stack: vec![0; STACK_SIZE as usize], ctx: regs.to_vec(), exited: None }
    }

    /// Runs one instruction of `cpu` (on its own stack and context): the names of the
    /// maps whose memory it touched, each with whether it stored (an update or delete of
    /// a hash's, a failed compare-and-exchange not). Once it has exited, `cpu.exited`
    /// holds its R0.
    pub fn step(&mut self, cpu: &mut Cpu) -> Result<Vec<(String, bool)>, InterpError> {
        std::mem::swap(&mut self.mem.regions[0].1, &mut cpu.stack);
        self.mem.regions.push((CTX, std::mem::take(&mut cpu.ctx)));
        self.mem.touched.clear();
        let done = step(cpu.prog, self.world, &mut cpu.r, &mut cpu.pc, &mut self.mem, &mut Vec::new());
        let at = self.mem.regions.iter().position(|(base, _)| *base == CTX).expect("the context");
        cpu.ctx = self.mem.regions.remove(at).1;
        std::mem::swap(&mut self.mem.regions[0].1, &mut cpu.stack);
        cpu.exited = done?;
        let names = self.mem.touched.iter().map(|(i, wrote)| (self.world.maps[*i].0.clone(), *wrote));
        Ok(names.collect())
    }

    /// The bytes of map `name` (an array's elements).
    pub fn map(&self, name: &str) -> &[u8] {
        let i = self.world.maps.iter().position(|(n, _)| n == name).expect("a map of the world");
        &self.mem.regions[i + 1].1
    }

    /// A hash map's elements: key bytes, value bytes.
    pub fn hash(&self, name: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.mem.elements(map_index(self.world, name))
    }

    /// Deletes `key` from hash map `name`, as another CPU's program would: whether it
    /// was held.
    pub fn remove(&mut self, name: &str, key: &[u8]) -> bool {
        let i = map_index(self.world, name);
        self.mem.tables.get_mut(&i).is_some_and(|t| t.remove(key).is_some())
    }
}

/// A program on a CPU of a `Machine`: its registers, the next instruction, its stack
/// and context, and R0 once it has exited.
#[derive(Clone)]
pub struct Cpu<'p> {
    prog: &'p Program,
    r: [u64; 11],
    pc: usize,
    stack: Vec<u8>,
    ctx: Vec<u8>,
    pub exited: Option<u64>,
}

/// The index of map `name` among the world's maps.
fn map_index(world: &World, name: &str) -> usize {
    world.maps.iter().position(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} is not a map of the world"))
}

/// Where `run_probe` puts the probe's context (the registers).
const CTX: u64 = 0x3000_0000;

/// What a run did: R0 at its exit, each read of the target (address, length) in order,
/// the maps' values after it, by name, each map lookup (the map, the key's bytes: 4 of
/// an array's) in order, and the hash maps' elements after it (key, value), by name.
#[derive(Debug)]
pub struct Run {
    pub r0: u64,
    pub reads: Vec<(u64, u64)>,
    pub maps: Vec<(String, Vec<u8>)>,
    pub lookups: Vec<(String, Vec<u8>)>,
    pub hashes: Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)>,
}

/// Runs `prog` with R1 pointing at `regs` (a probe's `struct pt_regs`, as bytes).
pub fn run_probe(prog: &Program, world: &World, regs: &[u8]) -> Result<Run, InterpError> {
    let mut mem = Memory::new(world);
    mem.regions.push((CTX, regs.to_vec()));
    let mut reads = Vec::new();
    let r0 = execute(prog, world, CTX, &mut mem, &mut reads)?;
    let hashes = (world.hashes.iter()).map(|(n, _)| (n.clone(), mem.elements(map_index(world, n)))).collect();
    let names = world.maps.iter().map(|(n, _)| n.clone());
    let lookups = std::mem::take(&mut mem.lookups);
    let maps = names.zip(mem.regions.into_iter().skip(1).map(|(_, b)| b)).collect();
    Ok(Run { r0, reads, maps, lookups, hashes })
}

/// Runs `prog` with R1 = `ctx` and returns R0 at its exit.
pub fn run(prog: &Program, world: &World, ctx: u64) -> Result<u64, InterpError> {
    execute(prog, world, ctx, &mut Memory::new(world), &mut Vec::new())
}

fn execute(
    prog: &Program,
    world: &World,
    ctx: u64,
    mem: &mut Memory,
    reads: &mut Vec<(u64, u64)>,
) -> Result<u64, InterpError> {
    let mut r = [0u64; 11];
    r[1] = ctx;
    r[10] = STACK_TOP;
    let mut pc = 0usize;
    for _ in 0..MAX_STEPS {
        if let Some(r0) = step(prog, world, &mut r, &mut pc, mem, reads)? {
            return Ok(r0);
        }
    }
    Err(InterpError::TooLong)
}

#[cfg(test)]
mod tests {
    use super::step::{alu, jump};
    use super::*;
    use crate::bpf::builder::{Builder, Program};
    use crate::bpf::helpers::{BPF_FUNC_map_lookup_elem, BPF_FUNC_map_update_elem, BPF_FUNC_probe_read_user};
    use crate::bpf::insn::*;

    #[test]
    fn runs_alu_memory_jumps_and_helpers() {
        let mut b = Builder::new();
        let skip = b.new_label();
        // The map's value (8 bytes: 5) plus the target's word at 0x4000 (7), doubled.
        b.emit(store_imm(Size::DW, R10, -8, 0));
        b.ld_map(R1, "m");
        b.emit(mov64_reg(R2, R10));
        b.emit(alu64_imm(AluOp::Add, R2, -8));
        b.emit(call(BPF_FUNC_map_lookup_elem));
        b.emit(load(Size::DW, R6, R0, 0));
        b.emit(mov64_reg(R1, R10));
        b.emit(alu64_imm(AluOp::Add, R1, -16));
        b.emit(mov64_imm(R2, 8));
        b.emit2(ld_imm64(R3, 0x4000));
        b.emit(call(BPF_FUNC_probe_read_user));
        b.emit(load(Size::DW, R0, R10, -16));
        b.emit(alu64_reg(AluOp::Add, R0, R6));
        b.jmp_imm_to(JmpOp::Ne, R0, 12, skip);
        b.emit(alu64_imm(AluOp::Lsh, R0, 1));
        b.bind(skip);
        b.emit(exit());
        let prog = b.finish().unwrap();
        let world = World {
            maps: vec![("m".into(), 5u64.to_le_bytes().to_vec())],
            user: vec![(0x4000, 7u64.to_le_bytes().to_vec())],
            ..World::default()
        };
        assert_eq!(run(&prog, &world, 0), Ok(24));
        let nothing = World { maps: world.maps, ..World::default() };
        assert!(matches!(run(&prog, &nothing, 0), Err(InterpError::UserFault { addr: 0x4000, .. })));
        // Failing as the kernel's read does: zeros, so 5 + 0.
        let failing = World { unmapped_fails: true, ..nothing };
        assert_eq!(run(&prog, &failing, 0), Ok(5));
    }

    /// Updates key 1 of hash `h` to 5, keeps the pointer a lookup gives, updates it to
    /// 7, and looks it up again: R0 = the old pointer's value * 100 + the new lookup's.
    fn update_twice() -> Program {
        let mut b = Builder::new();
        let update = |b: &mut Builder, value: i32| {
            b.emit(store_imm(Size::DW, R10, -16, value));
            b.ld_map(R1, "h");
            b.emit(mov64_reg(R2, R10));
            b.emit(alu64_imm(AluOp::Add, R2, -8));
            b.emit(mov64_reg(R3, R10));
            b.emit(alu64_imm(AluOp::Add, R3, -16));
            b.emit(mov64_imm(R4, 0));
            b.emit(call(BPF_FUNC_map_update_elem));
        };
        let lookup = |b: &mut Builder| {
            b.ld_map(R1, "h");
            b.emit(mov64_reg(R2, R10));
            b.emit(alu64_imm(AluOp::Add, R2, -8));
            b.emit(call(BPF_FUNC_map_lookup_elem));
        };
        b.emit(store_imm(Size::DW, R10, -8, 1));
        update(&mut b, 5);
        lookup(&mut b);
        b.emit(mov64_reg(R6, R0));
        update(&mut b, 7);
        lookup(&mut b);
        // R0 = old pointer's value * 100 + new lookup's.
        b.emit(load(Size::DW, R7, R0, 0));
        b.emit(load(Size::DW, R0, R6, 0));
        b.emit(alu64_imm(AluOp::Mul, R0, 100));
        b.emit(alu64_reg(AluOp::Add, R0, R7));
        b.emit(exit());
        b.finish().unwrap()
    }

    /// A world of one hash `h` of 8-byte keys and values.
    fn hash_world(per_cpu: bool) -> World {
        let spec = HashSpec { key_size: 8, value_size: 8, max_entries: 4, per_cpu };
        World { maps: vec![("h".into(), vec![0; 8])], hashes: vec![("h".into(), spec)], ..World::default() }
    }

    /// An update of a key a hash holds puts a new element in, as the kernel's does: a
    /// pointer looked up before still reads the old value (in place, a program that
    /// wrote through it after an update would pass here and lose its store there).
    #[test]
    fn a_hash_update_of_a_held_key_makes_a_new_element() {
        assert_eq!(run(&update_twice(), &hash_world(false), 0), Ok(507));
    }

    /// A per-CPU hash's update of a key it holds writes that element in place, as the
    /// kernel's does: the pointer looked up before reads the new value, and the map
    /// still holds one element.
    #[test]
    fn a_per_cpu_hash_update_of_a_held_key_writes_it_in_place() {
        let world = hash_world(true);
        assert_eq!(run(&update_twice(), &world, 0), Ok(707));
        let run = run_probe(&update_twice(), &world, &[0; 8]).unwrap();
        let value = 7u64.to_le_bytes().to_vec();
        assert_eq!(run.hashes, [("h".to_string(), vec![(1u64.to_le_bytes().to_vec(), value)])]);
    }

    #[test]
    #[should_panic(expected = "the interpreter lays out at most 16 maps, not 17")]
    fn more_maps_than_their_room_are_refused_not_overlapped() {
        let mut b = Builder::new();
        b.emit(mov64_imm(R0, 0));
        b.emit(exit());
        let prog = b.finish().unwrap();
        let maps = (0..17).map(|i| (format!("m{i}"), vec![0u8; 8])).collect();
        let _ = run(&prog, &World { maps, ..World::default() }, 0);
    }

    #[test]
    fn thirty_two_bit_operations_zero_extend() {
        assert_eq!(alu(BPF_ADD, u64::MAX, 2, false), Some(1));
        assert_eq!(alu(BPF_MOV, 0, -1i64 as u64, false), Some(0xffff_ffff));
        assert_eq!(alu(BPF_ARSH, 0x8000_0000, 4, false), Some(0xf800_0000));
        assert_eq!(jump(BPF_JSLT, 0xffff_ffff, 0, true), Some(true));
        assert_eq!(jump(BPF_JSLT, 0xffff_ffff, 0, false), Some(false));
    }
}
