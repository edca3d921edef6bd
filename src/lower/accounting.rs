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
//!   one with fewer sites, exactly, without touching its other links. While a link is
//!   handed over, the newer link claims each hit under the task in `handovers`
//!   (counting.rs says how one decision is made per hit).
//! - `--rate N`: a token bucket per probe in the array `rate` (GCRA: one u64, the time
//!   the bucket is full again, advanced by compare-and-swap), checked before an event is
//!   built.
//!
//! `plan::Accounting` is what the runtime learns of all this. Here the counters are laid
//! out; counting.rs generates the code that counts.

use super::maps::Maps;
use crate::plan::{Accounting, Counter, MapKind, MapRole, MapSpec, COOKIE_SLOT_MASK};
use crate::plan::{SiteRef, COOKIE_SLOT_SHIFT};

pub const COUNTERS: &str = "counters";
pub const GENERATIONS: &str = "generations";
pub const RATE: &str = "rate";
pub const HANDOVERS: &str = "handovers";

/// How many tasks `handovers` holds claims for: the target's threads that hit a site
/// while its link is handed over (the runtime empties it after each handover). A claim
/// the map has no room for is not made, and the older link counts that hit.
pub const HANDOVER_TASKS: u32 = 4096;

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
    /// With `accounting`: a program attached at one function takes its hits from the
    /// kernel's run count instead of counting them itself (`Accounting::kernel_hits`),
    /// which saves it a helper call and a counter's cache line a run. Only where the
    /// runtime will hold the kernel's statistics (`BPF_ENABLE_STATS`, CAP_SYS_ADMIN).
    pub kernel_hits: bool,
    /// How much of a whole Go value `print` copies (`--depth`, `--max-fields`,
    /// `--max-elems`, `--string-limit`).
    pub bounds: crate::capture::Bounds,
    /// `--cgroup`: every program attached to the target first asks whether the current
    /// task is in the cgroup (`scope`), and returns at once when it is not.
    pub cgroup: bool,
    /// The programs run in one process only (-p, -c; not a plan written for elsewhere):
    /// goroutines' keys need not hold the process (frames.rs), which saves a helper call
    /// (about 45 ns here) in every program that finds a goroutine's record.
    pub one_process: bool,
    /// The possible CPUs of the host the maps are made on (0: unknown): what
    /// preallocating a per-CPU map costs (`maps::PREALLOC_BYTES`).
    pub cpus: u32,
}

/// The accounting being laid out while the programs are generated.
#[derive(Debug, Default)]
pub struct Layout {
    acct: Accounting,
    /// `Settings::kernel_hits`.
    kernel_hits: bool,
    /// The script probe (item index) of each rate bucket.
    rate_items: Vec<usize>,
    /// Each counter's slot (a wildcard's thousands of hit counters are found at once).
    slot_of: std::collections::HashMap<Counter, u32>,
}

impl Layout {
    pub fn new(settings: &Settings) -> Layout {
        let acct = Accounting { hits: settings.accounting, rate: settings.rate, ..Accounting::default() };
        let kernel_hits = settings.accounting && settings.kernel_hits;
        Layout { acct, kernel_hits, rate_items: Vec::new(), slot_of: Default::default() }
    }

    pub fn hits(&self) -> bool {
        self.acct.hits
    }

    /// `--rate N`'s N, when given.
    pub fn rate(&self) -> Option<u32> {
        self.acct.rate
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
    pub(super) fn rate_bucket(&mut self, item: usize) -> u32 {
        match self.rate_items.iter().position(|i| *i == item) {
            Some(i) => i as u32,
            None => {
                self.rate_items.push(item);
                (self.rate_items.len() - 1) as u32
            }
        }
    }

    /// Whether `program`, attached at `functions` functions (`scoped`: behind the
    /// `--cgroup` check, which returns before the hit is counted), may take its hits from
    /// the kernel's run count; if so, it is marked as doing so. One function only: the
    /// kernel counts a program's runs, not its sites'.
    pub(super) fn hits_by_kernel(&mut self, program: &str, functions: usize, scoped: bool) -> bool {
        if !self.kernel_hits || functions != 1 || scoped {
            return false;
        }
        if !self.acct.hits_by_kernel(program) {
            self.acct.kernel_hits.push(program.to_string());
        }
        true
    }

    /// Marks `program` as one that checks its sites' generations.
    pub(super) fn checks_generations(&mut self, program: &str) {
        let programs = &mut self.acct.generation_programs;
        if !programs.iter().any(|p| p == program) {
            programs.push(program.to_string());
        }
    }

    /// The attach cookie of `program` at `function` (index `function_index`): the
    /// function's index, and its hit counter when sites count their hits in `counters`.
    pub fn cookie(&mut self, program: &str, function: &str, function_index: usize) -> u64 {
        let mut cookie = function_index as u64;
        if self.acct.hits && !self.acct.hits_by_kernel(program) {
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
        if !self.acct.generations.is_empty() {
            maps.specs.push(MapSpec {
                object_name: HANDOVERS.into(),
                kind: MapKind::Hash,
                key_size: 8,
                value_size: 8,
                max_entries: HANDOVER_TASKS,
                role: MapRole::Scratch,
            });
            self.acct.handovers = HANDOVERS.into();
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
    /// The stack slot that adds up the program's failed reads until its end (unread.rs),
    /// made at its first read.
    pub failed_reads: Option<super::ir::SlotId>,
}
