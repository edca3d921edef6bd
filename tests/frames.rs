//! The frame at an address: gtrace's CFA - SP (from the function table's `pcsp` runs)
//! against the CFA rule of the DWARF call frame table (`.debug_frame`, read here with
//! gimli), at every row of every function of the test programs, on the local toolchain,
//! the oldest supported release and the newest. DWARF's stack places (DW_OP_fbreg,
//! DW_OP_call_frame_cfa) are read from SP plus this offset.

mod support;

use gimli::{BaseAddresses, CfaRule, UnwindContext, UnwindSection};
use gtrace::gobin::Target;
use object::{Object, ObjectSection};
use support::toolchain::{build_arm64, build_plain, toolchains, PLAIN};

/// `(start, end, CFA - SP)` of every row of `.debug_frame` whose CFA is SP + offset
/// (`sp` is the stack pointer's DWARF number).
fn debug_frame_rows(data: &[u8], sp: u16) -> Vec<(u64, u64, i64)> {
    let file = object::File::parse(data).expect("an ELF file");
    let section = file.section_by_name(".debug_frame").expect("Go writes .debug_frame");
    let bytes = section.uncompressed_data().expect("decompress .debug_frame");
    let mut frame = gimli::DebugFrame::new(&bytes, gimli::LittleEndian);
    frame.set_address_size(8);
    let bases = BaseAddresses::default();
    let mut ctx = UnwindContext::new();
    let mut rows = Vec::new();
    let mut entries = frame.entries(&bases);
    while let Some(entry) = entries.next().expect("a CFI entry") {
        let gimli::CieOrFde::Fde(partial) = entry else { continue };
        let fde = partial.parse(|s, b, o| s.cie_from_offset(b, o)).expect("an FDE");
        let mut table = fde.rows(&frame, &bases, &mut ctx).expect("FDE rows");
        while let Some(row) = table.next_row().expect("a row") {
            if let CfaRule::RegisterAndOffset { register, offset } = row.cfa() {
                assert_eq!(register.0, sp, "Go's CFA is relative to SP");
                rows.push((row.start_address(), row.end_address(), *offset));
            }
        }
    }
    rows
}

/// Every row's start and last byte: gtrace's CFA - SP there equals `.debug_frame`'s.
fn check_against_debug_frame(bin: &std::path::Path, sp: u16, what: &str) {
    let data = std::fs::read(bin).unwrap();
    let target = Target::open(bin).unwrap();
    let rows = debug_frame_rows(&data, sp);
    assert!(rows.len() > 1000, "{what}: only {} rows", rows.len());
    let mut checked = 0;
    for (start, end, offset) in rows {
        if start >= end {
            continue;
        }
        for pc in [start, end - 1] {
            let Some(ours) = target.cfa_sp_offset(pc) else {
                // Go writes call frame rows for its functions only: a gap is a bug.
                panic!("{what}: no frame at {pc:#x}, .debug_frame says SP+{offset}");
            };
            assert_eq!(ours, offset, "{what}: CFA - SP at {pc:#x}");
            checked += 1;
        }
    }
    assert!(checked > 2000, "{what}: {checked}");
}

#[test]
fn cfa_from_pcsp_agrees_with_debug_frame_everywhere() {
    for dir in ["inline", "httpserver"] {
        for toolchain in toolchains() {
            let Some(bin) = build_plain(dir, &toolchain) else { continue };
            check_against_debug_frame(&bin, 7, &format!("{toolchain} {dir}"));
        }
    }
}

/// On arm64 the call leaves nothing above SP (the return address is in the link
/// register): the CFA is SP plus the function's SP delta alone.
#[test]
fn cfa_from_pcsp_agrees_with_debug_frame_on_arm64() {
    for toolchain in toolchains() {
        let Some(bin) = build_arm64("inline", &toolchain, PLAIN) else { continue };
        check_against_debug_frame(&bin, 31, &format!("{toolchain} arm64 inline"));
    }
}
