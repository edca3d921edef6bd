//! Long-running processes for the export tests: the export test program (tests/go/export,
//! driven through its stdin), gtrace itself with its stderr read as it comes, and a
//! child that is killed when the test ends however it ends.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A child process killed and reaped when dropped.
pub struct Owned(pub Child);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The lines a reader produces, collected by a thread: read as they come, or all at the end.
pub struct Lines {
    rx: Receiver<String>,
    pub all: Arc<Mutex<Vec<String>>>,
    /// Set by the thread once the reader is at its end (every line in `all`).
    ended: Arc<AtomicBool>,
}

impl Lines {
    pub fn of(reader: impl std::io::Read + Send + 'static) -> Lines {
        let (tx, rx) = mpsc::channel();
        let all = Arc::new(Mutex::new(Vec::new()));
        let keep = all.clone();
        let ended = Arc::new(AtomicBool::new(false));
        let end = ended.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines().map_while(Result::ok) {
                keep.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
            end.store(true, Ordering::SeqCst);
        });
        Lines { rx, all, ended }
    }

    /// Waits until the reader is at its end (the writer closed it: every line it wrote
    /// is in `all`), at most `limit`; whether it is. After a process has exited its
    /// last lines may still be in the pipe: a fixed sleep before reading them lost
    /// them on a loaded host.
    pub fn wait_end(&self, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while !self.ended.load(Ordering::SeqCst) {
            if Instant::now() > end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// The next line that `pred` accepts, waiting at most `limit`.
    pub fn wait_for(&self, limit: Duration, pred: impl Fn(&str) -> bool) -> Option<String> {
        let end = Instant::now() + limit;
        loop {
            let left = end.checked_duration_since(Instant::now())?;
            match self.rx.recv_timeout(left) {
                Ok(line) if pred(&line) => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    pub fn text(&self) -> String {
        self.all.lock().unwrap().join("\n")
    }
}

/// The export test program, started and waiting for "go" on its stdin.
pub struct Program {
    pub child: Owned,
    stdin: Option<ChildStdin>,
    pub out: Lines,
    pub pid: u32,
}

/// The script both export tests trace tests/go/export with: a counter keyed by a derived
/// and a written name, a histogram of a parameter, printed lines, a duration histogram.
pub const EXPORT_SCRIPT: &str = r#"
on entry main.handle {
    @requests[method, route: path] = count()
    @size = hist(size)
    if size > 950 { printf("big %s %s %d\n", method, path, size) }
}
on return main.work { @work = hist(elapsed) }
"#;

pub fn export_program() -> PathBuf {
    super::go_build("export", &[])
}

impl Program {
    pub fn start(binary: &Path) -> Program {
        Program::start_args(binary, &[])
    }

    /// `start` with arguments.
    pub fn start_args(binary: &Path, args: &[&str]) -> Program {
        let mut child = Command::new(binary)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the export program");
        let stdin = child.stdin.take();
        let out = Lines::of(child.stdout.take().expect("stdout"));
        let pid = child.id();
        let p = Program { child: Owned(child), stdin, out, pid };
        p.out.wait_for(Duration::from_secs(10), |l| l.starts_with("ready")).expect("the program says ready");
        p
    }

    /// Lets it run; returns its truth: every line it printed until it waits again.
    pub fn go(&mut self) -> String {
        writeln!(self.stdin.as_mut().expect("stdin"), "go").expect("write go");
        self.out.wait_for(Duration::from_secs(30), |l| l == "---").expect("the program prints its truth");
        self.out.text()
    }

    /// Closes its stdin (it ends) and waits for it.
    pub fn finish(&mut self) {
        self.stdin = None;
        let _ = self.child.0.wait();
    }
}

/// The value of `key=` in the program's `truth:` line.
pub fn truth_of(out: &str, key: &str) -> u64 {
    super::truth(out, key) as u64
}

/// The `truth-request: METHOD PATH N` lines, as (method, path) -> N.
pub fn requests(out: &str) -> std::collections::BTreeMap<(String, String), u64> {
    out.lines()
        .filter_map(|l| l.strip_prefix("truth-request: "))
        .map(|l| {
            let (rest, n) = l.rsplit_once(' ').expect("count");
            let (method, path) = rest.split_once(' ').expect("method and path");
            ((method.to_string(), path.to_string()), n.parse().expect("a count"))
        })
        .collect()
}

/// The program's `truth-bucket: K N` lines: N sizes in [2^(K-1), 2^K), as (K, N).
pub fn bucket_truth(truth: &str) -> Vec<(u32, u64)> {
    truth
        .lines()
        .filter_map(|l| l.strip_prefix("truth-bucket: "))
        .map(|l| {
            let (k, n) = l.split_once(' ').expect("K N");
            (k.parse().expect("K"), n.parse().expect("N"))
        })
        .collect()
}

/// gtrace running in the background, its stderr read as it comes.
pub struct Gtrace {
    pub child: Owned,
    pub err: Lines,
    pub out: Lines,
}

impl Gtrace {
    pub fn start(args: &[&str]) -> Gtrace {
        Gtrace::start_command(env!("CARGO_BIN_EXE_gtrace"), args)
    }

    /// `program ARGS` (gtrace under a wrapper such as unshare), read the same way; with
    /// the test's own cache directory (`support::private_cache`).
    pub fn start_command(program: &str, args: &[&str]) -> Gtrace {
        let mut child = Command::new(program)
            .env("XDG_CACHE_HOME", super::private_cache())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start gtrace");
        let err = Lines::of(child.stderr.take().expect("stderr"));
        let out = Lines::of(child.stdout.take().expect("stdout"));
        Gtrace { child: Owned(child), err, out }
    }

    /// Waits until every probe is attached.
    pub fn attached(&self) {
        let attached = self.err.wait_for(Duration::from_secs(30), |l| l.starts_with("Attached") || l.contains("error"));
        assert!(attached.as_deref().is_some_and(|l| l.starts_with("Attached")), "gtrace failed:\n{}", self.err.text());
    }

    /// Waits until every probe is attached and metrics are served: HOST:PORT.
    pub fn serving(&self) -> String {
        self.attached();
        let line = self.err.wait_for(Duration::from_secs(10), |l| l.starts_with("Serving metrics at http://"));
        let line = line.unwrap_or_else(|| panic!("gtrace does not say where it serves:\n{}", self.err.text()));
        line.trim_start_matches("Serving metrics at http://").trim_end_matches("/metrics").to_string()
    }

    /// Sends `signal` and waits for the end: the exit code.
    pub fn stop(&mut self, signal: &str) -> i32 {
        let pid = self.child.0.id().to_string();
        Command::new("kill").args([&format!("-{signal}"), &pid]).status().expect("kill");
        self.wait()
    }

    /// Waits for gtrace to end (at most 30s): its exit code, once its output is read to
    /// the end (10s more at most: a process gtrace started may hold its pipes open).
    pub fn wait(&mut self) -> i32 {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.0.try_wait().expect("wait") {
                self.out.wait_end(Duration::from_secs(10));
                self.err.wait_end(Duration::from_secs(10));
                return status.code().unwrap_or(-1);
            }
            assert!(Instant::now() < end, "gtrace did not end:\n{}", self.err.text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn running(&mut self) -> bool {
        self.child.0.try_wait().expect("try_wait").is_none()
    }
}

/// A copy of the export program of its own (its own inode), so that `-b` on it sees only
/// the processes a test starts, not those of tests running beside it.
pub fn private_export_program(name: &str) -> PathBuf {
    let copy = scratch_dir(name).join("export");
    super::copy_executable(&export_program(), &copy);
    copy
}

/// A TCP port nothing listens on now (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// A fresh directory under target/ for one test's files (emptied when the test runs
/// again, so runs do not pile up Prometheus databases).
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = super::root().join("target/export-tests").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch dir");
    dir
}

/// Polls `probe` every 200ms until it returns Some, at most `limit`.
pub fn poll<T>(limit: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = probe() {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
