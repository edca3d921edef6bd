//! The kernel's clocks: what turns a probe's `bpf_ktime_get_ns` (CLOCK_MONOTONIC) into
//! Unix time, for spans.

fn now(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec, which `ts` is.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec.saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec)
}

/// Unix time minus the monotonic clock, in nanoseconds: add it to a probe's time.
/// Read between two monotonic readings, so it is off by at most their gap (the
/// smallest of three tries).
pub fn unix_minus_monotonic() -> i64 {
    (0..3)
        .map(|_| {
            let before = now(libc::CLOCK_MONOTONIC);
            let unix = now(libc::CLOCK_REALTIME);
            let after = now(libc::CLOCK_MONOTONIC);
            (after - before, unix - before / 2 - after / 2)
        })
        .min_by_key(|(gap, _)| *gap)
        .map_or(0, |(_, offset)| offset)
}
