//! Code: file offsets (a PIE's too) and probe sites checked against `go tool objdump`:
//! the entry after the stack check (or at a leaf's first instruction), the returns.

use super::*;

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
