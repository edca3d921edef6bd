//! `m[k]` of Go maps end to end: tests/go/gomaps looks keys up in maps with integer keys
//! of every size and string keys (small maps of one bucket or group, bigger ones with
//! overflow buckets and several swiss tables, a map growing between lookups, deleted
//! entries, absent keys, a nil map) and prints what it found; gtrace's printf of `m[k]`
//! at the entry of the same call must print the same line. Built by Go 1.17 (buckets),
//! 1.23 (buckets, the last release with them), the local Go and the newest (swiss
//! tables), with maps of up to a million entries, whose absent keys read as absent;
//! string keys longer than gtrace hashes give a skipped hit, counted and said at exit.
//! Three string lookups in one probe pass the verifier; the hash keys found in the
//! runtime's code are those of the symbol table. The layout table gtrace uses without
//! DWARF is checked against each build's DWARF. Needs root for the traced runs (SKIP
//! without it, unless CI=true).

mod support;

use gtrace::gobin::Target;
use std::collections::BTreeMap;
use support::toolchain::{build, build_plain, toolchains, Kind, PLAIN};
use support::{gtrace, gtrace_env, privileged};

/// The bucket layout's last release and the swiss tables' first, besides the default
/// toolchains.
const LAST_BUCKETS: &str = "go1.23.12";
const FIRST_SWISS: &str = "go1.24.13";

const SCRIPT: &str = r#"
on entry main.lookupInt { printf("gt int %s %d %d\n", tag, k, m[k]) }
on entry main.lookupStr { printf("gt str %s %s %d\n", tag, k, m[k]) }
on entry main.lookupStrStr { printf("gt strstr %s %s %s\n", tag, k, m[k]) }
on entry main.lookupSmall { printf("gt small %s %d %d\n", tag, k, m[k]) }
on entry main.lookupByte { printf("gt byte %s %d %d\n", tag, k, m[k]) }
on entry main.lookupPoint { printf("gt point %s %d %d\n", tag, k, m[k].Y) }
on entry main.lookupLen { printf("gt len %s %d\n", tag, len(m)) }
on entry main.lookupKeyLen { printf("gt keylen %s %d %d\n", tag, len(k), m[k]) }
"#;

fn all_toolchains() -> Vec<String> {
    let mut v = toolchains();
    for t in [LAST_BUCKETS, FIRST_SWISS] {
        if !v.iter().any(|have| have == t) {
            v.push(t.to_string());
        }
    }
    v
}

/// The lines starting with `prefix`, without it, counted.
fn lines(out: &str, prefix: &str) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for l in out.lines().filter_map(|l| l.strip_prefix(prefix)) {
        *m.entry(l.to_string()).or_insert(0) += 1;
    }
    m
}

/// How many hits of `program` gtrace said it skipped for `why` (0 when it said nothing).
fn skipped(stderr: &str, program: &str, why: &str) -> usize {
    let tail = format!(" of on entry {program}: {why}");
    stderr
        .split("skipped ")
        .filter(|part| part.contains(&tail))
        .filter_map(|part| part.split_whitespace().next()?.parse::<usize>().ok())
        .sum()
}

/// The length of a truth line's string key (`keylen` lines print it; `str` and `strstr`
/// lines print the key), None for integer keys.
fn key_len(line: &str) -> Option<usize> {
    let f: Vec<&str> = line.split(' ').collect();
    match f.first()? {
        &"keylen" => f.get(2)?.parse().ok(),
        &"str" | &"strstr" => Some(f.get(2)?.len()),
        _ => None,
    }
}

/// How many hits gtrace said it skipped for a string key longer than it hashes.
fn skipped_long(stderr: &str) -> usize {
    ["main.lookupStr", "main.lookupStrStr", "main.lookupKeyLen"]
        .iter()
        .map(|p| skipped(stderr, p, "m[k] with a string key longer than"))
        .sum()
}

