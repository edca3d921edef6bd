//! arm64 Go binaries, read on this x86-64 host: tests/go/abiarm64 and tests/go/kinds
//! cross-built with GOARCH=arm64 by Go 1.17 (every argument on the stack), the local Go
//! and the newest (the register ABI, R0-R15), and what gtrace makes of them checked
//! against `go tool objdump` (RET sites, the entry after the stack check, file offsets,
//! the branch and its target of every instruction of a whole binary, the stack offsets
//! leaf functions read) and against src/cmd/compile/abi-internal.md (`-l` of every
//! construct). Nothing here loads eBPF: this machine has no arm64 kernel.

mod support;

use gtrace::arch::abi::{assign_call, Location};
use gtrace::arch::arm64::insn::{self, Kind};
use gtrace::arch::arm64::uprobe::Refusal as A64;
use gtrace::arch::{Arch, Refusal};
use gtrace::gobin::{Placement, Target};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use support::toolchain::{build_arm64, toolchains, Kind as Build, OLDEST, PLAIN};
use support::ObjdumpLine;

/// tests/go/<dir> for arm64 by each toolchain that can be had: (toolchain, binary).
fn builds(dir: &str, kind: Build) -> Vec<(String, PathBuf)> {
    toolchains().into_iter().filter_map(|tc| build_arm64(dir, &tc, kind).map(|p| (tc, p))).collect()
}

fn open(path: &Path) -> Target {
    let t = Target::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    assert_eq!(t.arch(), Arch::Arm64, "{}", path.display());
    t
}

/// Whether `toolchain` built its Go code with the register ABI (arm64: Go 1.18 on).
fn register_abi(toolchain: &str) -> bool {
    toolchain != OLDEST
}

// ---- -l: every construct, both calling conventions -------------------------------------

/// `gtrace -l 'main.*'` of tests/go/abiarm64 under the register ABI (abi-internal.md:
/// integers in R0-R15, a value that does not fit wholly goes to the stack from 8(SP),
/// arrays of more than one element to the stack, floats in F0-F15, results from R0).
const REGISTER_ABI: &[&str] = &[
    "main.(*Counter).Inc(c *main.Counter [R0], by int [R1])",
    "main.Counter.Value(c main.Counter [R0 R1 R2], add int [R3]) (~r0 int [R0])",
    "main.array(a [3]int [8(SP)], one [1]string [R0 R1]) (~r0 int [R0])",
    "main.big(n int [R0], b main.Big [8(SP)]) (~r0 int64 [R0])",
    "main.bump(p *int64 [R0], by int64 [R1]) (~r0 int64 [R0])",
    "main.bytesLen(b []uint8 [R0 R1 R2]) (~r0 int [R0])",
    "main.fail(msg string [R0 R1])",
    "main.flag(b bool [R0], n int [R1]) (~r0 bool [R0])",
    "main.float(f float64 [unreadable: it is passed in F0, a float register, which uprobes cannot read], n int [R0], g float32 [unreadable: it is passed in F1, a float register, which uprobes cannot read]) (~r0 float64 [unreadable: it is passed in F0, a float register, which uprobes cannot read])",
    "main.hugeFrame(n int [R0]) (~r0 int [R0])",
    "main.iface(v interface {} [R0 R1], e error [R2 R3], s fmt.Stringer [R4 R5]) (~r0 bool [R0])",
    "main.ints(a int8 [R0], b int16 [R1], c int32 [R2], d int64 [R3], e uint8 [R4], f uint16 [R5], g uint32 [R6], h uint64 [R7], i uintptr [R8]) (~r0 int64 [R0])",
    "main.main()",
    "main.main.func1(x int [R0]) (~r0 int [R0])",
    "main.many(a int [R0], b int [R1], c int [R2], d int [R3], e int [R4], f int [R5], g int [R6], h int [R7], i int [R8], j int [R9], k int [R10], l int [R11], m int [R12], n int [R13], o int [R14], p int [R15], q int [8(SP)]) (~r0 int [R0])",
    "main.manyResults(x int [R0]) (a int [R0], b int [R1], c int [R2], d int [R3], e int [R4], f int [R5], g int [R6], h int [R7], i int [R8], j int [R9], k int [R10], l int [R11], m int [R12], n int [R13], o int [R14], p int [R15], q int [8(SP)])",
    "main.mediumFrame(n int [R0]) (~r0 int [R0])",
    "main.mixed(p *main.Pair [R0], m map[string]int [R1], ch chan int [R2], fn func(int) int [R3]) (~r0 int [R0])",
    "main.named(n int [R0]) (q int [R0], err error [R1 R2])",
    "main.pair(n int [R0], p main.Pair [R1 R2]) (~r0 int64 [R0])",
    "main.raw(p unsafe.Pointer [R0], c complex128 [unreadable: it is passed in F0, a float register, which uprobes cannot read], d time.Duration [R1], m main.MyInt [R2]) (~r0 uintptr [R0])",
    "main.recurse(n int [R0]) (~r0 int [R0])",
    "main.spill(a int [R0], b int [R1], c int [R2], d int [R3], e int [R4], f int [R5], g int [R6], h int [R7], i int [R8], j int [R9], k int [R10], l int [R11], m int [R12], n int [R13], o int [R14], s string [8(SP)], last int [R15]) (~r0 int [R0])",
    "main.stackResults(a [2]int [8(SP)], n int [R0]) (r [2]int [24(SP)], s string [R0 R1])",
    "main.str(s string [R0 R1], n int [R2]) (~r0 int [R0])",
    "main.unnamed(n int [R0]) (~r0 int [R0], ~r1 string [R1 R2])",
];

