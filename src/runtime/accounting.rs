//! What probes cost, as the kernel measures it: each program's run time and run count
//! (`BPF_ENABLE_STATS`: the kernel counts while any process holds the fd it returns, so
//! several gtraces never fight over the `kernel.bpf_stats_enabled` sysctl, which is
//! never written). The cost of a uprobe trap itself is measured in `calibrate`.

use super::error::RuntimeError;
use super::loader::Loaded;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;

/// Where `struct bpf_prog_info` (linux/bpf.h) keeps the statistics, and its size up to
/// them: `run_time_ns` (Linux 5.1), `run_cnt`, `recursion_misses` (5.12).
const INFO_RUN_TIME_NS: usize = 192;
const INFO_RUN_CNT: usize = 200;
const INFO_RECURSION_MISSES: usize = 208;
const INFO_SIZE: usize = 224;

/// `union bpf_attr` as `BPF_OBJ_GET_INFO_BY_FD` reads it.
#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The kernel's statistics of one program (all its loaded copies together).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Time spent running it, while statistics were on.
    pub run_ns: u64,
    /// Runs, while statistics were on.
    pub run_count: u64,
    /// Runs the kernel skipped because a BPF program was already running on that CPU.
    pub missed: u64,
}

impl std::ops::AddAssign for RunStats {
    fn add_assign(&mut self, o: RunStats) {
        self.run_ns += o.run_ns;
        self.run_count += o.run_count;
        self.missed += o.missed;
    }
}

/// Where `struct bpf_prog_info` keeps the program's name (16 bytes, NUL-padded).
const INFO_NAME: usize = 64;

/// `struct bpf_prog_info` of the program behind `fd`, and how many bytes the kernel
/// filled.
fn prog_info(fd: BorrowedFd<'_>) -> io::Result<([u8; INFO_SIZE], usize)> {
    let mut info = [0u8; INFO_SIZE];
    let mut attr =
        InfoAttr { bpf_fd: fd.as_raw_fd() as u32, info_len: INFO_SIZE as u32, info: info.as_mut_ptr() as u64 };
    // SAFETY: `attr` is a valid bpf_attr prefix for BPF_OBJ_GET_INFO_BY_FD; `info` is a
    // buffer of `info_len` bytes that the kernel fills (at most that many).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            &mut attr as *mut InfoAttr,
            std::mem::size_of::<InfoAttr>(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((info, attr.info_len as usize))
}

/// The name the program behind `fd` was loaded with.
pub(super) fn program_name_of(fd: BorrowedFd<'_>) -> io::Result<String> {
    let (info, _) = prog_info(fd)?;
    let name = &info[INFO_NAME..INFO_NAME + 16];
    let end = name.iter().position(|b| *b == 0).unwrap_or(16);
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// The statistics of the program behind `fd`.
pub(super) fn run_stats_of(fd: BorrowedFd<'_>) -> io::Result<RunStats> {
    let (info, len) = prog_info(fd)?;
    // A kernel with a shorter struct fills less (info_len says how much).
    let field = |at: usize| -> u64 {
        if len < at + 8 {
            return 0;
        }
        u64::from_ne_bytes(info[at..at + 8].try_into().unwrap_or([0; 8]))
    };
    Ok(RunStats {
        run_ns: field(INFO_RUN_TIME_NS),
        run_count: field(INFO_RUN_CNT),
        missed: field(INFO_RECURSION_MISSES),
    })
}

impl Loaded {
    /// Turns the kernel's per-program statistics on for as long as this `Loaded` lives
    /// (or until `run_stats_off`). An error when the kernel cannot (before Linux 5.8).
    pub fn enable_run_stats(&mut self) -> Result<(), RuntimeError> {
        self.enable_run_stats_for("turning on the kernel's BPF statistics (BPF_ENABLE_STATS)")
    }

    /// `enable_run_stats`, its failure said as `action`.
    pub fn enable_run_stats_for(&mut self, action: &'static str) -> Result<(), RuntimeError> {
        if self.stats_fd.is_none() {
            let fd = aya::sys::enable_stats(aya::sys::Stats::RunTime)
                .map_err(|e| RuntimeError::Os { action, source: e.io_error })?;
            self.stats_fd = Some(fd);
        }
        Ok(())
    }

    /// Whether the kernel's statistics are on for us.
    pub fn run_stats_on(&self) -> bool {
        self.stats_fd.is_some()
    }

    /// The kernel's statistics of `program`: its aya-loaded copy and its multi-uprobe
    /// copy together. Zero where the kernel says nothing.
    pub fn run_stats(&self, program: &str) -> RunStats {
        let mut total = RunStats::default();
        if let Some(aya::programs::Program::UProbe(p)) = self.ebpf.program(program) {
            if let Ok(fd) = p.fd() {
                total += run_stats_of(fd.as_fd()).unwrap_or_default();
            }
        }
        if let Some(fd) = self.multi.get(program) {
            total += run_stats_of(fd.as_fd()).unwrap_or_default();
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_attr_has_the_kernel_layout() {
        assert_eq!(std::mem::size_of::<InfoAttr>(), 16);
    }
}
