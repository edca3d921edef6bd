//! Every kind of Go binary gtrace must handle, built from tests/go/kinds: stripped or not,
//! PIE or not, cgo or not, by the local Go toolchain, the oldest supported release (1.17)
//! and the newest (fetched through the Go module proxy with GOTOOLCHAIN; a toolchain that
//! cannot be fetched is skipped, loudly). The target stage is checked against the
//! unstripped build's symbols and DWARF; the real gtrace binary (with eBPF, needs root)
//! against the program's own truth. tests/go-versions.sh runs this for every release.
//!
//! GTRACE_GO_VERSIONS (space-separated, e.g. `go1.21.13 local`) replaces the default
//! toolchain list.

mod support;

use gtrace::gobin::{Abi, Target};
use std::path::{Path, PathBuf};
use std::process::Command;
use support::toolchain::{build, toolchains, Kind, NotBuilt};
use support::{map_value, privileged, truth};

const KINDS: [Kind; 7] = [
    Kind { stripped: false, pie: false, cgo: false },
    Kind { stripped: true, pie: false, cgo: false },
    Kind { stripped: false, pie: true, cgo: false },
    Kind { stripped: true, pie: true, cgo: false },
    Kind { stripped: false, pie: false, cgo: true },
    Kind { stripped: false, pie: true, cgo: true },
    Kind { stripped: true, pie: true, cgo: true },
];

/// The kinds program built every way with `toolchain`, or None (said loudly) when the
/// toolchain cannot be fetched.
fn builds(toolchain: &str) -> Option<Vec<(Kind, PathBuf)>> {
    let mut out = Vec::new();
    for kind in KINDS {
        match build("kinds", toolchain, kind) {
            Ok(p) => out.push((kind, p)),
            Err(NotBuilt::NoToolchain(err)) => {
                support::toolchain::no_toolchain(toolchain, &err);
                return None;
            }
        }
    }
    Some(out)
}