/// The same under Go 1.17's stack ABI: each value at its own alignment from 8(SP), the
/// results after the arguments from the next multiple of 8; floats in memory are read.
const STACK_ABI: &[&str] = &[
    "main.(*Counter).Inc(c *main.Counter [8(SP)], by int [16(SP)])",
    "main.Counter.Value(c main.Counter [8(SP)], add int [32(SP)]) (~r1 int [40(SP)])",
    "main.array(a [3]int [8(SP)], one [1]string [32(SP)]) (~r2 int [48(SP)])",
    "main.big(n int [8(SP)], b main.Big [16(SP)]) (~r2 int64 [40(SP)])",
    "main.bump(p *int64 [8(SP)], by int64 [16(SP)]) (~r2 int64 [24(SP)])",
    "main.bytesLen(b []uint8 [8(SP)]) (~r1 int [32(SP)])",
    "main.fail(msg string [8(SP)])",
    "main.flag(b bool [8(SP)], n int [16(SP)]) (~r2 bool [24(SP)])",
    "main.float(f float64 [8(SP)], n int [16(SP)], g float32 [24(SP)]) (~r3 float64 [32(SP)])",
    "main.hugeFrame(n int [8(SP)]) (~r1 int [16(SP)])",
    "main.iface(v interface {} [8(SP)], e error [24(SP)], s fmt.Stringer [40(SP)]) (~r3 bool [56(SP)])",
    "main.ints(a int8 [8(SP)], b int16 [10(SP)], c int32 [12(SP)], d int64 [16(SP)], e uint8 [24(SP)], f uint16 [26(SP)], g uint32 [28(SP)], h uint64 [32(SP)], i uintptr [40(SP)]) (~r9 int64 [48(SP)])",
    "main.main()",
    "main.main.func1(x int [8(SP)]) (~r1 int [16(SP)])",
    "main.many(a int [8(SP)], b int [16(SP)], c int [24(SP)], d int [32(SP)], e int [40(SP)], f int [48(SP)], g int [56(SP)], h int [64(SP)], i int [72(SP)], j int [80(SP)], k int [88(SP)], l int [96(SP)], m int [104(SP)], n int [112(SP)], o int [120(SP)], p int [128(SP)], q int [136(SP)]) (~r17 int [144(SP)])",
    "main.manyResults(x int [8(SP)]) (a int [16(SP)], b int [24(SP)], c int [32(SP)], d int [40(SP)], e int [48(SP)], f int [56(SP)], g int [64(SP)], h int [72(SP)], i int [80(SP)], j int [88(SP)], k int [96(SP)], l int [104(SP)], m int [112(SP)], n int [120(SP)], o int [128(SP)], p int [136(SP)], q int [144(SP)])",
    "main.mediumFrame(n int [8(SP)]) (~r1 int [16(SP)])",
    "main.mixed(p *main.Pair [8(SP)], m map[string]int [16(SP)], ch chan int [24(SP)], fn func(int) int [32(SP)]) (~r4 int [40(SP)])",
    "main.named(n int [8(SP)]) (q int [16(SP)], err error [24(SP)])",
    "main.pair(n int [8(SP)], p main.Pair [16(SP)]) (~r2 int64 [32(SP)])",
    "main.raw(p unsafe.Pointer [8(SP)], c complex128 [16(SP)], d time.Duration [32(SP)], m main.MyInt [40(SP)]) (~r4 uintptr [48(SP)])",
    "main.recurse(n int [8(SP)]) (~r1 int [16(SP)])",
    "main.spill(a int [8(SP)], b int [16(SP)], c int [24(SP)], d int [32(SP)], e int [40(SP)], f int [48(SP)], g int [56(SP)], h int [64(SP)], i int [72(SP)], j int [80(SP)], k int [88(SP)], l int [96(SP)], m int [104(SP)], n int [112(SP)], o int [120(SP)], s string [128(SP)], last int [144(SP)]) (~r17 int [152(SP)])",
    "main.stackResults(a [2]int [8(SP)], n int [24(SP)]) (r [2]int [32(SP)], s string [48(SP)])",
    "main.str(s string [8(SP)], n int [24(SP)]) (~r2 int [32(SP)])",
    "main.unnamed(n int [8(SP)]) (~r1 int [16(SP)], ~r2 string [24(SP)])",
];

