//! In the child of a fork, just before it execs the user's command: closing gtrace's own
//! descriptors early. Close-on-exec would close them once the exec is done, but the exec
//! of a file a fanotify group watches waits for that group's answer: a group of a file
//! guard (`file_guard`) that the child alone still held open, its guard gone in the
//! parent, never answered, and the exec waited forever. The descriptors the command
//! inherits on purpose (those without close-on-exec: what gtrace's own parent passed
//! down, a socket a supervisor hands over) stay open, as they would without gtrace.
//!
//! Only async-signal-safe calls (open, getdents64, fcntl, close): the child of a fork
//! of a threaded process may not allocate.

/// Closes every descriptor from 3 up that is marked close-on-exec, but `keep` (the pipe
/// that reports a failed exec). Without /proc nothing is closed early; exec closes them
/// as before.
///
/// # Safety
/// To be called in the child of fork only, before exec.
pub(super) unsafe fn close_own(keep: i32) {
    let dir = libc::open(c"/proc/self/fd".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
    if dir < 0 {
        return;
    }
    let mut buf = [0u8; 4096];
    loop {
        let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len());
        if n <= 0 {
            break;
        }
        let mut at = 0usize;
        while at + 19 < n as usize {
            // struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name.
            let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
            if reclen == 0 || at + reclen > n as usize {
                break;
            }
            if let Some(fd) = parse_fd(&buf[at + 19..at + reclen]) {
                if fd >= 3 && fd != keep && fd != dir && libc::fcntl(fd, libc::F_GETFD) & libc::FD_CLOEXEC != 0 {
                    libc::close(fd);
                }
            }
            at += reclen;
        }
    }
    libc::close(dir);
}

/// A descriptor's number from its NUL-terminated name in /proc/self/fd (`.` and `..`
/// are none).
fn parse_fd(name: &[u8]) -> Option<i32> {
    let mut fd: i32 = 0;
    let mut digits = 0;
    for &c in name.iter().take_while(|c| **c != 0) {
        if !c.is_ascii_digit() {
            return None;
        }
        fd = fd.checked_mul(10)?.checked_add(i32::from(c - b'0'))?;
        digits += 1;
    }
    (digits > 0).then_some(fd)
}

#[cfg(test)]
mod tests {
    use super::parse_fd;

    #[test]
    fn names_in_proc_fd_read_as_descriptors() {
        assert_eq!(parse_fd(b"17\0\0\0"), Some(17));
        assert_eq!(parse_fd(b"0\0"), Some(0));
        assert_eq!(parse_fd(b".\0"), None);
        assert_eq!(parse_fd(b"..\0"), None);
        assert_eq!(parse_fd(b"\0"), None);
        assert_eq!(parse_fd(b"99999999999\0"), None);
    }
}
