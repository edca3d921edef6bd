//! The cache of what runs learned of a binary (src/cache, issue 26): the real gtrace on
//! real Go builds, each test with its own cache directory (XDG_CACHE_HOME). Whatever the
//! cache holds (nothing, this binary's units, a file of another gtrace, of another
//! binary, a truncated one), the output is the output without a cache, byte for byte;
//! a file not used is written again whole; several gtrace share a directory at once.
//! A warm cache answers without decompressing `.debug_info` (checked through the
//! library). And a script that reads no Go value traces a binary whose DWARF is broken.

mod support;

use gtrace::cache::{format, Store};
use gtrace::compile::{compile, Options};
use gtrace::gobin::StoredUnits;
use gtrace::gobin::Target;
use gtrace::library::Root;
use object::{Object, ObjectSection};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Parameters, a field through a pointer, results and a type by name: the DWARF of
/// several units and types.
const SCRIPT: &str = "on entry main.add { @s = sum(a); @b[b] = count() } \
                      on entry \"main.(*T).Add\" { @d = sum(delta); @t = max(t.total) } \
                      on return main.label { @l[s] = sum(ret) }";

/// For tests/go/values: a field through a pointer, a string.
const VALUES_SCRIPT: &str = "on entry main.handle { @s[r.Size] = count() } on entry main.greet { @g[name] = sum(n) }";

fn script_for(binary: &Path) -> &'static str {
    match binary.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("values")) {
        true => VALUES_SCRIPT,
        false => SCRIPT,
    }
}

fn cache_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cache").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// gtrace with `XDG_CACHE_HOME=home`: the plan it compiles for its script and the listing
/// of main's functions, as one text.
fn outputs(binary: &Path, home: &Path, extra: &[&str]) -> String {
    let mut all = plan_of(binary, home, script_for(binary), extra);
    let (b, env) = (binary.to_str().unwrap(), [("XDG_CACHE_HOME", home.to_str().unwrap())]);
    let mut args = vec!["-l", "main.*", "-b", b];
    args.extend(extra);
    let r = support::gtrace_env(&args, &env);
    assert_eq!(r.code, 0, "gtrace {args:?}:\n{}", r.stderr);
    all.push_str(&r.stdout);
    all
}

/// tests/go/e2e built, a cache home of its own named `name`, and the outputs of a run
/// without the cache (what every run with one must print).
fn e2e_without_cache(name: &str) -> (PathBuf, PathBuf, String) {
    let bin = support::go_build("e2e", &[]);
    let home = cache_dir(name);
    let without = outputs(&bin, &home, &["--no-cache"]);
    (bin, home, without)
}

/// The plan gtrace with `XDG_CACHE_HOME=home` compiles for `script`, and what it said
/// on stderr.
fn plan_and_stderr(binary: &Path, home: &Path, script: &str, extra: &[&str]) -> (String, String) {
    let env = [("XDG_CACHE_HOME", home.to_str().unwrap())];
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let plan = home.join(format!("plan-{}-{n}.json", std::process::id()));
    let mut args = vec!["--emit", "plan", "-o", plan.to_str().unwrap(), "-e", script, "-b", binary.to_str().unwrap()];
    args.extend(extra);
    let r = support::gtrace_env(&args, &env);
    assert_eq!(r.code, 0, "gtrace {args:?}:\n{}", r.stderr);
    let text = std::fs::read_to_string(&plan).unwrap();
    std::fs::remove_file(&plan).unwrap();
    (text, r.stderr)
}

fn plan_of(binary: &Path, home: &Path, script: &str, extra: &[&str]) -> String {
    plan_and_stderr(binary, home, script, extra).0
}

fn store(home: &Path) -> Store {
    Store::at(&home.join("gtrace"))
}

fn cache_file(home: &Path, binary: &Path) -> PathBuf {
    store(home).file_for(&Target::open(binary).unwrap()).expect("a Go build has a build id")
}

/// The cache file for `binary` is whole, this gtrace's, for it, with DWARF units, every
/// one of which reads back and passes its check (read into the entry).
fn assert_valid(home: &Path, binary: &Path) -> format::Entry {
    let target = Target::open(binary).unwrap();
    let entry = store(home).load(&target).unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
    let mut entry = entry.unwrap_or_else(|| panic!("no cache file for {}", binary.display()));
    let seed = entry.dwarf.as_ref().expect("the DWARF the run read").read_stored();
    let seed = seed.unwrap_or_else(|| panic!("a unit of the cache of {} fails its check", binary.display()));
    assert!(!seed.bodies.is_empty() && !seed.memo.is_empty(), "{seed:?}");
    assert!(seed.stored.is_none() && seed.info_crc.is_some());
    entry.dwarf = Some(seed);
    entry
}

