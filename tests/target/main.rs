//! The target stage against real Go binaries built from tests/go/abi: symbols, file
//! offsets and probe sites checked against `go tool objdump`, DWARF parameters and their
//! ABI locations against src/cmd/compile/abi-internal.md, and the errors for files that
//! are not Go executables gtrace reads (arm64 ones are tested in tests/arm64.rs).
//!
//! Here the symbols; sites.rs holds the code's offsets and sites, params.rs the DWARF
//! parameters, files.rs the rest of what a file says and the errors.

mod files;
mod params;
mod sites;
#[path = "../support/mod.rs"]
mod support;

use gtrace::arch::abi::{assign_call, Location, RegPiece};
use gtrace::arch::x86_64::Reg::{self, *};
use gtrace::arch::Arch;
use gtrace::gobin::{Function, Param, Target, TargetError};
use gtrace::gotypes::TypeKind;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn abi_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| support::go_build("abi", &[]))
}

fn pie_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| support::go_build("abi", &["-buildmode=pie"]))
}

fn open() -> Target {
    Target::open(abi_binary()).expect("open the abi test program")
}

fn func<'t>(t: &'t Target, name: &str) -> &'t Function {
    let found = t.find(name);
    assert_eq!(found.len(), 1, "{name}: {found:?}");
    found[0]
}

fn names(fs: Vec<&Function>) -> Vec<&str> {
    fs.into_iter().map(|f| f.name.as_str()).collect()
}

// ---- symbols ----

#[test]
fn a_mapped_file_and_the_same_bytes_in_memory_read_alike() {
    let mapped = open();
    let bytes = std::fs::read(abi_binary()).unwrap();
    let owned = Target::from_bytes(abi_binary(), bytes.into(), &Default::default()).unwrap();
    assert_eq!(mapped.functions(), owned.functions());
    assert_eq!((mapped.go_version(), mapped.build_ids()), (owned.go_version(), owned.build_ids()));
    let f = &func(&mapped, "main.ints").clone();
    assert!(mapped.code(f).is_some_and(|c| !c.is_empty()));
    assert_eq!(mapped.code(f), owned.code(f));
    assert_eq!(mapped.source_frames(f.addr), owned.source_frames(f.addr));
    let params = mapped.params("main.ints").unwrap().expect("DWARF describes main.ints");
    assert!(!params.is_empty());
    assert_eq!(Some(params), owned.params("main.ints").unwrap());
    // Given back after attaching, the mapped pages read the same when touched again.
    let mut mapped = mapped;
    mapped.release_compiler_tables();
    assert_eq!(mapped.code(f), owned.code(f));
    assert_eq!(mapped.source_frames(f.addr), owned.source_frames(f.addr));
}

#[test]
fn functions_by_exact_name() {
    let t = open();
    for name in ["main.main", "main.ints", "main.Counter.Value", "main.(*Counter).Inc", "runtime.morestack.abi0"] {
        let f = func(&t, name);
        assert!(f.size > 0, "{name} has size 0");
    }
    assert!(t.find("main.nosuch").is_empty());
    assert!(t.functions().windows(2).all(|w| w[0].name <= w[1].name), "functions are sorted by name");
}

#[test]
fn functions_by_wildcard() {
    let t = open();
    assert_eq!(names(t.find("main.(*Counter).*")), vec!["main.(*Counter).Inc"]);
    assert_eq!(names(t.find("main.Counter.*")), vec!["main.Counter.Value"]);
    assert_eq!(names(t.find("main.Sum[...]")), vec!["main.Sum[go.shape.float64]", "main.Sum[go.shape.int]"]);
    assert_eq!(names(t.find("main.(*Stack[...]).Push")), vec!["main.(*Stack[go.shape.string]).Push"]);
    let all_main = t.find("main.*");
    assert!(all_main.len() >= 20, "{}", all_main.len());
    assert!(all_main.iter().all(|f| f.name.starts_with("main.")));
    assert!(t.find("*.(*Counter).Inc").len() == 1);
}

#[test]
fn closest_names_for_hints() {
    let t = open();
    let hints = t.closest("main.intz", 3);
    assert_eq!(hints.first(), Some(&"main.ints"), "{hints:?}");
    assert!(t.closest("main.reccurse", 1) == vec!["main.recurse"]);
}

#[test]
fn a_target_can_move_to_another_thread() {
    fn is_send<T: Send>(_: &T) {}
    is_send(&open());
}