#[test]
fn every_construct_is_listed_where_the_abi_puts_it() {
    let built = builds("abiarm64", PLAIN);
    assert!(!built.is_empty());
    for (tc, bin) in &built {
        let t = open(bin);
        assert_eq!(t.go_conv().registers, register_abi(tc), "{tc}");
        let run = support::gtrace(&["-l", "main.*", "-b", bin.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{tc}: {}", run.stderr);
        let got: Vec<&str> = run.stdout.lines().collect();
        let want = if register_abi(tc) { REGISTER_ABI } else { STACK_ABI };
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g, w, "{tc}");
        }
        assert_eq!(got.len(), want.len(), "{tc}:\n{}", run.stdout);
    }
}

/// Generic code (tests/go/abi, Go 1.18+): the hidden dictionary is an argument like any
/// other, first, or after a method's receiver (its DWARF type varies by release: `*`).
#[test]
fn generic_functions_take_their_dictionary_in_a_register() {
    for tc in toolchains().into_iter().filter(|tc| register_abi(tc)) {
        let Some(bin) = build_arm64("abi", &tc, PLAIN) else { continue };
        for (pattern, want) in [
            ("main.Sum[...]", "main.Sum[go.shape.int](.dict * [R0], xs []go.shape.int [R1 R2 R3]) (~r0 go.shape.int [R0])"),
            (
                "main.(*Stack[...]).Push",
                "main.(*Stack[go.shape.string]).Push(s *main.Stack[go.shape.string] [R0], .dict * [R1], v go.shape.string [R2 R3]) (~r0 int [R0])",
            ),
        ] {
            let run = support::gtrace(&["-l", pattern, "-b", bin.to_str().unwrap()]);
            let dict_type_hidden = |l: &str| -> String {
                let Some(at) = l.find(".dict ") else { return l.to_string() };
                let end = at + l[at..].find(" [").unwrap_or(0);
                format!("{}.dict *{}", &l[..at], &l[end..])
            };
            assert!(
                run.stdout.lines().any(|l| dict_type_hidden(l) == want),
                "{tc} {pattern}:\n{}{}",
                run.stdout,
                run.stderr
            );
        }
    }
}

