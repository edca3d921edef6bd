//! Whether a command gtrace started runs the very file its probes are attached to: a
//! file renamed over the command's path between the attach and the command's exec (a
//! build or a deploy finishing then) leaves the probes in the old file, and the command
//! would run untraced without a word. Compared once the command has exec'd: the device
//! and inode of the pinned file against those of `/proc/PID/exe`.

use std::os::unix::fs::MetadataExt;

/// Whether process `pid` runs `file` (same device and inode). None when it cannot be
/// told: the process already ended (a zombie has no executable), or `file` cannot be
/// stat'ed.
pub fn runs_file(pid: u32, file: &std::fs::File) -> Option<bool> {
    let pinned = file.metadata().ok()?;
    let exe = std::fs::metadata(format!("/proc/{pid}/exe")).ok()?;
    Some((pinned.dev(), pinned.ino()) == (exe.dev(), exe.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::held::spawn_held;

    /// A copy of `sleep` at `path` (a file of its own: its own inode).
    fn sleep_copy(path: &std::path::Path) {
        let sleep = crate::runtime::process::resolve_command("sleep").unwrap();
        std::fs::copy(sleep, path).unwrap();
    }

    #[test]
    fn a_file_renamed_over_the_command_before_its_exec_is_told() {
        let dir = std::env::temp_dir().join(format!("gtrace-replaced-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (path, other) = (dir.join("cmd"), dir.join("cmd.new"));
        for replace in [false, true] {
            sleep_copy(&path);
            // What gtrace attaches to: the file open before the command runs.
            let pinned = std::fs::File::open(&path).unwrap();
            let mut child = spawn_held(&[path.display().to_string(), "5".into()]).unwrap();
            if replace {
                sleep_copy(&other);
                std::fs::rename(&other, &path).unwrap();
            }
            child.release().unwrap();
            assert_eq!(runs_file(child.pid(), &pinned), Some(!replace), "replaced: {replace}");
            child.kill();
            // Ended and reaped: nothing to compare with.
            assert_eq!(runs_file(child.pid(), &pinned), None);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
