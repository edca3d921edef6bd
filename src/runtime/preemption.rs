//! The running kernel's preemption model, as far as it can be known: PREEMPT_RT from the
//! version string; a kernel built with PREEMPT_DYNAMIC says its current model in
//! /sys/kernel/debug/sched/preempt (`none voluntary (full) lazy`: root only) or was
//! booted with `preempt=`; otherwise the version string names PREEMPT or PREEMPT_LAZY
//! builds. What it is for: whether a uprobe's eBPF program can be preempted by another
//! task on its CPU (full, lazy and RT: uprobe programs run with only migration
//! disabled), which matters where the kernel has no `bpf_preempt_disable` to stop it.

/// A preemption model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preemption {
    /// none or voluntary: kernel code runs until it yields.
    NotPreemptible,
    Full,
    Lazy,
    Rt,
    /// PREEMPT_DYNAMIC, and neither debugfs nor the command line says which.
    Unknown,
}

impl Preemption {
    /// The running kernel's.
    pub fn running() -> Preemption {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        parse(
            &read("/proc/sys/kernel/version").unwrap_or_default(),
            read("/sys/kernel/debug/sched/preempt").as_deref(),
            &read("/proc/cmdline").unwrap_or_default(),
        )
    }

    /// Whether another task can run on the CPU in the middle of a uprobe's program
    /// (`Unknown` is counted as yes: it may be).
    pub fn preemptible(self) -> bool {
        !matches!(self, Preemption::NotPreemptible)
    }

    /// How it is named in messages.
    pub fn name(self) -> &'static str {
        match self {
            Preemption::NotPreemptible => "none or voluntary",
            Preemption::Full => "full",
            Preemption::Lazy => "lazy",
            Preemption::Rt => "PREEMPT_RT",
            Preemption::Unknown => "dynamic, model unknown",
        }
    }
}

fn by_name(word: &str) -> Option<Preemption> {
    Some(match word {
        "none" | "voluntary" => Preemption::NotPreemptible,
        "full" => Preemption::Full,
        "lazy" => Preemption::Lazy,
        _ => return None,
    })
}

/// The model from the version string (`#1 SMP PREEMPT_DYNAMIC Debian ...`), debugfs's
/// list with the current one in parentheses, and the kernel's command line.
pub fn parse(version: &str, debugfs: Option<&str>, cmdline: &str) -> Preemption {
    let words: Vec<&str> = version.split_whitespace().collect();
    if words.contains(&"PREEMPT_RT") {
        return Preemption::Rt;
    }
    let current =
        debugfs.and_then(|d| d.split_whitespace().find(|w| w.starts_with('('))).map(|w| w.trim_matches(['(', ')']));
    if let Some(model) = current.and_then(by_name) {
        return model;
    }
    if words.contains(&"PREEMPT_DYNAMIC") {
        let booted = cmdline.split_whitespace().filter_map(|w| w.strip_prefix("preempt=")).last();
        return booted.and_then(by_name).unwrap_or(Preemption::Unknown);
    }
    if words.contains(&"PREEMPT_LAZY") {
        Preemption::Lazy
    } else if words.contains(&"PREEMPT") {
        Preemption::Full
    } else {
        Preemption::NotPreemptible
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_models_of_the_kernels_tests_vm_boots() {
        let debian = "#1 SMP PREEMPT_DYNAMIC Debian 6.12.117-1 (2026-01-01)";
        assert_eq!(parse(debian, Some("none (voluntary) full lazy\n"), ""), Preemption::NotPreemptible);
        assert_eq!(parse(debian, Some("none voluntary (full) lazy\n"), "preempt=full"), Preemption::Full);
        // Debian's 7.3 says `full (lazy)` when booted with preempt=none.
        assert_eq!(parse(debian, Some("full (lazy)\n"), "preempt=none"), Preemption::Lazy);
        // Without debugfs (not root): the command line, else unknown.
        assert_eq!(parse(debian, None, "console=ttyS0 preempt=full"), Preemption::Full);
        assert_eq!(parse(debian, None, "console=ttyS0"), Preemption::Unknown);
        assert_eq!(parse("#1 SMP PREEMPT_RT Debian 7.3.4-1", None, ""), Preemption::Rt);
        assert_eq!(parse("#1 SMP PREEMPT Tue", None, ""), Preemption::Full);
        assert_eq!(parse("#1 SMP PREEMPT_LAZY Tue", None, ""), Preemption::Lazy);
        assert_eq!(parse("#1 SMP Tue", None, ""), Preemption::NotPreemptible);
    }

    #[test]
    fn unknown_counts_as_preemptible() {
        assert!(Preemption::Unknown.preemptible() && Preemption::Rt.preemptible());
        assert!(!Preemption::NotPreemptible.preemptible());
    }
}
