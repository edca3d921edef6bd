//! `--cgroup PATH`: the cgroup whose processes every probe is scoped to (a container, a
//! Kubernetes pod). It must be a directory of the unified (v2) hierarchy; on a hybrid
//! host that is where cgroup2 is mounted (often /sys/fs/cgroup/unified), not a v1
//! controller's tree. It is opened and checked before anything loads; its directory's
//! file descriptor goes into the programs' cgroup array, against which each program asks
//! the kernel whether the current task is in that cgroup or one below it
//! (`bpf_current_task_under_cgroup`).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// `statfs` f_type of the cgroup v2 filesystem (CGROUP2_SUPER_MAGIC).
pub const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
/// `statfs` f_type of a cgroup v1 hierarchy (CGROUP_SUPER_MAGIC).
pub const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;

/// An open cgroup v2 directory.
#[derive(Debug)]
pub struct Cgroup {
    /// As given on the command line.
    pub path: PathBuf,
    /// The cgroup id: the inode number of its directory (what
    /// `bpf_get_current_cgroup_id` returns for a task in it).
    pub id: u64,
    fd: OwnedFd,
}

#[derive(Debug, Error)]
pub enum CgroupError {
    #[error("--cgroup {}: no such cgroup", path.display())]
    Missing {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("--cgroup {}: cannot open it", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("--cgroup {} is {what}, not a cgroup directory", path.display())]
    NotADirectory { path: PathBuf, what: String },
    #[error("--cgroup {} is in a cgroup v1 hierarchy; gtrace scopes probes by the unified (v2) hierarchy", path.display())]
    V1 { path: PathBuf, unified: Option<PathBuf> },
    #[error("--cgroup {} is not a cgroup: it is a directory of {fs}", path.display())]
    NotCgroup { path: PathBuf, fs: String, unified: Option<PathBuf> },
    #[error("--cgroup {}: this host has no cgroup v2 (unified) hierarchy mounted", path.display())]
    NoV2 { path: PathBuf },
}

impl CgroupError {
    /// What to do about it.
    pub fn hint(&self) -> String {
        let unified = |u: &Option<PathBuf>| match u {
            Some(u) => format!("the unified (v2) hierarchy is mounted at {}", u.display()),
            None => "this host has no cgroup v2 hierarchy mounted".to_string(),
        };
        match self {
            CgroupError::Missing { .. } | CgroupError::NotADirectory { .. } => format!(
                "give a directory of the cgroup v2 hierarchy ({}): a process's cgroup is the `0::` line of \
                 /proc/PID/cgroup, a path below that mount",
                match unified_mount() {
                    Some(u) => format!("mounted at {} here", u.display()),
                    None => "not mounted here".to_string(),
                }
            ),
            CgroupError::Open { .. } => "run gtrace as root".to_string(),
            CgroupError::V1 { unified: u, .. } | CgroupError::NotCgroup { unified: u, .. } => {
                format!("{}; give the cgroup's directory there", unified(u))
            }
            CgroupError::NoV2 { .. } => {
                "mount it (mount -t cgroup2 none /sys/fs/cgroup/unified) or boot with systemd.unified_cgroup_hierarchy=1"
                    .to_string()
            }
        }
    }
}

impl From<CgroupError> for crate::diag::Failure {
    fn from(e: CgroupError) -> crate::diag::Failure {
        let hint = e.hint();
        crate::diag::Failure::system(&e, Some(&hint))
    }
}

impl Cgroup {
    /// Opens and checks `path`: an existing directory of a cgroup v2 filesystem.
    pub fn open(path: &Path) -> Result<Cgroup, CgroupError> {
        let meta = std::fs::metadata(path).map_err(|source| CgroupError::Missing { path: path.into(), source })?;
        if !meta.is_dir() {
            let what = crate::input::kind_of(&meta).to_string();
            return Err(CgroupError::NotADirectory { path: path.into(), what });
        }
        let dir = std::fs::File::open(path).map_err(|source| CgroupError::Open { path: path.into(), source })?;
        let fd = OwnedFd::from(dir);
        match fs_type(&fd).map_err(|source| CgroupError::Open { path: path.into(), source })? {
            CGROUP2_SUPER_MAGIC => {}
            CGROUP_SUPER_MAGIC => return Err(CgroupError::V1 { path: path.into(), unified: unified_mount() }),
            other => {
                let unified = unified_mount();
                if unified.is_none() && !kernel_has_cgroup2() {
                    return Err(CgroupError::NoV2 { path: path.into() });
                }
                return Err(CgroupError::NotCgroup { path: path.into(), fs: fs_name(other), unified });
            }
        }
        Ok(Cgroup { path: path.into(), id: meta.ino(), fd })
    }

