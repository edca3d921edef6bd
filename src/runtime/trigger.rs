//! gtrace's own trigger functions: `on begin`, `on end` and `on interval` programs are
//! uprobes on these functions of gtrace's executable, scoped to gtrace's pid, so calling
//! one runs its programs once, synchronously.

use super::error::RuntimeError;
use std::hint::black_box;
use std::path::PathBuf;

/// Which trigger function a program is attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    Begin,
    End,
    /// One of `INTERVAL_SLOTS` functions, one per `on interval` probe.
    Interval(usize),
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

impl Trigger {
    fn function(self) -> (extern "C" fn(), &'static str) {
        match self {
            Trigger::Begin => (gtrace_trigger_begin, "gtrace_trigger_begin"),
            Trigger::End => (gtrace_trigger_end, "gtrace_trigger_end"),
            Trigger::Interval(i) => INTERVALS[i % INTERVAL_SLOTS],
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
        let (f, name) = self.function();
        let addr = f as usize as u64;
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
    }
}
