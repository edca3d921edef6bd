//! DWARF kept aside: a Go binary stripped with objcopy, its DWARF in a separate file
//! (`objcopy --only-keep-debug`), given with --debug-file or found by build id under a
//! debug directory; traced by parameter names with counts equal to the program's own. A
//! debug file of another build is refused with both build ids. Needs objcopy (binutils;
//! .ci/run installs it); the tracing test needs root, like every end-to-end test.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::{gtrace, map_value, privileged, truth};

/// A scratch folder of this test process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gtrace-debugfile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn objcopy(args: &[&str]) {
    let out = Command::new("objcopy").args(args).output().unwrap_or_else(|e| panic!("objcopy (binutils): {e}"));
    assert!(out.status.success(), "objcopy {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// `binary` split into a stripped copy and its debug file, in `dir`.
fn split(binary: &Path, dir: &Path) -> (PathBuf, PathBuf) {
    let stripped = dir.join("prog");
    let debug = dir.join("prog.debug");
    let (b, s, d) = (binary.to_str().unwrap(), stripped.to_str().unwrap(), debug.to_str().unwrap());
    objcopy(&["--only-keep-debug", b, d]);
    objcopy(&["--strip-all", b, s]);
    (stripped, debug)
}

/// The GNU build id of `binary`, as `readelf -n` prints it.
fn gnu_build_id(binary: &Path) -> String {
    let out = Command::new("readelf").arg("-n").arg(binary).output().expect("readelf (binutils)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
        .expect("a GNU build id")
}

#[test]
fn a_stripped_binary_is_listed_by_names_from_its_debug_file() {
    let dir = scratch("list");
    let (stripped, debug) = split(&support::go_build("e2e", &[]), &dir);
    let b = stripped.to_str().unwrap();
    let r = gtrace(&["-l", "main.add", "-b", b]);
    assert!(r.stdout.contains("no DWARF"), "{}", r.stdout);
    let r = gtrace(&["-l", "main.add", "-b", b, "--debug-file", debug.to_str().unwrap()]);
    assert_eq!(r.stdout.trim(), "main.add(a int [RAX], b int [RBX]) (~r0 int [RAX])", "{}", r.stderr);
    // Found by build id in a debug directory, as gdb lays it out.
    let id = gnu_build_id(&stripped);
    let tree = dir.join("debugdir");
    let at = tree.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::copy(&debug, &at).unwrap();
    let r = gtrace(&["-l", "main.add", "-b", b, "--debug-dir", tree.to_str().unwrap()]);
    assert!(r.stdout.starts_with("main.add(a int [RAX]"), "{}{}", r.stdout, r.stderr);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_debug_file_of_another_build_is_refused_with_both_ids() {
    let dir = scratch("mismatch");
    let (stripped, _) = split(&support::go_build("e2e", &[]), &dir);
    let other = scratch("mismatch-other");
    let (_, other_debug) = split(&support::go_build("values", &[]), &other);
    let r =
        gtrace(&["-l", "main.add", "-b", stripped.to_str().unwrap(), "--debug-file", other_debug.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("is not the debug file of"), "{}", r.stderr);
    assert!(
        r.stderr.contains(&gnu_build_id(&stripped)) && r.stderr.contains(&gnu_build_id(&other_debug)),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(other);
}

#[test]
fn a_stripped_binary_is_traced_by_parameter_names_from_usr_lib_debug() {
    if !privileged("a_stripped_binary_is_traced_by_parameter_names_from_usr_lib_debug") {
        return;
    }
    // A build of its own (its own build id), its debug file where distributions put
    // them: /usr/lib/debug/.build-id/, the default directory.
    let tag = format!("-X=main.buildTag=debugfile-{}", std::process::id());
    let binary = support::go_build("e2e", &["-ldflags", &tag]);
    let dir = scratch("trace");
    let (stripped, debug) = split(&binary, &dir);
    let id = gnu_build_id(&stripped);
    let at = Path::new("/usr/lib/debug/.build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::copy(&debug, &at).unwrap();
    let cmd = format!("{} add 250", stripped.display());
    let r = gtrace(&["-e", "on entry main.add { @calls = count(); @sum = sum(a) }", "-c", &cmd]);
    let _ = std::fs::remove_file(&at);
    let _ = std::fs::remove_dir_all(dir);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(map_value(&r.stdout, "@calls"), truth(&r.stdout, "calls"));
    assert_eq!(map_value(&r.stdout, "@sum"), truth(&r.stdout, "sum_a"));
}
