//! What was lost, in words: the parts of the line of losses (`Stats::lost_line`) for a
//! map whose updates the kernel refused (by cause, with the fix that works) and for the
//! printed lines the OTLP exporter never sent.

use super::numbers::{plural, thousands};
use crate::plan::Refusal;
use serde::Serialize;

/// A map whose updates the kernel may refuse: the user's `@name`, `self` for the self
/// variables, or one of gtrace's tables of calls in flight (`MapStats::table`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MapStats {
    pub map: String,
    pub capacity: u32,
    /// Updates refused, every cause.
    pub refused: u64,
    /// Updates refused, by cause (the errno the kernel gave), causes that happened only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<(Refusal, u64)>,
    /// For a table of calls in flight: the functions whose calls it failed to keep
    /// (their returns were not seen), or the probes that counted them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calls_of: Vec<String>,
    /// For a per-CPU user map that is not preallocated: one CPU's value size, and the
    /// possible CPUs (what preallocating it would cost); 0 otherwise.
    #[serde(skip)]
    pub value_size: u32,
    #[serde(skip)]
    pub cpus: u32,
}

/// What `MapStats::map` names for gtrace's tables of calls in flight.
pub const INFLIGHT_TABLE: &str = "inflight";
pub const DEEP_FRAMES_TABLE: &str = "inflight deep frames";
pub const CARRIED_TABLE: &str = "inflight parameters";

impl MapStats {
    /// One of gtrace's tables of calls in flight (not a map of the script).
    pub fn table(&self) -> bool {
        [INFLIGHT_TABLE, DEEP_FRAMES_TABLE, CARRIED_TABLE].contains(&self.map.as_str())
    }

    /// Why its updates were refused, and what to do, in words: one part of the line of
    /// losses per cause.
    pub(super) fn losses(&self, parts: &mut Vec<String>) {
        for (why, n) in self.causes.iter().filter(|(_, n)| *n > 0) {
            let n = *n;
            let cause = self.cause(*why);
            if self.table() {
                let calls = match self.calls_of.as_slice() {
                    [] => String::new(),
                    of => format!(" of {}", of.join(", ")),
                };
                parts.push(format!(
                    "{} timed call{}{calls} missed (their returns not seen): {cause}",
                    thousands(n),
                    plural(n)
                ));
            } else {
                let what = if self.map == "self" { "self variables" } else { self.map.as_str() };
                parts.push(format!("{} update{} of {what} refused: {cause}", thousands(n), plural(n)));
            }
        }
    }

    /// A cause of refusal in words, with the fix that works.
    fn cause(&self, why: Refusal) -> String {
        let capacity = thousands(self.capacity.into());
        let (table, unit, option) = match self.map.as_str() {
            "self" => ("table", "entries", "--map-size self=N".to_string()),
            INFLIGHT_TABLE => {
                ("the table of goroutines with calls in flight", "goroutines", "--map-size inflight=N".into())
            }
            DEEP_FRAMES_TABLE => {
                ("the table of calls in flight deeper than 8 on a goroutine", "calls", "--map-size inflight=N".into())
            }
            CARRIED_TABLE => ("the table of parameters carried to returns", "calls", "--map-size inflight=N".into()),
            name => ("map", "keys", format!("--map-size {name}=N")),
        };
        let verb = if self.table() { " is" } else { "" };
        match why {
            Refusal::Full => format!("{table}{verb} full at {capacity} {unit} ({option} holds more)"),
            Refusal::NoMemory => self.no_memory(),
            Refusal::Busy => {
                "the kernel found the map busy on that CPU (EBUSY: a program ran inside an update of it)".into()
            }
            Refusal::Other => "the kernel refused them with an unexpected errno".into(),
        }
    }

