//! Which arm64 instructions must not hold a uprobe, decided from the bytes at the probe
//! site (and the code before it) before anything is attached.
//!
//! An arm64 uprobe replaces the instruction with `BRK #0x5` and, when it fires, either
//! simulates it (branches, ADR/ADRP) or single-steps a copy of it out of line. Linux's
//! arch/arm64/kernel/probes/uprobes.c (`arch_uprobe_analyze_insn`) refuses (EINVAL) what
//! decode-insn.c's `arm_probe_decode_insn` rejects, by the masks of
//! arch/arm64/include/asm/insn.h:
//!
//! 1. in the branch/exception/system class (bits 28-26 = 101): branches other than the
//!    simulated B, BL, B.cond, CBZ/CBNZ, TBZ/TBNZ, BR, BLR and RET (so the
//!    pointer-authenticating BRAA, BLRAA, RETAA, ...); MSR; exception-generating
//!    instructions (SVC, HVC, SMC, BRK, HLT, DCPS); ERET; MRS of DAIF (mainline steps every
//!    other MRS); HINTs other than NOP and the PAC/BTI ones it lists;
//! 2. elsewhere: loads of PC-relative literals (LDR, LDRSW and PRFM literal: the kernel
//!    simulates those for kprobes only) and exclusive loads and stores (LDXR, STXR, LDAXR,
//!    STLXR, their pairs), which would never complete around a single step.
//!
//! Two more gtrace refuses itself, though the kernel takes them, because a uprobe there
//! harms the program: an LDR of a float or vector literal (the kernel's literal mask
//! misses it, so it would be stepped from the out-of-line slot and load from the wrong
//! address), and any instruction between an exclusive load and its store (the kernel
//! checks this for kprobes only: the trap clears the exclusive monitor, so the store fails
//! on every retry and the loop never ends).

use super::insn::{self, bits, is};

/// Why a uprobe must not go on an arm64 instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Refusal {
    /// Fewer than four bytes: not one whole instruction.
    Undecodable,
    /// An exclusive load or store (LDXR, STXR, LDAXR, STLXR, LDXP, STXP, ...).
    Exclusive,
    /// A load of a PC-relative literal (LDR, LDRSW or PRFM literal).
    Literal,
    /// An exception-generating instruction (SVC, HVC, SMC, BRK, HLT, DCPS).
    Exception,
    /// MSR, ERET, or MRS of DAIF.
    System,
    /// A HINT that the kernel does not step (`op` is its CRm:op2, `HINT #op`).
    Hint { op: u8 },
    /// A pointer-authenticating branch (BRAA, BLRAA, RETAA, ...), which the kernel does
    /// not simulate.
    AuthBranch,
    /// gtrace's own: an LDR of a float or vector literal.
    FloatLiteral,
    /// gtrace's own: an instruction between an exclusive load and its store.
    InExclusive,
}

/// How far back `refusal` looks for the exclusive load of a sequence: the kernel's
/// MAX_ATOMIC_CONTEXT_SIZE (Arm recommends at most 128 bytes between the two).
pub const CONTEXT_BYTES: usize = 128;

impl Refusal {
    /// Whether the kernel refuses it (else gtrace does, to keep the program unharmed).
    pub fn by_kernel(&self) -> bool {
        !matches!(self, Refusal::FloatLiteral | Refusal::InExclusive)
    }

    /// What the refused instruction is, for one and for several (`arch::Refusal`
    /// picks).
    pub fn phrases(&self) -> (String, String) {
        match self {
            Refusal::Undecodable => (
                "bytes that are not a whole arm64 instruction".to_string(),
                "bytes that are not whole arm64 instructions".to_string(),
            ),
            Refusal::Exclusive => (
                "an exclusive load or store (LDXR/STXR and kin: an atomic without LSE)".into(),
                "exclusive loads or stores (LDXR/STXR and kin: atomics without LSE)".into(),
            ),
            Refusal::Literal => (
                "a load of a PC-relative literal (LDR, LDRSW or PRFM literal)".into(),
                "loads of PC-relative literals (LDR, LDRSW or PRFM literal)".into(),
            ),
            Refusal::Exception => (
                "an exception-generating instruction (SVC, BRK, HLT, ...)".into(),
                "exception-generating instructions (SVC, BRK, HLT, ...)".into(),
            ),
            Refusal::System => {
                ("a system instruction (MSR, ERET, MRS of DAIF)".into(), "system instructions (MSR, ERET, MRS of DAIF)".into())
            }
            Refusal::Hint { op } => (
                format!("a hint instruction uprobes cannot step (HINT #{op}{})", hint_name(*op)),
                format!("hint instructions uprobes cannot step (HINT #{op}{})", hint_name(*op)),
            ),
            Refusal::AuthBranch => (
                "a pointer-authenticating branch (BRAA, BLRAA, RETAA, ...)".into(),
                "pointer-authenticating branches (BRAA, BLRAA, RETAA, ...)".into(),
            ),
            Refusal::FloatLiteral => (
                "a load of a float literal, which a uprobe would run from the wrong address".into(),
                "loads of float literals, which a uprobe would run from the wrong address".into(),
            ),
            Refusal::InExclusive => (
                "an instruction inside an exclusive load/store sequence, whose store a uprobe's trap would make fail on every retry".into(),
                "instructions inside exclusive load/store sequences, whose stores a uprobe's trap would make fail on every retry".into(),
            ),
        }
    }
}