/// The `N(RSP)` offsets an instruction names.
fn rsp_offsets(asm: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for (i, _) in asm.match_indices("(RSP)") {
        let start = asm[..i].rfind(|c: char| !(c.is_ascii_digit() || c == '-')).map_or(0, |p| p + 1);
        out.push(asm[start..i].parse().unwrap_or(0));
    }
    out
}

/// A function without a frame and without calls reads its stack arguments and writes its
/// stack results at their offsets at entry: every offset it names is inside a value
/// gtrace places on the stack, and every such value is touched.
#[test]
fn leaf_functions_touch_exactly_the_stack_slots_gtrace_gives_their_values() {
    for (tc, bin) in &builds("abiarm64", PLAIN) {
        let t = open(bin);
        let mut leaves = 0;
        let names: Vec<String> = t.find("main.*").iter().map(|f| f.name.to_string()).collect();
        for name in names {
            let lines = support::objdump(bin, &name);
            if lines.iter().any(|l| l.asm.starts_with("CALL") || l.asm.contains("R29")) {
                continue;
            }
            let params = t.params(&name).unwrap().expect("DWARF");
            let types = t.types().clone();
            let (ins, outs): (Vec<_>, Vec<_>) = params.iter().partition(|p| !p.is_result);
            let tys = |ps: &[&gtrace::gobin::Param]| ps.iter().map(|p| p.ty).collect::<Vec<_>>();
            let layout = assign_call(t.go_conv(), &tys(&ins), &tys(&outs), &types);
            let slots: Vec<(i64, i64, &str)> = ins
                .iter()
                .zip(&layout.params)
                .chain(outs.iter().zip(&layout.results))
                .filter_map(|(p, loc)| match loc {
                    Location::Stack { offset } => Some((*offset, types.get(p.ty).size as i64, p.name.as_str())),
                    _ => None,
                })
                .collect();
            // Above the stack results, the caller leaves a spill slot for each register
            // argument (abi-internal.md), where a leaf may keep one.
            let align = |n: i64, a: i64| (n + a - 1) / a * a;
            let end = slots.iter().map(|(o, size, _)| o + size).max().unwrap_or(8);
            let mut at = align(end.max(8), 8);
            let mut spills = Vec::new();
            for (p, loc) in ins.iter().zip(&layout.params) {
                if matches!(loc, Location::Regs(_) | Location::Unreadable { .. }) {
                    at = align(at, gtrace::arch::abi::alignment(p.ty, &types) as i64);
                    spills.push((at, types.get(p.ty).size as i64, p.name.as_str()));
                    at += types.get(p.ty).size as i64;
                }
            }
            let touched: Vec<i64> = lines.iter().flat_map(|l| rsp_offsets(&l.asm)).collect();
            for off in &touched {
                let inside = |s: &[(i64, i64, &str)]| s.iter().any(|(o, size, _)| (*o..o + size).contains(off));
                assert!(
                    inside(&slots) || inside(&spills),
                    "{tc} {name}: {off}(RSP) is in no value: {slots:?} {spills:?}"
                );
            }
            for (o, size, value) in &slots {
                assert!(
                    touched.iter().any(|off| (*o..o + size).contains(off)),
                    "{tc} {name}: {value} at {o}(RSP) untouched: {touched:?}"
                );
            }
            leaves += usize::from(!slots.is_empty());
        }
        // Go 1.17 passes everything on the stack; later releases spill only some.
        assert!(leaves >= if register_abi(tc) { 4 } else { 15 }, "{tc}: only {leaves} leaves with stack values");
    }
}

// ---- probe sites and file offsets against objdump ---------------------------------------

/// Where objdump says the stack check ends: after its `BLS` (each form ends with one),
/// for a function that starts by loading g.stackguard0; the first instruction otherwise.
fn objdump_entry(lines: &[ObjdumpLine]) -> u64 {
    if !lines[0].asm.starts_with("MOVD 16(R28)") {
        return lines[0].addr;
    }
    let bls = lines.iter().take(10).position(|l| l.asm.starts_with("BLS")).expect("a stack check ends in BLS");
    lines[bls + 1].addr
}

