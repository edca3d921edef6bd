//! `--live`, end to end in a real terminal: gtrace runs in a tmux pane, tracing
//! tests/go/live (which calls main.work at a steady pace and prints its own counts)
//! with -p. `tmux capture-pane` must show the view redrawn with growing counts and a
//! rate per second; q must close it, give the terminal back and print the maps, whose
//! counts equal the program's own; with -c, the command's output is shown in the view
//! and written whole at the end. Off a terminal, --live is refused with a clear message. Needs root (CAP_BPF + CAP_PERFMON) and tmux (Debian's package): without
//! them these tests say SKIP, except on CI (CI=true), where they fail.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::processes::{Lines, Owned};
use support::{privileged, truth};

/// The test program, started and waiting for "go" on its stdin.
struct Program {
    _child: Owned,
    stdin: Option<std::process::ChildStdin>,
    out: Lines,
    pid: u32,
}

impl Program {
    fn start(calls: u32, period: &str) -> Program {
        let binary = support::go_build("live", &[]);
        let mut child = Command::new(&binary)
            .args([calls.to_string().as_str(), period])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tests/go/live");
        let stdin = child.stdin.take();
        let out = Lines::of(child.stdout.take().expect("stdout"));
        let pid = child.id();
        out.wait_for(Duration::from_secs(10), |l| l == "ready").expect("the program says ready");
        Program { _child: Owned(child), stdin, out, pid }
    }

    fn go(&mut self) {
        use std::io::Write;
        writeln!(self.stdin.as_mut().expect("stdin"), "go").expect("write go");
    }
}

/// A tmux session of its own (its own server socket, one a test), killed when the test
/// ends.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn tmux(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    /// Runs `command` in a new 160x60 pane; the pane stays after it ends.
    fn start(command: &str) -> Tmux {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let t = Tmux { socket: format!("gtrace-live-{}-{n}", std::process::id()) };
        let status = t
            .tmux()
            .args(["-f", "/dev/null", "new-session", "-d", "-s", "live", "-x", "160", "-y", "60"])
            // After gtrace: its exit code, and whether the terminal is back in canonical
            // mode (`icanon`; raw mode is `-icanon`).
            .arg(format!(
                "{command}; echo gtrace-exit=$?; stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\?icanon'; sleep 600"
            ))
            .status()
            .expect("run tmux");
        assert!(status.success(), "tmux new-session failed");
        t
    }

    /// What the pane shows now.
    fn capture(&self) -> String {
        let out = self.tmux().args(["capture-pane", "-p", "-t", "live"]).output().expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        let status = self.tmux().args(["send-keys", "-t", "live", keys]).status().expect("tmux send-keys");
        assert!(status.success());
    }

    /// Waits (at most `limit`) until the pane shows what `pred` accepts: that capture.
    fn wait_for(&self, limit: Duration, pred: impl Fn(&str) -> bool) -> Option<String> {
        let end = Instant::now() + limit;
        loop {
            let screen = self.capture();
            if pred(&screen) {
                return Some(screen);
            }
            if Instant::now() > end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").status();
    }
}

fn have_tmux(test: &str) -> bool {
    let ok = Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success());
    if !ok {
        support::skip(test, "tmux is not installed (Debian's package tmux)");
    }
    ok
}

/// The row of map `name` without keys in the view: `  -  VALUE  RATE/s`.
fn view_row(screen: &str, name: &str) -> Option<(i64, String)> {
    let mut lines = screen.lines().skip_while(|l| l.trim_end() != name);
    lines.next()?;
    let row = lines.find(|l| l.trim_start().starts_with("- "))?;
    let words: Vec<&str> = row.split_whitespace().collect();
    Some((words.get(1)?.parse().ok()?, words.get(2)?.to_string()))
}