    /// The directory's descriptor, for the programs' cgroup array.
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }
}

/// The `f_type` of the filesystem `fd` is on.
fn fs_type(fd: &OwnedFd) -> io::Result<i64> {
    // SAFETY: statfs is plain data; fstatfs writes into it and reads a valid open fd.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type as i64)
}

/// A filesystem's name from its magic number, for the filesystems a mistaken path is
/// likely to be on.
fn fs_name(magic: i64) -> String {
    let name = match magic {
        0x0102_1994 => "tmpfs",
        0x6265_6572 => "sysfs",
        0x9fa0 => "procfs",
        0xef53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683e => "btrfs",
        0x794c_7630 => "overlayfs",
        0x7472_6163 => "tracefs",
        0x6462_6720 => "debugfs",
        0xcafe_4a11 => "bpffs",
        _ => return format!("a filesystem of type {magic:#x}"),
    };
    name.to_string()
}

/// Where the cgroup v2 hierarchy is mounted, per /proc/self/mountinfo.
pub fn unified_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    unified_in_mountinfo(&info)
}

/// The mount point of the first cgroup2 mount in a mountinfo text.
fn unified_in_mountinfo(info: &str) -> Option<PathBuf> {
    info.lines().find_map(|line| {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
        let (mount, fs) = line.split_once(" - ")?;
        let fstype = fs.split_whitespace().next()?;
        (fstype == "cgroup2").then(|| mount.split_whitespace().nth(4).map(unescape_octal))?
    })
}

/// mountinfo escapes spaces and the like as `\040`.
fn unescape_octal(s: &str) -> PathBuf {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| std::str::from_utf8(d).ok());
        match octal.filter(|_| bytes[i] == b'\\').and_then(|d| u8::from_str_radix(d, 8).ok()) {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Whether the kernel knows the cgroup2 filesystem at all.
fn kernel_has_cgroup2() -> bool {
    std::fs::read_to_string("/proc/filesystems").is_ok_and(|f| f.lines().any(|l| l.trim_end().ends_with("\tcgroup2")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_unified_mount() {
        let hybrid = "25 30 0:23 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n\
                      26 25 0:24 / /sys/fs/cgroup/unified rw,relatime shared:5 - cgroup2 cgroup2 rw\n\
                      27 25 0:25 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        assert_eq!(unified_in_mountinfo(hybrid), Some(PathBuf::from("/sys/fs/cgroup/unified")));
        let spaced = "26 25 0:24 / /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw\n";
        assert_eq!(unified_in_mountinfo(spaced), Some(PathBuf::from("/mnt/my cgroups")));
        assert_eq!(unified_in_mountinfo("27 25 0:25 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"), None);
    }

    #[test]
    fn refuses_what_is_not_a_cgroup() {
        let err = |p: &str| Cgroup::open(Path::new(p)).unwrap_err();
        assert!(matches!(err("/no/such/cgroup"), CgroupError::Missing { .. }));
        assert!(matches!(err("/proc/self/status"), CgroupError::NotADirectory { .. }));
        match err("/proc") {
            CgroupError::NotCgroup { fs, .. } => assert_eq!(fs, "procfs"),
            CgroupError::NoV2 { .. } => {}
            other => panic!("{other:?}"),
        }
    }
}
