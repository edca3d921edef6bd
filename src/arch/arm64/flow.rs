//! The control flow of arm64 machine code: for each instruction, where the processor may
//! go next (`arch::Flow`).

use super::insn::{self, Kind};
use crate::arch::{Flow, FlowInsn};

/// The instructions of `code`, loaded at `addr`, with their flow. None when `code` is
/// not whole instructions.
pub fn decode(code: &[u8], addr: u64) -> Option<Vec<FlowInsn>> {
    if !code.len().is_multiple_of(insn::SIZE) {
        return None;
    }
    let mut out = Vec::with_capacity(code.len() / insn::SIZE);
    let mut prev = None;
    for (i, bytes) in code.chunks_exact(insn::SIZE).enumerate() {
        let w = insn::word(bytes)?;
        let at = addr + (i * insn::SIZE) as u64;
        let kind = insn::kind(w, at);
        let flow = match kind {
            Kind::Jump(to) => Flow::Jump(to),
            Kind::Branch(to) => Flow::Branch(to),
            Kind::Call(to) => Flow::Call(to),
            Kind::JumpIndirect => Flow::Indirect,
            Kind::Ret | Kind::Trap => Flow::Stop,
            Kind::CallIndirect | Kind::Nop | Kind::Other => Flow::Next,
        };
        out.push(FlowInsn {
            addr: at,
            next: at + insn::SIZE as u64,
            flow,
            nop: kind == Kind::Nop,
            shuffle: insn::is_shuffle(w, prev),
            sp_store: insn::sp_store(w),
        });
        prev = Some(w);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn flows() {
        // NOOP; BEQ 2(PC); JMP -2(PC); RET; BR R4; CALL 1(PC); CALL (R4); zero padding
        let code =
            bytes(&[0xd503_201f, 0x5400_0040, 0x17ff_fffe, 0xd65f_03c0, 0xd61f_0080, 0x9400_0001, 0xd63f_0080, 0]);
        let got = decode(&code, 0x1000).unwrap();
        let flows: Vec<Flow> = got.iter().map(|i| i.flow).collect();
        assert_eq!(
            flows,
            [
                Flow::Next,
                Flow::Branch(0x100c),
                Flow::Jump(0x1000),
                Flow::Stop,
                Flow::Indirect,
                Flow::Call(0x1018),
                Flow::Next,
                Flow::Stop
            ]
        );
        assert!(got[0].nop && !got[1].nop);
        assert_eq!(got[1].next, 0x1008);
    }

    #[test]
    fn an_address_after_adrp_is_a_shuffle() {
        // ADRP 180224(PC), R3; ADD $2539, R3, R3; ADD $1, R3, R3
        let got = decode(&bytes(&[0x9000_0163, 0x9127_ac63, 0x9100_0463]), 0).unwrap();
        assert_eq!(got.iter().map(|i| i.shuffle).collect::<Vec<_>>(), [true, true, false]);
    }

    #[test]
    fn part_of_a_word_is_none() {
        assert!(decode(&[0xc0, 0x03, 0x5f], 0x1000).is_none());
        assert_eq!(decode(&[], 0x1000), Some(Vec::new()));
    }
}