/// Runs SCRIPT on tests/go/gomaps built by `toolchain`, with `env`: every lookup of a key
/// up to `longest` bytes reads what the program found; longer ones are skipped, counted.
fn lookups_match(toolchain: &str, env: &[(&str, &str)], longest: usize) {
    let Some(bin) = build_plain("gomaps", toolchain) else { return };
    let r = gtrace_env(&["-e", SCRIPT, "-c", bin.to_str().unwrap()], env);
    assert_eq!(r.code, 0, "{toolchain} {env:?}:\n{}\n{}", r.stdout, r.stderr);
    let (ours, truth) = (lines(&r.stdout, "gt "), lines(&r.stdout, "go "));
    assert!(truth.len() > 60, "{toolchain}: the program printed too little:\n{}", r.stdout);
    let mut missing = 0;
    // The lookups' lines (the rest are printed maps, and main.lookupByPoint, there for
    // the checker's error: its key is a struct).
    let probed = ["int", "str", "strstr", "small", "byte", "point", "len", "keylen"];
    for (line, n) in truth.iter().filter(|(l, _)| probed.contains(&l.split(' ').next().unwrap_or(""))) {
        let got = ours.get(line).copied().unwrap_or(0);
        if key_len(line).is_some_and(|len| len > longest) {
            assert_eq!(got, 0, "{toolchain} {env:?}: `{line}` read, though longer than gtrace hashes");
            missing += n;
        } else {
            assert_eq!(got, *n, "{toolchain} {env:?}: `{line}`:\ngtrace:\n{ours:#?}\n{}", r.stderr);
        }
    }
    for line in ours.keys() {
        assert!(truth.contains_key(line), "{toolchain} {env:?}: gtrace read `{line}`, the program never did");
    }
    // What gtrace did not print, it said it skipped: only keys longer than it hashes.
    assert_eq!(missing, skipped_long(&r.stderr), "{toolchain} {env:?}: {}", r.stderr);
    assert!(missing >= 3, "{toolchain} {env:?}: the too long keys were not skipped");
    assert!(!r.stderr.contains("looked at"), "{toolchain} {env:?}: a lookup gave up:\n{}", r.stderr);
    // A million entries: absent keys read as absent (a scan could not tell them).
    for absent in ["int n1000000 2 0", "int n1000000 7000000 0", "str n1000000 key-1 0", "int n100000 -10 0"] {
        assert!(ours.contains_key(absent), "{toolchain} {env:?}: `{absent}` not read:\n{}", r.stderr);
    }
}

#[test]
fn map_lookups_read_what_the_program_finds() {
    if !privileged("map_lookups_read_what_the_program_finds") {
        return;
    }
    for toolchain in all_toolchains() {
        lookups_match(&toolchain, &[], 128);
    }
}

#[test]
fn without_aes_map_lookups_hash_as_the_runtime_falls_back() {
    if !privileged("without_aes_map_lookups_hash_as_the_runtime_falls_back") {
        return;
    }
    // The runtime's memhash (wyhash) where the CPU has no AES: string keys up to 48 bytes.
    for toolchain in all_toolchains() {
        lookups_match(&toolchain, &[("GODEBUG", "cpu.aes=off")], 48);
    }
}