const SITE_FUNCTIONS: [&str; 11] = [
    "main.ints",
    "main.recurse",
    "main.mediumFrame",
    "main.hugeFrame",
    "main.named",
    "main.fail",
    "main.main",
    "main.bump",
    "main.mixed",
    "runtime.mallocgc",
    "runtime.morestack",
];

/// The bytes at each instruction's file offset are the word objdump shows there.
fn check_bytes(t: &Target, bin: &Path, name: &str, what: &str) {
    let data = std::fs::read(bin).unwrap();
    for l in support::objdump(bin, name) {
        let off =
            t.file_offset(l.addr).unwrap_or_else(|| panic!("{what} {name}: no offset for {:#x}", l.addr)) as usize;
        let word = u32::from_le_bytes(data[off..off + 4].try_into().unwrap());
        assert_eq!(word.to_be_bytes().to_vec(), l.bytes, "{what} {name} at {:#x}", l.addr);
    }
}

#[test]
fn probe_sites_and_file_offsets_match_objdump() {
    for (tc, bin) in &builds("abiarm64", PLAIN) {
        let t = open(bin);
        for name in SITE_FUNCTIONS {
            // Assembly is `runtime.morestack.abi0` since Go 1.18.
            let abi0 = format!("{name}.abi0");
            let f = t
                .functions()
                .into_iter()
                .find(|f| f.name == name || f.name == abi0)
                .unwrap_or_else(|| panic!("{tc}: {name}"));
            let f = f.clone();
            let name = f.name.as_str();
            let lines = support::objdump(bin, name);
            let sites = t.probe_sites(&f).unwrap();
            let rets: Vec<u64> = lines.iter().filter(|l| l.asm == "RET").map(|l| l.addr).collect();
            assert_eq!(sites.returns, rets, "{tc} {name}");
            assert_eq!(sites.entry, objdump_entry(&lines), "{tc} {name}");
            check_bytes(&t, bin, name, tc);
        }
        let entry_past_start = |name: &str| {
            let f = t.find(name)[0].clone();
            t.probe_sites(&f).unwrap().entry > f.addr
        };
        assert!(!entry_past_start("main.ints"), "{tc}: a leaf has no stack check");
        assert!(entry_past_start("main.hugeFrame") && entry_past_start("main.mediumFrame"), "{tc}");
        assert!(t.probe_sites(&t.find("main.fail")[0].clone()).unwrap().returns.is_empty(), "{tc}");
    }
}

// ---- the decoder against Go's disassembler, every instruction of a binary ---------------

/// The branch target objdump prints last: `7(PC)`, `-5(PC)` or `pkg.F(SB)`.
fn target_of(asm: &str, addr: u64, symbols: &HashMap<&str, u64>) -> Option<u64> {
    let last = asm.rsplit([' ', ',']).next()?;
    if let Some(n) = last.strip_suffix("(PC)") {
        return Some(addr.wrapping_add_signed(n.parse::<i64>().ok()? * 4));
    }
    symbols.get(last.strip_suffix("(SB)")?).copied()
}

const CONDITIONS: [&str; 16] =
    ["EQ", "NE", "CS", "HS", "CC", "LO", "MI", "PL", "VS", "VC", "HI", "LS", "GE", "LT", "GT", "LE"];

/// What objdump's text says the instruction does to control flow; None for the words it
/// does not know (LSE atomics show as `?`) and branches to a symbol it cannot place.
fn expected_kind(l: &ObjdumpLine, symbols: &HashMap<&str, u64>) -> Option<Kind> {
    let mnemonic = l.asm.split_whitespace().next().unwrap_or("?");
    let indirect = l.asm.ends_with(')') && l.asm.split_whitespace().nth(1)?.starts_with('(');
    let to = || target_of(&l.asm, l.addr, symbols);
    Some(match mnemonic {
        "RET" => Kind::Ret,
        "NOOP" => Kind::Nop,
        "BRK" => Kind::Trap,
        "?" if l.bytes == [0, 0, 0, 0] => Kind::Trap,
        "?" => return None,
        "CALL" if indirect => Kind::CallIndirect,
        "JMP" if indirect => Kind::JumpIndirect,
        "CALL" => Kind::Call(to()?),
        "JMP" => Kind::Jump(to()?),
        "CBZ" | "CBNZ" | "CBZW" | "CBNZW" | "TBZ" | "TBNZ" => Kind::Branch(to()?),
        m if m.len() == 3 && m.starts_with('B') && CONDITIONS.contains(&&m[1..]) => Kind::Branch(to()?),
        _ => Kind::Other,
    })
}