    /// ENOMEM in words: a map that is not preallocated, in a probe that cannot wait for
    /// memory; for a per-CPU map, the size that gtrace would preallocate.
    fn no_memory(&self) -> String {
        let what = if self.table() || self.map == "self" { "entry" } else { "key" };
        let mut out = format!("the kernel had no memory ready for a new {what} (ENOMEM)");
        if self.value_size == 0 {
            let what = if self.table() || self.map == "self" { "the table" } else { self.map.as_str() };
            out.push_str(&format!(
                ": {what} is not preallocated, and a probe cannot wait for memory (the host is short of it, \
                 or new entries came faster than the kernel refills what it keeps ready)"
            ));
            return out;
        }
        let fits = crate::lower::maps::preallocated_keys(self.value_size, self.cpus);
        out.push_str(&format!(
            ": {} is not preallocated, and a probe cannot wait while the kernel's per-CPU allocator \
             refills, so a burst of new keys outran it (--map-size {}=N with N up to {} preallocates it: \
             N keys x {} bytes x {} CPUs within {} MiB)",
            self.map,
            self.map,
            thousands(fits),
            thousands(self.value_size.into()),
            self.cpus,
            crate::lower::maps::PREALLOC_BYTES >> 20
        ));
        out
    }
}

/// `--otlp`: the printed lines (log records) that never reached the collector.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct UnsentLogs {
    pub url: String,
    /// Dropped before any push: the pusher's queue (`queue` lines) was full, the
    /// collector slower than the printing, or not answering.
    pub dropped: u64,
    pub queue: u64,
    /// Still waiting at exit, when the last push failed (`error`).
    pub unsent: u64,
    /// Why the last push failed, if it did (its metrics were not sent either).
    pub error: Option<String>,
}

impl UnsentLogs {
    /// In words, as a part of the line of losses.
    pub fn describe(&self) -> String {
        let lost = self.dropped + self.unsent;
        if lost == 0 {
            let error = self.error.as_deref().unwrap_or("?");
            return format!(
                "the last push to the OpenTelemetry collector at {} (metrics at exit) failed: {error}",
                self.url
            );
        }
        let mut out = format!(
            "{} printed line{} never sent to the OpenTelemetry collector at {}",
            thousands(lost),
            plural(lost),
            self.url
        );
        let mut why = Vec::new();
        if self.dropped > 0 {
            why.push(format!(
                "{} dropped while {} waited to be pushed",
                thousands(self.dropped),
                thousands(self.queue)
            ));
        }
        if let Some(error) = &self.error {
            why.push(format!("{} in the last push at exit, which failed: {error}", thousands(self.unsent)));
        }
        if !why.is_empty() {
            out.push_str(&format!(" ({})", why.join(", ")));
        }
        out
    }
}

/// `--otlp`: the spans that never reached the collector.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct UnsentSpans {
    pub url: String,
    /// Dropped before any push: the sender's queue (`queue` spans) was full.
    pub dropped: u64,
    pub queue: u64,
    /// Still waiting at exit, when the last push failed (`error`).
    pub unsent: u64,
    pub error: Option<String>,
}