/// A seed's stored units, counting the reads.
#[derive(Debug)]
struct Counted(Arc<dyn StoredUnits>, AtomicUsize);

impl StoredUnits for Counted {
    fn held(&self) -> Vec<u32> {
        self.0.held()
    }
    fn read(&self, u: u32) -> Option<Vec<u8>> {
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
fn a_cache_of_another_gtrace_or_another_binary_is_not_used() {
    let bin = support::go_build("e2e", &[]);
    let other = support::go_build("values", &[]);
    let home = cache_dir("foreign");
    let without = outputs(&bin, &home, &["--no-cache"]);
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let file = cache_file(&home, &bin);
    let target = Target::open(&bin).unwrap();
    let binary = format::For::new(target.build_ids(), target.file_size());

    // Written by another gtrace, for this binary, with its units emptied.
    let mut foreign = entry.clone();
    foreign.dwarf.as_mut().unwrap().bodies.iter_mut().for_each(|(_, b)| b.fill(0));
    std::fs::write(&file, format::encode_as("gtrace 0.0.0-other", &binary, &foreign)).unwrap();
    assert!(matches!(store(&home).load(&target), Err(format::Rejected::Writer { .. })));
    assert_eq!(outputs(&bin, &home, &[]), without, "a cache of another gtrace");
    assert_eq!(assert_valid(&home, &bin), entry, "written again by this gtrace");

    // Another binary's cache file under this binary's name.
    outputs(&other, &home, &[]);
    std::fs::copy(cache_file(&home, &other), &file).unwrap();
    assert!(matches!(store(&home).load(&target), Err(format::Rejected::OtherBinary)));
    assert_eq!(outputs(&bin, &home, &[]), without, "a cache of another binary");
    assert_eq!(assert_valid(&home, &bin), entry, "written again for this binary");

    // This binary's ids, but its DWARF changed in place: opened (its DWARF is checked
    // only when DWARF is read), its units not used, and written again.
    let mut moved = foreign.clone();
    moved.dwarf.as_mut().unwrap().info_crc = entry.dwarf.as_ref().unwrap().info_crc.map(|c| c ^ 1);
    std::fs::write(&file, format::encode(&binary, &moved)).unwrap();
    assert!(store(&home).load(&target).is_ok_and(|e| e.is_some()));
    assert_eq!(outputs(&bin, &home, &[]), without, "a cache of the same ids, other DWARF");
    assert_eq!(assert_valid(&home, &bin), entry);
}

#[test]
fn a_truncated_or_corrupted_cache_file_is_ignored_and_written_again() {
    let (bin, home, without) = e2e_without_cache("truncated");
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let file = cache_file(&home, &bin);
    let whole = std::fs::read(&file).unwrap();
    let target = Target::open(&bin).unwrap();
    let flip = |at: usize| {
        let mut flipped = whole.clone();
        flipped[at] ^= 0x40;
        flipped
    };
    for (what, bytes) in [
        ("empty", Vec::new()),
        ("the header only", whole[..36].to_vec()),
        ("half", whole[..whole.len() / 2].to_vec()),
        ("all but a byte", whole[..whole.len() - 1].to_vec()),
        ("a byte flipped in the description", flip(40)),
    ] {
        std::fs::write(&file, &bytes).unwrap();
        assert!(store(&home).load(&target).is_err(), "{what}: used");
        assert_eq!(outputs(&bin, &home, &[]), without, "{what}");
        assert_eq!(assert_valid(&home, &bin), entry, "{what}: not written again");
    }
    // A unit's bytes are checked when a question reaches the unit: opened, the units
    // reached read from the binary instead, and the file written again (a byte flipped
    // in each unit: some are only walked past by a lookup the file answers).
    let seed = entry.dwarf.as_ref().unwrap();
    // The blobs follow the header (36 bytes) and the description; the units first.
    let mut at = 36 + u32::from_le_bytes(whole[20..24].try_into().unwrap()) as usize;
    let mut flipped = whole.clone();
    for (_, b) in &seed.bodies {
        flipped[at + 8] ^= 0x40;
        at += b.len();
    }
    std::fs::write(&file, flipped).unwrap();
    let flipped = store(&home).load(&target).unwrap().unwrap().dwarf.unwrap();
    assert!(flipped.read_stored().is_none(), "a unit flipped passes its check");
    assert_eq!(outputs(&bin, &home, &[]), without, "a byte flipped in each unit");
    // Written again with the units the run read from the binary (those it only walked
    // past before are not in it), every one of which passes its check.
    let again = assert_valid(&home, &bin);
    let bodies = |e: &format::Entry| e.dwarf.as_ref().unwrap().bodies.len();
    assert!(bodies(&again) <= bodies(&entry), "{} units, {} before", bodies(&again), bodies(&entry));
    assert_eq!(outputs(&bin, &home, &[]), without, "the file written again");
    // The lookups (the last blob) are checked when DWARF is loaded: opened, asked again,
    // and the file written again.
    let mut again = std::fs::read(&file).unwrap();
    let last = again.len() - 3;
    again[last] ^= 0x40;
    std::fs::write(&file, again).unwrap();
    let flipped = store(&home).load(&target).unwrap().unwrap().dwarf.unwrap();
    assert!(flipped.read_stored().is_none(), "flipped lookups pass their check");
    assert_eq!(outputs(&bin, &home, &[]), without, "a byte flipped in the lookups");
    assert_valid(&home, &bin);
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

/// The cache file `file` rewritten with its description changed by `change` (header,
/// lengths and CRC made to match) and `blobs_len` bytes of blobs claimed, the file's
/// length set to match: past its real blobs, a hole (a sparse file, nothing on disk).
fn forged(file: &Path, change: &dyn Fn(&mut serde_json::Value), blobs_len: u64) {
    let whole = std::fs::read(file).unwrap();
    let json_len = u32::from_le_bytes(whole[20..24].try_into().unwrap()) as usize;
    let mut d: serde_json::Value = serde_json::from_slice(&whole[36..36 + json_len]).unwrap();
    change(&mut d);
    let json = serde_json::to_vec(&d).unwrap();
    let mut out = whole[..16 + 4].to_vec();
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&blobs_len.to_le_bytes());
    out.extend_from_slice(&gtrace::gobin::crc32(&json).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(&whole[36 + json_len..]);
    std::fs::write(file, &out).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
    f.set_len(36 + json.len() as u64 + blobs_len).unwrap();
}

/// A sparse file claiming a blob of a TiB (4 KB on disk) is ignored, never read (it
/// aborted every run on its allocation): the output is the output without a cache, and
/// the file is written again.
#[test]
fn a_cache_file_claiming_a_huge_blob_is_ignored() {
    let (bin, home, without) = e2e_without_cache("huge");
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let file = cache_file(&home, &bin);
    let tib = 1u64 << 40;
    forged(&file, &|d| d["dwarf"]["abbrev"] = serde_json::json!([0, tib, 0]), tib);
    assert!(std::fs::metadata(&file).unwrap().len() > tib, "the forged file claims a TiB");
    let target = Target::open(&bin).unwrap();
    assert!(matches!(store(&home).load(&target), Err(format::Rejected::TooLarge { .. })));
    assert_eq!(outputs(&bin, &home, &[]), without, "a file claiming a TiB");
    assert_eq!(assert_valid(&home, &bin), entry, "written again");
}

/// The plan gtrace with `XDG_CACHE_HOME=home` compiles for `script`, failing the test if
/// it has not ended within a minute (it is killed).
fn plan_within_a_minute(binary: &Path, home: &Path, script: &str) -> String {
    let plan = home.join(format!("plan-{}-timed.json", std::process::id()));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gtrace"))
        .args(["--emit", "plan", "-o", plan.to_str().unwrap(), "-e", script, "-b", binary.to_str().unwrap()])
        .env("XDG_CACHE_HOME", home)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("gtrace still running after a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let text = std::fs::read_to_string(&plan).unwrap();
    std::fs::remove_file(&plan).unwrap();
    text
}

/// A FIFO (or a link to one) under the cache file's name is not opened to wait for a
/// writer (it hung every run): the run ends with the plan of a run without a cache, and
/// a cache file is written in its place.
#[test]
fn a_fifo_in_place_of_a_cache_file_is_ignored() {
    let bin = support::go_build("e2e", &[]);
    let home = cache_dir("fifo");
    let without = plan_of(&bin, &home, SCRIPT, &["--no-cache"]);
    outputs(&bin, &home, &[]);
    let file = cache_file(&home, &bin);
    let fifo = home.join("a-fifo");
    for link in [false, true] {
        std::fs::remove_file(&file).unwrap();
        let _ = std::fs::remove_file(&fifo);
        let made = if link { &fifo } else { &file };
        let status = std::process::Command::new("mkfifo").arg(made).status().unwrap();
        assert!(status.success(), "mkfifo {}", made.display());
        if link {
            std::os::unix::fs::symlink(&fifo, &file).unwrap();
        }
        assert_eq!(plan_within_a_minute(&bin, &home, SCRIPT), without, "a FIFO, through a link: {link}");
        assert!(std::fs::symlink_metadata(&file).unwrap().is_file(), "no cache file written over it");
        assert_valid(&home, &bin);
    }
}

/// A cache file another user could write is not trusted (a forged file can pass every
/// checksum): ignored, the output is the output without a cache, and it is written
/// again, for this user only.
#[test]
fn a_cache_file_writable_by_others_is_ignored() {
    use std::os::unix::fs::PermissionsExt;
    let (bin, home, without) = e2e_without_cache("writable-file");
    outputs(&bin, &home, &[]);
    let file = cache_file(&home, &bin);
    let mode = |f: &Path| std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&home.join("gtrace")), 0o700, "the cache directory");
    assert_eq!(mode(&file), 0o600, "a cache file");
    let target = Target::open(&bin).unwrap();
    for writable in [0o620, 0o602] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(writable)).unwrap();
        assert!(store(&home).load(&target).unwrap().is_none(), "mode {writable:o}: read");
        assert_eq!(outputs(&bin, &home, &[]), without, "mode {writable:o}");
        assert_eq!(mode(&file), 0o600, "mode {writable:o}: not written again");
        assert_valid(&home, &bin);
    }
}

