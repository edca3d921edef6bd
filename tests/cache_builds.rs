//! What a cache file is for, where build ids do not tell builds apart, and where its
//! directory's path leads (src/cache, issue 26). The real gtrace on real Go builds, each
//! test with its own cache directory (XDG_CACHE_HOME).
//!
//! Bazel's rules_go links every binary with `-buildid=redacted`, and Go derives the GNU
//! build id from the Go one: two programs of one size then share every id, and a cache
//! file kept by build id is the same file for both. What one run learned of the first
//! (where a function was inlined) must not place the second's probes: the plan is the
//! one compiled without a cache. And a cache directory reached through a link that a
//! directory others may write holds is not used: they could point it elsewhere mid-run.

mod support;

use gtrace::gobin::Target;
use std::path::{Path, PathBuf};

/// `main.inl` inlined twice into `main.work`, at places each variant's body moves.
const VARIANTS: &[&str] = &[
    "x := inl(t, a)\n\ty := b * 3\n\tz := inl(t, y)",
    "y := b * 3\n\tx := inl(t, a)\n\tz := inl(t, y)",
    "x := inl(t, a)\n\ty := b * 3\n\tz := inl(t, y) + 1",
    "x := inl(t, a) * 2\n\ty := b * 3\n\tz := inl(t, y)",
];

fn program(body: &str) -> String {
    format!(
        "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\ntype T struct{{ n int }}\n\n\
         func inl(t *T, d int) int {{ t.n += d; return t.n }}\n\n//go:noinline\n\
         func work(t *T, a, b int) int {{\n\t{body}\n\treturn x + z\n}}\n\n\
         func main() {{\n\tt := &T{{}}\n\tfmt.Println(work(t, len(os.Args), 7))\n}}\n"
    )
}

/// Each variant built as rules_go builds: every one with the build id `redacted`.
fn redacted_builds() -> Vec<PathBuf> {
    let mut built = Vec::new();
    for (k, body) in VARIANTS.iter().enumerate() {
        let src = support::processes::scratch_dir(&format!("cache_builds/src-{k}"));
        std::fs::write(src.join("go.mod"), "module redacted\n\ngo 1.21\n").unwrap();
        std::fs::write(src.join("main.go"), program(body)).unwrap();
        built.push(support::go_build_at(&src, &format!("redacted-{k}"), &["-ldflags=-buildid=redacted -w"]));
    }
    built
}

/// The plan for `script` on `binary` with `XDG_CACHE_HOME=home` (`extra` added).
fn plan(binary: &Path, home: &Path, script: &str, extra: &[&str]) -> String {
    let out = home.join("plan.json");
    let mut args = vec!["--emit", "plan", "-o", out.to_str().unwrap(), "-e", script, "-b", binary.to_str().unwrap()];
    args.extend(extra);
    let r = support::gtrace_env(&args, &[("XDG_CACHE_HOME", home.to_str().unwrap())]);
    assert_eq!(r.code, 0, "gtrace {args:?}:\n{}", r.stderr);
    std::fs::read_to_string(&out).unwrap()
}

#[test]
fn builds_that_share_every_build_id_do_not_share_where_functions_were_inlined() {
    let script = "on entry main.inl { @n = count() }";
    let builds = redacted_builds();
    let home = support::processes::scratch_dir("cache_builds/home");
    let alone: Vec<String> = builds.iter().map(|b| plan(b, &home, script, &["--no-cache"])).collect();
    // Two builds the cache cannot tell apart by their ids and size, inlined at other places.
    let same = |a: &Path, b: &Path| {
        let (ta, tb) = (Target::open(a).unwrap(), Target::open(b).unwrap());
        ta.build_ids() == tb.build_ids() && ta.file_size() == tb.file_size()
    };
    let pair = (0..builds.len())
        .flat_map(|i| (0..builds.len()).map(move |j| (i, j)))
        .find(|&(i, j)| i != j && same(&builds[i], &builds[j]) && alone[i] != alone[j]);
    let (i, j) = pair.expect("two redacted builds of one size whose inlined copies differ");
    assert!(Target::open(&builds[i]).unwrap().build_ids().gnu.is_some(), "no GNU build id to share");
    // The first leaves its sites in the file both builds name; the second's plan is its own.
    assert_eq!(plan(&builds[i], &home, script, &[]), alone[i]);
    assert_eq!(plan(&builds[j], &home, script, &[]), alone[j], "build {j} placed by build {i}'s cache");
    assert_eq!(plan(&builds[j], &home, script, &[]), alone[j], "build {j} from its own cache");
    assert_eq!(plan(&builds[i], &home, script, &[]), alone[i], "build {i} after build {j}");
}

#[test]
fn a_cache_directory_through_a_link_others_may_repoint_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let bin = support::go_build("e2e", &[]);
    let base = support::processes::scratch_dir("cache_builds/link");
    let (shared, real) = (base.join("shared"), base.join("real"));
    std::fs::create_dir(&shared).unwrap();
    std::fs::create_dir(&real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&real, shared.join("link")).unwrap();
    let script = "on entry main.add { @s = sum(a) }";
    let home = shared.join("link");
    let without = plan(&bin, &base, script, &["--no-cache"]);
    // Held by a directory only its owner writes: used.
    let used = support::gtrace_env(
        &["--check", "-e", script, "-b", bin.to_str().unwrap()],
        &[("XDG_CACHE_HOME", home.to_str().unwrap())],
    );
    assert_eq!(used.code, 0, "{}", used.stderr);
    assert!(!used.stderr.contains("cache directory"), "{}", used.stderr);
    assert!(real.join("gtrace").is_dir(), "the cache was not written through a link in a safe directory");
    std::fs::remove_dir_all(real.join("gtrace")).unwrap();
    // Held by a directory others may write: not used, said, nothing written.
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let r = support::gtrace_env(
        &["--check", "-e", script, "-b", bin.to_str().unwrap()],
        &[("XDG_CACHE_HOME", home.to_str().unwrap())],
    );
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("above it is writable by group or others"), "{}", r.stderr);
    assert!(!real.join("gtrace").exists(), "written through a link others may repoint");
    assert_eq!(plan(&bin, &base, script, &["--no-cache"]), without);
}
