//! Runs a program's instructions without a kernel, for tests of what the lowering
//! computes (tests/aeshash.rs: the runtime's map hash against a Go program's own). It
//! knows what such code uses: 64- and 32-bit ALU operations, loads and stores of every
//! width, jumps, `ld_imm64` (a map reference gives that map's value address), and the
//! helpers `map_lookup_elem` (an array map's one value, or its element by index when
//! the world says its elements' size, or a hash map's element by key),
//! `map_update_elem` and `map_delete_elem` of hash maps (with the kernel's errnos: full,
//! present under BPF_NOEXIST, absent under BPF_EXIST or at a delete; a hash may hold
//! elements before the run), `map_update_elem` of an array map's one value,
//! `probe_read_user` (from the regions given as the target's memory), `get_attach_cookie` (the world's, 0 unless set),
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

use super::builder::Program;
use super::helpers::{
    BPF_FUNC_get_attach_cookie, BPF_FUNC_get_current_pid_tgid, BPF_FUNC_ktime_get_ns, BPF_FUNC_map_delete_elem,
    BPF_FUNC_map_lookup_elem, BPF_FUNC_map_update_elem, BPF_FUNC_probe_read_user, BPF_EXIST, BPF_NOEXIST,
};
use super::insn::*;
use std::collections::BTreeMap;
use thiserror::Error;

/// Where the stack's 512 bytes end (R10), and where map values start.
const STACK_TOP: u64 = 0x1000_0000;
const STACK_SIZE: u64 = 512;
const MAPS: u64 = 0x2000_0000;
/// Where hash maps' elements are put, one region each.
const ELEMENTS: u64 = 0x4000_0000;
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

/// A hash map's shape: its key's and value's sizes, how many elements it holds.
#[derive(Clone, Copy, Debug)]
pub struct HashSpec {
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
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

/// What `probe_read_user` returns for memory it cannot read.
const EFAULT: u64 = -14i64 as u64;

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

/// The machine's writable memory: the stack, then each map's value, then the hash
/// maps' elements; the lookups made.
#[derive(Clone)]
struct Memory {
    regions: Vec<(u64, Vec<u8>)>,
    lookups: Vec<(String, Vec<u8>)>,
    /// Each hash map's elements (by its index in the world's maps): key, value address.
    tables: BTreeMap<usize, BTreeMap<Vec<u8>, u64>>,
    /// Hash elements made so far (each a new region).
    made: u64,
    /// The maps (by index in the world's) whose memory was touched since it was last
    /// emptied (a value or element loaded or stored, a hash's helper), and whether
    /// that changed it.
    touched: Vec<(usize, bool)>,
}

impl Memory {
    /// The stack, then each map's value, then the hashes' elements held before the run.
    fn new(world: &World) -> Memory {
        let stack = (STACK_TOP - STACK_SIZE, vec![0; STACK_SIZE as usize]);
        let mut mem =
            Memory { regions: vec![stack], lookups: Vec::new(), tables: BTreeMap::new(), made: 0, touched: Vec::new() };
        for (i, (_, value)) in world.maps.iter().enumerate() {
            mem.regions.push((MAPS + (i as u64) * 0x100_0000, value.clone()));
        }
        for (name, key, value) in &world.held {
            mem.insert(map_index(world, name), key.clone(), value.clone());
        }
        mem
    }

    /// Puts a new element (`key`, `value`) in hash map `i`, in a region of its own.
    fn insert(&mut self, i: usize, key: Vec<u8>, value: Vec<u8>) {
        let at = ELEMENTS + self.made * 0x1000;
        self.made += 1;
        self.regions.push((at, value));
        self.tables.entry(i).or_default().insert(key, at);
    }

    /// Hash map `i`'s elements: key bytes, value bytes.
    fn elements(&self, i: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let table = self.tables.get(&i).cloned().unwrap_or_default();
        table
            .into_iter()
            .map(|(k, at)| (k, self.regions.iter().find(|(b, _)| *b == at).expect("element").1.clone()))
            .collect()
    }

    fn slice(&mut self, pc: usize, addr: u64, len: u64) -> Result<&mut [u8], InterpError> {
        if (MAPS..CTX).contains(&addr) {
            self.touched.push((((addr - MAPS) / 0x100_0000) as usize, false));
        } else if addr >= ELEMENTS {
            let element = addr & !0xfff;
            let owner = self.tables.iter().find(|(_, t)| t.values().any(|at| *at == element));
            self.touched.extend(owner.map(|(i, _)| (*i, false)));
        }
        for (base, bytes) in &mut self.regions {
            if addr >= *base && addr + len <= *base + bytes.len() as u64 {
                let at = (addr - *base) as usize;
                return Ok(&mut bytes[at..at + len as usize]);
            }
        }
        Err(InterpError::Fault { pc, addr, len })
    }