/// A cache directory that is a symbolic link, or that another user could write, is
/// neither read nor written (nothing evicted from it either), and the run says so in
/// one line with a hint; the output is the output without a cache.
#[test]
fn a_cache_directory_not_this_user_s_own_is_neither_read_nor_written() {
    use std::os::unix::fs::PermissionsExt;
    let (bin, home, without) = e2e_without_cache("untrusted-dir");
    // A cache written where the link will point, and a temporary file two hours old
    // (evicted from a directory in use).
    let elsewhere = cache_dir("untrusted-dir-target");
    outputs(&bin, &elsewhere, &[]);
    let victim = elsewhere.join("gtrace");
    let old = victim.join("left.tmp");
    std::fs::write(&old, "").unwrap();
    let two_hours = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::options().write(true).open(&old).unwrap().set_modified(two_hours).unwrap();
    let listing = |d: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        names
    };
    let before = listing(&victim);
    let file = cache_file(&elsewhere, &bin);
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&victim, home.join("gtrace")).unwrap();
    let (plan, said) = plan_and_stderr(&bin, &home, SCRIPT, &[]);
    assert_eq!(plan, plan_of(&bin, &home, SCRIPT, &["--no-cache"]));
    assert_eq!(outputs(&bin, &home, &[]), without, "a linked cache directory");
    assert!(said.contains("is not used: it is a symbolic link"), "{said}");
    assert_eq!(said.lines().filter(|l| l.contains("cache directory")).count(), 1, "{said}");
    let mut expected = before.clone();
    expected.retain(|n| n != file.file_name().unwrap());
    assert_eq!(listing(&victim), expected, "written or evicted through the link");

    // A directory writable by its group: not used, and the hint says how to fix it.
    std::fs::remove_file(home.join("gtrace")).unwrap();
    std::fs::create_dir(home.join("gtrace")).unwrap();
    std::fs::set_permissions(home.join("gtrace"), std::fs::Permissions::from_mode(0o770)).unwrap();
    let (plan, said) = plan_and_stderr(&bin, &home, SCRIPT, &[]);
    assert_eq!(plan, plan_of(&bin, &home, SCRIPT, &["--no-cache"]));
    assert!(said.contains("writable by group or others") && said.contains("chmod go-w"), "{said}");
    assert!(listing(&home.join("gtrace")).is_empty(), "written into a group-writable directory");
}