impl UnsentSpans {
    /// In words, as a part of the line of losses.
    pub fn describe(&self) -> String {
        let lost = self.dropped + self.unsent;
        let mut out = format!(
            "{} span{} never sent to the OpenTelemetry collector at {}",
            thousands(lost),
            plural(lost),
            self.url
        );
        let mut why = Vec::new();
        if self.dropped > 0 {
            why.push(format!("{} dropped while {} waited to be sent", thousands(self.dropped), thousands(self.queue)));
        }
        if let Some(error) = &self.error {
            why.push(format!("{} in the last push at exit, which failed: {error}", thousands(self.unsent)));
        }
        if !why.is_empty() {
            out.push_str(&format!(" ({})", why.join(", ")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_of_a_refusal_is_said_with_its_fix() {
        let mut s = super::super::stats::Stats::default();
        s.maps.push(MapStats {
            map: "@h".into(),
            capacity: 16_384,
            refused: 107,
            causes: vec![(Refusal::Full, 2), (Refusal::NoMemory, 105)],
            value_size: 528,
            cpus: 2,
            ..MapStats::default()
        });
        s.maps.push(MapStats {
            map: INFLIGHT_TABLE.into(),
            capacity: 20_000,
            refused: 63_784,
            causes: vec![(Refusal::Full, 63_784)],
            calls_of: vec!["main.hold".into()],
            ..MapStats::default()
        });
        let line = s.lost_line().unwrap();
        let parts: Vec<&str> = line.split("; ").collect();
        assert_eq!(
            parts,
            [
                "2 updates of @h refused: map full at 16,384 keys (--map-size @h=N holds more)",
                "105 updates of @h refused: the kernel had no memory ready for a new key (ENOMEM): @h is not \
                 preallocated, and a probe cannot wait while the kernel's per-CPU allocator refills, so a burst of \
                 new keys outran it (--map-size @h=N with N up to 63,550 preallocates it: N keys x 528 bytes x 2 \
                 CPUs within 64 MiB)",
                "63,784 timed calls of main.hold missed (their returns not seen): the table of goroutines with \
                 calls in flight is full at 20,000 goroutines (--map-size inflight=N holds more)",
            ]
        );
    }

    #[test]
    fn printed_lines_the_collector_never_got_are_said_with_why() {
        let mut s = super::super::stats::Stats::default();
        let url = "http://127.0.0.1:4318".to_string();
        let refused = Some("connection refused".to_string());
        s.otlp = Some(UnsentLogs { url: url.clone(), dropped: 20_000, queue: 10_000, unsent: 10_000, error: refused });
        assert_eq!(
            s.lost_line().unwrap(),
            "30,000 printed lines never sent to the OpenTelemetry collector at http://127.0.0.1:4318 (20,000 dropped \
             while 10,000 waited to be pushed, 10,000 in the last push at exit, which failed: connection refused)"
        );
        s.otlp = Some(UnsentLogs { url, dropped: 3, queue: 10_000, unsent: 0, error: None });
        assert_eq!(
            s.lost_line().unwrap(),
            "3 printed lines never sent to the OpenTelemetry collector at http://127.0.0.1:4318 (3 dropped while \
             10,000 waited to be pushed)"
        );
    }
}

/// The line said when -b's file was changed in place (`runtime::file_guard`): the trace
/// ends with every probe detached, before a process ran the new code under them.
pub fn file_changed(file: &std::path::Path, exec_pid: Option<u32>) -> String {
    let held = match exec_pid {
        Some(pid) => format!("; pid {pid} was held at its exec until they were"),
        None => String::new(),
    };
    format!(
        "gtrace: {} was changed in place since the probes were placed in it (its new code is not what they were \
         placed for): every probe detached{held}; ending the trace. Trace the new build with a new gtrace",
        file.display()
    )
}

/// The line `--stats` says at the end of a trace under -b: how many records of ended
/// processes the sweep forgot (`runtime::ended`), room made for the live ones.
pub fn swept(keys: u64) -> String {
    let s = if keys == 1 { "" } else { "s" };
    format!("-b: {} record{s} of ended processes forgotten", super::numbers::thousands(keys))
}

/// The line said at attach under -b when gtrace cannot hold execs (no CAP_SYS_ADMIN,
/// no fanotify permission events): a change in place is seen at the loop's next look.
pub fn file_guard_weak(file: &std::path::Path) -> String {
    format!(
        "note: gtrace cannot hold a new process of {} at its exec (that needs CAP_SYS_ADMIN and fanotify's \
         permission events): if the file is written over in place (same inode) while traced, the probes are \
         detached at gtrace's next look (about 20 ms), and a process started in that moment may run the new code \
         under them. Deploy by rename (a new file), or run as root",
        file.display()
    )
}

/// The line said at exit when the kernel did not take gtrace's answer to a held exec
/// of -b's file (the exec waited until gtrace ended).
pub fn file_guard_unanswered(n: u32) -> String {
    format!(
        "gtrace: {n} exec{} of the traced file held until gtrace ended: the kernel did not take its answer",
        if n == 1 { "" } else { "s" }
    )
}

/// The line said at start where the kernel can preempt gtrace's programs and has no
/// `bpf_preempt_disable` to stop it (multi-uprobe links before Linux 6.10, with full,
/// lazy or RT preemption): what can go wrong, and what avoids it.
pub fn unguarded_preemption(model: &str) -> String {
    format!(
        "note: this kernel can preempt gtrace's probes (preemption: {model}) and has no bpf_preempt_disable \
         (Linux 6.10+): when two threads hit probes on one CPU at once, a printed event may mix two calls' \
         values and a count may miss an update; a kernel booted with preempt=voluntary, or Linux 6.10 or later, \
         traces exactly"
    )
}
