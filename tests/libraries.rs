//! Libraries and the output they need, end to end: `use`, `fn`, `param`/`--set`, the
//! stdlib (gc, sched, lock) by name, `on begin`/`on end`/`on interval`, `print`/`clear`
//! in an interval, and `-f json`, each run by the real gtrace binary on the real Go
//! program tests/go/libs (which prints its own truth as `key=value` lines).
//! The tracing tests need root (CAP_BPF + CAP_PERFMON): without it they say SKIP
//! loudly, except on CI (CI=true), where they fail. The `--check` tests need nothing.

mod support;

use support::{privileged, truth, Run};

use std::path::PathBuf;

fn libs() -> PathBuf {
    support::go_build("libs", &[])
}

/// gtrace `args` on `libs MODE N` started with -c; must succeed.
fn trace(args: &[&str], mode: &str) -> Run {
    support::trace_attached(args, &libs(), mode)
}

/// The number printed for map `name` (`@name: V`), the first time it is printed.
fn map_value(out: &str, name: &str) -> i64 {
    map_values(out, name).first().copied().unwrap_or_else(|| panic!("no `{name}: ` line in:\n{out}"))
}

/// Every number printed for map `name`, in order.
fn map_values(out: &str, name: &str) -> Vec<i64> {
    let prefix = format!("{name}: ");
    out.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().parse().unwrap_or_else(|_| panic!("`{name}` is not a number in:\n{out}")))
        .collect()
}