/// A cache directory under a directory another user could write (who could rename it
/// away and put theirs in its place) is neither read nor written, said in one line with
/// a hint; under a sticky one (`/tmp`) it is used. The check is made once a run: a
/// directory that passed is not checked again (here: made writable after).
#[test]
fn a_cache_directory_under_a_directory_others_may_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let (bin, base, without) = e2e_without_cache("untrusted-parent");
    let home = base.join("shared");
    std::fs::create_dir(&home).unwrap();
    outputs(&bin, &home, &[]);
    let file = cache_file(&home, &bin);
    let set = |mode: u32| std::fs::set_permissions(&home, std::fs::Permissions::from_mode(mode)).unwrap();
    set(0o777);
    std::fs::remove_file(&file).unwrap();
    let (plan, said) = plan_and_stderr(&bin, &home, SCRIPT, &[]);
    set(0o755);
    assert_eq!(plan, plan_of(&bin, &home, SCRIPT, &["--no-cache"]));
    assert!(said.contains("above it is writable by group or others") && said.contains("chmod go-w"), "{said}");
    assert_eq!(said.lines().filter(|l| l.contains("cache directory")).count(), 1, "{said}");
    assert!(!file.exists(), "written under a parent others may write");
    // Sticky, as /tmp is: others may not rename what is not theirs in it.
    set(0o1777);
    let (plan, said) = plan_and_stderr(&bin, &home, SCRIPT, &[]);
    set(0o755);
    assert_eq!(plan, plan_of(&bin, &home, SCRIPT, &["--no-cache"]));
    assert!(!said.contains("cache directory"), "{said}");
    assert!(file.exists(), "not written under a sticky parent");
    assert_valid(&home, &bin);
    assert_eq!(outputs(&bin, &home, &[]), without);

    // Checked once: a store whose directory passed is not checked again.
    let cache = store(&home);
    assert!(cache.trusted().is_ok());
    set(0o777);
    let again = cache.trusted();
    let fresh = store(&home).trusted();
    set(0o755);
    assert!(again.is_ok(), "checked again: {again:?}");
    assert!(matches!(fresh, Err(gtrace::cache::Untrusted::Parent { .. })), "{fresh:?}");
}