fn open(path: &Path) -> Target {
    Target::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

const MAIN_FUNCS: [&str; 6] = ["main.add", "main.sleepy", "main.callerA", "main.callerB", "main.callerC", "main.main"];

#[test]
fn every_kind_every_toolchain_target_facts() {
    for toolchain in toolchains() {
        let Some(built) = builds(&toolchain) else { continue };
        for (kind, path) in &built {
            let what = format!("{toolchain} {}", kind.label());
            let t = open(path);
            let version = t.go_version().unwrap_or_else(|| panic!("{what}: no Go version")).to_string();
            if toolchain != "local" {
                assert_eq!(version, toolchain, "{what}");
            }
            assert_eq!(t.module_path(), Some("example.com/kinds"), "{what}");
            assert_eq!(t.is_stripped(), kind.stripped, "{what}");
            assert_eq!(t.has_dwarf(), !kind.stripped, "{what}");
            for name in MAIN_FUNCS {
                let f = t.find(name);
                assert_eq!(f.len(), 1, "{what}: {name}");
                assert!(f[0].size > 0, "{what}: {name}");
                assert_ne!(f[0].abi, Abi::Abi0, "{what}: {name}");
            }
            // The same code with and without symbols: same functions at the same places,
            // same probe sites.
            let full = open(&built.iter().find(|(k, _)| *k == kind.unstripped()).expect("unstripped twin").1);
            for name in MAIN_FUNCS {
                let (a, b) = (t.find(name)[0], full.find(name)[0]);
                assert_eq!(a.addr, b.addr, "{what}: {name}");
                assert_eq!(t.probe_sites(a).unwrap(), full.probe_sites(b).unwrap(), "{what}: {name}");
                assert_eq!(t.file_offset(a.addr), full.file_offset(b.addr), "{what}: {name}");
            }
            if kind.stripped {
                check_against_symbols(&t, &full, &what);
            }
            // sleepy calls time.Sleep: it has a stack check, so its entry is past it.
            let sleepy = t.find("main.sleepy")[0];
            assert!(t.probe_sites(sleepy).unwrap().entry > sleepy.addr, "{what}");
            // Entry bytes at the file offset are the function's code.
            let data = std::fs::read(path).unwrap();
            let off = t.file_offset(sleepy.addr).unwrap() as usize;
            assert_eq!(&data[off..off + 16], &t.code(sleepy).unwrap()[..16], "{what}");
            // Parameters: by name from DWARF, none without it.
            let params = t.params("main.add").unwrap();
            if kind.stripped {
                assert!(params.is_none(), "{what}");
            } else {
                let names: Vec<String> = params.expect("DWARF params").into_iter().map(|p| p.name).collect();
                // Go 1.17 DWARF leaves out unnamed results; later releases call it ~r0.
                assert_eq!(names[..2], ["a", "b"], "{what}");
                assert!(names.len() == 2 || names[2] == "~r0", "{what}: {names:?}");
            }
            // runtime.g: the table by version agrees with DWARF.
            let g = t.g_layout().unwrap_or_else(|| panic!("{what}: no g layout"));
            let by_version = Target::g_layout_for_version(&version);
            assert_eq!(Some(g), by_version, "{what}: the g layout table is wrong for {version}");
            if !kind.stripped {
                assert_eq!(t.g_layout_from_dwarf(), Some(g), "{what}");
                // The panic state (on panic) and Go maps (m[k]): their tables too.
                let panics = t.panic_layout_from_dwarf().unwrap_or_else(|| panic!("{what}: no _panic in DWARF"));
                assert_eq!(Target::panic_layout_for_version(&version), Some(panics), "{what}: panic table, {version}");
                let maps = t.map_layout_from_dwarf().unwrap_or_else(|| panic!("{what}: no map type in DWARF"));
                assert_eq!(Target::map_layout_for_version(&version), Some(maps), "{what}: map table, {version}");
            }
            // Inlining: triple is inlined into its three callers.
            let sites = t.find_inlined("main.triple");
            let callers: Vec<&str> = sites.iter().map(|s| s.caller.as_str()).collect();
            for c in ["main.callerA", "main.callerB", "main.callerC"] {
                assert_eq!(callers.iter().filter(|x| **x == c).count(), 1, "{what}: {callers:?}");
                let caller = t.find(c)[0];
                let site = sites.iter().find(|s| s.caller == c).unwrap();
                for addr in [site.addr, site.body] {
                    assert!(addr >= caller.addr && addr < caller.addr + caller.size, "{what}: {site:x?} {caller:x?}");
                }
                assert_ne!(site.how, gtrace::gobin::Placement::Lowest, "{what}: {site:x?}");
            }
        }
    }
}

/// Every Go function of the symbol table is in the stripped binary's table, same address.
fn check_against_symbols(stripped: &Target, full: &Target, what: &str) {
    let mut checked = 0;
    for f in full.functions() {
        // C functions (cgo) and linker-made symbols are not Go functions.
        let name = f.name.strip_suffix(".abi0").unwrap_or(&f.name);
        if !name.contains('.')
            || name.starts_with("_cgo")
            || name.starts_with("x_cgo")
            || name.starts_with("go:")
            || name.starts_with("go.")
        {
            continue;
        }
        let found = stripped.find(name);
        if found.is_empty() {
            continue;
        }
        assert!(found.iter().any(|g| g.addr == f.addr), "{what}: {name} at {:#x}: {found:?}", f.addr);
        checked += 1;
    }
    assert!(checked > 1000, "{what}: only {checked} functions compared");
    let stripped_go = stripped.functions().len();
    assert!(stripped_go > 1000, "{what}: {stripped_go}");
}

#[test]
fn go_older_than_1_17_is_refused() {
    let toolchain = std::env::var("GTRACE_GO_TOO_OLD").unwrap_or_default();
    if toolchain.is_empty() {
        eprintln!("SKIP go_older_than_1_17_is_refused: set GTRACE_GO_TOO_OLD=go1.16.15 (tests/go-versions.sh does)");
        return;
    }
    let path = match build("kinds", &toolchain, KINDS[0]) {
        Ok(path) => path,
        Err(NotBuilt::NoToolchain(err)) => {
            support::toolchain::no_toolchain(&toolchain, &err);
            return;
        }
    };
    match Target::open(&path) {
        Err(e @ gtrace::gobin::TargetError::TooOld { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&toolchain) && text.contains("1.17"), "{text}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a {toolchain} binary was accepted"),
    }
}

// ---- end to end: the real gtrace binary, real eBPF ----

/// The text printed for map `name` (`@name: V`).
fn map_text<'o>(out: &'o str, name: &str) -> &'o str {
    let prefix = format!("{name}: ");
    out.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no `{prefix}` line in:\n{out}")).trim()
}