/// `, WFE` for the hints with a well-known name.
fn hint_name(op: u8) -> &'static str {
    match op {
        1 => ", YIELD",
        2 => ", WFE",
        3 => ", WFI",
        4 => ", SEV",
        5 => ", SEVL",
        12 => ", AUTIA1716",
        14 => ", AUTIB1716",
        28 => ", AUTIAZ",
        29 => ", AUTIASP",
        30 => ", AUTIBZ",
        31 => ", AUTIBSP",
        _ => "",
    }
}

/// Whether the instruction at the start of `code` must not hold a uprobe, and why.
/// `before` holds the bytes of the same function right before it (up to
/// `CONTEXT_BYTES`), to see whether it is inside an exclusive sequence.
pub fn refusal(before: &[u8], code: &[u8]) -> Option<Refusal> {
    let Some(w) = insn::word(code) else { return Some(Refusal::Undecodable) };
    if let Some(r) = kernel_refusal(w) {
        return Some(r);
    }
    if is(w, 0x3f00_0000, 0x1c00_0000) && bits(w, 30, 2) != 0b11 {
        return Some(Refusal::FloatLiteral); // LDR St/Dt/Qt, literal
    }
    inside_exclusive(before).then_some(Refusal::InExclusive)
}

/// `arm_probe_decode_insn`'s verdict: None when the kernel steps or simulates `w`.
fn kernel_refusal(w: u32) -> Option<Refusal> {
    if !is(w, 0x1c00_0000, 0x1400_0000) {
        let ldr_lit = is(w, 0xbf00_0000, 0x1800_0000);
        let ldrsw_lit = is(w, 0xff00_0000, 0x9800_0000);
        let prfm_lit = is(w, 0xff00_0000, 0xd800_0000);
        if ldr_lit || ldrsw_lit || prfm_lit {
            return Some(Refusal::Literal);
        }
        // ADR and ADRP use a literal too, but are simulated.
        return is(w, 0x3f80_0000, 0x0800_0000).then_some(Refusal::Exclusive);
    }
    let simulated = is(w, 0xff00_0010, 0x5400_0000) // B.cond
        || is(w, 0x7e00_0000, 0x3400_0000) // CBZ, CBNZ
        || is(w, 0x7e00_0000, 0x3600_0000) // TBZ, TBNZ
        || is(w, 0x7c00_0000, 0x1400_0000) // B, BL
        || is(w, 0xffff_fc1f, 0xd61f_0000) // BR
        || is(w, 0xffff_fc1f, 0xd63f_0000) // BLR
        || is(w, 0xffff_fc1f, 0xd65f_0000); // RET
    let auth_branch = is(w, 0xfeff_f800, 0xd61f_0800) // BRAA, BRAB (and BRAAZ, ...)
        || is(w, 0xfeff_f800, 0xd63f_0800) // BLRAA, BLRAB
        || is(w, 0xffff_fbff, 0xd65f_0bff); // RETAA, RETAB
    if simulated {
        return None;
    }
    if auth_branch {
        return Some(Refusal::AuthBranch);
    }
    let msr = is(w, 0xfff8_f01f, 0xd500_401f) || is(w, 0xfff0_0000, 0xd510_0000);
    let eret = w == 0xd69f_03e0 || is(w, 0xffff_fbff, 0xd69f_0bff);
    let mrs_daif = is(w, 0xfff0_0000, 0xd530_0000) && (w & 0x1f_ffe0) >> 5 == 0xda11;
    if msr || eret || mrs_daif {
        return Some(Refusal::System);
    }
    if is(w, 0xff00_0000, 0xd400_0000) {
        return Some(Refusal::Exception);
    }
    if is(w, 0xffff_f01f, 0xd503_201f) {
        let op = bits(w, 5, 7) as u8;
        return (!steppable_hint(op)).then_some(Refusal::Hint { op });
    }
    None
}

/// The HINTs the kernel steps (or simulates): NOP, XPACLRI, PACIA1716, PACIB1716,
/// PACIAZ, PACIASP, PACIBZ, PACIBSP, and the BTIs.
fn steppable_hint(op: u8) -> bool {
    matches!(op, 0 | 7 | 8 | 10 | 24 | 25 | 26 | 27 | 32 | 34 | 36 | 38)
}

