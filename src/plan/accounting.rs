//! gtrace's own accounting as the plan records it: what the attach cookie carries, the
//! counters the programs add to, the generations and handovers that let the budget
//! replace a link exactly, and the sites that must be detached together.

use serde::{Deserialize, Serialize};

/// Bits 32..56 of an attach cookie: the site's hit counter (a slot of
/// `Accounting::counters`); bits 56..64: the generation of the link it was attached with
/// (see `Accounting::generations`). Bits 0..32 index `Plan::functions`.
pub const COOKIE_SLOT_SHIFT: u32 = 32;
pub const COOKIE_SLOT_MASK: u64 = 0xff_ffff;
pub const COOKIE_GEN_SHIFT: u32 = 56;
/// Set beside the live generation in `Accounting::generations` while the function's
/// link is handed over to one of the next generation.
pub const GEN_HANDOVER: u64 = 0x100;

/// gtrace's own counters in the kernel, and the maps that govern its programs. Every
/// counter is a u64 slot of one per-CPU array (`counters`), added to atomically; the
/// runtime sums the CPUs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Accounting {
    /// The per-CPU array of counters (its object name); empty when nothing is counted.
    pub counters: String,
    /// What each slot of `counters` counts.
    pub slots: Vec<Counter>,
    /// Each probe site counts its hits (`Counter::Hits`): on for --stats and --budget.
    pub hits: bool,
    /// Programs whose site hits are not counted in `counters` but are their runs as the
    /// kernel counts them (`run_cnt` of `bpf_prog_info`, while the runtime holds
    /// `BPF_ENABLE_STATS` from before it attaches): each is attached at the sites of one
    /// function, checks no generation and returns before nothing (no `--cgroup`), so
    /// every run is one hit of that function, and its code spends no helper call on it.
    /// They have no `Counter::Hits` slot and no slot in their cookies.
    #[serde(default)]
    pub kernel_hits: Vec<String>,
    /// An array of u64 indexed like `counters`: at a function's hit slot, the
    /// generation of the link that holds the function's sites. A program in
    /// `generation_programs` runs only when the generation in its attach cookie is the
    /// live one of the site's slot, so that any of its multi-uprobe links can be
    /// replaced by one with fewer sites without a hit missed or counted twice. Empty when
    /// none.
    pub generations: String,
    /// The programs that check their sites' generations.
    pub generation_programs: Vec<String>,
    /// A hash of u64 to u64: while a link is handed over (`GEN_HANDOVER`), a task's
    /// claim on the hit it is in (bits 32.. of the newer link's cookie), so that one of
    /// the two links counts it. Empty with `generations`.
    pub handovers: String,
    /// `--rate N`: printed events a second per probe, a token bucket per probe in the
    /// array `rate` (the time the bucket is full again, GCRA); `None`: no limit.
    pub rate: Option<u32>,
    pub rate_map: String,
    /// Sites that must be detached together (a return probe using `elapsed` with the
    /// timing of its entries; every program sharing `self` variables, with their
    /// cleanup): each a list of (program, function), `function` `None` for every site of
    /// the program.
    pub ties: Vec<Vec<SiteRef>>,
}

/// One slot of `Accounting::counters`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Counter {
    /// Hits of `program` at the sites of `function`.
    Hits { program: String, function: String },
    /// Events of `program` the ring buffer had no room for.
    EventsLost { program: String },
    /// Printed events of `program` dropped by `--rate`.
    RateDropped { program: String },
    /// Updates of map `map` (object name) by `program` that the kernel refused, by the
    /// errno it gave (`why`).
    Refused {
        program: String,
        map: String,
        #[serde(default)]
        why: Refusal,
    },
    /// Hits of `program` that stopped short because a value could not be read, and why
    /// (a PIE's load bias not known; a map lookup past its bound).
    Skipped { program: String, why: String },
    /// Hits of `program` by a task outside the `--cgroup` cgroup: returned at once, not
    /// hits of the script, but their traps cost all the same.
    OtherCgroup { program: String },
    /// Reads of the target's memory by `program` that failed (not through a nil
    /// pointer): their values read as zero (lower/unread.rs).
    ReadFailed { program: String },
}

/// Why the kernel refused a map update: the errno `bpf_map_update_elem` returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Refusal {
    /// E2BIG: the map holds as many keys as it may.
    #[default]
    Full,
    /// ENOMEM: the kernel had no memory ready for a new element. A map that is not
    /// preallocated allocates in the probe, which cannot wait: from small per-CPU caches
    /// refilled behind it (per-CPU values from the percpu allocator's pages already
    /// populated), which a burst of new keys empties.
    NoMemory,
    /// EBUSY: the map was being updated on the same CPU (a program interrupted in it).
    Busy,
    /// Any other errno.
    Other,
}

impl Refusal {
    /// Every cause, in the order the programs test them.
    pub const ALL: [Refusal; 4] = [Refusal::Full, Refusal::NoMemory, Refusal::Busy, Refusal::Other];

    /// The errno (positive) of the cause, `None` for `Other`.
    pub fn errno(self) -> Option<i32> {
        match self {
            Refusal::Full => Some(7),
            Refusal::NoMemory => Some(12),
            Refusal::Busy => Some(16),
            Refusal::Other => None,
        }
    }
}

/// Sites of one program: those of one function, or all of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteRef {
    pub program: String,
    pub function: Option<String>,
}

impl Accounting {
    /// The slot of the hit counter of `program` at `function`.
    pub fn hits_slot(&self, program: &str, function: &str) -> Option<usize> {
        self.slots
            .iter()
            .position(|c| matches!(c, Counter::Hits { program: p, function: f } if p == program && f == function))
    }

    /// Every hit counter's slot by (program, function), to look up many at once.
    pub fn hits_slots(&self) -> std::collections::HashMap<(String, String), usize> {
        let hits = self.slots.iter().enumerate().filter_map(|(i, c)| match c {
            Counter::Hits { program, function } => Some(((program.clone(), function.clone()), i)),
            _ => None,
        });
        hits.collect()
    }

    /// Whether `program`'s site hits are its runs as the kernel counts them.
    pub fn hits_by_kernel(&self, program: &str) -> bool {
        self.kernel_hits.iter().any(|p| p == program)
    }

    /// Whether `program` checks its sites' generations.
    pub fn checks_generations(&self, program: &str) -> bool {
        self.generation_programs.iter().any(|p| p == program)
    }
}