/// The same script on every kind of binary: entry and return counts, an int parameter
/// (by name where there is DWARF), elapsed pairing, goid, and a function inlined into
/// three callers counted where it was inlined.
#[test]
fn the_same_script_gives_the_same_answer_on_every_kind() {
    if !privileged("the_same_script_gives_the_same_answer_on_every_kind") {
        return;
    }
    let n = 200;
    for toolchain in toolchains() {
        let Some(built) = builds(&toolchain) else { continue };
        for (kind, path) in &built {
            let what = format!("{toolchain} {}", kind.label());
            let mut script = String::from(
                "on entry main.add { @calls = count(); @g[goid] = count() } \
                 on return main.sleepy { @returns = count(); @min = min(elapsed) } \
                 on entry main.triple { @inlined = count() } \
                 on return main.add { @ret = sum(ret) }",
            );
            if !kind.stripped {
                // Parameters by name, and at inlined calls where DWARF places them.
                script.push_str(" on entry main.add { @sum = sum(a) } on entry main.triple { @tx = sum(x) }");
            }
            let out = support::gtrace_command()
                .args(["-e", &script, "-c", &format!("{} all {n}", path.display())])
                .output()
                .expect("run gtrace");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && stderr.contains("Attached"), "{what}:\n{stdout}\n{stderr}");
            assert_eq!(map_value(&stdout, "@calls"), truth(&stdout, "calls"), "{what}:\n{stdout}");
            let goid = truth(&stdout, "goid");
            assert_eq!(map_value(&stdout, &format!("@g[{goid}]")), truth(&stdout, "calls"), "{what}:\n{stdout}");
            assert_eq!(map_value(&stdout, "@returns"), truth(&stdout, "sleeps"), "{what}:\n{stdout}");
            // Every return found its own entry and took at least the 1ms it slept.
            let min = map_text(&stdout, "@min");
            assert!(
                min.ends_with("ms") || min.ends_with('s') && !min.ends_with("us") && !min.ends_with("ns"),
                "{what}: {min}"
            );
            assert_eq!(map_value(&stdout, "@inlined"), truth(&stdout, "inlined"), "{what}:\n{stdout}");
            // add(i, 1) returns i + 1: `ret` by DWARF, by position when stripped, and as a
            // machine word on Go 1.17, whose DWARF omits unnamed results.
            assert_eq!(
                map_value(&stdout, "@ret"),
                truth(&stdout, "sum_a") + truth(&stdout, "calls"),
                "{what}:\n{stdout}"
            );
            if !kind.stripped {
                assert_eq!(map_value(&stdout, "@sum"), truth(&stdout, "sum_a"), "{what}:\n{stdout}");
                // triple(i), triple(i+1), triple(i+2) for i < n, each inlined into its caller.
                let n = truth(&stdout, "inlined") / 3;
                assert_eq!(map_value(&stdout, "@tx"), 3 * n * (n - 1) / 2 + 3 * n, "{what}:\n{stdout}");
            }
            if kind.cgo {
                assert!(truth(&stdout, "cgo") > 0, "{what}: the C function did not run");
            }
        }
    }
}

/// `on return` of a function that exists only inlined: a clear error (no privileges).
#[test]
fn return_of_an_only_inlined_function_is_refused() {
    let path = build("kinds", "local", KINDS[1]).ok().expect("local build");
    let out = support::gtrace_command()
        .args(["--check", "-e", "on return main.triple { @n = count() }", "-b", path.to_str().unwrap()])
        .output()
        .expect("run gtrace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("exists only inlined") && stderr.contains("main.callerA"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

// ---- a real program nobody here wrote: gofmt ----

/// gofmt built from the installed Go source, stripped or not.
fn gofmt(stripped: bool) -> PathBuf {
    let out = support::root().join("target/gobin").join(format!(
        "gofmt-{}-{}",
        support::go_version(),
        if stripped { "s" } else { "full" }
    ));
    if out.exists() {
        return out;
    }
    let tmp = support::unique_tmp(out.parent().expect("target/gobin"), "gofmt");
    let mut cmd = Command::new("go");
    cmd.args(["build", "-o"]).arg(&tmp);
    if stripped {
        cmd.arg("-ldflags=-s -w");
    }
    let status =
        cmd.arg("cmd/gofmt").env("GOTOOLCHAIN", "local").env("CGO_ENABLED", "0").status().expect("go build gofmt");
    assert!(status.success(), "go build cmd/gofmt failed");
    support::publish(&tmp, &out);
    out
}

#[test]
fn gofmt_parses_each_file_once() {
    for stripped in [false, true] {
        let bin = gofmt(stripped);
        let t = open(&bin);
        assert_eq!(t.is_stripped(), stripped);
        assert_eq!(t.find("go/parser.(*parser).parseFile").len(), 1, "{}", bin.display());
    }
    if !privileged("gofmt_parses_each_file_once") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("gtrace-gofmt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = 23;
    for i in 0..n {
        std::fs::write(
            dir.join(format!("f{i}.go")),
            format!("package p\n\nfunc F{i}(x int) int {{ return x + {i} }}\n"),
        )
        .unwrap();
    }
    for stripped in [false, true] {
        let bin = gofmt(stripped);
        let out = support::gtrace_command()
            .args(["-e", r#"on entry "go/parser.(*parser).parseFile" { @files = count() }"#, "-c"])
            .arg(format!("{} -l {}", bin.display(), dir.display()))
            .output()
            .expect("run gtrace");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(map_value(&stdout, "@files"), n, "stripped={stripped}:\n{stdout}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
