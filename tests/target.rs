//! The target stage against real Go binaries built from tests/go/abi: symbols, file
//! offsets and probe sites checked against `go tool objdump`, DWARF parameters and their
//! ABI locations against src/cmd/compile/abi-internal.md, and the errors for files that
//! are not Go executables gtrace reads (arm64 ones are tested in tests/arm64.rs).

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

// ---- code: file offsets, probe sites ----

/// Every instruction `go tool objdump` shows for `name` is at `file_offset(addr)` in the file.
fn check_offsets(binary: &Path, name: &str) {
    let t = Target::open(binary).unwrap();
    let data = std::fs::read(binary).unwrap();
    let f = func(&t, name);
    let lines = support::objdump(binary, name);
    assert_eq!(lines[0].addr, f.addr, "{name}");
    for line in &lines {
        let off = t.file_offset(line.addr).unwrap_or_else(|| panic!("{name}: no offset for {:#x}", line.addr)) as usize;
        assert_eq!(&data[off..off + line.bytes.len()], &line.bytes[..], "{name} at {:#x}", line.addr);
    }
}

#[test]
fn file_offsets_match_objdump() {
    for name in ["main.recurse", "main.leaf", "main.main", "runtime.morestack.abi0"] {
        check_offsets(abi_binary(), name);
    }
    assert_eq!(open().file_offset(0), None);
}

#[test]
fn file_offsets_in_a_pie_build() {
    let data = std::fs::read(pie_binary()).unwrap();
    assert_eq!(u16::from_le_bytes([data[16], data[17]]), 3, "-buildmode=pie makes an ET_DYN file");
    for name in ["main.recurse", "main.pair", "main.(*Stack[go.shape.string]).Push"] {
        check_offsets(pie_binary(), name);
    }
}

/// The address of the first instruction after the stack check, per objdump: the first
/// `PUSHQ BP` (every frame-building Go function saves BP right after its check).
fn objdump_entry(name: &str) -> u64 {
    let lines = support::objdump(abi_binary(), name);
    assert!(lines[..5].iter().any(|l| l.asm.starts_with("JBE")), "{name} has no stack check: {lines:?}");
    lines.iter().find(|l| l.asm == "PUSHQ BP").expect("PUSHQ BP").addr
}

#[test]
fn entry_is_after_the_stack_check() {
    let t = open();
    // CMPQ SP, 16(R14); JBE
    assert_eq!(t.probe_sites(func(&t, "main.recurse")).unwrap().entry, objdump_entry("main.recurse"));
    // LEAQ -N(SP), R12; CMPQ R12, 16(R14); JBE
    assert_eq!(t.probe_sites(func(&t, "main.main")).unwrap().entry, objdump_entry("main.main"));
    // MOVQ SP, R12; SUBQ $N, R12; JB; CMPQ R12, 16(R14); JBE
    assert_eq!(t.probe_sites(func(&t, "main.hugeFrame")).unwrap().entry, objdump_entry("main.hugeFrame"));
}

#[test]
fn a_leaf_without_stack_check_enters_at_its_first_instruction() {
    let t = open();
    // main.raw starts with a float compare and a JBE that is not a stack check.
    for name in ["main.leaf", "main.stackResults", "main.raw"] {
        let f = func(&t, name);
        let lines = support::objdump(abi_binary(), name);
        assert!(!lines.iter().any(|l| l.asm.contains("morestack")), "{name} should be a leaf");
        assert_eq!(t.probe_sites(f).unwrap().entry, f.addr, "{name}");
    }
}

#[test]
fn returns_match_objdump() {
    let t = open();
    for name in ["main.recurse", "main.leaf", "main.named", "main.main", "main.fail", "runtime.morestack.abi0"] {
        let expected: Vec<u64> =
            support::objdump(abi_binary(), name).iter().filter(|l| l.asm == "RET").map(|l| l.addr).collect();
        let sites = t.probe_sites(func(&t, name)).unwrap();
        assert_eq!(sites.returns, expected, "{name}");
    }
    let recurse = t.probe_sites(func(&t, "main.recurse")).unwrap();
    assert_eq!(recurse.returns.len(), 2, "main.recurse has two RETs");
    // main.fail ends in a call to runtime.gopanic: no RET at all.
    assert!(t.probe_sites(func(&t, "main.fail")).unwrap().returns.is_empty());
}

// ---- DWARF: parameters, types, ABI ----

fn regs(pieces: &[(Reg, u64, u64)]) -> Location {
    Location::Regs(
        pieces
            .iter()
            .map(|(reg, offset, size)| RegPiece { reg: gtrace::arch::Reg::X86(*reg), offset: *offset, size: *size })
            .collect(),
    )
}

fn r(reg: Reg) -> Location {
    regs(&[(reg, 0, 8)])
}