/// gtrace ended with 0 and gave the terminal back: the view is gone (the alternate
/// screen left) and the terminal is in canonical mode again.
fn assert_restored(tmux: &Tmux, screen: &str) {
    assert!(screen.contains("gtrace-exit=0"), "{screen}");
    assert!(!screen.contains("gtrace --live"), "the view is still on the screen:\n{screen}");
    let mode = tmux.wait_for(Duration::from_secs(10), |s| s.lines().any(|l| l.ends_with("icanon")));
    let mode = mode.unwrap_or_else(|| panic!("stty says nothing:\n{}", tmux.capture()));
    assert!(mode.lines().any(|l| l == "icanon"), "the terminal is left in raw mode:\n{mode}");
}

const SCRIPT: &str = "on entry main.work { @calls = count(); @by_kind[kind] = count() } \
                      on return main.work { @took[kind] = hist(elapsed) }";

#[test]
fn live_view_redraws_the_maps_and_q_prints_them() {
    if !privileged("live_view_redraws_the_maps_and_q_prints_them")
        || !have_tmux("live_view_redraws_the_maps_and_q_prints_them")
    {
        return;
    }
    let mut program = Program::start(200, "20ms");
    let gtrace = format!("XDG_CACHE_HOME='{}' {}", support::private_cache().display(), env!("CARGO_BIN_EXE_gtrace"));
    let tmux = Tmux::start(&format!("{gtrace} --live -e '{SCRIPT}' -p {}", program.pid));
    let open = tmux.wait_for(Duration::from_secs(30), |s| s.contains("gtrace --live") && s.contains("@calls"));
    let open = open.unwrap_or_else(|| panic!("the view does not open:\n{}", tmux.capture()));
    assert!(open.contains("probe") && open.contains("on entry main.work"), "no probe rows:\n{open}");
    assert!(open.contains("no --budget") || open.contains("--budget 5% of a CPU"), "no budget line:\n{open}");
    program.go();
    // The counts shown grow while the program runs (200 calls over 4 s, a redraw a second).
    let mut seen: Vec<i64> = Vec::new();
    let mut rate_shown = false;
    let end = Instant::now() + Duration::from_secs(30);
    while program.out.wait_for(Duration::from_millis(400), |l| l == "---").is_none() {
        assert!(Instant::now() < end, "the program does not end:\n{}", tmux.capture());
        let screen = tmux.capture();
        if let Some((n, rate)) = view_row(&screen, "@calls") {
            rate_shown |= n > 0 && rate.ends_with("/s") && rate != "0/s";
            if seen.last() != Some(&n) {
                seen.push(n);
            }
            assert!(screen.contains("p50") && screen.contains("p99"), "no percentiles:\n{screen}");
        }
    }
    let truth_text = program.out.text();
    let calls = truth(&truth_text, "calls");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "counts shown: {seen:?}");
    assert!(seen.iter().filter(|n| **n > 0 && **n < calls).count() >= 2, "not seen growing: {seen:?}");
    assert!(rate_shown, "no rate per second was shown");
    // The last redraw shows the program's count, then q prints the maps.
    let last = tmux.wait_for(Duration::from_secs(5), |s| view_row(s, "@calls").is_some_and(|(n, _)| n == calls));
    assert!(last.is_some(), "the view never showed {calls}:\n{}", tmux.capture());
    tmux.keys("q");
    let printed = tmux.wait_for(Duration::from_secs(30), |s| s.contains("gtrace-exit="));
    let printed = printed.unwrap_or_else(|| panic!("q does not end gtrace:\n{}", tmux.capture()));
    assert_restored(&tmux, &printed);
    assert!(printed.contains(&format!("@calls: {calls}\n")), "q does not print @calls: {calls}:\n{printed}");
    for kind in 0..3 {
        let n = truth(&truth_text, &format!("kind{kind}"));
        assert!(printed.contains(&format!("@by_kind[{kind}]: {n}\n")), "@by_kind[{kind}] is not {n}:\n{printed}");
    }
}

