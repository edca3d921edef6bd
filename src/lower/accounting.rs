//! gtrace's own accounting inside the programs: what each probe costs and loses, counted
//! in the kernel, and the limits the command line puts on it.
//!
//! - Counters: u64 slots of one per-CPU array (`counters`), each added to atomically:
//!   hits per (program, function) when accounting is on (the slot travels in the attach
//!   cookie, so one program counts each of its functions apart), and always the losses:
//!   events the ring buffer had no room for, printed events `--rate` dropped, map
//!   updates the kernel refused, apart by the errno it gave (`plan::Refusal`: a full
//!   map, no memory ready for a new element, ...).
//! - Generations: a program attached at several functions checks that its attach
//!   cookie's generation is the live one of the site's function (`generations`, indexed
//!   like the hit counters), so the budget can replace any of its multi-uprobe links by
//!   one with fewer sites, exactly, without touching its other links.
//! - `--rate N`: a token bucket per probe in the array `rate` (GCRA: one u64, the time
//!   the bucket is full again, advanced by compare-and-swap), checked before an event is
//!   built.
//!
//! `plan::Accounting` is what the runtime learns of all this.

use super::codegen::Gen;
use super::ir::Arg;
use super::maps::Maps;
use super::LowerError;
use crate::bpf::builder::Label;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::plan::{Accounting, Counter, MapKind, MapRole, MapSpec, Refusal, COOKIE_GEN_SHIFT, COOKIE_SLOT_MASK};
use crate::plan::{SiteRef, COOKIE_SLOT_SHIFT};
use crate::syntax::ast::Span;

pub const COUNTERS: &str = "counters";
pub const GENERATIONS: &str = "generations";
pub const RATE: &str = "rate";

/// At most this many counters (the cookie holds 24 bits of slot).
pub const MAX_SLOTS: usize = COOKIE_SLOT_MASK as usize;

/// What the command line asks of the programs beyond the script.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    /// `--map-size`: how many keys the maps hold.
    pub map_sizes: super::maps::MapSizes,
    /// `--rate N`: printed events a second per probe.
    pub rate: Option<u32>,
    /// Count every site's hits, and let the budget detach single sites (`--stats`,
    /// `--budget`).
    pub accounting: bool,
    /// How much of a whole Go value `print` copies (`--depth`, `--max-fields`,
    /// `--max-elems`, `--string-limit`).
    pub bounds: crate::capture::Bounds,
    /// `--cgroup`: every program attached to the target first asks whether the current
    /// task is in the cgroup (`scope`), and returns at once when it is not.
    pub cgroup: bool,
    /// The possible CPUs of the host the maps are made on (0: unknown): what
    /// preallocating a per-CPU map costs (`maps::PREALLOC_BYTES`).
    pub cpus: u32,
}

/// The accounting being laid out while the programs are generated.
#[derive(Debug, Default)]
pub struct Layout {
    acct: Accounting,
    /// The script probe (item index) of each rate bucket.
    rate_items: Vec<usize>,
    /// Each counter's slot (a wildcard's thousands of hit counters are found at once).
    slot_of: std::collections::HashMap<Counter, u32>,
}

impl Layout {
    pub fn new(settings: &Settings) -> Layout {
        let acct = Accounting { hits: settings.accounting, rate: settings.rate, ..Accounting::default() };
        Layout { acct, rate_items: Vec::new(), slot_of: Default::default() }
    }

    pub fn hits(&self) -> bool {
        self.acct.hits
    }

    /// The slot of `counter`, allocated on first use.
    pub fn slot(&mut self, counter: Counter) -> u32 {
        if let Some(slot) = self.slot_of.get(&counter) {
            return *slot;
        }
        let slot = self.acct.slots.len() as u32;
        self.slot_of.insert(counter.clone(), slot);
        self.acct.slots.push(counter);
        slot
    }

    /// The rate bucket of the script probe `item`.
    fn rate_bucket(&mut self, item: usize) -> u32 {
        match self.rate_items.iter().position(|i| *i == item) {
            Some(i) => i as u32,
            None => {
                self.rate_items.push(item);
                (self.rate_items.len() - 1) as u32
            }
        }
    }

    /// Marks `program` as one that checks its sites' generations.
    fn checks_generations(&mut self, program: &str) {
        let programs = &mut self.acct.generation_programs;
        if !programs.iter().any(|p| p == program) {
            programs.push(program.to_string());
        }
    }