/// Whether, going back from the end of `before`, an exclusive load comes before any
/// exclusive store: the probed instruction would sit inside its sequence.
fn inside_exclusive(before: &[u8]) -> bool {
    let whole = before.len() - before.len() % insn::SIZE;
    for bytes in before[before.len() - whole..].rchunks_exact(insn::SIZE) {
        let Some(w) = insn::word(bytes) else { return false };
        if is(w, 0x3fc0_0000, 0x0800_0000) {
            return false; // a store-exclusive: the sequence before has ended
        }
        if is(w, 0x3fc0_0000, 0x0840_0000) {
            return true; // a load-exclusive, not yet stored
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(w: u32) -> Option<Refusal> {
        refusal(&[], &w.to_le_bytes())
    }

    #[test]
    fn ordinary_go_instructions_are_accepted() {
        for w in [
            0xf940_0b90, // MOVD 16(R28), R16
            0xeb30_63ff, // CMP R16, RSP
            0x5400_0169, // BLS 11(PC): simulated
            0xf81e_0ffe, // MOVD.W R30, -32(RSP)
            0xa93f_fa9d, // STP (R29, R30), -8(R20)
            0xd65f_03c0, // RET: simulated
            0x97ff_76d3, // CALL: simulated
            0xd63f_0080, // CALL (R4): simulated
            0x9000_0163, // ADRP: simulated
            0xd503_201f, // NOOP
            0xd503_233f, // PACIASP
            0xd503_245f, // BTI c
            0xc8df_fc00, // LDAR (R0), R0: acquire, not exclusive
            0xc89f_fc01, // STLR R1, (R0)
            0xf8e0_0020, // LDADDAL R0, (R1), R0: an LSE atomic
            0xd53b_d040, // MRS TPIDR_EL0, R0
            0xd503_3bbf, // DMB ISH
            0x0000_0000, // UDF: stepped (it traps in the program as it would anyway)
        ] {
            assert_eq!(r(w), None, "{w:#010x}");
        }
    }

    #[test]
    fn refused_instructions_and_why() {
        let cases = [
            (0xc85f_fc02, Refusal::Exclusive),       // LDAXR (R0), R2
            (0x885f_7c02, Refusal::Exclusive),       // LDXRW (R0), R2
            (0xc803_fc02, Refusal::Exclusive),       // STLXR R2, (R0), R3
            (0x5800_0041, Refusal::Literal),         // LDR literal into R1
            (0x9800_0041, Refusal::Literal),         // LDRSW literal
            (0xd800_0040, Refusal::Literal),         // PRFM literal
            (0xd400_0001, Refusal::Exception),       // SVC #0
            (0xd420_0000, Refusal::Exception),       // BRK #0
            (0xd440_0000, Refusal::Exception),       // HLT #0
            (0xd51b_4220, Refusal::System),          // MSR R0, NZCV
            (0xd53b_4220, Refusal::System),          // MRS DAIF, R0
            (0xd69f_03e0, Refusal::System),          // ERET
            (0xd503_205f, Refusal::Hint { op: 2 }),  // WFE
            (0xd503_203f, Refusal::Hint { op: 1 }),  // YIELD
            (0xd503_23bf, Refusal::Hint { op: 29 }), // AUTIASP
            (0xd65f_0bff, Refusal::AuthBranch),      // RETAA
            (0xd71f_0880, Refusal::AuthBranch),      // BRAA R4, R0
            (0x5c00_0040, Refusal::FloatLiteral),    // LDR D0, literal
            (0x1c00_0040, Refusal::FloatLiteral),    // LDR S0, literal
        ];
        for (w, want) in cases {
            assert_eq!(r(w), Some(want), "{w:#010x}");
        }
        assert_eq!(refusal(&[], &[0xc0, 0x03]), Some(Refusal::Undecodable));
        assert!(Refusal::Exclusive.by_kernel() && !Refusal::InExclusive.by_kernel());
    }

    /// Go's atomic add without LSE: `LDAXRW (R0), R2; ADDW R1, R2, R2; STLXRW R2, (R0),
    /// R3; CBNZ R3, -3(PC)`.
    #[test]
    fn inside_an_exclusive_sequence_is_refused() {
        let seq: [u32; 4] = [0x885f_fc02, 0x0b02_0022, 0x8803_fc02, 0x35ff_ffa3];
        let bytes: Vec<u8> = seq.iter().flat_map(|w| w.to_le_bytes()).collect();
        let at = |i: usize| refusal(&bytes[..4 * i], &bytes[4 * i..4 * i + 4]);
        assert_eq!(at(0), Some(Refusal::Exclusive));
        assert_eq!(at(1), Some(Refusal::InExclusive));
        assert_eq!(at(2), Some(Refusal::Exclusive));
        assert_eq!(at(3), None, "after the store the sequence is over");
        // A plain instruction with no exclusive load before it.
        assert_eq!(refusal(&0x8b01_0000u32.to_le_bytes(), &0x8b01_0000u32.to_le_bytes()), None);
    }

    #[test]
    fn descriptions_read_as_english() {
        let hint = crate::arch::Refusal::Arm64(Refusal::Hint { op: 2 });
        assert_eq!(hint.to_string(), "a hint instruction uprobes cannot step (HINT #2, WFE)");
        assert!(crate::arch::Refusal::Arm64(Refusal::Exclusive)
            .describe(true)
            .starts_with("exclusive loads or stores"));
    }
}
