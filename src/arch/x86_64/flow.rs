//! The control flow of x86-64 machine code (iced-x86): for each instruction, where the
//! processor may go next (`arch::Flow`).

use crate::arch::{Flow, FlowInsn};
use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register,
};

/// The instructions of `code`, loaded at `addr`, with their flow. None when the bytes do
/// not decode (not code, or cut short).
pub fn decode(code: &[u8], addr: u64) -> Option<Vec<FlowInsn>> {
    let mut decoder = Decoder::with_ip(64, code, addr, DecoderOptions::NONE);
    let mut out = Vec::new();
    while decoder.can_decode() {
        let ins = decoder.decode();
        if ins.is_invalid() {
            return None;
        }
        out.push(flow_insn(&ins));
    }
    Some(out)
}

/// One decoded instruction and where control goes after it.
pub(super) fn flow_insn(ins: &Instruction) -> FlowInsn {
    let flow = match ins.flow_control() {
        FlowControl::Call => Flow::Call(ins.near_branch_target()),
        FlowControl::Next | FlowControl::IndirectCall => Flow::Next,
        FlowControl::UnconditionalBranch => Flow::Jump(ins.near_branch_target()),
        FlowControl::ConditionalBranch => Flow::Branch(ins.near_branch_target()),
        FlowControl::IndirectBranch => Flow::Indirect,
        FlowControl::Return | FlowControl::Interrupt | FlowControl::Exception => Flow::Stop,
        FlowControl::XbeginXabortXend => Flow::Next,
    };
    FlowInsn {
        addr: ins.ip(),
        next: ins.next_ip(),
        flow,
        nop: ins.mnemonic() == Mnemonic::Nop,
        shuffle: is_shuffle(ins),
        sp_store: sp_store(ins),
    }
}

/// The bytes `ins` writes at RSP + displacement, if it writes memory addressed so.
fn sp_store(ins: &Instruction) -> Option<(i64, u32)> {
    if ins.memory_base() != Register::RSP || ins.memory_index() != Register::None {
        return None;
    }
    let i = (0..ins.op_count()).find(|i| ins.op_kind(*i) == OpKind::Memory)?;
    let access = InstructionInfoFactory::new().info(ins).op_access(i);
    if !matches!(access, OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite | OpAccess::ReadCondWrite) {
        return None;
    }
    let size = ins.memory_size().size();
    (size > 0).then_some((ins.memory_displacement64() as i64, size as u32))
}

fn is_shuffle(ins: &Instruction) -> bool {
    use Mnemonic::*;
    let stack_or_plain = |i: u32| match ins.op_kind(i) {
        OpKind::Register => true,
        OpKind::Memory => {
            matches!(ins.memory_base(), Register::RSP | Register::RBP) && ins.memory_index() == Register::None
        }
        OpKind::Immediate8 | OpKind::Immediate16 | OpKind::Immediate32 | OpKind::Immediate64 => true,
        OpKind::Immediate8to32 | OpKind::Immediate8to64 | OpKind::Immediate32to64 => true,
        _ => false,
    };
    match ins.mnemonic() {
        Mov | Movzx | Movsx | Movsxd | Movups | Movaps | Movsd | Movss | Movq | Movd => {
            (0..ins.op_count()).all(stack_or_plain)
        }
        // The address of a global or a function (LEAQ sym(IP)) or of a stack slot.
        Lea => ins.memory_base() == Register::RIP || stack_or_plain(1),
        // Zeroing a register: XORL AX, AX.
        Xor | Xorps | Pxor => {
            ins.op_count() == 2 && ins.op_kind(1) == OpKind::Register && ins.op0_register() == ins.op1_register()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows() {
        // NOP; JE +2 (to 0x1005); JMP -5 (to 0x1000); RET; JMP RAX; CALL +0 (to 0x100d)
        let code = [0x90, 0x74, 0x02, 0xeb, 0xfb, 0xc3, 0xff, 0xe0, 0xe8, 0, 0, 0, 0];
        let got = decode(&code, 0x1000).unwrap();
        let flows: Vec<Flow> = got.iter().map(|i| i.flow).collect();
        assert_eq!(
            flows,
            [Flow::Next, Flow::Branch(0x1005), Flow::Jump(0x1000), Flow::Stop, Flow::Indirect, Flow::Call(0x100d)]
        );
        assert!(got[0].nop && !got[1].nop);
        assert_eq!(got[1].next, 0x1003);
    }

    #[test]
    fn shuffles() {
        let is = |code: &[u8]| decode(code, 0x1000).unwrap()[0].shuffle;
        assert!(is(&[0x48, 0x8b, 0x44, 0x24, 0x28])); // MOVQ 0x28(SP), AX
        assert!(is(&[0x48, 0x89, 0xc2])); // MOVQ AX, DX
        assert!(is(&[0x31, 0xc9])); // XORL CX, CX
        assert!(is(&[0x48, 0x8d, 0x05, 0, 0, 0, 0])); // LEAQ sym(IP), AX
        assert!(!is(&[0x48, 0x8b, 0x50, 0x10])); // MOVQ 0x10(AX), DX: a field
        assert!(!is(&[0x48, 0xff, 0x05, 0, 0, 0, 0])); // INCQ sym(IP)
        assert!(!is(&[0x31, 0xd1])); // XORL DX, CX
    }

    #[test]
    fn stores_to_the_stack() {
        let store = |code: &[u8]| decode(code, 0x1000).unwrap()[0].sp_store;
        assert_eq!(store(&[0x48, 0x89, 0x44, 0x24, 0x28]), Some((0x28, 8))); // MOVQ AX, 0x28(SP)
        assert_eq!(store(&[0x88, 0x5c, 0x24, 0x30]), Some((0x30, 1))); // MOVB BL, 0x30(SP)
        assert_eq!(store(&[0x44, 0x0f, 0x11, 0x7c, 0x24, 0x20]), Some((0x20, 16))); // MOVUPS X15, 0x20(SP)
        assert_eq!(store(&[0x48, 0x8b, 0x44, 0x24, 0x28]), None); // MOVQ 0x28(SP), AX: a load
        assert_eq!(store(&[0x48, 0x89, 0x45, 0x08]), None); // MOVQ AX, 8(BP)
    }

    #[test]
    fn garbage_is_none() {
        assert!(decode(&[0x48, 0x8b], 0x1000).is_none());
    }
}
