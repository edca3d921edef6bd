//! End-to-end: real Go programs (tests/go/e2e) traced by the real gtrace binary with real
//! eBPF, and gtrace's output compared with the ground truth the program prints itself,
//! where that needs code (a second process, a signal, a histogram, stderr read as
//! numbers): the ones a case can say are in tests/cases/e2e.cases.
//! Needs root (CAP_BPF + CAP_PERFMON). Without it these tests say SKIP loudly, except
//! on CI (CI=true), where they fail.

mod support;

use support::{gtrace, map_value, privileged, truth, Run};

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn gtrace_bin() -> &'static str {
    env!("CARGO_BIN_EXE_gtrace")
}

fn e2e() -> PathBuf {
    support::go_build("e2e", &[])
}

/// Traces `e2e MODE N` started by gtrace (-c) with `script`.
fn trace_c(script: &str, mode_args: &str) -> Run {
    support::trace_attached(&["-e", script], &e2e(), mode_args)
}

/// Sum of the counts of the histogram printed under `header` (`@name:`).
fn hist_total(out: &str, header: &str) -> (u64, Vec<String>) {
    let mut lines = out.lines().skip_while(|l| *l != header).skip(1);
    let mut total = 0;
    let mut labels = Vec::new();
    for l in lines.by_ref() {
        // The rows end at a blank line, or at the percentiles under them.
        if l.trim().is_empty() || l.starts_with("p50 ") {
            break;
        }
        let (label, rest) = l.split_once(')').or_else(|| l.split_once(']')).expect("bucket line");
        labels.push(format!("{label})"));
        let count: u64 = rest.split('|').next().unwrap().trim().parse().expect("bucket count");
        total += count;
    }
    (total, labels)
}

#[test]
fn return_probes_pair_with_entries_in_a_latency_histogram() {
    if !privileged("return_probes_pair_with_entries_in_a_latency_histogram") {
        return;
    }
    let r = trace_c("on return main.sleepy < hist(elapsed) >; on return main.sleepy { @n = count() }", "sleep 20");
    let calls = truth(&r.stdout, "calls");
    assert_eq!(map_value(&r.stdout, "@n"), calls);
    let (total, labels) = hist_total(&r.stdout, "@[main.sleepy]:");
    assert_eq!(total as i64, calls, "histogram:\n{}", r.stdout);
    // Every call slept 2ms: no bucket may start below 1ms.
    for l in labels {
        assert!(l.contains("ms") && !l.starts_with("[0"), "bucket {l} is below the sleep:\n{}", r.stdout);
    }
}

