//! Real database servers from Debian's packages for the client library tests: a
//! PostgreSQL cluster made with initdb (run as the `postgres` user, which PostgreSQL
//! requires) and a redis-server, each in a fresh folder under /tmp, listening only on a
//! unix socket in it, stopped and removed when the test ends. None found: None, and
//! the test says SKIP (or fails on CI).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A fresh folder under /tmp, owned by `user` when given.
fn scratch(name: &str, user: Option<&str>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "gtrace-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).expect("create a scratch folder");
    if let Some(user) = user {
        let ok = Command::new("chown").arg(user).arg(&dir).status().is_ok_and(|s| s.success());
        assert!(ok, "chown {user} {}", dir.display());
    }
    dir
}

fn wait_for(what: &str, limit: Duration, ready: impl Fn() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < limit, "{what} not ready after {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A PostgreSQL server of its own: stopped (pg_ctl stop -m immediate) and its folder
/// removed when dropped.
pub struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
    /// The DSN pgx connects with (a unix socket in `dir`).
    pub dsn: String,
}

/// The folder of the newest PostgreSQL installed from Debian's packages.
fn postgres_bin() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> =
        std::fs::read_dir("/usr/lib/postgresql").ok()?.filter_map(|e| e.ok()).map(|e| e.path().join("bin")).collect();
    versions.sort();
    versions.into_iter().rev().find(|b| b.join("initdb").exists())
}

fn as_postgres(bin: &Path, tool: &str, args: &[&str]) -> std::process::Output {
    Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(bin.join(tool))
        .args(args)
        .current_dir("/tmp")
        .output()
        .unwrap_or_else(|e| panic!("run {tool}: {e}"))
}

impl Postgres {
    pub fn start() -> Option<Postgres> {
        let bin = postgres_bin()?;
        let dir = scratch("pg", Some("postgres"));
        let data = dir.join("data");
        let d = data.to_str().expect("UTF-8");
        let out = as_postgres(&bin, "initdb", &["-D", d, "-A", "trust", "-U", "postgres", "--no-sync"]);
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        let sock = dir.to_str().expect("UTF-8");
        let opts = format!("-k {sock} -p 5432 -c listen_addresses='' -c fsync=off");
        let log = dir.join("log");
        let out = as_postgres(&bin, "pg_ctl", &["-D", d, "-o", &opts, "-l", log.to_str().unwrap(), "-w", "start"]);
        assert!(out.status.success(), "pg_ctl start: {}", String::from_utf8_lossy(&out.stderr));
        let pg =
            Postgres { dsn: format!("host={sock} port=5432 user=postgres dbname=postgres sslmode=disable"), dir, bin };
        Some(pg)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let d = self.dir.join("data");
        let _ = as_postgres(&self.bin, "pg_ctl", &["-D", d.to_str().unwrap_or_default(), "-m", "immediate", "stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A redis-server of its own on a unix socket: killed and its folder removed when dropped.
pub struct Redis {
    dir: PathBuf,
    child: Child,
    /// The unix socket go-redis connects to.
    pub socket: PathBuf,
}

impl Redis {
    pub fn start() -> Option<Redis> {
        let server =
            ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].into_iter().find(|p| Path::new(p).exists())?;
        let dir = scratch("redis", None);
        let socket = dir.join("redis.sock");
        let child = Command::new(server)
            .args(["--port", "0", "--save", "", "--appendonly", "no", "--unixsocket"])
            .arg(&socket)
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let r = Redis { dir, child, socket };
        wait_for("redis-server", Duration::from_secs(10), || r.socket.exists());
        Some(r)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
