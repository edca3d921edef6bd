//! Which of the capabilities tracing needs gtrace holds (its effective set, from
//! /proc/self/status), so that a refusal for lack of privileges names the ones missing:
//! CAP_BPF (maps, programs) and CAP_PERFMON (kprobe-type programs, which uprobes are,
//! and their links) always; CAP_SYS_ADMIN for perf-event uprobes, what kernels without
//! multi-uprobe links (before 6.6) attach with, since the fix for CVE-2025-38466. And
//! the effective user id, whose files alone the cache trusts.

/// A capability tracing may need, with its number (linux/capability.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    SysAdmin = 21,
    Perfmon = 38,
    Bpf = 39,
}

impl Capability {
    pub const fn name(self) -> &'static str {
        match self {
            Capability::SysAdmin => "CAP_SYS_ADMIN",
            Capability::Perfmon => "CAP_PERFMON",
            Capability::Bpf => "CAP_BPF",
        }
    }
}

/// The capabilities a kernel wants of gtrace: with or without perf-event uprobes.
pub fn needed(perf_event_uprobes: bool) -> Vec<Capability> {
    let mut caps = vec![Capability::Bpf, Capability::Perfmon];
    if perf_event_uprobes {
        caps.push(Capability::SysAdmin);
    }
    caps
}

/// The effective set in a /proc/PID/status text (`CapEff:\t000001ffffffffff`).
pub fn effective(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
    u64::from_str_radix(hex, 16).ok()
}

/// Of `needed`, those the set `held` lacks. CAP_SYS_ADMIN stands in for CAP_BPF and
/// CAP_PERFMON on kernels before 5.8, which had neither; on later ones it does not
/// for loading programs, but it is not a refusal's likely cause then.
pub fn missing(held: u64, needed: &[Capability]) -> Vec<Capability> {
    let has = |c: Capability| held & (1u64 << c as u32) != 0;
    needed.iter().copied().filter(|c| !has(*c)).collect()
}

/// What gtrace's own process lacks of `needed` (nothing when it cannot tell).
pub fn missing_here(needed: &[Capability]) -> Vec<Capability> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| effective(&s))
        .map_or(Vec::new(), |held| missing(held, needed))
}

/// The sentence a refusal adds: `gtrace lacks CAP_PERFMON (it holds CAP_BPF)`.
pub fn say_missing(missing: &[Capability], needed: &[Capability]) -> Option<String> {
    if missing.is_empty() {
        return None;
    }
    let names = |cs: Vec<Capability>| cs.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ");
    let held: Vec<Capability> = needed.iter().copied().filter(|c| !missing.contains(c)).collect();
    let holds = if held.is_empty() { String::new() } else { format!(" (it holds {})", names(held)) };
    Some(format!("gtrace lacks {}{holds}", names(missing.to_vec())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_effective_set_and_names_what_is_missing() {
        let status = "Name:\tgtrace\nCapInh:\t0000000000000000\nCapEff:\t000000c000000000\nCapBnd:\t000001ffffffffff\n";
        let held = effective(status).unwrap();
        assert_eq!(held, (1 << 38) | (1 << 39));
        assert_eq!(missing(held, &needed(false)), vec![]);
        assert_eq!(missing(held, &needed(true)), vec![Capability::SysAdmin]);
        let only_bpf = 1u64 << 39;
        let lacks = missing(only_bpf, &needed(false));
        assert_eq!(say_missing(&lacks, &needed(false)).as_deref(), Some("gtrace lacks CAP_PERFMON (it holds CAP_BPF)"));
        assert_eq!(
            say_missing(&missing(0, &needed(true)), &needed(true)).as_deref(),
            Some("gtrace lacks CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN")
        );
        assert_eq!(effective("Name:\tx\n"), None);
    }
}

/// The effective user id of this process (whose files the cache trusts).
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() }
}
