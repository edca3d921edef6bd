//! A cache in use: the output the same cold and warm, a warm cache answering without
//! decompressing `.debug_info` and reading a file's units only when reached, inlined
//! sites kept beside the file's DWARF, several gtrace at once, and a binary whose DWARF
//! is broken traced by a script that reads no Go value.

use super::*;

/// A seed's stored units, counting the reads.
#[derive(Debug)]
struct Counted(Arc<dyn StoredUnits>, AtomicUsize);

impl StoredUnits for Counted {
    fn held(&self) -> Vec<u32> {
        self.0.held()
    }
    fn read(&self, u: u32) -> Option<gtrace::gobin::UnitBytes> {
        self.1.fetch_add(1, Ordering::Relaxed);
        self.0.read(u)
    }
    fn memo(&self) -> Option<Vec<(String, Option<[u64; 2]>)>> {
        self.0.memo()
    }
}

#[test]
fn outputs_are_the_same_without_the_cache_cold_and_warm() {
    let (bin, home, without) = e2e_without_cache("same");
    assert!(!home.join("gtrace").exists(), "--no-cache wrote a cache");
    assert!(without.contains("main.add(a int"), "{without}");
    assert!(without.contains("\"probes\""), "{without}");
    assert_eq!(outputs(&bin, &home, &[]), without, "first run, empty cache");
    let first = assert_valid(&home, &bin);
    assert_eq!(outputs(&bin, &home, &[]), without, "second run, warm cache");
    // The warm run learned nothing new: the file is as the first run wrote it.
    assert_eq!(assert_valid(&home, &bin), first);
}

/// Through the library: a target seeded from the cache compiles the same plan without
/// decompressing `.debug_info`; one without a seed decompresses it.
#[test]
fn a_warm_cache_answers_without_decompressing_the_dwarf() {
    let bin = support::go_build("e2e", &[]);
    let home = cache_dir("warm");
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let plan = |seeded: bool| {
        let target = Target::open(&bin).unwrap();
        if seeded {
            target.seed_dwarf(entry.dwarf.clone().unwrap());
        }
        let root = Root { name: "<test>".into(), text: SCRIPT.into(), dir: None };
        let c = compile(root, &target, &Options::default()).unwrap_or_else(|r| panic!("{}", r.render(false)));
        assert_eq!(target.dwarf_decompressed(), !seeded, "seeded: {seeded}");
        serde_json::to_string(&c.plan).unwrap()
    };
    assert_eq!(plan(true), plan(false));
}

/// A cache file's units are read when a question reaches them, not when it is opened:
/// a script without Go values reads none of them (and does not load DWARF); one that
/// reads values reads the units it reaches, from the file, and compiles the plan it
/// compiles without a cache.
#[test]
fn a_cache_file_s_units_are_read_only_when_reached() {
    let bin = support::go_build("e2e", &[]);
    let home = cache_dir("lazy");
    outputs(&bin, &home, &[]);
    let plan = |target: &Target, script: &str| {
        let root = Root { name: "<test>".into(), text: script.into(), dir: None };
        let c = compile(root, target, &Options::default()).unwrap_or_else(|r| panic!("{}", r.render(false)));
        serde_json::to_string(&c.plan).unwrap()
    };
    // The plan from a target seeded from the file, the units read, whether DWARF was.
    let seeded = |script: &str| {
        let target = Target::open(&bin).unwrap();
        let mut seed = store(&home).load(&target).unwrap().unwrap().dwarf.unwrap();
        assert!(seed.bodies.is_empty() && seed.memo.is_empty(), "units or lookups read at open: {seed:?}");
        let counted = Arc::new(Counted(seed.stored.take().unwrap(), AtomicUsize::new(0)));
        seed.stored = Some(counted.clone());
        target.seed_dwarf(seed);
        let plan = plan(&target, script);
        assert!(!target.dwarf_decompressed(), "{script}");
        (plan, counted.1.load(Ordering::Relaxed), target.dwarf_read())
    };
    let plain = "on entry main.add { @c = count() }";
    let (got, reads, dwarf) = seeded(plain);
    assert_eq!((reads, dwarf), (0, false), "a script without Go values");
    assert_eq!(got, plan(&Target::open(&bin).unwrap(), plain));
    let (got, reads, _) = seeded(SCRIPT);
    assert!(reads > 0, "the units the script reaches are read from the file");
    assert_eq!(got, plan(&Target::open(&bin).unwrap(), SCRIPT));
}