/// The parameters of `function` and their ABI locations, checked against `expected`:
/// (name, Go type name, is result, location).
fn check_params(t: &Target, function: &str, expected: &[(&str, &str, bool, Location)]) -> Vec<Param> {
    let params = t.params(function).unwrap().unwrap_or_else(|| panic!("{function}: no DWARF"));
    let args: Vec<_> = params.iter().filter(|p| !p.is_result).map(|p| p.ty).collect();
    let results: Vec<_> = params.iter().filter(|p| p.is_result).map(|p| p.ty).collect();
    let layout = assign_call(Arch::X86_64, &args, &results, &t.types());
    let locations: Vec<Location> = layout.params.into_iter().chain(layout.results).collect();
    let got: Vec<(String, String, bool, Location)> = params
        .iter()
        .zip(locations)
        .map(|(p, loc)| (p.name.clone(), t.types().get(p.ty).name.clone(), p.is_result, loc))
        .collect();
    let want: Vec<(String, String, bool, Location)> =
        expected.iter().map(|(n, ty, res, loc)| (n.to_string(), ty.to_string(), *res, loc.clone())).collect();
    assert_eq!(got, want, "{function}");
    params
}

fn kind(t: &Target, p: &Param) -> TypeKind {
    t.types().get(p.ty).kind.clone()
}

#[test]
fn ints_of_every_width_fill_the_nine_registers() {
    let t = open();
    let p = check_params(
        &t,
        "main.ints",
        &[
            ("a", "int8", false, regs(&[(Rax, 0, 1)])),
            ("b", "int16", false, regs(&[(Rbx, 0, 2)])),
            ("c", "int32", false, regs(&[(Rcx, 0, 4)])),
            ("d", "int64", false, r(Rdi)),
            ("e", "uint8", false, regs(&[(Rsi, 0, 1)])),
            ("f", "uint16", false, regs(&[(R8, 0, 2)])),
            ("g", "uint32", false, regs(&[(R9, 0, 4)])),
            ("h", "uint64", false, r(R10)),
            ("i", "uintptr", false, r(R11)),
            ("~r0", "int64", true, r(Rax)),
        ],
    );
    assert_eq!(kind(&t, &p[0]), TypeKind::Int { signed: true });
    assert_eq!(kind(&t, &p[4]), TypeKind::Int { signed: false });
    assert_eq!(kind(&t, &p[8]), TypeKind::Int { signed: false });
}

#[test]
fn bool_string_and_byte_slice() {
    let t = open();
    let p = check_params(
        &t,
        "main.flag",
        &[
            ("b", "bool", false, regs(&[(Rax, 0, 1)])),
            ("n", "int", false, r(Rbx)),
            ("~r0", "bool", true, regs(&[(Rax, 0, 1)])),
        ],
    );
    assert_eq!(kind(&t, &p[0]), TypeKind::Bool);
    let p = check_params(
        &t,
        "main.str",
        &[
            ("s", "string", false, regs(&[(Rax, 0, 8), (Rbx, 8, 8)])),
            ("n", "int", false, r(Rcx)),
            ("~r0", "int", true, r(Rax)),
        ],
    );
    assert_eq!(kind(&t, &p[0]), TypeKind::String);
    let p = check_params(
        &t,
        "main.bytesLen",
        &[("b", "[]uint8", false, regs(&[(Rax, 0, 8), (Rbx, 8, 8), (Rcx, 16, 8)])), ("~r0", "int", true, r(Rax))],
    );
    let TypeKind::Slice { elem } = kind(&t, &p[0]) else { panic!("[]byte is a slice") };
    assert_eq!(t.types().get(elem).name, "uint8");
}

#[test]
fn structs_split_over_registers_or_go_to_the_stack() {
    let t = open();
    let p = check_params(
        &t,
        "main.pair",
        &[
            ("n", "int", false, r(Rax)),
            ("p", "main.Pair", false, regs(&[(Rbx, 0, 8), (Rcx, 8, 4)])),
            ("~r0", "int64", true, r(Rax)),
        ],
    );
    let TypeKind::Struct { fields } = kind(&t, &p[1]) else { panic!("Pair is a struct") };
    let fields: Vec<(&str, u64)> = fields.iter().map(|f| (f.name.as_str(), f.offset)).collect();
    assert_eq!(fields, vec![("A", 0), ("B", 8)]);
    // Big holds a [4]int32: the whole struct goes to the stack, n keeps RAX.
    let p = check_params(
        &t,
        "main.big",
        &[
            ("n", "int", false, r(Rax)),
            ("b", "main.Big", false, Location::Stack { offset: 8 }),
            ("~r0", "int64", true, r(Rax)),
        ],
    );
    assert_eq!(t.types().get(p[1].ty).size, 24);
}

