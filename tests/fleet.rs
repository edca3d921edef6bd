//! Containers and cgroups, made by the tests with the kernel features container runtimes
//! use (tests/support/container.rs): a Go program in its own pid and mount namespaces
//! under a root of its own, traced by -p and by -b through every path a container gives
//! its executable; `--cgroup` scoping a -b trace to one cgroup's processes. Every count
//! is compared with the program's own, and every pid with the host's view of it.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use support::container::{self, can_run, move_into, Place, Proc, Scratch, TestCgroup};
use support::processes::Gtrace;
use support::skip;

const SCRIPT: &str = "on entry main.work { @calls = count(); @sum = sum(i); @pids[pid] = count() }";

/// `@NAME[KEY]: N` lines of a text output, by key.
fn keyed(out: &str, name: &str) -> BTreeMap<String, u64> {
    let prefix = format!("{name}[");
    out.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|l| l.split_once("]: "))
        .map(|(k, v)| (k.to_string(), v.trim().parse().expect("a count")))
        .collect()
}

fn value(out: &str, name: &str) -> u64 {
    support::map_value(out, name) as u64
}

fn pids(entries: &[(u32, u64)]) -> BTreeMap<String, u64> {
    entries.iter().map(|(p, n)| (p.to_string(), *n)).collect()
}

/// gtrace with `args`, attached; `run` drives the programs while it traces; then it is
/// stopped with SIGINT (or, with `-p`, ends with its target) and its output returned.
fn traced(args: &[&str], run: impl FnOnce(), by_signal: bool) -> (String, String) {
    let mut g = Gtrace::start(args);
    g.attached();
    run();
    let code = if by_signal { g.stop("INT") } else { g.wait() };
    assert_eq!(code, 0, "gtrace failed:\n{}", g.err.text());
    (g.out.text(), g.err.text())
}

#[test]
fn pid_of_a_process_in_its_own_pid_and_mount_namespaces() {
    let test = "pid_of_a_process_in_its_own_pid_and_mount_namespaces";
    if !can_run(test) {
        return;
    }
    let scratch = Scratch::new("by-pid");
    let bin = scratch.program();
    let mut c = Proc::container(&bin, Place::Copy, &scratch.0);
    // A container: another pid and mount namespace, pid 1 in its own, and its
    // executable reached from the host only through /proc/PID/root.
    assert_ne!(c.pid_namespace(), container::own_namespace("pid"));
    assert_ne!(c.mount_namespace(), container::own_namespace("mnt"));
    assert_eq!(c.own_pid, 1);
    assert!(!scratch.0.join("root/app/server").exists(), "the container's root is not visible from the host");
    let pid = c.host_pid.to_string();
    let mut g = Gtrace::start(&["-p", &pid, "-e", SCRIPT, "--prometheus", ":0"]);
    let addr = g.serving();
    let truth = c.run(300);
    // Exported with the binary's name inside the container, and the host's pid.
    let mut body = ureq::get(&format!("http://{addr}/metrics")).call().expect("scrape");
    let text = body.body_mut().read_to_string().expect("metrics");
    let calls = format!("gtrace_calls_total{{binary=\"/app/server\",pid=\"{pid}\"}} {}", truth.calls);
    assert!(text.lines().any(|l| l == calls), "{calls} in:\n{text}");
    c.finish();
    // -p: gtrace ends with its target.
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    let (out, err) = (g.out.text(), g.err.text());
    assert_eq!(value(&out, "@calls"), truth.calls, "{out}");
    assert_eq!(value(&out, "@sum"), truth.sum, "{out}");
    // `pid` is the host's pid, not the 1 the program sees.
    assert_eq!(keyed(&out, "@pids"), pids(&[(c.host_pid, truth.calls)]), "{out}");
    let from_here = format!("/proc/{pid}/root/app/server");
    let note = format!("gtrace: pid {pid} runs /app/server in another mount namespace (a container); from here that file is {from_here}");
    assert!(err.lines().any(|l| l == note), "{err}");
}

/// Which path `-b` is given for a container's file.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    /// `/proc/PID/root/app/server` of a container whose /app/server is a copy: no other
    /// path reaches that file, and the host's original is another file.
    ProcRoot,
    /// The host's path of a file the container bind-mounts at /app/server: the host's
    /// process of it is seen too.
    HostPath,
    /// The path of an image layer on the host, under the container's overlay root: the
    /// layer's file is what runs (overlayfs maps the lower file); the host's original
    /// is another file.
    Layer,
}

