//! The kernel's statistics of BPF programs that another process loaded (bpftrace, or a
//! gtrace run under measurement): which programs a process holds (its fds, as
//! /proc/PID/fdinfo shows them), and each one's name, run time and run count. For the
//! benchmark (benches/perf/ebpf.rs), which compares tracers by what their programs cost,
//! as the kernel measures it, on any machine however slow its traps.

use super::accounting::{run_stats_of, RunStats};
use std::io;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};

const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;

/// Keeps the kernel's run-time statistics on while it lives (`BPF_ENABLE_STATS`).
pub struct StatsOn(#[allow(dead_code)] OwnedFd);

/// Turns the kernel's per-program statistics on for as long as the result lives.
pub fn hold_run_stats() -> io::Result<StatsOn> {
    aya::sys::enable_stats(aya::sys::Stats::RunTime).map(StatsOn).map_err(|e| e.io_error)
}

/// The ids of the BPF programs process `pid` holds a file descriptor of.
pub fn programs_of(pid: u32) -> Vec<u32> {
    let dir = format!("/proc/{pid}/fdinfo");
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut ids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|info| info.lines().find_map(|l| l.strip_prefix("prog_id:")?.trim().parse().ok()))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// `union bpf_attr` for BPF_PROG_GET_FD_BY_ID.
#[repr(C)]
#[derive(Default)]
struct IdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

/// The name and statistics of the program with id `id` (gone: an error).
pub fn program_stats(id: u32) -> io::Result<(String, RunStats)> {
    let attr = IdAttr { id, ..IdAttr::default() };
    // SAFETY: a valid bpf_attr prefix for BPF_PROG_GET_FD_BY_ID; the kernel only reads it.
    let fd = unsafe {
        libc::syscall(libc::SYS_bpf, BPF_PROG_GET_FD_BY_ID, &attr as *const IdAttr, std::mem::size_of::<IdAttr>())
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new fd that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let name = super::accounting::program_name_of(fd.as_fd())?;
    Ok((name, run_stats_of(fd.as_fd())?))
}
