//! Which x86-64 instructions the kernel refuses to put a uprobe on, decided from the bytes
//! at the probe site before anything is attached.
//!
//! A uprobe replaces the instruction with INT3 and, when it fires, runs a copy of the
//! instruction out of line (single-stepped, or emulated for branches and pushes). The
//! kernel only does this for instructions it knows to be safe; for the others
//! perf_event_open answers ENOTSUPP (524) when the file is already mapped, and the probe
//! is silently not installed when a process maps it later (a `-c` command, `-b`). The
//! rules, as Linux's arch/x86/kernel/uprobes.c applies them (`uprobe_init_insn`,
//! `is_prefix_bad`, the `good_insns_64` table, `branch_setup_xol_ops`), in its order:
//!
//! 1. the bytes must decode as one instruction (else ENOEXEC);
//! 2. no ES, CS, SS or DS segment prefix and no LOCK prefix among the legacy prefixes;
//! 3. not POP SS nor MOV to SS (they hold off interrupts for one instruction);
//! 4. the first opcode byte must be in the one-byte table below. For VEX and EVEX
//!    instructions the kernel's decoder calls the byte after the VEX prefix the opcode
//!    and looks it up in the same table. Every two-byte opcode (0F xx) passes, because
//!    0F itself is in the table (the kernel's two-byte table is never reached);
//! 5. a relative branch (JMP, CALL, Jcc) must not have an operand-size (66) prefix.
//!
//! Only the first four distinct legacy prefixes are looked at by the kernel's decoder;
//! no real instruction has more.

use iced_x86::{Decoder, DecoderOptions};

/// Why the kernel would refuse a uprobe on an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Refusal {
    /// The bytes are not one whole x86-64 instruction.
    Undecodable,
    /// A LOCK prefix: an atomic read-modify-write (`LOCK ORB`, `LOCK XADDQ`, ...).
    Lock,
    /// An ES, CS, SS or DS segment-override prefix (in 64-bit code also a branch hint
    /// or the padding of a long NOP).
    SegmentPrefix { byte: u8 },
    /// POP SS or MOV to SS, which mask interrupts for the next instruction.
    MasksInterrupts,
    /// An opcode the kernel does not single-step (INT3, HLT, IN/OUT, INT n, ...), or a
    /// VEX/EVEX instruction whose opcode byte is not in the one-byte table.
    Opcode { opcode: u8, vex: bool },
    /// A relative branch with an operand-size (66) prefix.
    Branch16,
}

impl Refusal {
    /// What the refused instruction is, for one (`a LOCK-prefixed (atomic) instruction`)
    /// and for several (`LOCK-prefixed (atomic) instructions`); `arch::Refusal` picks.
    pub fn phrases(&self) -> (String, String) {
        match self {
            Refusal::Undecodable => (
                "bytes that do not decode as an x86 instruction".into(),
                "bytes that do not decode as x86 instructions".into(),
            ),
            Refusal::Lock => {
                ("a LOCK-prefixed (atomic) instruction".into(), "LOCK-prefixed (atomic) instructions".into())
            }
            Refusal::SegmentPrefix { byte } => {
                let seg = segment_name(*byte);
                (
                    format!("an instruction with a segment prefix ({seg})"),
                    format!("instructions with a segment prefix ({seg})"),
                )
            }
            Refusal::MasksInterrupts => ("a MOV or POP to SS".into(), "MOVs or POPs to SS".into()),
            Refusal::Opcode { opcode, vex: false } => (
                format!("an instruction uprobes cannot step (opcode {opcode:#04x})"),
                format!("instructions uprobes cannot step (opcode {opcode:#04x})"),
            ),
            Refusal::Opcode { opcode, vex: true } => (
                format!("a VEX instruction uprobes cannot step (opcode byte {opcode:#04x})"),
                format!("VEX instructions uprobes cannot step (opcode byte {opcode:#04x})"),
            ),
            Refusal::Branch16 => {
                ("a branch with an operand-size prefix".into(), "branches with an operand-size prefix".into())
            }
        }
    }
}

