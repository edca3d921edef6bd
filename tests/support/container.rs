//! Containers made by the tests, with the same kernel features a container runtime uses:
//! a process in its own pid and mount namespaces (`unshare`), under a root of its own
//! (`pivot_root` into a tmpfs or an overlay, as runc does), its executable put there by
//! copy, bind mount or an overlay's lower layer; cgroups (v2) made under the unified
//! hierarchy. The program inside is tests/go/fleet, driven through its stdin: each line
//! N makes it call `main.work` N times and print its own truth.

use super::processes::{Lines, Owned};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::time::Duration;

/// tests/go/fleet, built.
pub fn fleet_program() -> PathBuf {
    super::go_build("fleet", &[])
}

/// A fresh directory under target/fleet-tests for one test's files, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = super::root().join("target/fleet-tests").join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a scratch dir");
        Scratch(dir)
    }

    /// A copy of the fleet program of this test's own, so that `-b` sees no other test's
    /// processes.
    pub fn program(&self) -> PathBuf {
        let copy = self.0.join("fleet");
        super::copy_executable(&fleet_program(), &copy);
        copy
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The tools a container test needs, by path: util-linux's and coreutils'.
pub fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    found
}

/// Why container tests cannot run here, if they cannot: the tools are missing.
pub fn missing_tools() -> Option<String> {
    let missing: Vec<&str> =
        ["unshare", "pivot_root", "mount", "cp", "sh"].into_iter().filter(|t| tool(t).is_none()).collect();
    (!missing.is_empty()).then(|| format!("missing {} (util-linux, coreutils)", missing.join(", ")))
}

/// Whether a container test can run here: eBPF privileges and the tools. When not, it
/// says SKIP (or, on CI, fails).
pub fn can_run(test: &str) -> bool {
    if !super::privileged(test) {
        return false;
    }
    if let Some(why) = missing_tools() {
        super::skip(test, &why);
        return false;
    }
    true
}

/// How the container's /app/server is made from the host's binary.
pub enum Place<'a> {
    /// A copy on the container's own tmpfs root: no path on the host reaches it.
    Copy,
    /// The host's file, bind-mounted there: the same inode under another path.
    Bind,
    /// The root is an overlay whose lower layer (a directory on the host, as an image
    /// layer of a container runtime) holds app/server.
    Overlay { layer: &'a Path },
}

/// What the fleet program printed about one round of calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truth {
    pub calls: u64,
    pub sum: u64,
    /// Its pid as it sees it (in its own pid namespace).
    pub pid: u32,
    /// Its cgroup (v2) as /proc/self/cgroup says: `?` where /proc is not mounted.
    pub cgroup: String,
}

/// The fleet program, on the host or in a container, waiting for lines on its stdin.
pub struct Proc {
    pub child: Owned,
    stdin: Option<ChildStdin>,
    pub out: Lines,
    /// Its pid as the host sees it.
    pub host_pid: u32,
    /// Its pid as it sees itself (the `ready pid=` line).
    pub own_pid: u32,
}

impl Proc {
    /// The program started on the host.
    pub fn host(binary: &Path) -> Proc {
        let cmd = Command::new(binary);
        Proc::spawn(cmd, false)
    }

    /// The program in a container: its own pid and mount namespaces, its root a tmpfs
    /// (or an overlay) at `dir`/root, pivoted into, and its executable /app/server.
    pub fn container(binary: &Path, place: Place<'_>, dir: &Path) -> Proc {
        Proc::container_named(binary, place, dir, "server")
    }

    /// `container` with the executable at /app/`name` (with `Place::Overlay`, the layer
    /// must hold app/`name`).
    pub fn container_named(binary: &Path, place: Place<'_>, dir: &Path, name: &str) -> Proc {
        let root = dir.join("root");
        std::fs::create_dir_all(&root).expect("create the container's mount point");
        let q = |p: &Path| format!("'{}'", p.display());
        let (r, bin) = (q(&root), q(binary));
        let mount_root = match &place {
            Place::Copy | Place::Bind => format!("mount -t tmpfs tmpfs {r} && mkdir {r}/app"),
            Place::Overlay { layer } => {
                let (upper, work) = (dir.join("upper"), dir.join("work"));
                std::fs::create_dir_all(&upper).expect("upper dir");
                std::fs::create_dir_all(&work).expect("work dir");
                format!(
                    "mount -t overlay overlay -o lowerdir={},upperdir={},workdir={} {r}",
                    layer.display(),
                    upper.display(),
                    work.display()
                )
            }
        };
        let place_binary = match place {
            Place::Copy => format!(" && cp {bin} {r}/app/{name}"),
            Place::Bind => format!(" && touch {r}/app/{name} && mount --bind {bin} {r}/app/{name}"),
            Place::Overlay { .. } => String::new(),
        };
        let pivot = tool("pivot_root").expect("pivot_root");
        let script = format!(
            "set -e; {mount_root}{place_binary}; mkdir -p {r}/old; cd {r}; {} . old; cd /; exec /app/{name}",
            pivot.display()
        );
        let mut cmd = Command::new(tool("unshare").expect("unshare"));
        cmd.args(["--pid", "--mount", "--propagation", "private", "--kill-child", "sh", "-c", &script]);
        Proc::spawn(cmd, true)
    }