/// A container and a host process of one binary, traced with `-b` by the path `via`
/// gives; the counts and pids are exactly those of the processes that run that file.
fn traced_through(test: &str, via: Via) {
    if !can_run(test) {
        return;
    }
    let scratch = Scratch::new(test);
    let bin = scratch.program();
    let layer = scratch.0.join("layer");
    let place = match via {
        Via::ProcRoot => Place::Copy,
        Via::HostPath => Place::Bind,
        Via::Layer => {
            std::fs::create_dir_all(layer.join("app")).expect("layer dir");
            support::copy_executable(&bin, &layer.join("app/server"));
            Place::Overlay { layer: &layer }
        }
    };
    let mut c = Proc::container(&bin, place, &scratch.0);
    let mut h = Proc::host(&bin);
    assert_eq!(c.own_pid, 1);
    let path = match via {
        Via::ProcRoot => format!("/proc/{}/root/app/server", c.host_pid),
        Via::HostPath => bin.display().to_string(),
        Via::Layer => layer.join("app/server").display().to_string(),
    };
    let (mut tc, mut th) = (None, None);
    let (out, _) = traced(
        &["-b", &path, "-e", SCRIPT],
        || {
            tc = Some(c.run(120));
            th = Some(h.run(75));
        },
        true,
    );
    let (tc, th) = (tc.expect("truth"), th.expect("truth"));
    let mut seen = vec![(c.host_pid, tc.clone())];
    if via == Via::HostPath {
        seen.push((h.host_pid, th));
    }
    assert_eq!(value(&out, "@calls"), seen.iter().map(|(_, t)| t.calls).sum::<u64>(), "{out}");
    assert_eq!(value(&out, "@sum"), seen.iter().map(|(_, t)| t.sum).sum::<u64>(), "{out}");
    let want: Vec<(u32, u64)> = seen.iter().map(|(p, t)| (*p, t.calls)).collect();
    assert_eq!(keyed(&out, "@pids"), pids(&want), "{out}");
    c.finish();
    h.finish();
}

#[test]
fn binary_reached_only_through_proc_root() {
    traced_through("binary_reached_only_through_proc_root", Via::ProcRoot);
}

#[test]
fn binary_bind_mounted_under_another_path_in_a_container() {
    traced_through("binary_bind_mounted_under_another_path_in_a_container", Via::HostPath);
}

#[test]
fn binary_in_an_overlay_layer() {
    traced_through("binary_in_an_overlay_layer", Via::Layer);
}

#[test]
fn gtrace_in_a_pid_namespace_of_its_own_reads_host_pids() {
    let test = "gtrace_in_a_pid_namespace_of_its_own_reads_host_pids";
    if !can_run(test) {
        return;
    }
    let scratch = Scratch::new("gtrace-ns");
    let bin = scratch.program();
    let mut h = Proc::host(&bin);
    let unshare = container::tool("unshare").expect("unshare");
    let gtrace = env!("CARGO_BIN_EXE_gtrace");
    let mut g = Gtrace::start_command(
        unshare.to_str().unwrap(),
        &["--pid", "--mount-proc", "--kill-child", gtrace, "-b", bin.to_str().unwrap(), "-e", SCRIPT],
    );
    g.attached();
    let truth = h.run(55);
    // gtrace is pid 1 in its namespace: signal it from the host by its host pid.
    let inner = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", g.child.0.id())).expect("children");
    let status = std::process::Command::new("kill").args(["-INT", inner.trim()]).status().expect("kill");
    assert!(status.success());
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    let (out, err) = (g.out.text(), g.err.text());
    assert!(
        err.contains("gtrace runs in a pid namespace of its own: `pid` and `tid` in probes are the host's pids"),
        "{err}"
    );
    assert_eq!(keyed(&out, "@pids"), pids(&[(h.host_pid, truth.calls)]), "{out}");
    h.finish();
}

