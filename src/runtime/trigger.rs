//! gtrace's own trigger functions: `on begin`, `on end` and `on interval` programs are
//! uprobes on these functions of gtrace's executable, scoped to gtrace's pid, so calling
//! one runs its programs once, synchronously. One more, `Calibrate`, is what the cost of
//! a uprobe trap is measured on (`accounting::calibrate_trap`).

use super::error::RuntimeError;
use crate::arch::trap::TrapKind;
use std::hint::black_box;
use std::path::PathBuf;

/// Which trigger function a program is attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    Begin,
    End,
    /// One of `INTERVAL_SLOTS` functions, one per `on interval` probe.
    Interval(usize),
    /// Timed with and without an empty uprobe, to learn what a trap costs on an
    /// instruction of this kind (functions written in assembly, `arch::*::trap`).
    Calibrate(TrapKind),
}

/// How many `on interval` probes can run as uprobes on trigger functions.
pub const INTERVAL_SLOTS: usize = crate::plan::MAX_INTERVAL_PROBES;

// Each body differs (a different constant) so that no compiler or linker pass can fold two
// triggers into one address.
macro_rules! trigger_fn {
    ($name:ident, $tag:expr) => {
        #[no_mangle]
        #[inline(never)]
        pub extern "C" fn $name() {
            black_box($tag as u64);
        }
    };
}

trigger_fn!(gtrace_trigger_begin, 0x6274_0001u64);
trigger_fn!(gtrace_trigger_end, 0x6274_0002u64);
trigger_fn!(gtrace_trigger_interval_0, 0x6274_0100u64);
trigger_fn!(gtrace_trigger_interval_1, 0x6274_0101u64);
trigger_fn!(gtrace_trigger_interval_2, 0x6274_0102u64);
trigger_fn!(gtrace_trigger_interval_3, 0x6274_0103u64);
trigger_fn!(gtrace_trigger_interval_4, 0x6274_0104u64);
trigger_fn!(gtrace_trigger_interval_5, 0x6274_0105u64);
trigger_fn!(gtrace_trigger_interval_6, 0x6274_0106u64);
trigger_fn!(gtrace_trigger_interval_7, 0x6274_0107u64);

const INTERVALS: [(extern "C" fn(), &str); INTERVAL_SLOTS] = [
    (gtrace_trigger_interval_0, "gtrace_trigger_interval_0"),
    (gtrace_trigger_interval_1, "gtrace_trigger_interval_1"),
    (gtrace_trigger_interval_2, "gtrace_trigger_interval_2"),
    (gtrace_trigger_interval_3, "gtrace_trigger_interval_3"),
    (gtrace_trigger_interval_4, "gtrace_trigger_interval_4"),
    (gtrace_trigger_interval_5, "gtrace_trigger_interval_5"),
    (gtrace_trigger_interval_6, "gtrace_trigger_interval_6"),
    (gtrace_trigger_interval_7, "gtrace_trigger_interval_7"),
];

// The calibration functions, defined in assembly by the host's `arch::*::trap` (each starts
// with one instruction of its kind and returns; they leave registers other than the first
// argument's and memory as they were).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
extern "C" {
    fn gtrace_calibrate_step();
    fn gtrace_calibrate_push();
    fn gtrace_calibrate_branch();
}

/// A call of the calibration function of `kind`, and where it is (the probe goes on the
/// assembly itself, not on the caller).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn calibration(kind: TrapKind) -> (extern "C" fn(), u64) {
    extern "C" fn step() {
        // SAFETY: `mov rax, rdi; ret` (arm64: `mov x0, x0; ret`) under the C calling
        // convention: clobbers only the return register.
        unsafe { gtrace_calibrate_step() }
    }
    extern "C" fn push() {
        // SAFETY: `push rbp; pop rbp; ret` (arm64: `stp x29, x30, [sp, #-16]!; ldp x29,
        // x30, [sp], #16; ret`): the stack is left as it was.
        unsafe { gtrace_calibrate_push() }
    }
    extern "C" fn branch() {
        // SAFETY: `jmp 2f; 2: ret` (arm64: `b 2f; 2: ret`): touches nothing.
        unsafe { gtrace_calibrate_branch() }
    }
    match kind {
        TrapKind::Step => (step, gtrace_calibrate_step as *const () as usize as u64),
        TrapKind::Push => (push, gtrace_calibrate_push as *const () as usize as u64),
        TrapKind::Branch => (branch, gtrace_calibrate_branch as *const () as usize as u64),
    }
}