/// A run that learns only where a new pattern's functions were inlined writes the file
/// again with the DWARF it held, byte for byte (copied, not read), and the new sites.
#[test]
fn new_inlined_sites_keep_the_file_s_dwarf() {
    let bin = support::go_build("e2e", &[]);
    let home = cache_dir("resited");
    outputs(&bin, &home, &[]);
    let before = assert_valid(&home, &bin);
    let script = "on entry main.small8 { @c = count() }";
    let without = plan_of(&bin, &home, script, &["--no-cache"]);
    assert_eq!(plan_of(&bin, &home, script, &[]), without);
    let after = assert_valid(&home, &bin);
    assert_eq!(after.dwarf, before.dwarf, "the DWARF the file held");
    assert!(after.inlined.iter().any(|(p, _)| p == "main.small8"), "{:?}", after.inlined);
    assert_eq!(after.inlined.len(), before.inlined.len() + 1);
    assert_eq!(outputs(&bin, &home, &[]), outputs(&bin, &home, &["--no-cache"]));
}

#[test]
fn several_gtrace_share_a_cache_at_once() {
    let bins = [support::go_build("e2e", &[]), support::go_build("values", &[])];
    let home = cache_dir("shared");
    let want: Vec<String> = bins.iter().map(|b| outputs(b, &home, &["--no-cache"])).collect();
    for round in 0..2 {
        // Four at once on each binary, cold in the first round, warm in the second.
        let runs: Vec<_> = (0..8)
            .map(|i| {
                let (bin, home) = (bins[i % 2].clone(), home.clone());
                std::thread::spawn(move || (i % 2, outputs(&bin, &home, &[])))
            })
            .collect();
        for r in runs {
            let (which, got) = r.join().unwrap();
            assert_eq!(got, want[which], "round {round}: {}", bins[which].display());
        }
        for bin in &bins {
            assert_valid(&home, bin);
        }
        let names: Vec<String> = std::fs::read_dir(home.join("gtrace"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "one file a binary, no temporary left: {names:?}");
    }
}

/// A script that reads no Go value traces a binary whose `.debug_info` is broken (the
/// counts are the program's own), and the cache is left alone.
#[test]
fn a_script_without_go_values_traces_a_binary_with_broken_dwarf() {
    if !support::privileged("a_script_without_go_values_traces_a_binary_with_broken_dwarf") {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    let mut data = std::fs::read(&bin).unwrap();
    let (start, size) = {
        let file = object::File::parse(&*data).unwrap();
        let (start, size) = file.section_by_name(".debug_info").unwrap().file_range().unwrap();
        (start as usize, size as usize)
    };
    for i in (start..start + size).step_by(61) {
        data[i] = !data[i];
    }
    let home = cache_dir("broken");
    let broken = home.join("e2e-broken-dwarf");
    std::fs::write(&broken, &data).unwrap();
    std::fs::set_permissions(&broken, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let cmd = format!("{} add 500", broken.display());
    let script = "on entry main.add { @c = count() } on return main.add { @r = count() }";
    let env = [("XDG_CACHE_HOME", home.to_str().unwrap())];
    let r = support::gtrace_env(&["-e", script, "-c", &cmd], &env);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let calls = support::truth(&r.stdout, "calls");
    assert_eq!(calls, 500);
    assert_eq!(support::map_value(&r.stdout, "@c"), calls, "{}", r.stdout);
    assert_eq!(support::map_value(&r.stdout, "@r"), calls, "{}", r.stdout);
    // Where main.add was inlined is kept; no DWARF was read.
    let entry = store(&home).load(&Target::open(&broken).unwrap()).unwrap().expect("a cache file");
    assert!(entry.dwarf.is_none(), "no DWARF read, none cached");
}

/// Where a pattern's functions were inlined (finding it reads every inline tree of the
/// binary) is cached: the plan is the one without a cache, cold and warm; the warm run
/// takes the sites from the file (a file that says otherwise changes the warning); a
/// truncated file, and one whose sites are not in the binary's code or not at the
/// start of an instruction of it, are ignored and written again.
#[test]
fn where_functions_were_inlined_is_cached_and_a_bad_file_ignored() {
    let bin = support::go_build("inline", &[]);
    let home = cache_dir("inlined");
    let script = "on entry main.weigh { @w = count() } on entry main.inner { @i = count() } \
                  on entry main.main { @m = count() }";
    let without = plan_of(&bin, &home, script, &["--no-cache"]);
    assert!(!home.join("gtrace").exists(), "--no-cache wrote a cache");
    assert_eq!(plan_of(&bin, &home, script, &[]), without, "first run, empty cache");
    let target = Target::open(&bin).unwrap();
    let entry = store(&home).load(&target).unwrap().expect("a cache file");
    let sites = |e: &format::Entry, p: &str| e.inlined.iter().find(|(q, _)| q == p).map(|(_, s)| s.clone());
    let weigh = target.find_inlined("main.weigh");
    assert!(!weigh.is_empty(), "main.weigh is inlined in tests/go/inline");
    assert_eq!(sites(&entry, "main.weigh"), Some(weigh.clone()));
    assert_eq!(sites(&entry, "main.inner"), Some(target.find_inlined("main.inner")));
    assert_eq!(sites(&entry, "main.main"), Some(Vec::new()), "a function inlined nowhere is cached too");
    let (warm, said) = plan_and_stderr(&bin, &home, script, &[]);
    assert_eq!(warm, without, "second run, warm cache");
    assert!(!said.contains("warning"), "{said}");

    let file = cache_file(&home, &bin);
    // No DWARF read: the file names the binary without a CRC of its DWARF.
    assert!(entry.dwarf.is_none());
    let binary = format::For::new(target.build_ids(), target.file_size());
    let with_sites = |f: &dyn Fn(&mut gtrace::gobin::InlinedSite)| {
        let mut e = entry.clone();
        e.inlined.iter_mut().flat_map(|(_, s)| s.iter_mut()).for_each(f);
        format::encode(&binary, &e)
    };
    // The warm run reads the sites from the file: placed at their lowest address, it
    // warns about them.
    std::fs::write(&file, with_sites(&|s| s.how = gtrace::gobin::Placement::Lowest)).unwrap();
    let (_, said) = plan_and_stderr(&bin, &home, script, &[]);
    assert!(said.contains(&format!("places where `main.weigh` was inlined")), "{said}");

    // An address inside an instruction of the caller's code (its second byte, of the
    // first instruction longer than one byte from the site on): a uprobe there would
    // corrupt the target's code.
    let inside = |s: &gtrace::gobin::InlinedSite| {
        let f = target.function_containing(s.addr).expect("the site's caller");
        let insns = target.arch().control_flow(target.code(f).unwrap(), f.addr).unwrap();
        insns.iter().find(|i| i.addr >= s.addr && i.next > i.addr + 1).map(|i| i.addr + 1).unwrap()
    };
    let whole = format::encode(&binary, &entry);
    for (what, bytes) in [
        ("truncated", whole[..whole.len() / 2].to_vec()),
        ("sites outside the binary's code", with_sites(&|s| s.addr = 0x10)),
        ("sites in another function", with_sites(&|s| s.caller = "main.nosuch".into())),
        ("sites inside an instruction", with_sites(&|s| s.addr = inside(s))),
        ("bodies inside an instruction", with_sites(&|s| s.body = inside(s))),
    ] {
        std::fs::write(&file, &bytes).unwrap();
        assert_eq!(plan_of(&bin, &home, script, &[]), without, "{what}");
        assert_eq!(store(&home).load(&target).unwrap(), Some(entry.clone()), "{what}: not written again");
    }
}