/// The JSON objects of `-f json` output; every line that is not the program's own
/// `key=value` must be one.
fn json_lines(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .filter(|l| !l.contains('=') || l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not one JSON object a line ({e}): {l}\n{out}")))
        .collect()
}

/// The value of the map named `name` without keys, from JSON lines.
fn json_map_value(objects: &[serde_json::Value], name: &str) -> i64 {
    objects
        .iter()
        .filter(|o| o["type"] == "map" && o["name"] == name)
        .find_map(|o| o["entries"][0]["value"].as_i64())
        .unwrap_or_else(|| panic!("no map {name} with a number in {objects:?}"))
}

// ---- output: begin, end, interval, print, clear, json -----------------------------------

#[test]
fn begin_runs_before_the_target_and_end_after_it() {
    if !privileged("begin_runs_before_the_target_and_end_after_it") {
        return;
    }
    let r = trace(
        &[
            "-e",
            r#"on begin { printf("began\n") } on entry main.tick { @ticks = count() } on end { printf("ended\n") }"#,
        ],
        "tick 5",
    );
    let lines: Vec<&str> = r.stdout.lines().collect();
    let at = |s: &str| lines.iter().position(|l| *l == s).unwrap_or_else(|| panic!("no `{s}` line in:\n{}", r.stdout));
    assert!(at("began") < at("ticks=5"), "begin after the program's output:\n{}", r.stdout);
    assert!(at("ticks=5") < at("ended"), "end before the program's output:\n{}", r.stdout);
    assert!(at("ended") < at("@ticks: 5"), "maps are printed after `on end`:\n{}", r.stdout);
}

#[test]
fn interval_prints_and_clears_a_map_like_top() {
    if !privileged("interval_prints_and_clears_a_map_like_top") {
        return;
    }
    // 60 ticks 10ms apart: at least 600ms, so a 100ms interval fires several times.
    let r = trace(&["-e", "on entry main.tick { @t = count() } on interval 100ms { print(@t); clear(@t) }"], "tick 60");
    let printed = map_values(&r.stdout, "@t");
    assert!(printed.len() >= 4, "the interval fired {} times:\n{}", printed.len(), r.stdout);
    // Each print holds only the ticks since the last clear; with the final print they add
    // up to every tick (one may fall between a print and its clear).
    let total: i64 = printed.iter().sum();
    let ticks = truth(&r.stdout, "ticks");
    assert!(total <= ticks && total >= ticks - 2, "printed {printed:?}, sum {total}, ticks {ticks}:\n{}", r.stdout);
    assert!(printed.iter().all(|v| *v < ticks), "a print was not cleared before: {printed:?}");
}

#[test]
fn json_is_one_object_a_line_with_raw_numbers() {
    if !privileged("json_is_one_object_a_line_with_raw_numbers") {
        return;
    }
    let r = trace(
        &[
            "-f",
            "json",
            "-e",
            r#"on begin { printf("hello %d\n", 7) } on entry main.tick { @calls = count() } on return main.spawn { @took = max(elapsed) }"#,
        ],
        "spawn 20",
    );
    let objects = json_lines(&r.stdout);
    assert!(objects.iter().any(|o| o["type"] == "printf" && o["text"] == "hello 7\n"), "{}", r.stdout);
    assert_eq!(json_map_value(&objects, "@calls"), 20);
    // A duration is a plain number of nanoseconds: spawn waits for 20 goroutines, > 1us.
    let took = objects.iter().find(|o| o["name"] == "@took").expect("@took");
    assert!(took["entries"][0]["value"].as_u64().is_some_and(|ns| ns > 1_000), "{took}");
}

// ---- the stdlib, by name -----------------------------------------------------------------

#[test]
fn sched_counts_spawned_goroutines() {
    if !privileged("sched_counts_spawned_goroutines") {
        return;
    }
    let r = trace(&["sched"], "spawn 300");
    let spawned = truth(&r.stdout, "spawned");
    // Every goroutine the program ever created, the runtime's own count (Go 1.26 and
    // later; the probes are attached before the program's first instruction).
    // The runtime may start a few goroutines between the count and the program's exit
    // (GC workers, one per P, on a first GC): at most that many more.
    let created = truth(&r.stdout, "created");
    if created >= 0 {
        let counted = map_value(&r.stdout, "@sched_created");
        let procs = std::thread::available_parallelism().map_or(8, |n| n.get() as i64);
        assert!((created..=created + procs + 1).contains(&counted), "created {created}:\n{}", r.stdout);
    } else {
        assert!(map_value(&r.stdout, "@sched_created") >= spawned, "{}", r.stdout);
    }
    // Those that ended: at least the spawned ones, at most all (some end after the count).
    let exited = map_value(&r.stdout, "@sched_exited");
    assert!(exited >= spawned && exited <= map_value(&r.stdout, "@sched_created"), "{}", r.stdout);
    // Created minus exited: the spawned ones all ended; a few runtime goroutines may live,
    // and the GC's workers, one per P, if a GC ran (on a host of 32 CPUs, more than the
    // 20 this allowed before).
    let alive = map_value(&r.stdout, "@sched_alive");
    let procs = std::thread::available_parallelism().map_or(8, |n| n.get() as i64);
    assert!((0..20 + procs).contains(&alive), "alive {alive}:\n{}", r.stdout);
    // By creator: the stack whose `go` statement is in main.spawn made every one of them.
    let by_spawn = r
        .stdout
        .split("@sched_created_by[")
        .find(|block| block.contains("\n    main.spawn+"))
        .and_then(|block| block.split("]: ").nth(1))
        .and_then(|rest| rest.lines().next())
        .and_then(|n| n.trim().parse::<i64>().ok());
    assert_eq!(by_spawn, Some(spawned), "{}", r.stdout);
}

#[test]
fn lock_measures_mutex_waits() {
    if !privileged("lock_measures_mutex_waits") {
        return;
    }
    // 20 goroutines take one mutex in turn, each holding it 1ms.
    let r = trace(&["lock", "-f", "json", "--set", "lock_slow_wait=1h"], "lock 20");
    let n = truth(&r.stdout, "contenders");
    let objects = json_lines(&r.stdout);
    let contended = json_map_value(&objects, "@lock_contended");
    assert!(contended >= n / 2 && contended <= n + 5, "contended {contended} of {n}:\n{}", r.stdout);
    // The last to get the lock waited for most of the others' 1ms each.
    let max = json_map_value(&objects, "@lock_wait_max");
    assert!(max >= (n / 2) * 1_000_000, "longest wait {max}ns:\n{}", r.stdout);
    assert!(!r.stdout.contains("lock: waited"), "nothing is slower than lock_slow_wait=1h");
    // By caller: every wait is under the goroutine in main.contend that called Lock.
    let by_caller = objects.iter().find(|o| o["name"] == "@lock_wait_by_caller").expect("@lock_wait_by_caller");
    let entries = by_caller["entries"].as_array().unwrap();
    assert!(!entries.is_empty());
    for e in entries {
        let frames: Vec<&str> = e["keys"]["ustack"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        assert!(frames.iter().any(|f| f.starts_with("main.contend.func1+")), "{frames:?}");
    }
}

// ---- a user's own library: use, fn, param, --set -----------------------------------------

fn user_library() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gtrace-libraries-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("ticks.gt"),
        "# ticks: counts main.tick calls at or above a minimum\nparam min_i = 5\nfn big(x) = x >= min_i\nfn tally(x) {\n  if big(x) { @big = count() }\n}\non entry main.tick { @all = count() }\n",
    )
    .expect("write library");
    dir
}