impl Trigger {
    /// The function to call, its name, and the address its uprobe goes on.
    fn function(self) -> (extern "C" fn(), &'static str, u64) {
        let own = |f: extern "C" fn(), name| (f, name, f as usize as u64);
        match self {
            Trigger::Begin => own(gtrace_trigger_begin, "gtrace_trigger_begin"),
            Trigger::End => own(gtrace_trigger_end, "gtrace_trigger_end"),
            Trigger::Calibrate(kind) => {
                let (f, addr) = calibration(kind);
                (f, kind.calibration_symbol(), addr)
            }
            Trigger::Interval(i) => {
                let (f, name) = INTERVALS[i % INTERVAL_SLOTS];
                own(f, name)
            }
        }
    }

    pub fn name(self) -> &'static str {
        self.function().1
    }

    /// Calls the function, running every program attached to it.
    pub fn fire(self) {
        let f = black_box(self.function().0);
        f();
    }

    /// The file holding the function and the function's offset in it.
    pub fn location(self) -> Result<(PathBuf, u64), RuntimeError> {
        let (_, name, addr) = self.function();
        let maps = std::fs::read_to_string("/proc/self/maps")
            .map_err(|source| RuntimeError::Os { action: "reading /proc/self/maps", source })?;
        file_offset_in_maps(&maps, addr).ok_or(RuntimeError::TriggerNotFound { function: name })
    }
}

/// The file and file offset of `addr` according to a `/proc/PID/maps` text.
pub fn file_offset_in_maps(maps: &str, addr: u64) -> Option<(PathBuf, u64)> {
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (range, _perms, offset) = (fields.next()?, fields.next()?, fields.next()?);
        let (_dev, _inode) = (fields.next()?, fields.next()?);
        let path: Vec<&str> = fields.collect();
        let (start, end) = range.split_once('-')?;
        let start = u64::from_str_radix(start, 16).ok()?;
        let end = u64::from_str_radix(end, 16).ok()?;
        let offset = u64::from_str_radix(offset, 16).ok()?;
        if (start..end).contains(&addr) {
            let path = path.join(" ");
            if !path.starts_with('/') {
                return None;
            }
            return Some((PathBuf::from(path), addr - start + offset));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_from_maps_line() {
        let maps = "55d0c0000000-55d0c0010000 r--p 00000000 08:01 42 /usr/bin/gtrace\n\
                    55d0c0010000-55d0c0200000 r-xp 00010000 08:01 42 /usr/bin/gtrace\n\
                    7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n";
        assert_eq!(file_offset_in_maps(maps, 0x55d0c0010123), Some((PathBuf::from("/usr/bin/gtrace"), 0x10123)));
        assert_eq!(file_offset_in_maps(maps, 0x7ffd00000010), None);
        assert_eq!(file_offset_in_maps(maps, 0x1000), None);
    }

    #[test]
    fn own_triggers_are_found_at_distinct_offsets() {
        let (path, begin) = Trigger::Begin.location().unwrap();
        let (_, end) = Trigger::End.location().unwrap();
        assert!(path.is_absolute());
        assert_ne!(begin, end);
        assert_ne!(Trigger::Interval(0).location().unwrap().1, Trigger::Interval(1).location().unwrap().1);
        // The calibration functions are the assembly of the host's arch::*::trap, each of its
        // kind (arm64 emulates no push: its push function is single-stepped).
        let code = std::fs::read(&path).unwrap();
        let host = crate::arch::Arch::host().expect("a host gtrace runs on");
        for kind in TrapKind::ALL {
            let (_, at) = Trigger::Calibrate(kind).location().unwrap();
            let want = if host == crate::arch::Arch::Arm64 && kind == TrapKind::Push { TrapKind::Step } else { kind };
            assert_eq!(host.trap_kind(&code[at as usize..at as usize + 4]), want);
            Trigger::Calibrate(kind).fire();
        }
    }
}
