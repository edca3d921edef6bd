//! The cache of what runs learned of a binary (src/cache, issue 26): the real gtrace on
//! real Go builds, each test with its own cache directory (XDG_CACHE_HOME). Whatever the
//! cache holds (nothing, this binary's units, a file of another gtrace, of another
//! binary, a truncated one), the output is the output without a cache, byte for byte;
//! a file not used is written again whole; several gtrace share a directory at once.
//! A warm cache answers without decompressing `.debug_info` (checked through the
//! library). And a script that reads no Go value traces a binary whose DWARF is broken.
//!
//! Here the scripts and what the tests share; warm.rs, files.rs and places.rs hold the
//! tests.

mod files;
mod places;
#[path = "../support/mod.rs"]
mod support;
mod warm;

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
    // The binary's stamp depends on when it was built (it is taken a second after its
    // last change): not compared (files.rs tests it).
    entry.stamp = None;
    entry
}