    fn spawn(mut cmd: Command, contained: bool) -> Proc {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start the fleet program");
        let stdin = child.stdin.take();
        let out = Lines::of(child.stdout.take().expect("stdout"));
        let pid = child.id();
        let child = Owned(child);
        let ready = out.wait_for(Duration::from_secs(20), |l| l.starts_with("ready pid="));
        let ready = ready.unwrap_or_else(|| panic!("the fleet program did not start:\n{}", out.text()));
        let own_pid = ready.trim_start_matches("ready pid=").trim().parse().expect("its pid");
        let host_pid = if contained { only_child(pid) } else { pid };
        Proc { child, stdin, out, host_pid, own_pid }
    }

    /// Makes it call `main.work` `n` times; its truth.
    pub fn run(&mut self, n: u64) -> Truth {
        writeln!(self.stdin.as_mut().expect("stdin"), "{n}").expect("write to the fleet program");
        let line = self.out.wait_for(Duration::from_secs(30), |l| l.starts_with("truth:"));
        let line = line.unwrap_or_else(|| panic!("no truth from the fleet program:\n{}", self.out.text()));
        let word = |k: &str| {
            line.split_whitespace().find_map(|w| w.strip_prefix(&format!("{k}="))).map(str::to_string).expect(k)
        };
        Truth {
            calls: word("calls").parse().expect("calls"),
            sum: word("sum").parse().expect("sum"),
            pid: word("pid").parse().expect("pid"),
            cgroup: word("cgroup"),
        }
    }

    /// Closes its stdin (it ends) and waits for it.
    pub fn finish(&mut self) {
        self.stdin = None;
        let _ = self.child.0.wait();
    }

    /// The pid namespace it is in (the inode of /proc/PID/ns/pid).
    pub fn pid_namespace(&self) -> u64 {
        std::fs::metadata(format!("/proc/{}/ns/pid", self.host_pid)).expect("its pid namespace").ino()
    }

    pub fn mount_namespace(&self) -> u64 {
        std::fs::metadata(format!("/proc/{}/ns/mnt", self.host_pid)).expect("its mount namespace").ino()
    }
}

/// The inode of this process's namespace of `kind` (`pid`, `mnt`).
pub fn own_namespace(kind: &str) -> u64 {
    std::fs::metadata(format!("/proc/self/ns/{kind}")).expect("own namespace").ino()
}

/// The one child of `pid` (unshare's forked child, which became the program).
fn only_child(pid: u32) -> u32 {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).expect("read children");
    let pids: Vec<u32> = children.split_whitespace().map(|p| p.parse().expect("a pid")).collect();
    assert_eq!(pids.len(), 1, "unshare {pid} has children {pids:?}");
    pids[0]
}

/// Where the cgroup v2 hierarchy is mounted (on a hybrid host, the unified one).
pub fn unified_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (mount, fs) = l.split_once(" - ")?;
        (fs.split_whitespace().next()? == "cgroup2").then(|| mount.split_whitespace().nth(4).map(PathBuf::from))?
    })
}

/// A cgroup made by a test under the unified hierarchy, removed (with its children)
/// when dropped, once the processes in it have ended.
pub struct TestCgroup {
    pub path: PathBuf,
    children: Vec<PathBuf>,
}

impl TestCgroup {
    pub fn new(name: &str) -> TestCgroup {
        let unified = unified_mount().expect("a cgroup v2 hierarchy");
        let path = unified.join(format!("gtrace-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir(&path);
        std::fs::create_dir(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        TestCgroup { path, children: Vec::new() }
    }

    /// A cgroup below it.
    pub fn child(&mut self, name: &str) -> PathBuf {
        let p = self.path.join(name);
        std::fs::create_dir(&p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
        self.children.push(p.clone());
        p
    }

    /// The cgroup's path as /proc/PID/cgroup names it: from the hierarchy's root.
    pub fn relative(path: &Path) -> String {
        let unified = unified_mount().expect("a cgroup v2 hierarchy");
        format!("/{}", path.strip_prefix(&unified).expect("under the unified mount").display())
    }
}

/// Moves process `pid` into the cgroup at `path`.
pub fn move_into(path: &Path, pid: u32) {
    std::fs::write(path.join("cgroup.procs"), pid.to_string())
        .unwrap_or_else(|e| panic!("move {pid} into {}: {e}", path.display()));
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for dir in self.children.iter().rev().chain(std::iter::once(&self.path)) {
            // A cgroup can be removed once its processes have ended (they may still be
            // exiting).
            for _ in 0..50 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}
