//! Nothing hangs, nothing panics, nothing is orphaned: huge numbers, files that are not
//! files, a closed or full output, `exit()` at the start, and the ways gtrace can be
//! ended (SIGHUP, SIGKILL), each run through the real gtrace binary. Every run is bounded:
//! a hang fails the test instead of stopping the suite.
//!
//! The tracing tests need root (SKIP without it, a failure when CI=true).

mod support;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Far longer than any of these runs takes; a hang exceeds it.
const BOUND: Duration = Duration::from_secs(60);

fn gtrace_cmd(args: &[&str]) -> Command {
    let mut c = support::gtrace_command();
    c.args(args).stdin(Stdio::null());
    c
}

/// Waits for gtrace at most `BOUND`; kills it and fails the test on a hang.
fn wait_bounded(child: &mut Child, what: &str) -> i32 {
    support::wait_bounded(child, BOUND, what)
}

/// Runs gtrace to its end (bounded); its output and exit code.
fn run(args: &[&str]) -> support::Run {
    let mut child = gtrace_cmd(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    let code = wait_bounded(&mut child, &format!("{args:?}"));
    support::Run { stdout: out.join().unwrap(), stderr: err.join().unwrap(), code }
}

fn assert_no_panic(r: &support::Run) {
    assert_ne!(r.code, 101, "gtrace panicked:\n{}", r.stderr);
    assert!(!r.stderr.contains("panicked") && !r.stderr.contains("RUST_BACKTRACE"), "{}", r.stderr);
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("robustness-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

#[test]
fn a_duration_too_long_is_an_error_not_a_panic() {
    let bin = support::go_build("e2e", &[]);
    for d in ["99999999999999999999s", "99999999999999999999h", "1e400s"] {
        let r = run(&["--duration", d, "-e", "on begin { }", "--check", "-b", bin.to_str().unwrap()]);
        assert_no_panic(&r);
        assert_eq!(r.code, 2, "{d}: {}", r.stderr);
        assert!(r.stderr.contains("--duration"), "{}", r.stderr);
    }
    // The largest duration the message names is one that parses.
    let max = format!("{}s", u64::MAX);
    let r = run(&["--duration", &max, "-e", "on begin { }", "--check", "-b", bin.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let past = format!("{}s", u128::from(u64::MAX) + 1);
    let r = run(&["--duration", &past, "-e", "on begin { }", "--check", "-b", bin.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("`{past}` is too long: a duration holds at most {} seconds", u64::MAX)),
        "{}",
        r.stderr
    );
}

#[test]
fn long_literals_and_records_are_errors_at_their_place() {
    let bin = support::go_build("values", &[]);
    let long = "x".repeat(40_000);
    let names = vec!["name"; 100].join(", ");
    let cases = [
        (format!("on entry main.greet {{ print(\"{long}\") }}"), "bytes in one record"),
        (format!("on entry main.greet {{ if name == \"{long}\" {{ print(1) }} }}"), "bytes of stack"),
        (format!("on entry main.greet {{ self.s = \"{long}\" }}"), "bytes of stack"),
        (format!("on entry main.greet {{ printf(\"{}\", {names}) }}", "%s".repeat(100)), "bytes in one record"),
    ];
    for (script, says) in cases {
        let r = run(&["-e", &script, "--string-limit", "400", "--check", "-b", bin.to_str().unwrap()]);
        assert_no_panic(&r);
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(r.stderr.contains(says), "{}", r.stderr);
        assert!(r.stderr.contains("┌─ <-e>:1:"), "no place: {}", r.stderr);
    }
}

#[test]
fn files_that_are_not_files_are_refused_at_once() {
    let bin = support::go_build("e2e", &[]);
    let fifo = scratch("fifo");
    mkfifo(&fifo);
    let dir = scratch("");
    for (path, kind) in [
        ("/dev/zero", "a character device"),
        (fifo.to_str().unwrap(), "a named pipe"),
        (dir.to_str().unwrap(), "a directory"),
    ] {
        let r = run(&["-e", "on begin { }", "--check", "-b", path]);
        assert_no_panic(&r);
        assert_eq!(r.code, 1);
        assert!(r.stderr.contains(&format!("is {kind}")), "{}", r.stderr);
        let r = run(&[path, "--check", "-b", bin.to_str().unwrap()]);
        assert_eq!(r.code, 1);
        assert!(r.stderr.contains("cannot read the script") && r.stderr.contains(kind), "{}", r.stderr);
    }
}

/// A sparse file of `size` bytes that starts with `head`: it takes no room on the disk.
fn sparse(name: &str, head: &[u8], size: u64) -> PathBuf {
    let path = scratch(name);
    std::fs::write(&path, head).unwrap();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(size).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn huge_files_are_refused_by_size_and_kind_before_reading() {
    let bin = support::go_build("e2e", &[]);
    let gt = env!("CARGO_BIN_EXE_gtrace");
    let b = bin.to_str().unwrap();
    let size = 50 << 30;
    let zeros = sparse("zeros", b"", size);
    let elf = sparse("elf", b"\x7fELF\x02\x01\x01", size);
    let script = sparse("huge.gt", b"on begin { }\n", size);
    let plan = sparse("plan.json", b"{", size);
    let (zeros, elf, script, plan) =
        (zeros.to_str().unwrap(), elf.to_str().unwrap(), script.to_str().unwrap(), plan.to_str().unwrap());
    for (args, says) in [
        (vec!["-e", "on begin { }", "--check", "-b", zeros], format!("{zeros} is not an ELF executable")),
        (vec!["-e", "on begin { }", "--check", "-b", elf], format!("{elf} is larger than gtrace reads (4 GiB)")),
        (vec!["-e", "on begin { }", "--check", "-c", elf], format!("{elf} is larger than gtrace reads (4 GiB)")),
        (vec!["-e", "on begin { }", "-l", "main.*", "-b", zeros], format!("{zeros} is not an ELF executable")),
        (vec![script, "--check", "-b", b], format!("{script} is larger than gtrace reads (64 MiB)")),
        (vec!["run", plan, "-p", "1"], format!("{plan} is larger than gtrace reads")),
    ] {
        // With at most 1 GiB of address space: reading the 4 GiB cap, as gtrace did, fails.
        let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
        let line = format!("ulimit -v 1048576 && exec '{gt}' {}", quoted.join(" "));
        let mut child = Command::new("sh")
            .env("XDG_CACHE_HOME", support::private_cache())
            .args(["-c", &line])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let code = wait_bounded(&mut child, &line);
        let r = support::Run { stdout: String::new(), stderr: err, code };
        assert_no_panic(&r);
        assert!(r.code == 1 || r.code == 2, "{args:?}: exit {}: {}", r.code, r.stderr);
        assert!(r.stderr.contains(&says), "{args:?}: wanted `{says}` in:\n{}", r.stderr);
    }
    for f in [zeros, elf, script, plan] {
        std::fs::remove_file(f).unwrap();
    }
}

/// The pid of gtrace's child (the -c command), once it has one.
fn child_of(pid: u32) -> Option<u32> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let children = std::fs::read_to_string(task.ok()?.path().join("children")).unwrap_or_default();
        if let Some(c) = children.split_whitespace().next() {
            return c.parse().ok();
        }
    }
    None
}

/// Whether `pid` is a running (not zombie) process.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').and_then(|(_, r)| r.trim_start().chars().next()))
        .is_some_and(|state| state != 'Z' && state != 'X')
}

fn wait_gone(pid: u32, what: &str) {
    let start = Instant::now();
    while alive(pid) {
        assert!(start.elapsed() < BOUND, "{what}: pid {pid} still alive");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts gtrace on `e2e sleep 100000` (a 200 s program) printing a line per call, and
/// waits for the first line; returns gtrace, its stdout, and the command's pid.
fn trace_a_long_command() -> (Child, BufReader<std::process::ChildStdout>, u32) {
    let bin = support::go_build("e2e", &[]);
    let cmd = format!("{} sleep 100000", bin.display());
    let mut g = gtrace_cmd(&["-e", "on entry main.sleepy { printf(\"%d\\n\", ms) }", "-c", &cmd])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(g.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "2", "the first traced call");
    let child = child_of(g.id()).expect("gtrace has started the command");
    assert!(alive(child));
    (g, out, child)
}

#[test]
fn a_closed_output_pipe_ends_gtrace_and_its_command() {
    if !support::privileged("a_closed_output_pipe_ends_gtrace_and_its_command") {
        return;
    }
    let (mut g, out, child) = trace_a_long_command();
    drop(out); // `| head -1`
    assert_eq!(wait_bounded(&mut g, "closed pipe"), 0);
    wait_gone(child, "the command after a closed pipe");
}

#[test]
fn sigkill_of_gtrace_takes_its_command_along() {
    if !support::privileged("sigkill_of_gtrace_takes_its_command_along") {
        return;
    }
    let (mut g, _out, child) = trace_a_long_command();
    g.kill().unwrap(); // SIGKILL: no handler runs
    g.wait().unwrap();
    wait_gone(child, "the command after gtrace was killed");
}

#[test]
fn a_full_output_device_is_an_error() {
    if !support::privileged("a_full_output_device_is_an_error") {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    let cmd = format!("{} add 50", bin.display());
    let mut g = gtrace_cmd(&["-e", "on entry main.add { printf(\"%d\\n\", a) }", "-c", &cmd])
        .stdout(std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    g.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(wait_bounded(&mut g, "/dev/full"), 1, "{err}");
    assert!(err.contains("cannot write the output") && err.contains("No space left on device"), "{err}");
}

#[test]
fn exit_in_begin_ends_the_trace_before_the_command_runs() {
    if !support::privileged("exit_in_begin_ends_the_trace_before_the_command_runs") {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    let cmd = format!("{} sleep 100000", bin.display());
    let r = run(&["-e", "on begin { @b = count(); exit() } on entry main.sleepy { @n = count() }", "-c", &cmd]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // `on begin` ran once; the command never ran a line of its own.
    assert_eq!(support::map_value(&r.stdout, "@b"), 1);
    assert!(!r.stdout.contains("@n") && !r.stdout.contains("calls="), "{}", r.stdout);
}

#[test]
fn sighup_prints_the_maps_like_sigterm() {
    if !support::privileged("sighup_prints_the_maps_like_sigterm") {
        return;
    }
    // A copy of its own: -b traces every process of the file, and the tests beside it
    // run the e2e program too (a_full_output_device_is_an_error calls main.add 50 times,
    // which a trace of the shared build counted here: 127 where the program said 77).
    let bin = scratch("sighup-e2e");
    support::copy_executable(&support::go_build("e2e", &[]), &bin);
    let mut g = gtrace_cmd(&["-e", "on entry main.add { @n = count() }", "-b", bin.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(g.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.starts_with("Attached"), "{line}");
    // The program runs to its end under the probes, and says how many calls it made.
    let out = Command::new(&bin).args(["add", "77"]).output().unwrap();
    let calls = support::truth(&String::from_utf8_lossy(&out.stdout), "calls");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(g.id() as i32, libc::SIGHUP) };
    let mut stdout = String::new();
    g.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    assert_eq!(wait_bounded(&mut g, "SIGHUP"), 0);
    assert_eq!(support::map_value(&stdout, "@n"), calls);
}
