//! Values read back from where probes stored them: a `self.x` variable or an element of
//! a plain map (`@m[k]`) holds the whole record of what was assigned (a string, a stack,
//! an interface), and reading it copies that record as it was stored, not the value the
//! same expression would have now.

use super::codegen::Gen;
use super::ir::Arg;
use super::LowerError;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::syntax::ast::*;

impl Gen<'_> {
    /// Copies the stored record `e` names (a self variable or a plain map's element) to
    /// `base + off`: `size` bytes, zeros when nothing is stored there. False (and nothing
    /// emitted) when `e` names no stored value.
    pub fn stored_record_to(&mut self, e: &Expr, base: Reg, off: i16, size: u32) -> Result<bool, LowerError> {
        let mark = self.b.frame.mark();
        match &e.kind {
            ExprKind::SelfVar(name) => self.lookup_self(name, e.span)?,
            ExprKind::Map(m) => {
                let um = self.user_map(&m.name.name, m.span)?;
                let key = self.key(&um, &m.keys, e.span)?;
                if let Some(s) = &um.slots {
                    // An 8-byte number, kept in its slot or the spill.
                    super::offset(e.span, off, 8)?;
                    self.slotted_read(&um, s, key, e.span)?;
                    self.b.emit(store_reg(Size::DW, base, off, R0));
                    self.b.frame.release(mark);
                    return Ok(true);
                }
                self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
            }
            _ => return Ok(false),
        }
        let bytes = (size as usize).next_multiple_of(8);
        super::offset(e.span, off, bytes)?;
        let words = (bytes / 8) as i16;
        for i in 0..words {
            self.b.emit(store_imm(Size::DW, base, off + 8 * i, 0));
        }
        let end = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, end);
        for i in 0..words {
            self.b.emit(load(Size::DW, R1, R0, 8 * i));
            self.b.emit(store_reg(Size::DW, base, off + 8 * i, R1));
        }
        self.b.bind(end);
        self.b.frame.release(mark);
        Ok(true)
    }

    /// A stored string's record cut to `max` bytes: its length word clamped too.
    pub fn stored_string_to(&mut self, e: &Expr, base: Reg, off: i16, have: u32, max: u32) -> Result<bool, LowerError> {
        if !self.stored_record_to(e, base, off, 8 + have.min(max))? {
            return Ok(false);
        }
        if have > max {
            let short = self.b.new_label();
            self.b.emit(load(Size::DW, R1, base, off));
            self.b.jmp_imm_to(JmpOp::Le, R1, max as i32, short);
            self.b.emit(store_imm(Size::DW, base, off, max as i32));
            self.b.bind(short);
        }
        Ok(true)
    }
}