#[test]
fn three_string_lookups_in_one_probe_load() {
    if !privileged("three_string_lookups_in_one_probe_load") {
        return;
    }
    let script = r#"on entry main.lookupStr { printf("gt3 %d %d %d\n", m[k], m["key-3"], m[tag]) }"#;
    for toolchain in all_toolchains() {
        let Some(bin) = build_plain("gomaps", &toolchain) else { continue };
        let r = support::check_against(&["-e", script], &bin);
        assert_eq!(r.code, 0, "{toolchain}:\n{}\n{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("the kernel's verifier accepts every program"), "{toolchain}: {}", r.stderr);
    }
}

#[test]
fn the_hash_keys_found_in_code_are_the_symbols() {
    for toolchain in all_toolchains() {
        let Some(bin) = build_plain("gomaps", &toolchain) else { continue };
        let target = Target::open(&bin).unwrap_or_else(|e| panic!("{toolchain}: {e}"));
        let from_code = target.aes_globals().unwrap_or_else(|| panic!("{toolchain}: no aeshash keys in the code"));
        assert_eq!(Some(from_code), target.aes_globals_from_symbols(), "{toolchain}");
    }
    let stripped = Kind { stripped: true, ..PLAIN };
    let Ok(bin) = build("gomaps", "local", stripped) else { panic!("build gomaps") };
    let target = Target::open(&bin).unwrap();
    assert_eq!(target.aes_globals_from_symbols(), None, "a stripped binary has no symbol table");
    assert!(target.aes_globals().is_some(), "the keys of a stripped binary, from its code");
}

#[test]
fn maps_print_as_fmt_prints_them_up_to_max_elems() {
    if !privileged("maps_print_as_fmt_prints_them_up_to_max_elems") {
        return;
    }
    let script = r#"
on entry main.show { printf("gt show %s %v %v %+v %v\n", tag, a, b, h, n); printf("gt sharp %s %#v %#v\n", tag, a, b) }
on entry main.showBig { printf("gt big %v\n", m) }
"#;
    for toolchain in all_toolchains() {
        let Some(bin) = build_plain("gomaps", &toolchain) else { continue };
        let r = gtrace(&["-e", script, "--max-elems", "5", "-c", bin.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{toolchain}:\n{}\n{}", r.stdout, r.stderr);
        for kind in ["show ", "sharp "] {
            let (ours, truth) = (lines(&r.stdout, &format!("gt {kind}")), lines(&r.stdout, &format!("go {kind}")));
            assert_eq!(truth.len(), 2, "{toolchain}: {}", r.stdout);
            assert_eq!(ours, truth, "{toolchain}");
        }
        // 300 entries, 5 shown: each one the program has, sorted, then `...`.
        let truth = r.stdout.lines().find_map(|l| l.strip_prefix("go big map[")).expect("the program's big map");
        let ours = r.stdout.lines().find_map(|l| l.strip_prefix("gt big map[")).expect("gtrace's big map");
        let shown: Vec<&str> = ours.strip_suffix(" ...]").expect("cut with ...").split(' ').collect();
        assert_eq!(shown.len(), 5, "{toolchain}: {ours}");
        let all: Vec<&str> = truth.trim_end_matches(']').split(' ').collect();
        let keys: Vec<i64> = shown.iter().map(|e| e.split(':').next().unwrap().parse().unwrap()).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{toolchain}: not sorted: {ours}");
        for e in shown {
            assert!(all.contains(&e), "{toolchain}: gtrace shows {e}, which the map does not hold");
        }
    }
}

#[test]
fn the_layout_table_agrees_with_dwarf() {
    for toolchain in all_toolchains() {
        let Some(bin) = build_plain("gomaps", &toolchain) else { continue };
        let target = Target::open(&bin).unwrap_or_else(|e| panic!("{toolchain}: {e}"));
        let version = target.go_version().expect("a Go version").to_string();
        let dwarf = target.map_layout_from_dwarf().unwrap_or_else(|| panic!("{toolchain}: no map layout in DWARF"));
        assert_eq!(Target::map_layout_for_version(&version), Some(dwarf), "{toolchain} ({version})");
    }
}

#[test]
fn a_stripped_binary_reads_maps_with_its_dwarf_kept_aside() {
    if !privileged("a_stripped_binary_reads_maps_with_its_dwarf_kept_aside") {
        return;
    }
    let Ok(bin) = build("gomaps", "local", PLAIN) else { panic!("build gomaps") };
    let dir = support::root().join("target/tmp/gomaps-stripped");
    std::fs::create_dir_all(&dir).unwrap();
    let (debug, stripped) = (dir.join("gomaps.debug"), dir.join("gomaps"));
    for args in [
        vec!["--only-keep-debug", bin.to_str().unwrap(), debug.to_str().unwrap()],
        vec!["--strip-all", bin.to_str().unwrap(), stripped.to_str().unwrap()],
    ] {
        let out = std::process::Command::new("objcopy").args(&args).output().expect("objcopy (binutils)");
        assert!(out.status.success(), "objcopy {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let script = r#"on entry main.lookupStr { printf("gt str %s %s %d\n", tag, k, m[k]) }"#;
    let r = gtrace(&["-e", script, "--debug-file", debug.to_str().unwrap(), "-c", stripped.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let (ours, truth) = (lines(&r.stdout, "gt str "), lines(&r.stdout, "go str "));
    assert!(!truth.is_empty());
    assert_eq!(ours, truth, "{}", r.stderr);
}

#[test]
fn a_pie_hashes_with_its_keys_at_the_load_bias() {
    if !privileged("a_pie_hashes_with_its_keys_at_the_load_bias") {
        return;
    }
    let pie = Kind { pie: true, ..PLAIN };
    let Ok(bin) = build("gomaps", "local", pie) else { panic!("build gomaps") };
    let script = r#"
on entry main.lookupInt { printf("gt int %s %d %d\n", tag, k, m[k]) }
on entry main.lookupStr { printf("gt str %s %s %d\n", tag, k, m[k]) }
"#;
    let r = gtrace(&["-e", script, "-c", bin.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    for kind in ["int ", "str "] {
        let (ours, truth) = (lines(&r.stdout, &format!("gt {kind}")), lines(&r.stdout, &format!("go {kind}")));
        assert!(truth.len() > 20, "{}", r.stdout);
        assert_eq!(ours, truth, "{}", r.stderr);
    }
}

#[test]
fn a_plan_with_map_lookups_runs_elsewhere() {
    if !privileged("a_plan_with_map_lookups_runs_elsewhere") {
        return;
    }
    let Ok(bin) = build("gomaps", "local", PLAIN) else { panic!("build gomaps") };
    let dir = support::root().join("target/tmp/gomaps-plan");
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("plan.json");
    let script = r#"on entry main.lookupStr { printf("gt str %s %s %d\n", tag, k, m[k]) }"#;
    let (b, p) = (bin.to_str().unwrap(), plan.to_str().unwrap());
    let r = gtrace(&["--emit", "plan", "-o", p, "-e", script, "-b", b]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The plan's AES tables map passes `gtrace run`'s checks, and the lookups read true.
    let r = gtrace(&["run", "-c", b, p]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let (ours, truth) = (lines(&r.stdout, "gt str "), lines(&r.stdout, "go str "));
    assert!(truth.len() > 20, "{}", r.stdout);
    assert_eq!(ours, truth, "{}", r.stderr);
}

/// The diagnostics of `script` against tests/go/gomaps built as `kind`, the binary's
/// path replaced by BIN.
fn rendered(script: &str, kind: Kind) -> String {
    let Ok(bin) = build("gomaps", "local", kind) else { panic!("build gomaps") };
    let r = support::check_against(&["-e", script], &bin);
    assert_ne!(r.code, 0, "expected an error for {script}");
    r.stderr.replace(bin.to_str().unwrap(), "BIN")
}

#[test]
fn a_key_type_that_is_not_read_is_a_clear_error() {
    insta::assert_snapshot!(rendered("on entry main.lookupByPoint { @[k.X] = sum(m[k]) }", PLAIN));
}

#[test]
fn a_key_of_the_wrong_type_is_a_clear_error() {
    insta::assert_snapshot!(rendered(r#"on entry main.lookupInt { @s = sum(m["three"]) }"#, PLAIN));
}

#[test]
fn without_dwarf_a_map_lookup_is_a_clear_error() {
    let stripped = Kind { stripped: true, ..PLAIN };
    insta::assert_snapshot!(rendered("on entry main.lookupInt { @s = sum(m[k]) }", stripped));
}
