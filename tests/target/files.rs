//! What a file says beside its code: `runtime.g`'s layout and the Go version (from DWARF,
//! or a stripped binary's tables), and the errors for files gtrace does not read (not
//! ELF, missing, C, another architecture, Go before 1.17).

use super::*;

/// The offset of member `member` of struct `runtime.g`, per `readelf --debug-dump=info`.
fn readelf_g_member(binary: &Path, member: &str) -> u64 {
    let out = std::process::Command::new("readelf").arg("--debug-dump=info").arg(binary).output().expect("readelf");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .windows(2)
        .position(|w| {
            w[0].contains("DW_TAG_structure_type") && w[1].trim_end().ends_with("DW_AT_name        : runtime.g")
        })
        .expect("runtime.g in readelf output");
    let mut in_member = false;
    for line in &lines[start + 2..] {
        if line.contains("<1>") {
            break;
        }
        if line.contains("DW_AT_name") {
            in_member = line.trim_end().ends_with(&format!(": {member}"));
        }
        if in_member && line.contains("DW_AT_data_member_location") {
            return line.rsplit(':').next().unwrap().trim().parse().unwrap();
        }
    }
    panic!("no member {member} in runtime.g");
}

#[test]
fn g_layout_from_dwarf() {
    let t = open();
    let g = t.g_layout().expect("runtime.g in DWARF");
    assert_eq!(u64::from(g.goid), readelf_g_member(abi_binary(), "goid"));
    // stack is a struct { lo, hi uintptr }.
    assert_eq!(u64::from(g.stack_hi), readelf_g_member(abi_binary(), "stack") + 8);
}

#[test]
fn go_version_from_build_info() {
    assert_eq!(open().go_version(), Some(support::go_version().as_str()));
}

#[test]
fn a_file_that_is_not_elf() {
    let path = support::root().join("Cargo.toml");
    assert!(matches!(Target::open(&path), Err(TargetError::NotElf { .. })));
}

#[test]
fn a_missing_file() {
    assert!(matches!(
        Target::open(Path::new("/nonexistent/gtrace-test")),
        Err(TargetError::File(gtrace::input::InputError::Io { .. }))
    ));
}

#[test]
fn a_c_binary_is_not_go() {
    let err = Target::open(Path::new("/bin/true")).err().expect("/bin/true is not Go");
    assert!(matches!(err, TargetError::NotGo { .. }), "{err}");
}

#[test]
fn a_riscv64_binary_is_the_wrong_arch() {
    // amd64 and arm64 are read (tests/arm64.rs); any other architecture is refused.
    let bin = support::go_build_env("abi", &[], &[("GOARCH", "riscv64")]);
    match Target::open(&bin) {
        Err(TargetError::WrongArch { arch, .. }) => assert_eq!(arch, "riscv64"),
        other => panic!("expected WrongArch, got {:?}", other.err()),
    }
}

#[test]
fn a_stripped_binary_reads_its_functions_from_gopclntab() {
    let bin = support::go_build("abi", &["-ldflags=-s -w"]);
    let t = Target::open(&bin).expect("a stripped binary opens");
    assert!(t.is_stripped() && !t.has_dwarf());
    let full = open();
    for name in ["main.main", "main.ints", "main.(*Counter).Inc", "main.Sum[go.shape.int]"] {
        let (a, b) = (func(&t, name), func(&full, name));
        assert_eq!((a.addr, a.abi), (b.addr, b.abi), "{name}");
        assert!(a.size >= b.size, "{name}: {} < {}", a.size, b.size);
        assert_eq!(t.probe_sites(a).unwrap(), full.probe_sites(b).unwrap(), "{name}");
    }
    // Assembly is ABI0 (the table says so since Go 1.18), Go code the register ABI.
    assert_eq!(func(&t, "runtime.morestack").abi, gtrace::gobin::Abi::Abi0);
    assert_eq!(func(&t, "main.ints").abi, gtrace::gobin::Abi::Internal);
    assert_eq!(t.go_version(), full.go_version());
    assert_eq!(t.module_path(), Some("abi"));
}

#[test]
fn without_dwarf_params_are_none_and_g_layout_comes_from_the_table() {
    let bin = support::go_build("abi", &["-ldflags=-w"]);
    let t = Target::open(&bin).unwrap();
    assert_eq!(t.params("main.pair").unwrap(), None);
    assert!(!t.has_dwarf());
    assert_eq!(t.g_layout_from_dwarf(), None);
    assert_eq!(t.g_layout(), open().g_layout_from_dwarf(), "the table by version disagrees with DWARF");
    assert!(!t.find("main.pair").is_empty());
}

#[test]
fn go_older_than_1_17_is_refused_by_its_build_info() {
    // The local build with its version string rewritten to a 1.16 one of the same length.
    let data = std::fs::read(abi_binary()).unwrap();
    let version = support::go_version();
    let old = format!("go1.16{}", &version["go1.NN".len()..]);
    assert_eq!(old.len(), version.len());
    let mut patched = data.clone();
    let places: Vec<usize> =
        data.windows(version.len()).enumerate().filter(|(_, w)| *w == version.as_bytes()).map(|(i, _)| i).collect();
    assert!(!places.is_empty());
    for at in places {
        patched[at..at + version.len()].copy_from_slice(old.as_bytes());
    }
    let path = std::env::temp_dir().join(format!("gtrace-old-go-{}", std::process::id()));
    std::fs::write(&path, &patched).unwrap();
    let err = Target::open(&path).err();
    let _ = std::fs::remove_file(&path);
    match err {
        Some(e @ TargetError::TooOld { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&old) && text.contains("Go 1.17"), "{text}");
        }
        other => panic!("expected TooOld, got {other:?}"),
    }
}
