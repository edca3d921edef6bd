//! A running program's code against its file: how many bytes of its executable
//! mappings differ (a uprobe's breakpoint is a byte the kernel writes there), and
//! tests/go/e2e started so that it holds on with its code mapped.

use super::processes::{Lines, Owned};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The executable mappings of `pid` backed by `binary`: (start, end, file offset).
pub fn code_mappings(pid: u32, binary: &Path) -> Vec<(u64, u64, u64)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("read the target's maps");
    let name = binary.to_str().unwrap();
    maps.lines()
        .filter(|l| l.ends_with(name))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if !f[1].contains('x') {
                return None;
            }
            let (lo, hi) = f[0].split_once('-').unwrap();
            let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
            Some((hex(lo), hex(hi), hex(f[2])))
        })
        .collect()
}

/// How many bytes of `pid`'s executable mappings of `binary` differ from the file's.
pub fn bytes_changed(pid: u32, binary: &Path) -> usize {
    let file = std::fs::read(binary).expect("read the binary");
    let mut mem = File::open(format!("/proc/{pid}/mem")).expect("open the target's memory");
    let mappings = code_mappings(pid, binary);
    assert!(!mappings.is_empty(), "no executable mapping of {} in {pid}", binary.display());
    let mut changed = 0;
    for (lo, hi, off) in mappings {
        let mut live = vec![0u8; (hi - lo) as usize];
        mem.seek(SeekFrom::Start(lo)).unwrap();
        mem.read_exact(&mut live).expect("read the target's code");
        let end = (off as usize + live.len()).min(file.len());
        let on_disk = &file[off as usize..end];
        changed += live.iter().zip(on_disk).filter(|(a, b)| a != b).count();
    }
    changed
}

/// tests/go/e2e (`binary`) holding on in main.sleepy for 300 s after `calls` calls of
/// main.add, once it has said so (killed when the test ends), and its pid.
pub fn start_holding(binary: &Path, calls: u32) -> (Owned, u32) {
    let mut child = Command::new(binary)
        .args(["hold", &calls.to_string(), "300000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the program");
    let out = Lines::of(child.stdout.take().unwrap());
    let pid = child.id();
    out.wait_for(Duration::from_secs(10), |l| l.starts_with("calls=")).expect("the program says its calls");
    (Owned(child), pid)
}