#[test]
fn cgroup_scopes_every_probe_to_its_processes_and_those_below() {
    let test = "cgroup_scopes_every_probe_to_its_processes_and_those_below";
    if !can_run(test) {
        return;
    }
    if container::unified_mount().is_none() {
        skip(test, "no cgroup v2 hierarchy mounted");
        return;
    }
    let scratch = Scratch::new("cgroup");
    let bin = scratch.program();
    // A pod: a cgroup whose process lives in a container's cgroup one level down.
    let mut pod = TestCgroup::new("pod");
    let inner = pod.child("container");
    let mut outside = Proc::host(&bin);
    let mut inside = Proc::host(&bin);
    move_into(&inner, inside.host_pid);
    let script = "on entry main.work { @calls = count(); @pids[pid] = count() }
                  on return main.work { @lat = hist(elapsed) }";
    let pod_path = pod.path.to_str().unwrap().to_string();
    let (mut t_in, mut t_out) = (None, None);
    let (out, err) = traced(
        &["-b", bin.to_str().unwrap(), "--cgroup", &pod_path, "--stats", "-f", "json", "-e", script],
        || {
            t_out = Some(outside.run(400));
            t_in = Some(inside.run(150));
        },
        true,
    );
    let (t_in, t_out) = (t_in.expect("truth"), t_out.expect("truth"));
    assert_eq!(t_in.cgroup, TestCgroup::relative(&inner), "the program says where it ran");
    assert_eq!(t_out.cgroup, "/", "{t_out:?}");
    let objects: Vec<serde_json::Value> = out.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let map = |name: &str| {
        objects
            .iter()
            .find(|o| o["type"] == "map" && o["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {out}\n{err}"))
    };
    assert_eq!(map("@calls")["entries"][0]["value"], t_in.calls, "{out}");
    let pid_entries = map("@pids")["entries"].as_array().expect("entries").clone();
    assert_eq!(pid_entries.len(), 1, "{out}");
    assert_eq!(pid_entries[0]["keys"]["pid"], inside.host_pid, "{out}");
    assert_eq!(pid_entries[0]["value"], t_in.calls, "{out}");
    let buckets: u64 = map("@lat")["entries"][0]["value"]
        .as_array()
        .expect("buckets")
        .iter()
        .map(|b| b["count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(buckets, t_in.calls, "every return in the cgroup paired with its entry: {out}");
    // Each program attached to main.work returned at once for every call outside: the
    // entry probe, the return probe, the entry timing.
    let stats = objects.iter().find(|o| o["type"] == "stats").unwrap_or_else(|| panic!("no stats in {out}"));
    // gtrace's own programs in the runtime (stack copies, recoveries) ran for no call here.
    let probes: Vec<_> = stats["probes"].as_array().expect("probes").iter().filter(|p| p["hits"] != 0).collect();
    assert_eq!(probes.len(), 3, "{stats}");
    for p in probes {
        assert_eq!(p["other_cgroup"], t_out.calls, "{p}");
        assert_eq!(p["hits"], t_in.calls, "{p}");
    }
    outside.finish();
    inside.finish();
}

#[test]
fn cgroup_bad_input_is_a_clear_error_before_anything_attaches() {
    let scratch = Scratch::new("cgroup-bad");
    let bin = support::container::fleet_program();
    let run = |cgroup: &Path| {
        let r = support::gtrace(&["-b", bin.to_str().unwrap(), "--cgroup", cgroup.to_str().unwrap(), "-e", SCRIPT]);
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(!r.stderr.contains("Attached"), "{}", r.stderr);
        r.stderr
    };
    let err = run(Path::new("/no/such/cgroup"));
    assert!(err.starts_with("error: --cgroup /no/such/cgroup: no such cgroup"), "{err}");
    assert!(err.contains("hint: give a directory of the cgroup v2 hierarchy"), "{err}");
    let file = scratch.0.join("file");
    std::fs::write(&file, "x").expect("write");
    let err = run(&file);
    assert!(
        err.starts_with(&format!("error: --cgroup {} is a regular file, not a cgroup directory", file.display())),
        "{err}"
    );
    let err = run(&scratch.0);
    assert!(
        err.starts_with(&format!("error: --cgroup {} is not a cgroup: it is a directory of ", scratch.0.display())),
        "{err}"
    );
    match container::unified_mount() {
        Some(u) => assert!(err.contains(&format!("the unified (v2) hierarchy is mounted at {}", u.display())), "{err}"),
        None => assert!(err.contains("no cgroup v2"), "{err}"),
    }
    // A cgroup v1 directory, where the host has one (a hybrid host).
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let v1 = info.lines().find_map(|l| {
        let (mount, fs) = l.split_once(" - ")?;
        (fs.split_whitespace().next()? == "cgroup").then(|| mount.split_whitespace().nth(4).map(String::from))?
    });
    if let Some(v1) = v1 {
        let err = run(Path::new(&v1));
        assert!(err.starts_with(&format!("error: --cgroup {v1} is in a cgroup v1 hierarchy")), "{err}");
    }
}

#[test]
fn a_plan_and_its_cgroup_go_together() {
    let Some(unified) = container::unified_mount() else {
        skip("a_plan_and_its_cgroup_go_together", "no cgroup v2 hierarchy mounted");
        return;
    };
    let scratch = Scratch::new("plan");
    let bin = support::container::fleet_program();
    let (b, u) = (bin.to_str().unwrap(), unified.to_str().unwrap());
    let scoped = scratch.0.join("scoped.json");
    let plain = scratch.0.join("plain.json");
    for (plan, extra) in [(&scoped, vec!["--cgroup", u]), (&plain, vec![])] {
        let mut args = vec!["-e", SCRIPT, "-b", b, "--emit", "plan", "-o", plan.to_str().unwrap()];
        args.extend(extra);
        let r = support::gtrace(&args);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let r = support::gtrace(&["run", scoped.to_str().unwrap(), "-b", b]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("the plan was compiled with --cgroup"), "{}", r.stderr);
    let r = support::gtrace(&["run", plain.to_str().unwrap(), "-b", b, "--cgroup", u]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("the plan was compiled without --cgroup"), "{}", r.stderr);
}

#[test]
fn pid_whose_proc_root_is_not_readable() {
    let test = "pid_whose_proc_root_is_not_readable";
    // Another user's process: root's, read by nobody.
    let Some(setpriv) = container::tool("setpriv") else {
        skip(test, "no setpriv (util-linux)");
        return;
    };
    if !nix_is_root() {
        skip(test, "needs root, to run the target as root and gtrace as nobody");
        return;
    }
    let scratch = Scratch::new("unreadable");
    let bin = scratch.program();
    // gtrace where nobody may run it.
    let gtrace = scratch.0.join("gtrace");
    support::copy_executable(std::path::Path::new(env!("CARGO_BIN_EXE_gtrace")), &gtrace);
    open_up(&scratch.0);
    let mut p = Proc::host(&bin);
    let pid = p.host_pid.to_string();
    let out = std::process::Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&gtrace)
        .args(["-p", &pid, "--check", "-e", SCRIPT])
        .output()
        .expect("run gtrace as nobody");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let comm: String = bin.file_name().unwrap().to_string_lossy().chars().take(15).collect();
    let want = format!(
        "error: cannot trace pid {pid} ({comm}): the kernel refuses access to its root directory (/proc/{pid}/root: Permission denied (os error 13)); reading another user's process needs root or CAP_SYS_PTRACE"
    );
    assert!(err.starts_with(&want), "{err}");
    p.finish();
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .is_some_and(|u| u.split_whitespace().nth(1) == Some("0"))
}

/// Lets every user reach `dir` and its parents (target/ and up are root's 0755 already).
fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut d = Some(dir);
    while let Some(p) = d {
        if let Ok(m) = std::fs::metadata(p) {
            let mode = m.permissions().mode();
            if mode & 0o005 != 0o005 {
                let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode | 0o005));
            }
        }
        d = p.parent();
    }
}