/// What the kernel (or gtrace) refuses by objdump's mnemonic, with the exclusive
/// sequence the instruction is in: `since_load` counts the instructions since the last
/// exclusive load not yet stored, within the function.
fn expected_refusal(asm: &str, since_load: Option<usize>) -> Option<Refusal> {
    let mnemonic = asm.split_whitespace().next().unwrap_or("");
    let operand = asm.split(", ").next().unwrap_or("");
    let exclusive_load = ["LDAXR", "LDXR", "LDAXP", "LDXP"].iter().any(|p| mnemonic.starts_with(p));
    let exclusive_store = ["STLXR", "STXR", "STLXP", "STXP"].iter().any(|p| mnemonic.starts_with(p));
    // Go's objdump writes a literal load as a MOV from `N(PC)`.
    let literal = |m: &str| m.starts_with("MOV") && operand.ends_with("(PC)");
    let r = if exclusive_load || exclusive_store {
        A64::Exclusive
    } else if literal(mnemonic) {
        A64::Literal
    } else if mnemonic.starts_with("FMOV") && operand.ends_with("(PC)") {
        A64::FloatLiteral
    } else if ["SVC", "BRK", "HLT"].contains(&mnemonic) {
        A64::Exception
    } else if mnemonic == "MSR" {
        A64::System
    } else if let Some(op) = ["YIELD", "WFE", "WFI", "SEV", "SEVL"].iter().position(|h| *h == mnemonic) {
        A64::Hint { op: op as u8 + 1 }
    } else if since_load.is_some_and(|n| n <= gtrace::arch::arm64::uprobe::CONTEXT_BYTES / 4) {
        A64::InExclusive
    } else {
        return None;
    };
    Some(Refusal::Arm64(r))
}

#[test]
fn the_decoder_agrees_with_go_objdump_on_every_instruction() {
    for (tc, bin) in &builds("abiarm64", PLAIN) {
        let t = open(bin);
        let symbols: HashMap<&str, u64> = t.functions().iter().map(|f| (f.name.as_str(), f.addr)).collect();
        let data = std::fs::read(bin).unwrap();
        let lines = support::objdump_all(bin);
        let mut seen: HashMap<std::mem::Discriminant<Kind>, usize> = HashMap::new();
        let (mut checked, mut refused) = (0, 0);
        let (mut function, mut since_load): (u64, Option<usize>) = (0, None);
        for l in &lines {
            let off = t.file_offset(l.addr).unwrap() as usize;
            let word = insn::word(&data[off..]).unwrap();
            assert_eq!(word.to_be_bytes().to_vec(), l.bytes, "{tc} at {:#x}", l.addr);
            // The exclusive sequence the instruction is in, within its function.
            let start = t.function_containing(l.addr).map_or(0, |f| f.addr);
            if start != function {
                (function, since_load) = (start, None);
            }
            let mnemonic = l.asm.split_whitespace().next().unwrap_or("");
            let in_sequence = since_load;
            since_load = if ["LDAXR", "LDXR", "LDAXP", "LDXP"].iter().any(|p| mnemonic.starts_with(p)) {
                Some(1)
            } else if ["STLXR", "STXR", "STLXP", "STXP"].iter().any(|p| mnemonic.starts_with(p)) {
                None
            } else {
                since_load.map(|n| n + 1)
            };
            let Some(kind) = expected_kind(l, &symbols) else { continue };
            assert_eq!(insn::kind(word, l.addr), kind, "{tc} at {:#x}: {}", l.addr, l.asm);
            *seen.entry(std::mem::discriminant(&kind)).or_default() += 1;
            let want = expected_refusal(&l.asm, in_sequence);
            assert_eq!(t.uprobe_refusal(l.addr), want, "{tc} at {:#x}: {}", l.addr, l.asm);
            refused += usize::from(want.is_some());
            checked += 1;
        }
        eprintln!(
            "{tc}: {checked} instructions decoded as go tool objdump reads them, {refused} refused as uprobe sites"
        );
        assert!(checked > 50_000, "{tc}: {checked}");
        assert_eq!(seen.len(), 9, "{tc}: every kind of instruction is met: {seen:?}");
        assert!(refused > 100, "{tc}: {refused} refused sites (atomics, syscalls)");
    }
}

