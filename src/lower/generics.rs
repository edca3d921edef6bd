//! `func` at a shape function (check/generics.rs): the function's index in its low 32
//! bits and the link-time address of the dictionary the call passed in its high 32 (the
//! run-time address less the PIE's load bias), named in user space
//! (`Plan::function_name`). At the entry the dictionary is where the ABI put it; at a
//! return, where the entry of the same call carried it.

use super::codegen::Gen;
use super::ir::Arg;
use super::loaded::DictAt;
use super::values::Place;
use super::LowerError;
use crate::arch::abi::Location;
use crate::bpf::insn::*;
use crate::check::generics::CARRIED_DICTIONARY;
use crate::syntax::ast::Span;

impl Gen<'_> {
    /// R0 = the probed function's identity for gtrace's own records (the frames of
    /// timed calls): `func` without the dictionary.
    pub fn function_id(&mut self, span: Span) -> Result<(), LowerError> {
        let dictionary = self.attached.dictionary.take();
        let done = self.builtin(crate::check::Builtin::Func, span);
        self.attached.dictionary = dictionary;
        done
    }

    /// R0 = `index` | (dictionary - load bias) << 32.
    pub fn func_with_dictionary(&mut self, index: u32, span: Span) -> Result<(), LowerError> {
        self.dictionary_address(span)?;
        self.b.emit(alu64_imm(AluOp::Lsh, R0, 32));
        self.b.emit(alu64_imm(AluOp::Or, R0, index as i32));
        Ok(())
    }

    /// A probe that names one instantiation: ends the program unless this call passed
    /// its dictionary (at link-time address `addr`).
    pub fn only_dictionary(&mut self, addr: u64, span: Span) -> Result<(), LowerError> {
        self.b.comment(format!("only the calls that pass the dictionary at {addr:#x}"));
        self.dictionary_address(span)?;
        self.b.emit2(ld_imm64(R1, addr));
        self.b.jmp_reg_to(JmpOp::Ne, R0, R1, self.done);
        Ok(())
    }

    /// R0 = the link-time address of the dictionary this call passed.
    fn dictionary_address(&mut self, span: Span) -> Result<(), LowerError> {
        match self.attached.dictionary.clone() {
            Some(DictAt::Entry(Location::Regs(pieces))) if pieces.len() == 1 && pieces[0].size == 8 => {
                self.load_ctx_reg(R0, pieces[0].reg);
            }
            Some(DictAt::Entry(Location::Stack { offset })) => {
                let slot = self.slot(8, span)?;
                let src = self.b.vreg();
                self.load_reg(src, self.arch().stack_pointer());
                self.b.op(alu64_imm(AluOp::Add, R0, offset as i32), src, R0);
                self.read_target(&[Arg::Stack(slot), Arg::Imm(8), src.into()])?;
                self.b.emit(load(Size::DW, R0, R10, slot));
            }
            Some(DictAt::Carried) => {
                let Place::Carried { offset } = self.carried_place(CARRIED_DICTIONARY, span)? else {
                    return Err(LowerError::unsupported(span, "a dictionary that was not carried"));
                };
                self.read_carried(offset, 8, span)?;
            }
            _ => return Err(LowerError::unsupported(span, "a generic dictionary in this place")),
        }
        if let Some(bias) = self.loaded.bias {
            self.b.emit(load(Size::DW, R1, R10, bias));
            self.b.emit(alu64_reg(AluOp::Sub, R0, R1));
        }
        Ok(())
    }
}