    /// The attach cookie of `program` at `function` (index `function_index`): the
    /// function's index, and its hit counter when sites count their hits.
    pub fn cookie(&mut self, program: &str, function: &str, function_index: usize) -> u64 {
        let mut cookie = function_index as u64;
        if self.acct.hits {
            let slot = self.slot(Counter::Hits { program: program.into(), function: function.into() });
            cookie |= (u64::from(slot) & COOKIE_SLOT_MASK) << COOKIE_SLOT_SHIFT;
        }
        cookie
    }

    /// Sites the budget must detach together.
    pub fn tie(&mut self, sites: Vec<SiteRef>) {
        if sites.len() > 1 {
            self.acct.ties.push(sites);
        }
    }

    /// Adds the maps the programs use to `maps` and returns what the plan says.
    pub fn finish(mut self, maps: &mut Maps) -> Accounting {
        let mut array = |name: &str, kind: MapKind, entries: usize| {
            maps.specs.push(MapSpec {
                object_name: name.into(),
                kind,
                key_size: 4,
                value_size: 8,
                max_entries: entries.max(1) as u32,
                role: MapRole::Scratch,
            });
            name.to_string()
        };
        if !self.acct.slots.is_empty() {
            self.acct.counters = array(COUNTERS, MapKind::PercpuArray, self.acct.slots.len());
        }
        if !self.acct.generation_programs.is_empty() {
            // Indexed by hit counter: each function's sites have their own generation.
            self.acct.generations = array(GENERATIONS, MapKind::Array, self.acct.slots.len());
        }
        if !self.rate_items.is_empty() {
            self.acct.rate_map = array(RATE, MapKind::Array, self.rate_items.len());
        }
        self.acct
    }
}

/// What one program's generator knows of the accounting.
pub struct ProgramAcct<'a> {
    pub layout: &'a mut Layout,
    pub program: String,
    /// The script probe the program belongs to (its rate bucket).
    pub item: usize,
}