    fn load(&mut self, pc: usize, addr: u64, len: u64) -> Result<u64, InterpError> {
        let mut word = [0u8; 8];
        word[..len as usize].copy_from_slice(self.slice(pc, addr, len)?);
        Ok(u64::from_le_bytes(word))
    }

    fn store_bytes(&mut self, pc: usize, addr: u64, bytes: &[u8]) -> Result<(), InterpError> {
        let touched = self.touched.len();
        self.slice(pc, addr, bytes.len() as u64)?.copy_from_slice(bytes);
        self.touched[touched..].iter_mut().for_each(|t| t.1 = true);
        Ok(())
    }

    fn store(&mut self, pc: usize, addr: u64, len: u64, value: u64) -> Result<(), InterpError> {
        self.store_bytes(pc, addr, &value.to_le_bytes()[..len as usize])
    }
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

/// Runs the instruction at `pc`: its R0 when it is the exit.
fn step(
    prog: &Program,
    world: &World,
    r: &mut [u64; 11],
    cur: &mut usize,
    mem: &mut Memory,
    reads: &mut Vec<(u64, u64)>,
) -> Result<Option<u64>, InterpError> {
    let pc = *cur;
    let i = *prog.insns.get(pc).ok_or(InterpError::Unknown { pc, code: 0 })?;
    let (dst, src) = (usize::from(i.dst), usize::from(i.src));
    let unknown = InterpError::Unknown { pc, code: i.code };
    let mut next = pc;
    match class(i.code) {
        BPF_ALU64 | BPF_ALU => {
            let wide = class(i.code) == BPF_ALU64;
            let operand = if source(i.code) == BPF_X { r[src] } else { i.imm as i64 as u64 };
            r[dst] = alu(op(i.code), r[dst], operand, wide).ok_or(unknown)?;
        }
        BPF_LDX if mode(i.code) == BPF_MEM => {
            let len = u64::from(Size::from_code(i.code).bytes());
            r[dst] = mem.load(pc, r[src].wrapping_add_signed(i64::from(i.off)), len)?;
        }
        BPF_STX if mode(i.code) == BPF_ATOMIC && i.imm == BPF_CMPXCHG => {
            let len = u64::from(Size::from_code(i.code).bytes());
            let at = r[dst].wrapping_add_signed(i64::from(i.off));
            let old = mem.load(pc, at, len)?;
            let mask = if len == 8 { u64::MAX } else { (1 << (8 * len)) - 1 };
            if old == r[0] & mask {
                mem.store(pc, at, len, r[src])?;
            }
            r[0] = old;
        }
        BPF_STX if mode(i.code) == BPF_ATOMIC && i.imm == i32::from(BPF_ADD) => {
            let len = u64::from(Size::from_code(i.code).bytes());
            let at = r[dst].wrapping_add_signed(i64::from(i.off));
            let sum = mem.load(pc, at, len)?.wrapping_add(r[src]);
            mem.store(pc, at, len, sum)?;
        }
        BPF_STX if mode(i.code) == BPF_ATOMIC && [BPF_XCHG, i32::from(BPF_ADD) | BPF_FETCH].contains(&i.imm) => {
            let len = u64::from(Size::from_code(i.code).bytes());
            let at = r[dst].wrapping_add_signed(i64::from(i.off));
            let old = mem.load(pc, at, len)?;
            let new = if i.imm == BPF_XCHG { r[src] } else { old.wrapping_add(r[src]) };
            mem.store(pc, at, len, new)?;
            r[src] = old;
        }
        BPF_STX | BPF_ST if mode(i.code) == BPF_MEM => {
            let len = u64::from(Size::from_code(i.code).bytes());
            let value = if class(i.code) == BPF_STX { r[src] } else { i.imm as i64 as u64 };
            mem.store(pc, r[dst].wrapping_add_signed(i64::from(i.off)), len, value)?;
        }
        BPF_LD if i.is_ld_imm64() => {
            let high = prog.insns.get(pc + 1).ok_or(unknown)?;
            r[dst] = if i.src == BPF_PSEUDO_MAP_FD {
                map_value_addr(prog, world, pc)?
            } else {
                u64::from(i.imm as u32) | u64::from(high.imm as u32) << 32
            };
            next += 1;
        }
        BPF_JMP | BPF_JMP32 => match op(i.code) {
            BPF_EXIT => return Ok(Some(r[0])),
            BPF_CALL => {
                if i.src == 0 {
                    r[0] = helper(i.imm, r, mem, world, pc, reads)?;
                }
            }
            BPF_JA => next = next.wrapping_add_signed(isize::from(i.off)),
            code => {
                let operand = if source(i.code) == BPF_X { r[src] } else { i.imm as i64 as u64 };
                let narrow = class(i.code) == BPF_JMP32;
                if jump(code, r[dst], operand, narrow).ok_or(unknown)? {
                    next = next.wrapping_add_signed(isize::from(i.off));
                }
            }
        },
        _ => return Err(unknown),
    }
    *cur = next + 1;
    Ok(None)
}

/// The address the map loaded at instruction `pc` has its value at.
fn map_value_addr(prog: &Program, world: &World, pc: usize) -> Result<u64, InterpError> {
    let name = prog.relocations.iter().find(|r| r.insn_index == pc).map(|r| r.map.clone()).unwrap_or_default();
    let index = world.maps.iter().position(|(n, _)| *n == name).ok_or(InterpError::NoMap { pc, name })?;
    Ok(MAPS + (index as u64) * 0x100_0000)
}

/// A helper call: R1-R5 its arguments (clobbered after it), its result for R0.
fn helper(
    id: i32,
    r: &mut [u64; 11],
    mem: &mut Memory,
    world: &World,
    pc: usize,
    reads: &mut Vec<(u64, u64)>,
) -> Result<u64, InterpError> {
    // The map R1 names, by the address its ld_imm64 gave (`map_value_addr`).
    let map = r[1]
        .checked_sub(MAPS)
        .map(|d| d / 0x100_0000)
        .and_then(|i| (r[1] == MAPS + i * 0x100_0000 && (i as usize) < world.maps.len()).then_some(i as usize));
    let hash = map.and_then(|i| world.hashes.iter().find(|(n, _)| *n == world.maps[i].0).map(|(_, h)| (i, *h)));
    let array = map.and_then(|i| world.arrays.iter().find(|(n, _)| *n == world.maps[i].0).map(|(_, s)| *s));
    if id == BPF_FUNC_map_lookup_elem {
        let name = map.map_or(String::new(), |i| world.maps[i].0.clone());
        let size = hash.map_or(4, |(_, spec)| u64::from(spec.key_size));
        let key = mem.slice(pc, r[2], size)?.to_vec();
        mem.lookups.push((name, key));
    }
    let result = match id {
        id if [BPF_FUNC_map_lookup_elem, BPF_FUNC_map_update_elem, BPF_FUNC_map_delete_elem].contains(&id)
            && hash.is_some() =>
        {
            let (i, spec) = hash.expect("a hash");
            hash_helper(id, i, spec, r, mem, pc)?
        }
        id if id == BPF_FUNC_map_lookup_elem && array.is_some() => {
            let size = u64::from(array.expect("an array"));
            let index = mem.load(pc, r[2], 4)?;
            let len = map.map_or(0, |i| mem.regions[i + 1].1.len() as u64);
            if (index + 1) * size <= len {
                r[1] + index * size
            } else {
                0
            }
        }
        // The map's address as R1 holds it is its value's: an array map's one entry.
        id if id == BPF_FUNC_map_lookup_elem => r[1],
        id if id == BPF_FUNC_map_update_elem => {
            mem.slice(pc, r[2], 4)?;
            // The value is as long as the map's.
            let len = mem.regions.iter().find(|(base, _)| *base == r[1]).map_or(0, |(_, b)| b.len() as u64);
            let value = mem.slice(pc, r[3], len)?.to_vec();
            mem.slice(pc, r[1], len)?.copy_from_slice(&value);
            0
        }
        id if id == BPF_FUNC_get_attach_cookie => world.cookie,
        id if id == BPF_FUNC_get_current_pid_tgid => world.pid_tgid,
        id if id == BPF_FUNC_ktime_get_ns => world.now,
        id if id == BPF_FUNC_probe_read_user => {
            let (dst, len, from) = (r[1], r[2], r[3]);
            reads.push((from, len));
            let bytes = world
                .user
                .iter()
                .find(|(base, b)| from >= *base && from.saturating_add(len) <= *base + b.len() as u64)
                .map(|(base, b)| &b[(from - base) as usize..(from - base + len) as usize]);
            match bytes {
                Some(bytes) => {
                    mem.slice(pc, dst, len)?.copy_from_slice(bytes);
                    0
                }
                None if world.unmapped_fails => {
                    mem.slice(pc, dst, len)?.fill(0);
                    EFAULT
                }
                None => return Err(InterpError::UserFault { pc, addr: from, len }),
            }
        }
        _ => return Err(InterpError::Unknown { pc, code: BPF_JMP | BPF_CALL }),
    };
    r[1..6].fill(0);
    Ok(result)
}

/// A helper on hash map `i` of the world: R2 the key, R3 the value and R4 the flags of
/// an update; what the kernel returns (an element's address, 0, minus an errno).
fn hash_helper(
    id: i32,
    i: usize,
    spec: HashSpec,
    r: &[u64; 11],
    mem: &mut Memory,
    pc: usize,
) -> Result<u64, InterpError> {
    mem.touched.push((i, id != BPF_FUNC_map_lookup_elem));
    let key = mem.slice(pc, r[2], u64::from(spec.key_size))?.to_vec();
    let found = mem.tables.get(&i).and_then(|t| t.get(&key)).copied();
    let errno = |e: i64| (-e) as u64;
    Ok(match id {
        id if id == BPF_FUNC_map_lookup_elem => found.unwrap_or(0),
        id if id == BPF_FUNC_map_delete_elem => match found {
            Some(_) => {
                mem.tables.get_mut(&i).expect("its table").remove(&key);
                0
            }
            None => errno(2),
        },
        _ => {
            let value = mem.slice(pc, r[3], u64::from(spec.value_size))?.to_vec();
            let flags = r[4] as i32;
            let held = mem.tables.get(&i).map_or(0, |t| t.len());
            match found {
                Some(_) if flags == BPF_NOEXIST => errno(17),
                None if flags == BPF_EXIST => errno(2),
                None if held >= spec.max_entries as usize => errno(7),
                Some(at) => {
                    mem.store_bytes(pc, at, &value)?;
                    0
                }
                None => {
                    mem.insert(i, key, value);
                    0
                }
            }
        }
    })
}

/// `a op b` of an ALU instruction, 64 or 32 bits wide (then zero-extended).
fn alu(code: u8, a: u64, b: u64, wide: bool) -> Option<u64> {
    let bits = if wide { 64 } else { 32 };
    let shift = (b % bits) as u32;
    let v = match code {
        BPF_ADD => a.wrapping_add(b),
        BPF_SUB => a.wrapping_sub(b),
        BPF_MUL => a.wrapping_mul(b),
        BPF_OR => a | b,
        BPF_AND => a & b,
        BPF_XOR => a ^ b,
        BPF_MOV => b,
        BPF_NEG => a.wrapping_neg(),
        BPF_LSH => a << shift,
        BPF_RSH if wide => a >> shift,
        BPF_RSH => (a as u32 >> shift).into(),
        BPF_ARSH if wide => (a as i64 >> shift) as u64,
        BPF_ARSH => (a as i32 >> shift) as u32 as u64,
        _ => return None,
    };
    Some(if wide { v } else { v as u32 as u64 })
}

/// Whether a conditional jump is taken.
fn jump(code: u8, a: u64, b: u64, narrow: bool) -> Option<bool> {
    let (a, b) = if narrow { (a as u32 as u64, b as u32 as u64) } else { (a, b) };
    let (sa, sb) = if narrow { (a as u32 as i32 as i64, b as u32 as i32 as i64) } else { (a as i64, b as i64) };
    Some(match code {
        BPF_JEQ => a == b,
        BPF_JNE => a != b,
        BPF_JGT => a > b,
        BPF_JGE => a >= b,
        BPF_JLT => a < b,
        BPF_JLE => a <= b,
        BPF_JSGT => sa > sb,
        BPF_JSGE => sa >= sb,
        BPF_JSLT => sa < sb,
        BPF_JSLE => sa <= sb,
        BPF_JSET => a & b != 0,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::builder::Builder;

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

    #[test]
    fn thirty_two_bit_operations_zero_extend() {
        assert_eq!(alu(BPF_ADD, u64::MAX, 2, false), Some(1));
        assert_eq!(alu(BPF_MOV, 0, -1i64 as u64, false), Some(0xffff_ffff));
        assert_eq!(alu(BPF_ARSH, 0x8000_0000, 4, false), Some(0xf800_0000));
        assert_eq!(jump(BPF_JSLT, 0xffff_ffff, 0, true), Some(true));
        assert_eq!(jump(BPF_JSLT, 0xffff_ffff, 0, false), Some(false));
    }
}
