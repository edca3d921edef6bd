//! Helpers shared by the integration tests: building the Go test programs of `tests/go/`
//! (cached by a hash of their sources and flags) and reading what Go's own tools say of
//! a binary, to check gtrace against.
#![allow(dead_code)]

pub mod toolchain;

pub mod code;
pub mod collector;
pub mod container;
pub mod cost;
pub mod jsonout;
pub mod processes;
pub mod prometheus;
pub mod rng;
pub mod servers;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The crate's root folder.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Builds the Go program in `tests/go/<dir>` with `go build <extra_flags>` and returns
/// the executable, `target/gobin/<dir>-<hash>`: rebuilt only when its sources or the
/// flags change. Panics with go's stderr if the build fails.
pub fn go_build(dir: &str, extra_flags: &[&str]) -> PathBuf {
    go_build_env(dir, extra_flags, &[])
}

/// `go_build` with extra environment variables, e.g. `[("GOARCH", "arm64")]`.
pub fn go_build_env(dir: &str, extra_flags: &[&str], env: &[(&str, &str)]) -> PathBuf {
    go_build_dir(&root().join("tests/go").join(dir), dir, extra_flags, env)
}

/// The grpc-go versions tests/go/grpcprog is built with (tests/go/grpcprog/mods/VERSION):
/// the oldest and the newest the grpc library's header names.
pub const GRPC_VERSIONS: &[&str] = &["v1.69.0", "v1.85.0"];

/// The pgx versions tests/go/pgxprog is built with (tests/go/pgxprog/mods/VERSION): the
/// oldest and the newest the pgx library's header names.
pub const PGX_VERSIONS: &[&str] = &["v5.7.2", "v5.12.0"];

/// The go-redis versions tests/go/redisprog is built with (tests/go/redisprog/mods/VERSION):
/// the oldest and the newest the redis library's header names.
pub const REDIS_VERSIONS: &[&str] = &["v9.7.0", "v9.23.0"];

/// The kafka-go versions tests/go/kafkaprog is built with (tests/go/kafkaprog/mods/VERSION):
/// the oldest and the newest the kafka library's header names, and v0.4.48 and v0.4.49
/// between (the last built with Go 1.15's semantics, kafka-go's go.mod then, and the
/// first with Go 1.23's: the compiled writeBatch differs).
pub const KAFKA_VERSIONS: &[&str] = &["v0.4.47", "v0.4.48", "v0.4.49", "v0.4.51"];

/// A program that uses what the stdlib library `name` probes, for `--check` and compile
/// tests of every library, built for `goarch` (None: this host's): grpc, kafka, pgx and
/// redis have their own test programs, sql sqlprog, and every other httpserver (net/http,
/// and the runtime that gc, lock and sched probe).
pub fn program_using(name: &str, goarch: Option<&str>) -> PathBuf {
    let env: Vec<(&str, &str)> = goarch.map(|a| ("GOARCH", a)).into_iter().collect();
    let last = |v: &[&'static str]| v[v.len() - 1];
    match name {
        "grpc" => versioned("grpcprog", last(GRPC_VERSIONS), &[], &env),
        "kafka" => versioned("kafkaprog", last(KAFKA_VERSIONS), &[], &env),
        "pgx" => versioned("pgxprog", last(PGX_VERSIONS), &[], &env),
        "redis" => versioned("redisprog", last(REDIS_VERSIONS), &[], &env),
        "sql" => go_build_env("sqlprog", &[], &env),
        _ => go_build_env("httpserver", &[], &env),
    }
}

/// tests/go/grpcprog built against grpc-go `version` (with extra `go build` flags).
pub fn grpcprog(version: &str, flags: &[&str]) -> PathBuf {
    versioned("grpcprog", version, flags, &[])
}

/// `grpcprog` with extra environment variables, e.g. `[("GOARCH", "arm64")]`.
pub fn grpcprog_env(version: &str, flags: &[&str], env: &[(&str, &str)]) -> PathBuf {
    versioned("grpcprog", version, flags, env)
}

/// A test program built against one version of a library from the Go module proxy:
/// tests/go/PROG's main.go with the go.mod and go.sum of tests/go/PROG/mods/VERSION, put
/// together under target/PROG/VERSION and built like every test program (cached under
/// target/gobin by a hash of its sources, flags and environment).
pub fn versioned(prog: &str, version: &str, flags: &[&str], env: &[(&str, &str)]) -> PathBuf {
    let src = root().join("tests/go").join(prog);
    let dir = root().join("target").join(prog).join(version);
    std::fs::create_dir_all(&dir).expect("create the build folder");
    let copy = |from: PathBuf, name: &str| {
        let text = std::fs::read(&from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        // Written only when it changed, and by a rename: a test building at the same
        // time never sees a half-written file.
        if std::fs::read(dir.join(name)).ok().as_deref() != Some(&text[..]) {
            let tmp = unique_tmp(&dir, name);
            std::fs::write(&tmp, &text).expect("write");
            std::fs::rename(&tmp, dir.join(name)).expect("rename");
        }
    };
    copy(src.join("main.go"), "main.go");
    copy(src.join("mods").join(version).join("go.mod"), "go.mod");
    copy(src.join("mods").join(version).join("go.sum"), "go.sum");
    go_build_at_env(&dir, &format!("{prog}-{version}"), flags, env)
}

/// A Go program of `n` tiny functions `main.f0000`... (each `x ^ i`, never inlined) in
/// the slice `fs`, and `main` (what follows the slice), generated `by` a test as
/// `target/gen/NAME-N` (its files written only when they change) and built once.
pub fn many_functions(name: &str, n: usize, by: &str, main: &str) -> PathBuf {
    let dir = root().join(format!("target/gen/{name}-{n}"));
    std::fs::create_dir_all(&dir).unwrap();
    let imports = "import (\n\t\"fmt\"\n\t\"os\"\n\t\"strconv\"\n\t\"time\"\n)\n\n";
    let mut src = format!("// Generated by {by}.\npackage main\n\n{imports}");
    for i in 0..n {
        src.push_str(&format!("//go:noinline\nfunc f{i:04}(x int) int {{ return x ^ {i} }}\n\n"));
    }
    src.push_str("var fs = []func(int) int{\n");
    for i in 0..n {
        src.push_str(&format!("\tf{i:04},\n"));
    }
    src.push_str("}\n");
    src.push_str(main);
    let write_if_changed = |path: PathBuf, text: &str| {
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
            std::fs::write(&path, text).unwrap();
        }
    };
    write_if_changed(dir.join("main.go"), &src);
    write_if_changed(dir.join("go.mod"), &format!("module example.com/{name}\n\ngo 1.21\n"));
    go_build_at(&dir, &format!("{name}-{n}"), &[])
}

/// The `--budget` lines of a run: each decision's.
pub fn budget_decisions(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("--budget ") && l.contains(": detached ")).collect()
}