#[test]
fn a_users_library_with_helpers_and_a_param_set_on_the_command_line() {
    if !privileged("a_users_library_with_helpers_and_a_param_set_on_the_command_line") {
        return;
    }
    let dir = user_library();
    let inc = dir.display().to_string();
    let script = r#"use "ticks"; on entry main.tick { tally(i) }"#;
    // tick(i) for i in 0..30: 25 are >= 5 (the default), 20 are >= 10.
    let r = trace(&["-I", &inc, "-e", script], "tick 30");
    assert_eq!(map_value(&r.stdout, "@all"), 30, "{}", r.stdout);
    assert_eq!(map_value(&r.stdout, "@big"), 25, "{}", r.stdout);
    let r = trace(&["-I", &inc, "--set", "min_i=10", "-e", script], "tick 30");
    assert_eq!(map_value(&r.stdout, "@big"), 20, "{}", r.stdout);
}

// ---- --check of every stdlib library and example; listing -------------------------------

/// Every stdlib library says in its header what one event costs the target, in uprobe
/// hits (a user choosing what to leave on a production server reads it there).
#[test]
fn every_stdlib_library_says_what_an_event_costs() {
    for name in support::stdlib_names() {
        let path = support::root().join("stdlib").join(format!("{name}.gt"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
        assert!(
            header.iter().any(|l| l.starts_with("# Cost: ") && l.contains("uprobe hit")),
            "stdlib/{name}.gt does not say in its header what an event costs in uprobe hits"
        );
    }
}

#[test]
fn every_stdlib_library_checks_by_name_and_through_use() {
    let names = support::stdlib_names();
    for want in ["gc", "lock", "sched"] {
        assert!(names.iter().any(|n| n == want), "{want} not listed in {names:?}");
    }
    // libs has only the runtime: the libraries of a package (net/http, database/sql,
    // grpc-go, pgx, ...: those `stdlib::needs` names) are checked against programs that
    // use them, in tests/stdlib_net.rs.
    let names: Vec<String> = names.into_iter().filter(|n| gtrace::library::stdlib::needs(n).is_none()).collect();
    let bin = libs();
    for name in &names {
        let r = support::check_against(&[name], &bin);
        assert_eq!(r.code, 0, "gtrace {name} --check:\n{}", r.stderr);
        assert!(r.stderr.contains("ok,"), "{}", r.stderr);
        let r = support::check_against(&["-e", &format!("use \"{name}\"")], &bin);
        assert_eq!(r.code, 0, "use \"{name}\" --check:\n{}", r.stderr);
    }
    // And all of them at once: no name is defined twice.
    let all: String = names.iter().map(|n| format!("use \"{n}\"\n")).collect();
    let r = support::check_against(&["-e", &all], &bin);
    assert_eq!(r.code, 0, "{all}--check:\n{}", r.stderr);
}

#[test]
fn every_example_script_checks_against_its_program() {
    let examples = support::root().join("examples");
    let mut checked = 0;
    for dir in std::fs::read_dir(&examples).expect("examples/").map(|e| e.expect("entry").path()) {
        let scripts: Vec<PathBuf> = match std::fs::read_dir(&dir) {
            Ok(rd) => {
                rd.map(|e| e.expect("entry").path()).filter(|p| p.extension().is_some_and(|x| x == "gt")).collect()
            }
            Err(_) => continue,
        };
        if scripts.is_empty() {
            continue;
        }
        let name = dir.file_name().expect("name").to_string_lossy().into_owned();
        let bin = support::go_build_at(&dir, &format!("example-{name}"), &[]);
        for s in scripts {
            let r = support::check_against(&[&s.display().to_string()], &bin);
            assert_eq!(r.code, 0, "{} --check:\n{}", s.display(), r.stderr);
            checked += 1;
        }
    }
    assert!(checked > 0, "no examples/*/*.gt found");
}

#[test]
fn library_errors_name_the_library() {
    let r = support::check_against(&["-e", r#"use "nosuchlib""#], &libs());
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no library `nosuchlib`"), "{}", r.stderr);
    let r = support::check_against(&["gc", "--set", "gc_slow_pause=5"], &libs());
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("`gc_slow_pause` is a duration"), "{}", r.stderr);
    let r = support::check_against(&["nosuchlib"], &libs());
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("--list-libraries"), "{}", r.stderr);
}