#[test]
fn live_is_refused_when_standard_output_is_not_a_terminal() {
    if !privileged("live_is_refused_when_standard_output_is_not_a_terminal") {
        return;
    }
    let program = Program::start(1, "1ms");
    let r = support::gtrace(&["--live", "-e", SCRIPT, "-p", &program.pid.to_string()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("error: --live draws on a terminal, and standard output is not one"), "{}", r.stderr);
    assert!(r.stderr.contains("hint: run it in a terminal"), "{}", r.stderr);
    assert!(!r.stderr.contains("Attached"), "refused only after attaching:\n{}", r.stderr);
}

/// With -c the command's output comes through gtrace: its last lines are shown in the
/// view, and all of it is written when the view closes (here when the command ends),
/// before the maps, whose counts equal the command's own.
#[test]
fn live_view_of_a_command_shows_its_output_and_writes_it_all_at_the_end() {
    let test = "live_view_of_a_command_shows_its_output_and_writes_it_all_at_the_end";
    if !privileged(test) || !have_tmux(test) {
        return;
    }
    let program = support::go_build("live", &[]);
    let gtrace = format!("XDG_CACHE_HOME='{}' {}", support::private_cache().display(), env!("CARGO_BIN_EXE_gtrace"));
    // Its stdin is /dev/null under --live: it does not wait for "go".
    let tmux = Tmux::start(&format!("{gtrace} --live -e '{SCRIPT}' -c '{} 150 20ms'", program.display()));
    let shown = tmux.wait_for(Duration::from_secs(30), |s| {
        s.contains("the command's output") && view_row(s, "@calls").is_some_and(|(n, _)| n > 0)
    });
    let shown = shown.unwrap_or_else(|| panic!("the view shows no output of the command:\n{}", tmux.capture()));
    let below: Vec<&str> = shown.lines().skip_while(|l| !l.starts_with("the command's output")).collect();
    assert!(below.contains(&"ready"), "the command's first line is not shown:\n{shown}");
    let end = tmux.wait_for(Duration::from_secs(30), |s| s.contains("gtrace-exit="));
    let end = end.unwrap_or_else(|| panic!("gtrace does not end with the command:\n{}", tmux.capture()));
    assert_restored(&tmux, &end);
    let lines: Vec<&str> = end.lines().collect();
    let at = |want: &str| lines.iter().position(|l| l.starts_with(want)).unwrap_or_else(|| panic!("no {want}:\n{end}"));
    let calls = truth(lines[at("calls=")], "calls");
    assert!(at("ready") < at("calls=") && at("calls=") < at("@calls: "), "out of order:\n{end}");
    assert_eq!(lines[at("@calls: ")], format!("@calls: {calls}"), "{end}");
}

/// Ctrl-C, which raw mode delivers to the view as a key, closes it as q does.
#[test]
fn live_view_closes_on_ctrl_c_and_gives_the_terminal_back() {
    let test = "live_view_closes_on_ctrl_c_and_gives_the_terminal_back";
    if !privileged(test) || !have_tmux(test) {
        return;
    }
    let mut program = Program::start(20, "10ms");
    let gtrace = format!("XDG_CACHE_HOME='{}' {}", support::private_cache().display(), env!("CARGO_BIN_EXE_gtrace"));
    let tmux = Tmux::start(&format!("{gtrace} --live -e '{SCRIPT}' -p {}", program.pid));
    let open = tmux.wait_for(Duration::from_secs(30), |s| s.contains("gtrace --live") && s.contains("@calls"));
    assert!(open.is_some(), "the view does not open:\n{}", tmux.capture());
    program.go();
    program.out.wait_for(Duration::from_secs(30), |l| l == "---").expect("the program prints its counts");
    let calls = truth(&program.out.text(), "calls");
    let last = tmux.wait_for(Duration::from_secs(30), |s| view_row(s, "@calls").is_some_and(|(n, _)| n == calls));
    assert!(last.is_some(), "the view never showed {calls}:\n{}", tmux.capture());
    tmux.keys("C-c");
    let end = tmux.wait_for(Duration::from_secs(30), |s| s.contains("gtrace-exit="));
    let end = end.unwrap_or_else(|| panic!("Ctrl-C does not end gtrace:\n{}", tmux.capture()));
    assert_restored(&tmux, &end);
    assert!(end.contains(&format!("@calls: {calls}\n")), "Ctrl-C does not print @calls: {calls}:\n{end}");
}