/// Builds the Go program in `src` (e.g. examples/worker) like `go_build`, as
/// `target/gobin/<name>-<hash>`.
pub fn go_build_at(src: &Path, name: &str, extra_flags: &[&str]) -> PathBuf {
    go_build_dir(src, name, extra_flags, &[])
}

/// `go_build_at` with extra environment variables, e.g. `[("GOARCH", "arm64")]`.
pub fn go_build_at_env(src: &Path, name: &str, extra_flags: &[&str], env: &[(&str, &str)]) -> PathBuf {
    go_build_dir(src, name, extra_flags, env)
}

fn go_build_dir(src: &Path, dir: &str, extra_flags: &[&str], env: &[(&str, &str)]) -> PathBuf {
    assert!(src.is_dir(), "no Go program at {}", src.display());
    let mut hasher = DefaultHasher::new();
    hash_tree(src, &mut hasher);
    extra_flags.hash(&mut hasher);
    env.hash(&mut hasher);
    go_version().hash(&mut hasher);
    let out_dir = root().join("target/gobin");
    std::fs::create_dir_all(&out_dir).expect("create target/gobin");
    let out = out_dir.join(format!("{dir}-{:016x}", hasher.finish()));
    if out.exists() {
        return out;
    }
    let tmp = unique_tmp(&out_dir, dir);
    let output = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&tmp)
        .args(extra_flags)
        .arg(".")
        .current_dir(src)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .envs(env.iter().copied())
        .output()
        .expect("run go build");
    if !output.status.success() {
        panic!("go build of tests/go/{dir} {extra_flags:?} failed:\n{}", String::from_utf8_lossy(&output.stderr));
    }
    publish(&tmp, &out);
    out
}

/// Puts a program built at `tmp` in place at `out`, unless a build that raced this one
/// already did: the first in wins and is never replaced. A test may already trace `out`,
/// and a uprobe is on the file it opened: a rename over it would give the test's
/// command a file without the probes (no hits, and nothing said).
pub fn publish(tmp: &Path, out: &Path) {
    match std::fs::hard_link(tmp, out) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => panic!("linking the built program to {}: {e}", out.display()),
    }
    let _ = std::fs::remove_file(tmp);
}

/// Copies the executable `from` to `to` (a file of its own; written over in place, the
/// same inode, when `to` exists) with cp(1), in a process of its own. A copy written by
/// this test process holds `to` open for writing while it writes; a test beside it that
/// forks then gives its child that descriptor until the child's exec, and running `to`
/// meanwhile fails with ETXTBSY (tests/fleet with --test-threads=16: "Text file busy").
pub fn copy_executable(from: &Path, to: &Path) {
    let out = Command::new("cp").arg(from).arg(to).output().expect("run cp");
    assert!(out.status.success(), "cp {} {}: {}", from.display(), to.display(), String::from_utf8_lossy(&out.stderr));
}