/// Without privileges: with `--cgroup`, every program attached to the target asks the
/// kernel about the current task before anything else (before its hit is counted), and
/// returns at once unless it is under the cgroup; programs that run in gtrace itself
/// (begin, end, interval) do not ask. The cgroup array is in the object and the plan.
#[test]
fn cgroup_scope_is_the_first_thing_every_target_program_does() {
    use gtrace::bpf::helpers::{BPF_FUNC_current_task_under_cgroup, BPF_FUNC_get_attach_cookie};
    use gtrace::compile::{compile, Options};
    use gtrace::plan::{MapKind, ProbeAttach};
    let bin = container::fleet_program();
    let target = gtrace::gobin::Target::open(&bin).expect("open");
    let script = "on entry main.work { @c = count() } on return main.work { @l = hist(elapsed) }
                  on begin { print(1) } on interval 10ms { print(2) }";
    let root = gtrace::library::Root { name: "<test>".into(), text: script.into(), dir: None };
    let mut opts = Options::default();
    opts.lowering.cgroup = true;
    opts.lowering.accounting = true;
    let c = compile(root, &target, &opts).unwrap_or_else(|r| panic!("{}", r.render(false)));
    assert_eq!(c.plan.cgroup, "cgroup");
    let map = c.plan.maps.iter().find(|m| m.object_name == c.plan.cgroup).expect("the cgroup array");
    assert_eq!((map.kind, map.key_size, map.value_size, map.max_entries), (MapKind::CgroupArray, 4, 4, 1));
    let obj = aya_obj::Object::parse(&c.object).expect("aya-obj parses the object");
    assert_eq!(obj.maps["cgroup"].map_type(), 8, "BPF_MAP_TYPE_CGROUP_ARRAY");
    let calls = |name: &str| -> Vec<i32> {
        let (_, p) = c.programs.iter().find(|(n, _)| n == name).expect("program");
        // Helper calls; the preemption guard's kfunc calls (src 2) come before them.
        let kfunc = gtrace::bpf::kfuncs::BPF_PSEUDO_KFUNC_CALL;
        p.insns.iter().filter(|i| i.code == 0x85 && i.src != kfunc).map(|i| i.imm).collect()
    };
    let mut target_programs = 0;
    for probe in &c.plan.probes {
        let called = calls(&probe.program);
        if matches!(probe.attach, ProbeAttach::Uprobe(_)) {
            target_programs += 1;
            assert_eq!(called.first(), Some(&BPF_FUNC_current_task_under_cgroup), "{}: {called:?}", probe.program);
            assert!(called.contains(&BPF_FUNC_get_attach_cookie), "{}: the hit is counted after", probe.program);
        } else {
            assert!(!called.contains(&BPF_FUNC_current_task_under_cgroup), "{}", probe.program);
        }
    }
    // Entry, return and the entry timing; runtime.copystack and runtime.recovery, which
    // keep the frames `elapsed` pairs.
    assert_eq!(target_programs, 5, "entry, return, the entry timing, stack copies, recoveries");
    // Hits in other cgroups are counted apart, per program, when hits are counted.
    let others = c.plan.accounting.slots.iter().filter(|s| matches!(s, gtrace::plan::Counter::OtherCgroup { .. }));
    assert_eq!(others.count(), 5);
    // Without --cgroup: none of it.
    let root = gtrace::library::Root { name: "<test>".into(), text: script.into(), dir: None };
    let c = compile(root, &target, &Options::default()).unwrap_or_else(|r| panic!("{}", r.render(false)));
    assert!(c.plan.cgroup.is_empty() && c.plan.maps.iter().all(|m| m.kind != MapKind::CgroupArray));
    assert!(c
        .programs
        .iter()
        .all(|(_, p)| p.insns.iter().all(|i| i.imm != BPF_FUNC_current_task_under_cgroup || i.code != 0x85)));
}