/// A cache file written by another build of the same gtrace version (the writer names
/// its build by a hash of its sources, build.rs) is not used, and is written again;
/// and the CRC-32 of the compressed `.debug_info` a first run writes is the binary's
/// (computed when the file is written, not when DWARF is loaded).
#[test]
fn a_cache_of_another_build_of_this_version_is_not_used() {
    let (bin, home, without) = e2e_without_cache("other-build");
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let target = Target::open(&bin).unwrap();
    let crc = gtrace::gobin::crc32(target.dwarf_bytes().expect("DWARF"));
    assert_eq!(entry.dwarf.as_ref().unwrap().info_crc, Some(crc));
    let version = concat!("gtrace ", env!("CARGO_PKG_VERSION"));
    assert!(format::WRITER.starts_with(&format!("{version} build ")), "{}", format::WRITER);
    let file = cache_file(&home, &bin);
    let binary = format::For::new(target.build_ids(), target.file_size());
    let mut foreign = entry.clone();
    foreign.dwarf.as_mut().unwrap().bodies.iter_mut().for_each(|(_, b)| b.fill(0));
    for other in [version.to_string(), format!("{version} build 0123456789abcdef")] {
        std::fs::write(&file, format::encode_as(&other, &binary, &foreign)).unwrap();
        assert!(matches!(store(&home).load(&target), Err(format::Rejected::Writer { .. })), "{other}");
        assert_eq!(outputs(&bin, &home, &[]), without, "a cache of {other}");
        assert_eq!(assert_valid(&home, &bin), entry, "{other}: written again by this build");
    }
}

/// A file whose blob area holds more than the blobs its description lists (here a hole
/// of 200 MiB after them, nothing on disk) is not copied as it is when only new inlined
/// sites are written (the hole became 200 MiB of disk blocks): it is written from the
/// blobs it lists, as long as they need.
#[test]
fn a_hole_after_the_blobs_is_not_copied() {
    use std::os::unix::fs::MetadataExt;
    let bin = support::go_build("e2e", &[]);
    let home = cache_dir("hole");
    outputs(&bin, &home, &[]);
    let file = cache_file(&home, &bin);
    let whole = std::fs::read(&file).unwrap();
    let blobs_len = u64::from_le_bytes(whole[24..32].try_into().unwrap());
    let hole = 200u64 << 20;
    forged(&file, &|_| {}, blobs_len + hole);
    let before = std::fs::metadata(&file).unwrap();
    assert!(before.len() > hole && before.blocks() * 512 < hole, "a sparse file");
    assert!(store(&home).load(&Target::open(&bin).unwrap()).unwrap().is_some(), "the forged file is used");
    let script = "on entry main.small8 { @c = count() }";
    assert_eq!(plan_of(&bin, &home, script, &[]), plan_of(&bin, &home, script, &["--no-cache"]));
    let after = assert_valid(&home, &bin);
    assert!(after.inlined.iter().any(|(p, _)| p == "main.small8"), "{:?}", after.inlined);
    let meta = std::fs::metadata(&file).unwrap();
    assert!(meta.len() < hole && meta.blocks() * 512 < hole, "{} bytes, {} blocks", meta.len(), meta.blocks());
    let json_len = u32::from_le_bytes(std::fs::read(&file).unwrap()[20..24].try_into().unwrap()) as u64;
    let need = after.dwarf.as_ref().unwrap().bodies.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
    assert!(meta.len() >= 36 + json_len + need && meta.len() < 36 + json_len + need + (1 << 20), "{meta:?}");
}