// ---- kinds of binaries; inlined calls ----------------------------------------------------

const MAIN_FUNCS: [&str; 6] = ["main.add", "main.sleepy", "main.callerA", "main.callerB", "main.callerC", "main.main"];

/// Stripped, PIE and stripped PIE builds (CGO off: this host has no arm64 C compiler)
/// have the functions, probe sites and file offsets of their unstripped twins; the
/// stripped ones read them from .gopclntab (pc deltas in 4-byte units), the PIEs apply
/// R_AARCH64_RELATIVE relocations to find it.
#[test]
fn stripped_and_pie_binaries_match_their_twins() {
    let kinds = [(true, false), (false, true), (true, true)];
    for tc in toolchains() {
        let Some(exe) = build_arm64("kinds", &tc, PLAIN) else { continue };
        let pie = build_arm64("kinds", &tc, Build { pie: true, ..PLAIN }).unwrap();
        let (exe, pie) = (open(&exe), open(&pie));
        for (stripped, is_pie) in kinds {
            let bin = build_arm64("kinds", &tc, Build { stripped, pie: is_pie, cgo: false }).unwrap();
            let what = format!("{tc} stripped={stripped} pie={is_pie}");
            let t = open(&bin);
            let twin = if is_pie { &pie } else { &exe };
            assert_eq!((t.is_stripped(), t.has_dwarf()), (stripped, !stripped), "{what}");
            assert_eq!(t.go_version(), twin.go_version(), "{what}");
            for name in MAIN_FUNCS {
                let (a, b) = (t.find(name)[0].clone(), twin.find(name)[0].clone());
                assert_eq!((a.addr, t.file_offset(a.addr)), (b.addr, twin.file_offset(b.addr)), "{what} {name}");
                assert_eq!(t.probe_sites(&a).unwrap(), twin.probe_sites(&b).unwrap(), "{what} {name}");
            }
            let go_funcs = |x: &Target| x.functions().iter().filter(|f| f.name.starts_with("runtime.")).count();
            assert!(go_funcs(&t) > 500, "{what}: {}", go_funcs(&t));
            assert_eq!(t.g_layout(), exe.g_layout_from_dwarf(), "{what}: the table by version agrees with DWARF");
        }
        for name in MAIN_FUNCS {
            check_bytes(&pie, &pie_path(&tc), name, &format!("{tc} pie"));
        }
    }
}

fn pie_path(tc: &str) -> PathBuf {
    build_arm64("kinds", tc, Build { pie: true, ..PLAIN }).unwrap()
}

/// triple is inlined into three callers: each call site's entry is placed on the
/// caller's control flow graph, decoded from arm64 code.
#[test]
fn inlined_calls_are_placed_on_the_arm64_control_flow_graph() {
    for (tc, bin) in &builds("kinds", PLAIN) {
        let t = open(bin);
        let sites = t.find_inlined("main.triple");
        for c in ["main.callerA", "main.callerB", "main.callerC"] {
            let site = sites.iter().find(|s| s.caller == c).unwrap_or_else(|| panic!("{tc}: {c}: {sites:?}"));
            let caller = t.find(c)[0];
            assert!((caller.addr..caller.addr + caller.size).contains(&site.addr), "{tc}: {site:x?}");
            assert_eq!(site.addr % 4, 0, "{tc}: {site:x?}");
            assert_ne!(site.how, Placement::Lowest, "{tc}: {site:x?}");
        }
    }
}