/// A name in `out_dir` no other build of this test process uses: programs are built under
/// it and renamed, since tests running in parallel may build the same program at once.
/// One counter for every builder (`go_build`, `toolchain::build`): two counters gave two
/// builds of the same program the same name.
pub fn unique_tmp(out_dir: &Path, name: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    out_dir.join(format!(".{name}-{}-{}.tmp", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)))
}

/// Hashes every file under `dir` (names and contents), in a stable order.
pub fn hash_tree(dir: &Path, hasher: &mut DefaultHasher) {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).expect("read test program dir").map(|e| e.expect("dir entry").path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            hash_tree(&path, hasher);
        } else {
            path.file_name().hash(hasher);
            std::fs::read(&path).expect("read source").hash(hasher);
        }
    }
}

/// The Go toolchain's version, as `go env GOVERSION` prints it: `go1.26.8`.
pub fn go_version() -> String {
    let out = Command::new("go").args(["env", "GOVERSION"]).env("GOTOOLCHAIN", "local").output().expect("run go env");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// One instruction as `go tool objdump` prints it.
#[derive(Clone, Debug)]
pub struct ObjdumpLine {
    /// The source position: `main.go:42`.
    pub position: String,
    pub addr: u64,
    pub bytes: Vec<u8>,
    /// The Go assembler text: `CMPQ SP, 0x10(R14)`, `RET`.
    pub asm: String,
}

/// The instructions of the function named exactly `function`, per `go tool objdump`.
pub fn objdump(binary: &Path, function: &str) -> Vec<ObjdumpLine> {
    let pattern = format!("^{}$", regex_escape(function));
    let lines = parse_objdump(&objdump_text(binary, &["-s", &pattern]));
    assert!(!lines.is_empty(), "go tool objdump found no function {function}");
    lines
}

/// Every instruction of the whole binary, per `go tool objdump`.
pub fn objdump_all(binary: &Path) -> Vec<ObjdumpLine> {
    parse_objdump(&objdump_text(binary, &[]))
}

fn objdump_text(binary: &Path, args: &[&str]) -> String {
    let out = Command::new("go")
        .args(["tool", "objdump"])
        .args(args)
        .arg(binary)
        .env("GOTOOLCHAIN", "local")
        .output()
        .expect("run go tool objdump");
    assert!(out.status.success(), "go tool objdump: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The instructions of `go tool objdump` output, every function's in a row.
fn parse_objdump(text: &str) -> Vec<ObjdumpLine> {
    let mut lines = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with("TEXT ")) {
        let cols: Vec<&str> = line.trim().split('\t').filter(|c| !c.is_empty()).collect();
        if cols.len() < 3 {
            continue;
        }
        let addr = u64::from_str_radix(cols[1].trim_start_matches("0x"), 16).expect("objdump address");
        let hex = cols[2];
        let bytes = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect();
        let position = cols[0].to_string();
        lines.push(ObjdumpLine { position, addr, bytes, asm: cols.get(3).unwrap_or(&"").trim().to_string() });
    }
    lines
}

fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Whether this process may load eBPF and attach uprobes: root's CAP_SYS_ADMIN, or both
/// CAP_BPF and CAP_PERFMON, in the effective set.
pub fn can_load_bpf() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let cap_sys_admin = 1u64 << 21;
    let cap_bpf_and_perfmon = (1u64 << 39) | (1u64 << 38);
    cap_eff & cap_sys_admin != 0 || cap_eff & cap_bpf_and_perfmon == cap_bpf_and_perfmon
}

/// Whether the tests run on CI (CI=true): there a test that cannot run what it needs
/// fails instead of saying SKIP.
pub fn on_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// A test that cannot run here: says SKIP loudly (straight to stderr, which the harness
/// does not hide), or, on CI, fails.
pub fn skip(test: &str, why: &str) {
    if on_ci() {
        panic!("{test}: {why}, and CI=true: on CI a test that cannot run fails");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n!!! SKIP {test}: {why}\n");
}

/// True when this process may load eBPF. Otherwise a test that needs it says SKIP loudly
/// (straight to stderr, which the harness does not hide), or fails when CI=true: on CI a
/// test that cannot load eBPF must never pass silently.
pub fn privileged(test: &str) -> bool {
    let ok = can_load_bpf();
    if !ok {
        skip(test, "cannot load eBPF here (need root, or CAP_BPF and CAP_PERFMON)");
    }
    ok
}

/// What a run of the gtrace binary printed, and its exit code.
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

/// The cache directory (`XDG_CACHE_HOME`) of the running test, never the user's: one
/// per test (named by its thread, as the test harness names it), emptied the first time
/// this test process asks for it, so that tests neither read what an earlier run left
/// nor race each other's cache files. A thread a test spawned itself shares one directory
/// with the other such threads of the process.
pub fn private_cache() -> PathBuf {
    static MADE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let thread = std::thread::current();
    let test = match thread.name() {
        Some(name) if name != "main" => name.replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_"),
        _ => format!("process-{}", std::process::id()),
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("xdg-cache").join(test);
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if !made.contains(&dir) {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test's cache directory");
        made.push(dir.clone());
    }
    dir
}

/// A command for the real gtrace binary with the test's own cache directory
/// (`private_cache`).
pub fn gtrace_command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gtrace"));
    c.env("XDG_CACHE_HOME", private_cache());
    c
}

/// Runs the real gtrace binary.
pub fn gtrace(args: &[&str]) -> Run {
    gtrace_env(args, &[])
}

/// `gtrace` with extra environment variables, e.g. `[("GTRACE_NO_UPROBE_MULTI", "1")]`
/// (an `XDG_CACHE_HOME` there replaces the test's own cache directory).
pub fn gtrace_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = gtrace_command().args(args).envs(env.iter().copied()).output().expect("run gtrace");
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code().unwrap_or(-1),
    }
}

