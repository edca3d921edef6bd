//! Attaching: to a held child from its first instruction, to a running process by its
//! `/proc/PID/exe`; detaching for real; a point the kernel refuses left out, an attach
//! error that names its function and detaches; each program verified once; a thousand
//! points through one multi-uprobe link.

use super::*;

#[test]
fn counts_calls_of_a_go_function_in_a_held_child() {
    let _serial = serial();
    let (bytes, plan) = object_and_plan(vec![(work_probe(3), count_by_cookie())], vec![counts_map()]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    let printed = run_target(Some(&mut loaded), 37);
    assert_eq!(printed, 37);
    // Every call counted under the cookie, across CPUs, from the first instruction on.
    assert_eq!(count_of(&loaded, 3), printed);
    let entries = loaded.map_entries(COUNTS).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].1.len(), runtime::possible_cpus().unwrap());
    // clear_map empties it.
    loaded.clear_map(COUNTS).unwrap();
    assert!(loaded.map_entries(COUNTS).unwrap().is_empty());
}

#[test]
fn held_child_is_probed_from_its_first_instruction_across_exec() {
    let _serial = serial();
    // The ELF entry point of the Go binary runs exactly once, before anything else; the
    // held child first execs sh, which execs the target: the pid-scoped probe follows.
    let offset = entry_offset(go_target(), "_rt0_amd64_linux");
    let entry = probe(
        "count",
        ProbeAttach::Uprobe(vec![AttachPoint { function: "_rt0".into(), address: 0, file_offset: offset, cookie: 9 }]),
    );
    let (bytes, plan) = object_and_plan(vec![(entry, count_by_cookie())], vec![counts_map()]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    run_target(Some(&mut loaded), 2);
    assert_eq!(count_of(&loaded, 9), 1);
}

#[test]
fn attaches_to_a_running_process_through_proc_pid_exe() {
    let _serial = serial();
    let (bytes, plan) = object_and_plan(vec![(work_probe(4), count_by_cookie())], vec![counts_map()]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    // The target runs (release returns once it exec'd) and waits for its gate file before
    // its loop; attach (as `-p` does) meanwhile, then open the gate. (It slept 400ms
    // instead: an attach slower than 300ms under load would have missed calls.)
    let gate = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("runtime-gate-{}", std::process::id()));
    let _ = std::fs::remove_file(&gate);
    let argv = [go_target().display().to_string(), "21".to_string(), gate.display().to_string()];
    let mut child = runtime::spawn_held(&argv).unwrap();
    child.release().unwrap();
    let pid = child.pid();
    assert!(runtime::is_alive(pid));
    let exe = runtime::process_exe(pid).unwrap();
    assert_eq!(loaded.attach(&exe, Scope::Process(pid), None).unwrap(), 1);
    std::fs::write(&gate, b"").unwrap();
    assert!(child.wait().unwrap().success());
    assert!(!runtime::is_alive(pid));
    std::fs::remove_file(&gate).unwrap();
    assert_eq!(count_of(&loaded, 4), 21);
}

#[test]
fn detach_all_really_detaches() {
    let _serial = serial();
    let (bytes, plan) = object_and_plan(vec![(work_probe(1), count_by_cookie())], vec![counts_map()]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    // Every process running the binary: a later run would be counted if still attached.
    assert_eq!(loaded.attach(go_target(), Scope::AllProcesses, None).unwrap(), 1);
    let printed = run_target(None, 11);
    assert_eq!(count_of(&loaded, 1), printed);
    loaded.detach_all();
    assert_eq!(loaded.attached(), 0);
    run_target(None, 13);
    assert_eq!(count_of(&loaded, 1), printed);
}

#[test]
fn nonexistent_pid_is_no_such_process() {
    let pid = 0x3fff_fff0;
    assert!(matches!(runtime::process_exe(pid), Err(RuntimeError::NoSuchProcess { pid: p }) if p == pid));
    assert!(!runtime::is_alive(pid));

    let _serial = serial();
    let (bytes, plan) = object_and_plan(vec![(work_probe(0), count_by_cookie())], vec![counts_map()]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    match loaded.attach(go_target(), Scope::Process(pid), None) {
        Err(RuntimeError::NoSuchProcess { pid: p }) => assert_eq!(p, pid),
        other => panic!("expected NoSuchProcess, got {other:?}"),
    }
    assert_eq!(loaded.attached(), 0);
}

#[test]
fn a_point_the_kernel_refuses_is_left_out_and_the_others_attach() {
    let _serial = serial();
    let offset = entry_offset(go_target(), "main.work");
    let size = std::fs::metadata(go_target()).unwrap().len();
    let points = vec![
        AttachPoint { function: "main.work".into(), address: 0, file_offset: offset, cookie: 0 },
        AttachPoint { function: "main.beyond".into(), address: 0x99, file_offset: size + 0x1000, cookie: 1 },
    ];
    let (bytes, plan) =
        object_and_plan(vec![(probe("count", ProbeAttach::Uprobe(points)), count_by_cookie())], vec![counts_map()]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    assert_eq!(loaded.attach(go_target(), Scope::AllProcesses, None).unwrap(), 1);
    let refused = loaded.refused().to_vec();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!((refused[0].function.as_str(), refused[0].address), ("main.beyond", 0x99));
    assert_eq!((refused[0].file_offset, refused[0].errno), (size + 0x1000, libc::EINVAL));
    let printed = run_target(None, 3);
    assert_eq!(count_of(&loaded, 0), printed);
    assert_eq!(count_of(&loaded, 1), 0);
}

/// The ids of the kprobe-type programs (uprobes are kprobe programs) this process holds.
fn kprobe_programs() -> std::collections::BTreeSet<u64> {
    let fds = fdinfos().into_iter().filter(|f| f.get("prog_type").is_some_and(|t| t == "2"));
    fds.filter_map(|f| f.get("prog_id")?.parse().ok()).collect()
}

#[test]
fn a_program_is_verified_once_and_its_second_copy_loaded_only_for_a_refused_link() {
    let _serial = serial();
    let before = kprobe_programs();
    let loaded_now = |before: &std::collections::BTreeSet<u64>| kprobe_programs().difference(before).count();
    // Every point attaches: the program is loaded (verified) once, as the multi-uprobe
    // copy where the kernel has such links, else as aya's.
    let (bytes, plan) = object_and_plan(vec![(work_probe(0), count_by_cookie())], vec![counts_map()]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    assert_eq!(loaded_now(&before), 1, "programs loaded for one probe");
    assert_eq!(loaded.attach(go_target(), Scope::AllProcesses, None).unwrap(), 1);
    // Kernels before 6.6 have no multi-uprobe links (the VM matrix runs these tests).
    let multi = holds_link_of_type("uprobe_multi");
    assert_eq!(loaded_now(&before), 1, "programs loaded once attached");
    let printed = run_target(None, 4);
    assert_eq!(count_of(&loaded, 0), printed);
    drop(loaded);

    // A point the kernel refuses: the multi-uprobe link is refused, and each point is
    // attached alone through aya's copy, loaded (verified) only now.
    let size = std::fs::metadata(go_target()).unwrap().len();
    let mut probe = work_probe(0);
    if let ProbeAttach::Uprobe(points) = &mut probe.attach {
        points.push(AttachPoint {
            function: "main.beyond".into(),
            address: 0x99,
            file_offset: size + 0x1000,
            cookie: 1,
        });
    }
    let (bytes, plan) = object_and_plan(vec![(probe, count_by_cookie())], vec![counts_map()]);
    let before = kprobe_programs();
    let mut loaded = load_or_skip(&bytes, &plan).unwrap();
    assert_eq!(loaded_now(&before), 1);
    assert_eq!(loaded.attach(go_target(), Scope::AllProcesses, None).unwrap(), 1);
    assert_eq!(loaded.refused().len(), 1);
    assert_eq!(loaded_now(&before), if multi { 2 } else { 1 }, "aya's copy loaded for the points alone");
    let printed = run_target(None, 3);
    assert_eq!(count_of(&loaded, 0), printed);
}

#[test]
fn an_attach_error_names_the_function_and_detaches() {
    let _serial = serial();
    let offset = entry_offset(go_target(), "main.work");
    // A file that does not exist is no refused point: the attach fails, naming it, and
    // detaches (it is opened once, before any probe, and attached to through that fd).
    let points = vec![AttachPoint { function: "main.work".into(), address: 0, file_offset: offset, cookie: 0 }];
    let (bytes, plan) =
        object_and_plan(vec![(probe("count", ProbeAttach::Uprobe(points)), count_by_cookie())], vec![counts_map()]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    let missing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-such-binary");
    match loaded.attach(&missing, Scope::AllProcesses, None) {
        Err(e @ RuntimeError::Open { .. }) => {
            let text = e.to_string();
            assert!(text.contains("no-such-binary") && text.contains("to attach probes to it"), "{text}");
        }
        other => panic!("expected an attach error, got {other:?}"),
    }
    assert_eq!(loaded.attached(), 0);
}

/// File offsets of the entries of the first `n` functions of `binary` whose names start
/// with `prefix`, in address order.
fn function_offsets(binary: &Path, prefix: &str, n: usize) -> Vec<(String, u64)> {
    use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
    let data = std::fs::read(binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut found: Vec<(u64, String, u64)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .filter_map(|s| {
            let name = s.name().ok()?;
            if !name.starts_with(prefix) {
                return None;
            }
            let section = file.section_by_index(s.section_index()?).ok()?;
            let (file_start, _) = section.file_range()?;
            Some((s.address(), name.to_string(), s.address() - section.address() + file_start))
        })
        .collect();
    found.sort();
    found.dedup_by_key(|f| f.0);
    found.into_iter().take(n).map(|(_, name, off)| (name, off)).collect()
}

/// Whether this process holds a BPF link of `link_type` (as /proc/self/fdinfo names it).
fn holds_link_of_type(link_type: &str) -> bool {
    fdinfos().iter().any(|f| f.get("link_type").is_some_and(|t| t == link_type))
}

#[test]
fn a_thousand_points_attach_and_detach_through_one_multi_uprobe_link() {
    let _serial = serial();
    // 999 runtime functions (cookies 0..999) and main.work (cookie 999).
    let mut points: Vec<AttachPoint> = function_offsets(go_target(), "runtime.", 999)
        .into_iter()
        .enumerate()
        .map(|(i, (function, file_offset))| AttachPoint { function, address: 0, file_offset, cookie: i as u64 })
        .collect();
    assert_eq!(points.len(), 999, "the Go target has fewer runtime functions");
    points.push(AttachPoint {
        function: "main.work".into(),
        address: 0,
        file_offset: entry_offset(go_target(), "main.work"),
        cookie: 999,
    });
    let counts = map_spec(COUNTS, MapKind::PercpuHash, 8, 8, 1024, MapRole::Scratch);
    let (bytes, plan) =
        object_and_plan(vec![(probe("count", ProbeAttach::Uprobe(points)), count_by_cookie())], vec![counts]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    let argv = [go_target().display().to_string(), "123".to_string()];
    let mut child = runtime::spawn_held(&argv).unwrap();
    let started = Instant::now();
    assert_eq!(loaded.attach(go_target(), Scope::Process(child.pid()), None).unwrap(), 1000);
    let attach_time = started.elapsed();
    assert_eq!(loaded.attached(), 1000);
    // One multi-uprobe link, not a thousand perf events (the kernel here has them).
    let multi = holds_link_of_type("uprobe_multi");
    if std::env::var_os(runtime::NO_UPROBE_MULTI_ENV).is_none() {
        assert!(multi, "no uprobe_multi link in /proc/self/fdinfo");
    }
    child.release().unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(count_of(&loaded, 999), 123);
    // The runtime ran: some runtime functions were counted under their own cookies.
    let entries = loaded.map_entries(COUNTS).unwrap();
    assert!(entries.len() > 10, "only {} functions counted", entries.len());
    let started = Instant::now();
    loaded.detach_all();
    let detach_time = started.elapsed();
    assert_eq!(loaded.attached(), 0);
    assert!(!holds_link_of_type("uprobe_multi"));
    // Detached: another run is not counted.
    let mut child = runtime::spawn_held(&argv).unwrap();
    child.release().unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(count_of(&loaded, 999), 123);
    eprintln!("1000 points: attach {attach_time:?}, detach {detach_time:?} (multi link: {multi})");
}