fn segment_name(byte: u8) -> &'static str {
    match byte {
        0x26 => "ES",
        0x2e => "CS",
        0x36 => "SS",
        _ => "DS",
    }
}

/// The one-byte opcodes the kernel single-steps or emulates in 64-bit processes, a row
/// per high nibble (Linux's `good_insns_64`). Refused: the opcodes invalid in 64-bit
/// mode (06 07 0E 16 17 1E 1F 27 2F 37 3F 60 61 62 82 9A CE D4 D5 D6 EA), INS/OUTS
/// (6C-6F), IN/OUT (E4-E7, EC-EF), INT3 (CC), INT n (CD), IRET (CF), INT1 (F1), HLT (F4),
/// CLI (FA) and STI (FB).
const GOOD_ONE_BYTE: [[u8; 16]; 16] = [
    [1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 1], // 00
    [1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0], // 10
    [1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0], // 20
    [1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0], // 30
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], // 40
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], // 50
    [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0], // 60
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], // 70
    [1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], // 80
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1], // 90
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], // a0
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], // b0
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0], // c0
    [1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1], // d0
    [1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0], // e0
    [1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1], // f0
];

fn good_one_byte(opcode: u8) -> bool {
    GOOD_ONE_BYTE[usize::from(opcode >> 4)][usize::from(opcode & 0xf)] == 1
}

fn is_legacy_prefix(b: u8) -> bool {
    matches!(b, 0x26 | 0x2e | 0x36 | 0x3e | 0x64 | 0x65 | 0x66 | 0x67 | 0xf0 | 0xf2 | 0xf3)
}

/// The longest x86 instruction, and how many bytes the kernel copies from the file.
pub const MAX_INSN_BYTES: usize = 15;