/// Runs gtrace with `args`, then `-c` with `program` started with `program_args`; fails
/// the test (with what gtrace printed) unless gtrace exits 0.
pub fn trace_command(args: &[&str], program: &Path, program_args: &str) -> Run {
    let cmd = format!("{} {program_args}", program.display());
    let mut all = args.to_vec();
    all.extend(["-c", cmd.trim_end()]);
    let r = gtrace(&all);
    assert_eq!(r.code, 0, "gtrace {all:?} failed:\nstdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    r
}

/// `trace_command`, and gtrace said it attached.
pub fn trace_attached(args: &[&str], program: &Path, program_args: &str) -> Run {
    let r = trace_command(args, program, program_args);
    assert!(r.stderr.contains("Attached"), "no Attached line: {}", r.stderr);
    r
}

/// The value of `key=` in a test program's own output (its ground truth).
pub fn truth(out: &str, key: &str) -> i64 {
    out.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {out}"))
        .parse()
        .unwrap_or_else(|_| panic!("{key}= is not a number in {out}"))
}

/// The lines of `out` starting with `prefix`, without it, sorted: gtrace's lines and a
/// program's lines of the same format compare one to one.
pub fn sorted_lines(out: &str, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = out.lines().filter_map(|l| l.strip_prefix(prefix)).map(String::from).collect();
    v.sort();
    v
}

/// The number of the line of tests/go/PROGRAM/main.go marked `// L:NAME`.
pub fn marked_line(program: &str, name: &str) -> u32 {
    let path = root().join("tests/go").join(program).join("main.go");
    let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mark = format!("// L:{name}");
    let i = source.lines().position(|l| l.trim_end().ends_with(&mark));
    i.unwrap_or_else(|| panic!("no {mark} in {}", path.display())) as u32 + 1
}

/// The number gtrace printed for map `name` (`@name: V`, or `@name: V (partial: ...)`),
/// the first time.
pub fn map_value(out: &str, name: &str) -> i64 {
    let prefix = format!("{name}: ");
    let line = out.lines().find_map(|l| l.strip_prefix(&prefix));
    let line = line.unwrap_or_else(|| panic!("no `{prefix}` line in:\n{out}"));
    line.split(" (partial: ")
        .next()
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("`{name}` is not a number in:\n{out}"))
}

/// `gtrace ARGS --check -b BINARY`.
pub fn check_against(args: &[&str], binary: &Path) -> Run {
    let mut all: Vec<&str> = args.to_vec();
    let b = binary.display().to_string();
    all.extend(["--check", "-b", &b]);
    gtrace(&all)
}

/// The names `gtrace --list-libraries` lists.
pub fn stdlib_names() -> Vec<String> {
    let listing = gtrace(&["--list-libraries"]);
    assert_eq!(listing.code, 0, "{}", listing.stderr);
    listing.stdout.lines().filter_map(|l| l.split_whitespace().next()).map(String::from).collect()
}

/// Waits for `child` at most `bound`; kills it and fails the test when it is still
/// running then (a hang). Returns its exit code (-1 when a signal ended it).
pub fn wait_bounded(child: &mut std::process::Child, bound: std::time::Duration, what: &str) -> i32 {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            return status.code().unwrap_or(-1);
        }
        if start.elapsed() > bound {
            let _ = child.kill();
            panic!("{what}: still running after {bound:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