#[test]
fn arrays_of_length_one_use_registers_longer_ones_the_stack() {
    let t = open();
    let p = check_params(
        &t,
        "main.array",
        &[
            ("a", "[3]int", false, Location::Stack { offset: 8 }),
            ("one", "[1]string", false, regs(&[(Rax, 0, 8), (Rbx, 8, 8)])),
            ("~r0", "int", true, r(Rax)),
        ],
    );
    assert!(matches!(kind(&t, &p[0]), TypeKind::Array { len: 3, .. }));
    // Results on the stack follow the arguments' stack area (objdump: MOVQ AX, 0x18(SP)).
    check_params(
        &t,
        "main.stackResults",
        &[
            ("a", "[2]int", false, Location::Stack { offset: 8 }),
            ("n", "int", false, r(Rax)),
            ("r", "[2]int", true, Location::Stack { offset: 24 }),
            ("s", "string", true, regs(&[(Rax, 0, 8), (Rbx, 8, 8)])),
        ],
    );
}

#[test]
fn more_than_nine_ints_spill_to_the_stack() {
    let t = open();
    let int_regs = [Rax, Rbx, Rcx, Rdi, Rsi, R8, R9, R10, R11];
    let mut expected: Vec<(&str, &str, bool, Location)> = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
        .iter()
        .zip(int_regs)
        .map(|(n, reg)| (*n, "int", false, r(reg)))
        .collect();
    expected.push(("j", "int", false, Location::Stack { offset: 8 }));
    expected.push(("k", "int", false, Location::Stack { offset: 16 }));
    expected.push(("~r0", "int", true, r(Rax)));
    check_params(&t, "main.many", &expected);
    // A string that does not fit in the one register left goes to the stack and gives
    // the register back to the next int.
    let mut expected: Vec<(&str, &str, bool, Location)> = ["a", "b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .zip(int_regs)
        .map(|(n, reg)| (*n, "int", false, r(reg)))
        .collect();
    expected.push(("s", "string", false, Location::Stack { offset: 8 }));
    expected.push(("last", "int", false, r(R11)));
    expected.push(("~r0", "int", true, r(Rax)));
    check_params(&t, "main.spill", &expected);
}

#[test]
fn receivers_come_first() {
    let t = open();
    check_params(
        &t,
        "main.Counter.Value",
        &[
            ("c", "main.Counter", false, regs(&[(Rax, 0, 8), (Rbx, 8, 8), (Rcx, 16, 8)])),
            ("add", "int", false, r(Rdi)),
            ("~r0", "int", true, r(Rax)),
        ],
    );
    let p =
        check_params(&t, "main.(*Counter).Inc", &[("c", "*main.Counter", false, r(Rax)), ("by", "int", false, r(Rbx))]);
    let TypeKind::Pointer { elem } = kind(&t, &p[0]) else { panic!("*Counter is a pointer") };
    assert_eq!(t.types().get(elem).name, "main.Counter");
}

#[test]
fn generic_functions_take_a_hidden_dictionary() {
    let t = open();
    // objdump of main.main: LEAQ main..dict.Sum[int], AX before CALL main.Sum[go.shape.int].
    check_params(
        &t,
        "main.Sum[go.shape.int]",
        &[
            (".dict", "unsafe.Pointer", false, r(Rax)),
            ("xs", "[]go.shape.int", false, regs(&[(Rbx, 0, 8), (Rcx, 8, 8), (Rdi, 16, 8)])),
            ("~r0", "go.shape.int", true, r(Rax)),
        ],
    );
    // A method of a generic type: receiver in AX, dictionary in BX.
    check_params(
        &t,
        "main.(*Stack[go.shape.string]).Push",
        &[
            ("s", "*main.Stack[go.shape.string]", false, r(Rax)),
            (".dict", "unsafe.Pointer", false, r(Rbx)),
            ("v", "go.shape.string", false, regs(&[(Rcx, 0, 8), (Rdi, 8, 8)])),
            ("~r0", "int", true, r(Rax)),
        ],
    );
}

#[test]
fn interfaces_and_errors() {
    let t = open();
    let p = check_params(
        &t,
        "main.iface",
        &[
            ("v", "interface {}", false, regs(&[(Rax, 0, 8), (Rbx, 8, 8)])),
            ("e", "error", false, regs(&[(Rcx, 0, 8), (Rdi, 8, 8)])),
            ("s", "fmt.Stringer", false, regs(&[(Rsi, 0, 8), (R8, 8, 8)])),
            ("~r0", "bool", true, regs(&[(Rax, 0, 1)])),
        ],
    );
    assert_eq!(kind(&t, &p[0]), TypeKind::Interface { empty: true });
    assert_eq!(kind(&t, &p[1]), TypeKind::Interface { empty: false });
    assert_eq!(kind(&t, &p[2]), TypeKind::Interface { empty: false });
}

#[test]
fn floats_are_unreadable() {
    let t = open();
    let params = t.params("main.float").unwrap().unwrap();
    let tys: Vec<_> = params.iter().filter(|p| !p.is_result).map(|p| p.ty).collect();
    let res: Vec<_> = params.iter().filter(|p| p.is_result).map(|p| p.ty).collect();
    let layout = assign_call(Arch::X86_64, &tys, &res, &t.types());
    let unreadable_in = |loc: &Location, x: &str| matches!(loc, Location::Unreadable { reason } if reason.contains(x));
    assert!(unreadable_in(&layout.params[0], "X0"), "{:?}", layout.params[0]);
    assert_eq!(layout.params[1], r(Rax));
    assert!(unreadable_in(&layout.params[2], "X1"), "{:?}", layout.params[2]);
    assert!(unreadable_in(&layout.results[0], "X0"));
    assert_eq!(kind(&t, &params[0]), TypeKind::Float);
    assert_eq!(t.types().get(params[2].ty).size, 4);
}

#[test]
fn named_and_unnamed_results() {
    let t = open();
    check_params(
        &t,
        "main.named",
        &[
            ("n", "int", false, r(Rax)),
            ("q", "int", true, r(Rax)),
            ("err", "error", true, regs(&[(Rbx, 0, 8), (Rcx, 8, 8)])),
        ],
    );
    check_params(
        &t,
        "main.unnamed",
        &[
            ("n", "int", false, r(Rax)),
            ("~r0", "int", true, r(Rax)),
            ("~r1", "string", true, regs(&[(Rbx, 0, 8), (Rcx, 8, 8)])),
        ],
    );
}

#[test]
fn pointers_maps_chans_funcs() {
    let t = open();
    let p = check_params(
        &t,
        "main.mixed",
        &[
            ("p", "*main.Pair", false, r(Rax)),
            ("m", "map[string]int", false, r(Rbx)),
            ("ch", "chan int", false, r(Rcx)),
            ("fn", "func(int) int", false, r(Rdi)),
            ("~r0", "int", true, r(Rax)),
        ],
    );
    let kinds: Vec<TypeKind> = p[1..4].iter().map(|p| kind(&t, p)).collect();
    let TypeKind::Map { key: Some(key), elem: Some(elem) } = kinds[0] else { panic!("{:?}", kinds[0]) };
    let name = |id| t.types().get(id).name.clone();
    assert_eq!((name(key), name(elem)), ("string".to_string(), "int".to_string()));
    assert_eq!(kinds[1..], [TypeKind::Chan, TypeKind::Func]);
}

#[test]
fn params_of_unknown_functions_are_none() {
    let t = open();
    assert_eq!(t.params("main.nosuch").unwrap(), None);
}

#[test]
fn only_reached_types_are_parsed() {
    let t = open();
    t.params("main.str").unwrap();
    assert!(t.types().items.len() < 10, "{} types parsed for main.str", t.types().items.len());
}

// ---- runtime.g, build info ----

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

// ---- errors ----

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

#[test]
fn a_target_can_move_to_another_thread() {
    fn is_send<T: Send>(_: &T) {}
    is_send(&open());
}

#[test]
fn unsafe_pointer_complex_and_named_types() {
    let t = open();
    let params = t.params("main.raw").unwrap().unwrap();
    let tys: Vec<_> = params.iter().filter(|p| !p.is_result).map(|p| p.ty).collect();
    let res: Vec<_> = params.iter().filter(|p| p.is_result).map(|p| p.ty).collect();
    let layout = assign_call(Arch::X86_64, &tys, &res, &t.types());
    let types = t.types().clone();
    let got: Vec<(&str, &str, TypeKind)> =
        params.iter().map(|p| (p.name.as_str(), types.get(p.ty).name.as_str(), kind(&t, p))).collect();
    assert_eq!(
        got,
        vec![
            ("p", "unsafe.Pointer", TypeKind::UnsafePointer),
            ("c", "complex128", TypeKind::Complex),
            ("d", "time.Duration", TypeKind::Int { signed: true }),
            ("m", "main.MyInt", TypeKind::Int { signed: true }),
            ("~r0", "uintptr", TypeKind::Int { signed: false }),
        ]
    );
    // The complex takes X0 and X1; the ints go on in RBX and RCX.
    assert_eq!(layout.params[0], r(Rax));
    assert!(matches!(&layout.params[1], Location::Unreadable { reason } if reason.contains("X0")));
    assert_eq!(layout.params[2], r(Rbx));
    assert_eq!(layout.params[3], regs(&[(Rcx, 0, 4)]));
    assert_eq!(layout.results[0], r(Rax));
}