/// Whether the kernel would refuse a uprobe on the instruction at the start of `code` (a
/// 64-bit process), and why. `code` should hold at least the whole instruction.
pub fn refusal(code: &[u8]) -> Option<Refusal> {
    let code = &code[..code.len().min(MAX_INSN_BYTES)];
    let mut decoder = Decoder::new(64, code, DecoderOptions::NONE);
    if code.is_empty() || decoder.decode().is_invalid() {
        return Some(Refusal::Undecodable);
    }
    let legacy: Vec<u8> = code.iter().copied().take_while(|b| is_legacy_prefix(*b)).collect();
    if legacy.contains(&0xf0) {
        return Some(Refusal::Lock);
    }
    if let Some(byte) = legacy.iter().copied().find(|b| matches!(b, 0x26 | 0x2e | 0x36 | 0x3e)) {
        return Some(Refusal::SegmentPrefix { byte });
    }
    let mut at = legacy.len();
    if code.get(at).is_some_and(|b| (0x40..=0x4f).contains(b)) {
        at += 1; // REX
    }
    let vex_len = match code.get(at) {
        Some(0xc5) => Some(2),
        Some(0xc4) => Some(3),
        Some(0x62) => Some(4),
        _ => None,
    };
    let (opcode_at, vex) = match vex_len {
        Some(len) => (at + len, true),
        None => (at, false),
    };
    let opcode = *code.get(opcode_at)?;
    let modrm = code.get(opcode_at + 1).copied();
    if !vex && (opcode == 0x17 || (opcode == 0x8e && modrm.is_some_and(|m| (m >> 3) & 7 == 2))) {
        return Some(Refusal::MasksInterrupts);
    }
    if !good_one_byte(opcode) {
        return Some(Refusal::Opcode { opcode, vex });
    }
    let relative_branch = !vex
        && (matches!(opcode, 0xe8 | 0xe9 | 0xeb | 0x70..=0x7f)
            || (opcode == 0x0f && modrm.is_some_and(|b| (0x80..=0x8f).contains(&b))));
    if relative_branch && legacy.contains(&0x66) {
        return Some(Refusal::Branch16);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_go_instructions_are_accepted() {
        for code in [
            &[0x55][..],                                 // PUSHQ BP
            &[0x48, 0x83, 0xec, 0x18],                   // SUBQ $0x18, SP
            &[0xc3],                                     // RET
            &[0x49, 0x3b, 0x66, 0x10],                   // CMPQ SP, 16(R14)
            &[0xe8, 0, 0, 0, 0],                         // CALL
            &[0x0f, 0x84, 0, 0, 0, 0],                   // JEQ rel32
            &[0x0f, 0x05],                               // SYSCALL: 0F passes the table
            &[0xc5, 0xfe, 0x7f, 0x07],                   // VMOVDQU Y0, (DI): opcode byte 7F
            &[0xf3, 0x48, 0xab],                         // REP STOSQ
            &[0x64, 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0], // MOVQ FS:0, AX
            &[0x66, 0x90],                               // 2-byte NOP
            &[0x0f, 0x1f, 0x44, 0x00, 0x00],             // NOPL
        ] {
            assert_eq!(refusal(code), None, "{code:x?}");
        }
    }

    #[test]
    fn refused_instructions_and_why() {
        let cases: &[(&[u8], Refusal)] = &[
            (&[0xf0, 0x08, 0x0b], Refusal::Lock),                         // LOCK ORB CL, (BX)
            (&[0xf0, 0x48, 0x0f, 0xc1, 0x03], Refusal::Lock),             // LOCK XADDQ AX, (BX)
            (&[0x66, 0xf0, 0x0f, 0xb1, 0x0b], Refusal::Lock),             // LOCK after another prefix
            (&[0x2e, 0xeb, 0x00], Refusal::SegmentPrefix { byte: 0x2e }), // CS-hinted JMP
            (&[0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0], Refusal::SegmentPrefix { byte: 0x2e }), // long NOP
            (&[0x8e, 0xd0], Refusal::MasksInterrupts),                    // MOV AX, SS
            (&[0xcc], Refusal::Opcode { opcode: 0xcc, vex: false }),      // INT3
            (&[0xf4], Refusal::Opcode { opcode: 0xf4, vex: false }),      // HLT
            (&[0xcd, 0x80], Refusal::Opcode { opcode: 0xcd, vex: false }), // INT 0x80
            (&[0xc5, 0xfe, 0x6f, 0x07], Refusal::Opcode { opcode: 0x6f, vex: true }), // VMOVDQU (DI), Y0
            (&[0x66, 0xe9, 0, 0, 0, 0], Refusal::Branch16),
            (&[0x48, 0x8b], Refusal::Undecodable), // cut short
            (&[], Refusal::Undecodable),
            (&[0x06], Refusal::Undecodable), // PUSH ES: invalid in 64-bit mode
        ];
        for (code, want) in cases {
            assert_eq!(refusal(code), Some(*want), "{code:x?}");
        }
    }

    #[test]
    fn mov_from_ss_is_not_mov_to_ss() {
        // 8C D0 is MOVW SS, AX (a read of SS): allowed; 8E with reg=2 writes SS.
        assert_eq!(refusal(&[0x8c, 0xd0]), None);
        assert_eq!(refusal(&[0x8e, 0xd8]), None); // MOV AX, DS
    }

    #[test]
    fn table_matches_the_documented_refusals() {
        let refused: Vec<u8> = (0..=255u8).filter(|b| !good_one_byte(*b)).collect();
        let documented = [
            0x06, 0x07, 0x0e, 0x16, 0x17, 0x1e, 0x1f, 0x27, 0x2f, 0x37, 0x3f, 0x60, 0x61, 0x62, 0x6c, 0x6d, 0x6e, 0x6f,
            0x82, 0x9a, 0xcc, 0xcd, 0xce, 0xcf, 0xd4, 0xd5, 0xd6, 0xe4, 0xe5, 0xe6, 0xe7, 0xea, 0xec, 0xed, 0xee, 0xef,
            0xf1, 0xf4, 0xfa, 0xfb,
        ];
        assert_eq!(refused, documented);
    }
}