/// A node's gtrace follows a file, not a process: `-b /proc/PID/root/app/server` names
/// the file through one container's process, and goes on tracing the containers started
/// after that process ended (here a second container with the same file bind-mounted).
#[test]
fn a_path_through_proc_root_outlives_its_process() {
    let test = "a_path_through_proc_root_outlives_its_process";
    if !can_run(test) {
        return;
    }
    let scratch = Scratch::new("outlives");
    let bin = scratch.program();
    let first_dir = scratch.0.join("first");
    let mut first = Proc::container(&bin, Place::Bind, &first_dir);
    let path = format!("/proc/{}/root/app/server", first.host_pid);
    let (mut t1, mut t2, mut second_pid) = (None, None, 0);
    let (out, _) = traced(
        &["-b", &path, "-e", SCRIPT],
        || {
            t1 = Some(first.run(21));
            first.finish();
            assert!(!Path::new(&path).exists(), "the first container's root is gone");
            let mut second = Proc::container(&bin, Place::Bind, &scratch.0.join("second"));
            t2 = Some(second.run(34));
            second_pid = second.host_pid;
            second.finish();
        },
        true,
    );
    let (t1, t2) = (t1.expect("truth"), t2.expect("truth"));
    assert_eq!(value(&out, "@calls"), t1.calls + t2.calls, "{out}");
    assert_eq!(keyed(&out, "@pids"), pids(&[(first.host_pid, t1.calls), (second_pid, t2.calls)]), "{out}");
}
