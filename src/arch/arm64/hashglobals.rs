//! Where the Go runtime keeps its map hash keys on arm64, read from the code of its
//! 8-byte key hash (for binaries without a symbol table): `runtime.memhash64` (Go 1.17
//! to 1.26) loads the bool `useAeshash` (`MOVB runtime·useAeshash(SB), R10`) and takes
//! the address of `aeskeysched` (`MOVD $runtime·aeskeysched(SB), R3`); Go 1.27 splits
//! the two between `internal/runtime/maps.MemHash64` and `memHash64AES`. A global's
//! address is an `ADRP` (its 4 KiB page, PC-relative) completed by the low 12 bits in
//! the `ADD` or the load that uses that register, so both give link-time addresses.

use super::insn::{bits, is, word, SIZE};

/// The globals the words of `code` (at `addr`) reach through an `ADRP`, in order:
/// `(address, how)`. An address made by `ADRP` and `ADD` and then loaded from (Go 1.17:
/// `ADD $lo, R27, R27; MOVB (R27), R0`) counts as the load, not as an address taken.
fn globals(code: &[u8], addr: u64) -> Vec<(u64, Access)> {
    // Per register: the page an ADRP put there, or the address an ADD completed (with
    // its entry in `out`).
    let mut page: [Option<u64>; 32] = [None; 32];
    let mut exact: [Option<(u64, usize)>; 32] = [None; 32];
    let mut out = Vec::new();
    for (i, chunk) in code.chunks_exact(SIZE).enumerate() {
        let Some(w) = word(chunk) else { break };
        let at = addr + (i * SIZE) as u64;
        let (rd, rn) = (bits(w, 0, 5) as usize, bits(w, 5, 5) as usize);
        if is(w, 0x9f00_0000, 0x9000_0000) {
            // ADRP: immhi (bits 5-23) : immlo (bits 29-30), pages from this one.
            let imm = (bits(w, 5, 19) << 2 | bits(w, 29, 2)) as i64;
            let pages = (imm << 43) >> 43;
            page[rd] = Some((at & !0xfff).wrapping_add_signed(pages << 12));
            exact[rd] = None;
            continue;
        }
        let access = if is(w, 0xff80_0000, 0x9100_0000) {
            // ADD Xd, Xn, #imm12 (LSL #12 when bit 22).
            Some((u64::from(bits(w, 10, 12)) << (12 * bits(w, 22, 1)), Access::Address))
        } else if is(w, 0xff00_0000, 0x3900_0000) && bits(w, 22, 2) != 0 {
            // LDRB, LDRSB (unsigned offset, unscaled for bytes).
            Some((u64::from(bits(w, 10, 12)), Access::Byte))
        } else if is(w, 0xffc0_0000, 0xf940_0000) {
            // LDR Xt (unsigned offset, scaled by 8).
            Some((u64::from(bits(w, 10, 12)) * 8, Access::Word))
        } else {
            None
        };
        match (access, page[rn], exact[rn]) {
            (Some((low, Access::Address)), Some(p), _) => {
                out.push((p + low, Access::Address));
                (page[rd], exact[rd]) = (None, Some((p + low, out.len() - 1)));
                continue;
            }
            (Some((low, how)), Some(p), _) if how != Access::Address => out.push((p + low, how)),
            (Some((low, how)), None, Some((a, entry))) if how != Access::Address => out[entry] = (a + low, how),
            _ => {}
        }
        // Whatever writes rd leaves it no longer a page (stores write no register, but
        // none of them comes between an ADRP and its use in Go's code).
        (page[rd], exact[rd]) = (None, None);
    }
    out
}

/// How a global is reached.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Its address taken (`ADD`).
    Address,
    /// One byte loaded.
    Byte,
    /// Eight bytes loaded.
    Word,
}

/// The address of the first byte global `code` loads: `useAeshash` in `runtime.memhash64`
/// (Go 1.17 to 1.26) or `internal/runtime/maps.MemHash64` (1.27 and later).
pub fn use_aeshash(code: &[u8], addr: u64) -> Option<u64> {
    globals(code, addr).into_iter().find(|&(_, how)| how == Access::Byte).map(|(a, _)| a)
}

/// The address of the first global whose address `code` takes: `aeskeysched` in
/// `runtime.memhash64` (Go 1.17 to 1.26) or `internal/runtime/maps.memHash64AES` (1.27).
pub fn aeskeysched(code: &[u8], addr: u64) -> Option<u64> {
    globals(code, addr).into_iter().find(|&(_, how)| how == Access::Address).map(|(a, _)| a)
}

/// The address of `hashkey`, the fallback hash's keys, from the code of the 8-byte key's
/// fallback hash (`runtime.memhash64Fallback`): the lowest global it reads 8 bytes of or
/// takes the address of (it reads `hashkey[0]` and, since Go 1.23, `hashkey[1]`).
pub fn hashkey(code: &[u8], addr: u64) -> Option<u64> {
    globals(code, addr).into_iter().filter(|&(_, how)| how != Access::Byte).map(|(a, _)| a).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[u32]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn reads_the_globals_an_adrp_reaches() {
        // At 0x10000: ADRP R27, +0x2000 (0x12000); LDRSB X10, [X27, #0x123]; CBZ X10;
        // ADRP R3, +0x3000 (0x13000); ADD X3, X3, #0x456.
        let adrp = |rd: u32, pages: u32| 0x9000_0000 | (pages & 3) << 29 | (pages >> 2) << 5 | rd;
        let code = words(&[
            adrp(27, 2),
            0x3980_0000 | 0x123 << 10 | 27 << 5 | 10,
            0xb400_00aa,
            adrp(3, 3),
            0x9100_0000 | 0x456 << 10 | 3 << 5 | 3,
        ]);
        assert_eq!(use_aeshash(&code, 0x10000), Some(0x12123));
        assert_eq!(aeskeysched(&code, 0x10000), Some(0x13456));
        // LDR X1, [X2, #16] after ADRP R2: a word at page + 16; an ADD at page + 0x456.
        let code = words(&[
            adrp(2, 1),
            0xf940_0000 | 2 << 10 | 2 << 5 | 1,
            adrp(3, 3),
            0x9100_0000 | 0x456 << 10 | 3 << 5 | 3,
        ]);
        assert_eq!(hashkey(&code, 0x10000), Some(0x11010));
        // Go 1.17: ADRP R27; ADD R27, R27, #0x10; LDRSB X0, [X27]: a byte at page + 0x10.
        let code = words(&[adrp(27, 2), 0x9100_0000 | 0x10 << 10 | 27 << 5 | 27, 0x3980_0000 | 27 << 5]);
        assert_eq!((use_aeshash(&code, 0x10000), aeskeysched(&code, 0x10000)), (Some(0x12010), None));
        // A register written in between is no longer a page.
        let code = words(&[adrp(3, 3), 0xd280_0003, 0x9100_0000 | 0x456 << 10 | 3 << 5 | 3]);
        assert_eq!(aeskeysched(&code, 0x10000), None);
    }
}
