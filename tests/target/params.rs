//! DWARF: parameters, results and their types, and the ABI locations
//! src/cmd/compile/abi-internal.md gives them (registers, the stack, hidden
//! dictionaries); only the types reached are parsed.

use super::*;

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