/// A lookup's answer in the cache that is not a DIE of the name asked (two functions'
/// answers swapped, or one pointing inside a DIE, checksums made to match) is not
/// used: the function is looked up again, the output is the output without a cache,
/// and the file is written again with the right answer.
#[test]
fn a_lookup_answer_that_is_not_the_name_asked_is_not_used() {
    let (bin, home, without) = e2e_without_cache("memo");
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let file = cache_file(&home, &bin);
    let target = Target::open(&bin).unwrap();
    let binary = format::For::new(target.build_ids(), target.file_size());
    let memo = &entry.dwarf.as_ref().unwrap().memo;
    let answer = |key: &str| memo.iter().find(|(k, _)| k == key).and_then(|(_, v)| *v);
    let add = answer("f main.add").expect("main.add looked up");
    let (other, other_at) = memo
        .iter()
        .find_map(|(k, v)| Some((k.clone(), (*v)?)).filter(|_| k.starts_with("f main.") && k != "f main.add"))
        .expect("another function of main looked up");
    let swapped = |key: &str, v: Option<[u64; 2]>| match key {
        "f main.add" => Some(other_at),
        k if k == other => Some(add),
        _ => v,
    };
    let inside = |key: &str, v: Option<[u64; 2]>| if key == "f main.add" { Some([add[0] + 1, 0]) } else { v };
    for (what, change) in [
        ("swapped", &swapped as &dyn Fn(&str, Option<[u64; 2]>) -> _),
        ("inside a DIE", &inside as &dyn Fn(&str, _) -> _),
    ] {
        let mut forged = entry.clone();
        forged.dwarf.as_mut().unwrap().memo.iter_mut().for_each(|(k, v)| *v = change(k, *v));
        std::fs::write(&file, format::encode(&binary, &forged)).unwrap();
        assert_eq!(outputs(&bin, &home, &[]), without, "{what}");
        let again = assert_valid(&home, &bin);
        let memo = &again.dwarf.as_ref().unwrap().memo;
        let now = |key: &str| memo.iter().find(|(k, _)| k == key).and_then(|(_, v)| *v);
        assert_eq!(now("f main.add"), Some(add), "{what}: not written again");
    }
}

/// A cache file whose DWARF units are bad though their checksums match (forged): the
/// DWARF error is not blamed on the binary; the run compiles again without the cache
/// (and says so in one line), its output is the output without a cache, and the file
/// is written again.
#[test]
fn bad_dwarf_from_the_cache_is_compiled_again_without_it() {
    let (bin, home, without) = e2e_without_cache("bad-units");
    outputs(&bin, &home, &[]);
    let entry = assert_valid(&home, &bin);
    let file = cache_file(&home, &bin);
    let target = Target::open(&bin).unwrap();
    let binary = format::For::new(target.build_ids(), target.file_size());
    let mut forged = entry.clone();
    for (_, body) in &mut forged.dwarf.as_mut().unwrap().bodies {
        body.iter_mut().skip(11).step_by(7).for_each(|b| *b = 0xff);
    }
    std::fs::write(&file, format::encode(&binary, &forged)).unwrap();
    let (plan, said) = plan_and_stderr(&bin, &home, SCRIPT, &[]);
    assert_eq!(plan, plan_of(&bin, &home, SCRIPT, &["--no-cache"]));
    assert!(said.contains("compiled again without the cache"), "{said}");
    assert_eq!(outputs(&bin, &home, &[]), without, "the file written again");
    assert_valid(&home, &bin);
}