#[test]
fn deep_calls_past_their_table_are_counted_exactly() {
    if !privileged("deep_calls_past_their_table_are_counted_exactly") {
        return;
    }
    // 4 goroutines recurse 2,000 deep, one after the other; calls deeper than 8 go to a
    // table held to 1,000 here: those it has no room for are missed, every one said.
    let cmd = format!("{} grow 2000", e2e().display());
    let script = "on return main.grow { @timed = count(); @lat = max(elapsed) }";
    let r = gtrace(&["-e", script, "--map-size", "inflight=1000", "-c", &cmd]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let part = r.stderr.lines().flat_map(|l| l.split("; ")).find(|p| p.contains("timed calls of main.grow missed"));
    let part = part.unwrap_or_else(|| panic!("no loss said: {}", r.stderr));
    assert!(part.ends_with("the table of calls in flight deeper than 8 on a goroutine is full at 1,000 calls (--map-size inflight=N holds more)"), "{part}");
    let missed: i64 = part.split_whitespace().next().unwrap().replace(',', "").parse().unwrap();
    assert!(missed > 0, "{part}");
    assert_eq!(map_value(&r.stdout, "@timed") + missed, truth(&r.stdout, "calls"), "{}\n{}", r.stdout, r.stderr);
}

#[test]
fn printf_events_arrive_in_order() {
    if !privileged("printf_events_arrive_in_order") {
        return;
    }
    let r = trace_c(r#"on entry main.add { printf("a=%d b=%d\n", a, b) }"#, "add 100");
    let lines: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("a=")).collect();
    let want: Vec<String> = (0..100).map(|i| format!("a={i} b=1")).collect();
    assert_eq!(lines, want);
}

#[test]
fn attaches_to_a_running_process_by_pid() {
    if !privileged("attaches_to_a_running_process_by_pid") {
        return;
    }
    let go_file = std::env::temp_dir().join(format!("gtrace-e2e-go-{}", std::process::id()));
    let _ = std::fs::remove_file(&go_file);
    let mut target = Command::new(e2e())
        .args(["wait", "500", go_file.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the target");
    let mut target_out = BufReader::new(target.stdout.take().unwrap());
    let mut line = String::new();
    target_out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let pid = target.id().to_string();
    let mut tracer = Command::new(gtrace_bin())
        .env("XDG_CACHE_HOME", support::private_cache())
        .args(["-e", "on entry main.add { @calls = count(); @sum = sum(a) }", "-p", &pid])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start gtrace");
    let mut err = BufReader::new(tracer.stderr.take().unwrap());
    let mut attached = String::new();
    err.read_line(&mut attached).unwrap();
    assert!(attached.starts_with("Attached"), "gtrace said: {attached}");
    std::fs::write(&go_file, "go").unwrap();
    let mut rest = String::new();
    target_out.read_to_string(&mut rest).unwrap();
    target.wait().unwrap();
    // gtrace ends by itself when the target ends.
    let out = tracer.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&go_file);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert_eq!(map_value(&stdout, "@calls"), truth(&rest, "calls"));
    assert_eq!(map_value(&stdout, "@sum"), truth(&rest, "sum_a"));
}

/// Two gtraces on one file, one with -b: the kernel puts a -b probe's breakpoints (int3)
/// into every private mapping of the file that may execute, whoever made it, so a gtrace
/// that mapped the file privately to read it read them as the file's code (`main.add`
/// refused for opcode 0xcc while the other traced it). The second reads the file as it
/// is, attaches, and both count the calls the program made.
#[test]
fn a_file_traced_with_b_reads_as_itself_to_a_second_gtrace() {
    if !privileged("a_file_traced_with_b_reads_as_itself_to_a_second_gtrace") {
        return;
    }
    // A copy of its own: the -b trace sees no other test's process of the file.
    let dir = std::env::temp_dir().join(format!("gtrace-e2e-twice-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("e2e");
    support::copy_executable(&e2e(), &copy);
    let mut first =
        support::processes::Gtrace::start(&["-e", "on entry main.add { @n = count() }", "-b", copy.to_str().unwrap()]);
    first.attached();
    let script = "on entry main.add { @calls = count() } on return main.add { @returns = count() }";
    let second = support::trace_attached(&["-e", script], &copy, "add 40");
    let calls = truth(&second.stdout, "calls");
    assert_eq!(map_value(&second.stdout, "@calls"), calls, "{}", second.stdout);
    assert_eq!(map_value(&second.stdout, "@returns"), calls, "{}", second.stdout);
    assert_eq!(first.stop("INT"), 0, "{}", first.err.text());
    assert_eq!(map_value(&first.out.text(), "@n"), calls, "{}", first.out.text());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn duration_ends_the_trace() {
    if !privileged("duration_ends_the_trace") {
        return;
    }
    let start = Instant::now();
    let r =
        gtrace(&["-e", "on entry main.sleepy { @n = count() }", "-b", e2e().to_str().unwrap(), "--duration", "300ms"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // -b runs until told to stop: without --duration this would never return. The bound
    // only tells that apart from a hang; it measures nothing.
    assert!(start.elapsed() < Duration::from_secs(30));
}

// Bad input: a clear error, a non-zero exit, never a panic. These need no privileges.

fn assert_clean_failure(r: &Run) {
    assert_ne!(r.code, 0);
    assert!(!r.stderr.contains("panicked") && !r.stderr.contains("RUST_BACKTRACE"), "{}", r.stderr);
    assert!(r.stderr.starts_with("error"), "{}", r.stderr);
}

#[test]
fn unknown_symbol_names_the_closest_functions() {
    let r = gtrace(&["-e", "on entry main.ad { @n = count() }", "-b", e2e().to_str().unwrap()]);
    assert_clean_failure(&r);
    assert!(r.stderr.contains("no function matches `main.ad`"), "{}", r.stderr);
    assert!(r.stderr.contains("did you mean") && r.stderr.contains("main.add"), "{}", r.stderr);
    assert!(r.stderr.contains("<-e>:1:10"), "{}", r.stderr);
}

#[test]
fn syntax_error_points_at_the_place() {
    let r = gtrace(&["-e", "on entry main.add { @n = count( }", "-b", e2e().to_str().unwrap()]);
    assert_clean_failure(&r);
    assert!(r.stderr.contains("<-e>:1:"), "{}", r.stderr);
    assert!(r.stderr.contains('^'), "{}", r.stderr);
}

#[test]
fn unknown_parameter_suggests_the_right_one() {
    let r = gtrace(&["-e", "on entry main.add { @s = sum(aa) }", "-b", e2e().to_str().unwrap()]);
    assert_clean_failure(&r);
    assert!(r.stderr.contains("unknown name `aa`") && r.stderr.contains("did you mean `a`?"), "{}", r.stderr);
}

#[test]
fn elapsed_in_an_entry_probe_is_a_type_error() {
    let r = gtrace(&["-e", "on entry main.add { @s = sum(elapsed) }", "-b", e2e().to_str().unwrap()]);
    assert_clean_failure(&r);
    assert!(r.stderr.contains("`elapsed` is only known in `on return` and `on panic` probes"), "{}", r.stderr);
}

#[test]
fn check_needs_no_privileges_and_says_ok() {
    let r = gtrace(&["--check", "-e", "on return main.add { @s = sum(ret) }", "-b", e2e().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("ok, 1 probe"), "{}", r.stderr);
}

#[test]
fn a_binary_that_is_not_go_is_refused() {
    let r = gtrace(&["-e", "on entry main.add { @n = count() }", "-b", "/bin/true"]);
    assert_clean_failure(&r);
    assert!(r.stderr.contains("not a Go executable"), "{}", r.stderr);
}

#[test]
fn a_foreign_arch_binary_is_refused() {
    let riscv = support::go_build_env("e2e", &[], &[("GOARCH", "riscv64")]);
    let r = gtrace(&["-e", "on entry main.add { @n = count() }", "-b", riscv.to_str().unwrap()]);
    assert_clean_failure(&r);
    assert!(r.stderr.contains("built for riscv64, which gtrace cannot read"), "{}", r.stderr);
}

#[test]
fn a_pid_that_does_not_exist_is_refused() {
    let r = gtrace(&["-e", "on entry main.add { @n = count() }", "-p", "999999999"]);
    assert_clean_failure(&r);
    assert!(r.stderr.contains("999999999"), "{}", r.stderr);
}

#[test]
fn a_command_that_does_not_exist_is_refused() {
    let r = gtrace(&["-e", "on entry main.add { @n = count() }", "-c", "/no/such/program"]);
    assert_clean_failure(&r);
}

/// Runs gtrace as `nobody` with no capabilities (setpriv is in util-linux), from copies
/// of gtrace and the e2e program that nobody may run; `args` may name the copy of the
/// program as `{e2e}`. Needs root to switch user.
fn as_nobody(args: &[&str]) -> Run {
    let dir = std::env::temp_dir().join(format!("gtrace-noprivs-{}-{}", std::process::id(), args.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let gt = dir.join("gtrace");
    let target = dir.join("e2e");
    support::copy_executable(std::path::Path::new(gtrace_bin()), &gt);
    support::copy_executable(&e2e(), &target);
    use std::os::unix::fs::PermissionsExt;
    for p in [&dir, &gt, &target] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // A home of its own, as a user has (gtrace keeps its cache there).
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
    let args: Vec<String> = args.iter().map(|a| a.replace("{e2e}", &target.display().to_string())).collect();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"])
        .env("HOME", &home)
        .env_remove("XDG_CACHE_HOME")
        .arg(&gt)
        .args(&args)
        .output()
        .expect("run setpriv");
    let _ = std::fs::remove_dir_all(&dir);
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code().unwrap_or(-1),
    }
}

#[test]
fn missing_privileges_give_the_cause_and_what_to_do() {
    if !privileged("missing_privileges_give_the_cause_and_what_to_do") {
        return;
    }
    let r = as_nobody(&["-e", "on entry main.add { @n = count() }", "-c", "{e2e} add 3"]);
    assert_clean_failure(&r);
    assert!(r.stderr.contains("permission denied") && r.stderr.contains("CAP_BPF"), "{}", r.stderr);
    assert!(!r.stdout.contains("calls="), "the command must not run untraced: {}", r.stdout);
}

#[test]
fn check_compiles_everything_and_the_kernel_verifies_it_where_it_may() {
    if !privileged("check_compiles_everything_and_the_kernel_verifies_it_where_it_may") {
        return;
    }
    let script = "on return main.add { @s = sum(ret) }";
    let r = gtrace(&["--check", "-e", script, "-b", e2e().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("the kernel's verifier accepts every program"), "{}", r.stderr);
    let r = as_nobody(&["--check", "-e", script, "-b", "{e2e}"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("ok, 1 probe") && r.stderr.contains("not verified by the kernel"), "{}", r.stderr);
    // A probe the verifier gives up on: a limit of the kernel, said with its source line,
    // not blamed on gtrace.
    let heavy: Vec<&str> = vec!["@m = hist(a)"; 2730];
    let heavy = format!("on entry main.add {{ {} }}", heavy.join("; "));
    let r = gtrace(&["--check", "-e", &heavy, "-b", e2e().to_str().unwrap()]);
    assert_clean_failure(&r);
    assert!(r.stderr.contains("for the kernel's verifier"), "{}", r.stderr);
    assert!(r.stderr.contains("compiled from: <-e>:1: on entry main.add"), "{}", r.stderr);
    assert!(r.stderr.contains("split the probe") && !r.stderr.contains("bug in gtrace"), "{}", r.stderr);
}

#[test]
fn comm_is_the_thread_name() {
    if !privileged("comm_is_the_thread_name") {
        return;
    }
    let r = trace_c(r#"on entry main.add { @c[comm] = count(); @l = max(len(comm)) }"#, "add 10");
    let exe = e2e();
    let name: String = exe.file_name().unwrap().to_str().unwrap().chars().take(15).collect();
    assert_eq!(map_value(&r.stdout, &format!("@c[{name}]")), 10, "{}", r.stdout);
    assert_eq!(map_value(&r.stdout, "@l"), name.len() as i64);
}

#[test]
fn ustack_is_the_go_call_stack_symbolized() {
    if !privileged("ustack_is_the_go_call_stack_symbolized") {
        return;
    }
    // grow(3) recurses to grow(0): at that entry the stack is grow ×4 under the goroutine's
    // function. As a map key, each distinct stack is counted.
    let r = trace_c("on entry main.grow { if n == 0 { @[ustack] = count() } }", "grow 3");
    let frames: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("    ")).map(|l| l.trim()).collect();
    let names: Vec<&str> = frames.iter().map(|f| f.split('+').next().unwrap()).collect();
    assert_eq!(names[..5], ["main.grow", "main.grow", "main.grow", "main.grow", "main.main.func1"], "{}", r.stdout);
    assert!(r.stdout.contains("]: 4"), "four goroutines took the same path:\n{}", r.stdout);
}

#[test]
fn a_named_parameter_in_a_stripped_binary_says_use_positions() {
    let stripped = support::go_build("e2e", &["-ldflags=-s -w"]);
    let r = gtrace(&["--check", "-e", "on entry main.add { @s = sum(a) }", "-b", stripped.to_str().unwrap()]);
    assert_clean_failure(&r);
    assert!(r.stderr.contains("no DWARF (stripped)") && r.stderr.contains("arg0"), "{}", r.stderr);
    let l = gtrace(&["-l", "main.add", "-b", stripped.to_str().unwrap()]);
    assert!(l.stdout.contains("main.add  (no DWARF: parameters by position, arg0"), "{}", l.stdout);
}

#[test]
fn goroutine_state_in_an_assembly_function_is_refused() {
    let r =
        gtrace(&["--check", "-e", "on entry runtime.memmove { @g[goid] = count() }", "-b", e2e().to_str().unwrap()]);
    assert_clean_failure(&r);
    assert!(r.stderr.contains("assembly (ABI0) function"), "{}", r.stderr);
}

#[test]
fn sigterm_and_ctrl_c_end_the_trace_cleanly_with_the_maps() {
    if !privileged("sigterm_and_ctrl_c_end_the_trace_cleanly_with_the_maps") {
        return;
    }
    for signal in ["TERM", "INT"] {
        let bin = e2e();
        // `hold` calls add 25 times, says so, then holds on 30s: the signal comes then.
        let cmd = format!("{} hold 25", bin.display());
        let mut tracer = Command::new(gtrace_bin())
            .env("XDG_CACHE_HOME", support::private_cache())
            .args(["-e", "on entry main.add { @n = count() }", "-c", &cmd])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start gtrace");
        let mut err = BufReader::new(tracer.stderr.take().unwrap());
        let mut attached = String::new();
        err.read_line(&mut attached).unwrap();
        assert!(attached.starts_with("Attached"), "{attached}");
        let mut out = BufReader::new(tracer.stdout.take().unwrap());
        let mut said = String::new();
        out.read_line(&mut said).unwrap();
        let calls = truth(&said, "calls");
        Command::new("kill").args([format!("-{signal}"), tracer.id().to_string()]).status().unwrap();
        let mut stdout = String::new();
        out.read_to_string(&mut stdout).unwrap();
        let status = tracer.wait().unwrap();
        assert!(status.success(), "signal {signal}: {status:?}");
        assert_eq!(map_value(&stdout, "@n"), calls, "signal {signal}: {stdout}");
        assert!(!stdout.contains("woke"), "signal {signal}: the command outlived gtrace");
        // The command it started does not outlive it.
        std::thread::sleep(Duration::from_millis(100));
        let ps = Command::new("pgrep").args(["-f", &cmd]).output().unwrap();
        assert!(ps.stdout.is_empty(), "signal {signal}: the traced command still runs");
    }
}
