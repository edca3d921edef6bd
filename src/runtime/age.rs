//! How long a process has been running: its start time in /proc/PID/stat (clock ticks
//! since boot) against the boot-time clock now. `trace::measured` divides the CPU time
//! a process spent over its life by this, for its share of a CPU before gtrace came.

use std::time::Duration;

/// How long `pid` has been running (to the clock tick, 10 ms on most kernels), when
/// its stat file can be read.
pub fn process_age(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // PID (COMM) STATE ... : starttime is field 22, the 20th after COMM's ')'.
    let after = stat.get(stat.rfind(')')? + 1..)?;
    let ticks: u64 = after.split_whitespace().nth(19)?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0)?;
    let started = Duration::from_nanos(ticks.checked_mul(1_000_000_000)? / hz);
    boot_time_now()?.checked_sub(started)
}

/// CLOCK_BOOTTIME now (the clock /proc/PID/stat's start times count on).
fn boot_time_now() -> Option<Duration> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    let ret = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    if ret != 0 {
        return None;
    }
    Some(Duration::new(u64::try_from(ts.tv_sec).ok()?, u32::try_from(ts.tv_nsec).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// procps reads the same start time its own way (`ps -o etimes`, whole seconds): a
    /// wrong field of the stat line, or a wrong tick rate, gives another age (the start
    /// time is counted in ticks since boot, hours of them on a host that has run a while).
    #[test]
    fn a_process_is_as_old_as_ps_says() {
        let pid = std::process::id();
        let before = process_age(pid).expect("own stat");
        let out = std::process::Command::new("ps").args(["-o", "etimes=", "-p", &pid.to_string()]).output();
        let out = out.expect("ps (procps) runs");
        let said: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("ps says whole seconds");
        let after = process_age(pid).expect("own stat");
        // ps truncates to the second, between the two reads.
        assert!(
            before.as_secs() <= said + 1 && said <= after.as_secs() + 1,
            "ps says {said} s, gtrace {before:?} to {after:?}"
        );
    }
}