impl Gen<'_> {
    /// Adds one to `counter` (a no-op for a program generated without accounting).
    /// Clobbers R0-R5.
    pub fn count(&mut self, counter: Counter, span: Span) -> Result<(), LowerError> {
        let Some(acct) = self.acct.as_mut() else { return Ok(()) };
        let slot = acct.layout.slot(counter);
        let mark = self.b.frame.mark();
        let key = self.slot(8, span)?;
        self.b.emit(store_imm(Size::W, R10, key, slot as i32));
        self.add_one_at(key);
        self.b.frame.release(mark);
        Ok(())
    }

    /// counters[*(u32 *)(r10 + key)] += 1, atomically.
    fn add_one_at(&mut self, key: i16) {
        let out = self.b.new_label();
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(COUNTERS), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, out);
        self.b.emit(mov64_imm(R1, 1));
        self.b.emit(atomic_add(Size::DW, R0, 0, R1));
        self.b.bind(out);
        self.b.emit(mov64_imm(R0, 0));
    }

    /// The start of a uprobe program with accounting: count the site's hit, but first,
    /// for a program at several functions, return at once when the cookie's generation
    /// is not the live one of the site's function (`generations`, indexed like the hit
    /// counters). Nothing without accounting.
    pub fn accounting_prologue(&mut self, functions: usize, span: Span) -> Result<(), LowerError> {
        let Some(acct) = self.acct.as_mut() else { return Ok(()) };
        if !acct.layout.hits() {
            return Ok(());
        }
        let generations = functions > 1;
        if generations {
            let program = acct.program.clone();
            acct.layout.checks_generations(&program);
        }
        self.b.comment("accounting: the live generation, the site's hit");
        let mark = self.b.frame.mark();
        let key = self.slot(8, span)?;
        self.b.emit(mov64_reg(R1, R6));
        self.b.emit(call(BPF_FUNC_get_attach_cookie));
        let cookie = self.b.vreg();
        self.b.op(mov64_reg(R0, R0), cookie, R0);
        self.b.emit(mov64_reg(R1, R0));
        self.b.emit(alu64_imm(AluOp::Rsh, R1, COOKIE_SLOT_SHIFT as i32));
        self.b.emit(alu64_imm(AluOp::And, R1, COOKIE_SLOT_MASK as i32));
        self.b.emit(store_reg(Size::W, R10, key, R1));
        if generations {
            self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(GENERATIONS), Arg::Stack(key)]);
            self.b.jmp_imm_to(JmpOp::Eq, R0, 0, self.done);
            self.b.emit(load(Size::DW, R1, R0, 0));
            self.b.op(mov64_reg(R2, R0), R2, cookie);
            self.b.emit(alu64_imm(AluOp::Rsh, R2, COOKIE_GEN_SHIFT as i32));
            self.b.jmp_reg_to(JmpOp::Ne, R1, R2, self.done);
        }
        self.add_one_at(key);
        self.b.frame.release(mark);
        Ok(())
    }

    /// With `--rate N`: takes a token from this probe's bucket, or counts the event as
    /// dropped and jumps to `skip`. Clobbers R0-R5 and R9.
    pub fn rate_limit(&mut self, skip: Label, span: Span) -> Result<(), LowerError> {
        let Some(acct) = self.acct.as_mut() else { return Ok(()) };
        let Some(rate) = acct.layout.acct.rate else { return Ok(()) };
        let bucket = acct.layout.rate_bucket(acct.item);
        let program = acct.program.clone();
        // GCRA: each event moves the time the bucket is full again (`tat`) one interval
        // later; an event that would move it more than a second (the burst: N events)
        // past now is dropped.
        let interval = (1_000_000_000 / u64::from(rate.max(1))).max(1);
        let burst = interval * u64::from(rate.max(1));
        let dropped = self.b.new_label();
        let allowed = self.b.new_label();
        self.b.comment(format!("--rate {rate}: a token from this probe's bucket"));
        let mark = self.b.frame.mark();
        let key = self.slot(8, span)?;
        self.b.emit(store_imm(Size::W, R10, key, bucket as i32));
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(RATE), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, dropped);
        self.b.emit(mov64_reg(R9, R0));
        self.b.call(BPF_FUNC_ktime_get_ns, &[]);
        self.b.emit(mov64_reg(R5, R0));
        self.b.emit(load(Size::DW, R1, R9, 0));
        // Two tries: another CPU may take a token between the read and the swap.
        for _ in 0..2 {
            let later = self.b.new_label();
            self.b.emit(mov64_reg(R2, R1));
            self.b.jmp_reg_to(JmpOp::Ge, R2, R5, later);
            self.b.emit(mov64_reg(R2, R5));
            self.b.bind(later);
            self.b.emit2(ld_imm64(R3, interval));
            self.b.emit(alu64_reg(AluOp::Add, R2, R3));
            self.b.emit(mov64_reg(R3, R2));
            self.b.emit(alu64_reg(AluOp::Sub, R3, R5));
            self.b.emit2(ld_imm64(R4, burst));
            self.b.jmp_reg_to(JmpOp::Gt, R3, R4, dropped);
            self.b.emit(mov64_reg(R0, R1));
            self.b.emit(atomic_cmpxchg(Size::DW, R9, 0, R2));
            self.b.jmp_reg_to(JmpOp::Eq, R0, R1, allowed);
            self.b.emit(mov64_reg(R1, R0));
        }
        self.b.bind(dropped);
        self.b.frame.release(mark);
        self.count(Counter::RateDropped { program }, span)?;
        self.b.ja_to(skip);
        self.b.bind(allowed);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// After a `bpf_map_update_elem` of `map`: counts a refusal (R0 != 0) under its
    /// cause.
    pub fn count_refused_update(&mut self, map: &str, span: Span) -> Result<(), LowerError> {
        let ok = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, ok);
        self.count_refused(map, span)?;
        self.b.bind(ok);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// Counts an update of `map` that the kernel refused, under the cause R0 says (what
    /// `bpf_map_update_elem` returned: minus the errno). Clobbers R0-R5.
    pub fn count_refused(&mut self, map: &str, span: Span) -> Result<(), LowerError> {
        let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) else { return Ok(()) };
        let counted = self.b.new_label();
        for why in Refusal::ALL {
            let next = self.b.new_label();
            let errno = why.errno();
            if let Some(errno) = errno {
                self.b.jmp_imm_to(JmpOp::Ne, R0, -errno, next);
            }
            self.count(Counter::Refused { program: program.clone(), map: map.to_string(), why }, span)?;
            if errno.is_some() {
                self.b.ja_to(counted);
                self.b.bind(next);
                self.b.emit(mov64_imm(R5, 0));
            }
        }
        self.b.bind(counted);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }
}
