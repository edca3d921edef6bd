//! Copying a Go map's entries into an event record for `print(m)` and `%v`
//! (capture.rs lays out `NodeKind::Map`): its length, then the walk of mapwalk.rs over
//! at most `MAX_PRINT_GROUPS` buckets or groups, copying each full slot's key and element
//! until `--max-elems` entries are copied, then the strings in them. fmt prints a map
//! sorted by key; the output sorts what was copied (output/gofmt.rs) and shows `...` when
//! the map has more entries than were copied.

use super::codegen::Gen;
use super::ir::Arg;
use super::mapwalk::{slots, Labels, MIN_TOP_HASH, SLOTS};
use super::LowerError;
use crate::bpf::insn::*;
use crate::capture::{Node, NodeKind};
use crate::gobin::MapLayout;
use crate::gotypes::TypeKind;
use crate::syntax::ast::Span;

/// Buckets or groups a printed map's walk looks at, at most.
pub const MAX_PRINT_GROUPS: i32 = 64;

impl Gen<'_> {
    /// The entries of the map whose node is `node` (its header's address already at
    /// R8 + `off` + `node.at`), as the node lays them out.
    pub(super) fn capture_map(&mut self, node: &Node, off: i16, span: Span) -> Result<(), LowerError> {
        let NodeKind::Map { len_at, n_at, entries_at, entry, elem_off, entries } = &node.kind else {
            return Ok(());
        };
        let TypeKind::Map { key: Some(key), elem: Some(elem) } = self.types.get(node.ty).kind else {
            return Ok(());
        };
        let layout = self.binary.map_layout.ok_or(LowerError::NoMapLayout { span })?;
        let at = |x: u32| super::offset(span, off, x as usize);
        let (len_at, n_at, entries_at) = (at(*len_at)?, at(*n_at)?, at(*entries_at)?);
        let (ks, es) = (self.types.get(key).size as i32, self.types.get(elem).size as i32);
        let mark = self.b.frame.mark();
        let s = self.scan_slots(slots(self.types, &layout, key, elem), None, span)?;
        let l = Labels::new(&mut self.b);
        self.b.emit(store_imm(Size::DW, R8, len_at, 0));
        self.b.emit(store_imm(Size::DW, R8, n_at, 0));
        self.b.emit(load(Size::DW, R3, R8, at(node.at)?));
        self.b.emit(store_reg(Size::DW, R10, s.cur, R3));
        self.b.jmp_imm_to(JmpOp::Eq, R3, 0, l.done);
        // The count (hmap.count, maps.Map.used: the first word of both headers).
        self.read_into(len_at, 8, R3, span)?;
        self.walk_start(&s, &layout, &l, MAX_PRINT_GROUPS, l.done)?;
        self.word_at(&s, s.cur, 0, 8)?;
        self.b.emit(store_reg(Size::DW, R10, s.ctrl, R0));
        let max = entries.len() as i32;
        for i in 0..SLOTS {
            let next = self.b.new_label();
            self.b.emit(load(Size::DW, R1, R10, s.ctrl));
            self.b.emit(alu64_imm(AluOp::Rsh, R1, 8 * i as i32));
            self.b.emit(alu64_imm(AluOp::And, R1, 0xff));
            match layout {
                MapLayout::Buckets { .. } => self.b.jmp_imm_to(JmpOp::Lt, R1, MIN_TOP_HASH, next),
                MapLayout::Swiss { .. } => self.b.jmp_imm_to(JmpOp::Set, R1, 0x80, next),
            }
            // Room for one more: entry n at entries_at + n * entry.
            self.b.emit(load(Size::DW, R1, R8, n_at));
            self.b.jmp_imm_to(JmpOp::Ge, R1, max, l.done);
            self.b.emit(alu64_imm(AluOp::Mul, R1, *entry as i32));
            self.b.emit(store_reg(Size::DW, R10, s.tmp, R1));
            for (from, to, size) in [
                (s.slots.key + i * s.slots.key_stride, 0, ks),
                (s.slots.elem + i * s.slots.elem_stride, *elem_off as i32, es),
            ] {
                if size == 0 {
                    continue;
                }
                // The entry's place in the record: R8 + the entry's offset + this part's.
                let (dst, at) = (self.b.vreg(), self.b.vreg());
                self.b.op(mov64_reg(R0, R0), dst, R8);
                self.b.load_stack(Size::DW, at, s.tmp);
                self.b.op(alu64_reg(AluOp::Add, R0, R0), dst, at);
                self.b.op(alu64_imm(AluOp::Add, R0, i32::from(entries_at) + to), dst, R0);
                let src = self.b.vreg();
                self.b.load_stack(Size::DW, src, s.cur);
                self.b.op(alu64_imm(AluOp::Add, R0, from as i32), src, R0);
                self.read_target(&[dst.into(), Arg::Imm(size), src.into()])?;
            }
            self.b.emit(load(Size::DW, R1, R8, n_at));
            self.b.emit(alu64_imm(AluOp::Add, R1, 1));
            self.b.emit(store_reg(Size::DW, R8, n_at, R1));
            self.b.bind(next);
            self.b.emit(mov64_imm(R0, 0));
        }
        self.walk_step_end(&s, &layout, &l)?;
        self.b.bind(l.done);
        self.b.emit(mov64_imm(R0, 0));
        self.b.frame.release(mark);
        // What the copied keys and elements point at (their strings' bytes).
        for (i, (k, v)) in entries.iter().enumerate() {
            let skip = self.b.new_label();
            self.b.emit(load(Size::DW, R1, R8, n_at));
            self.b.jmp_imm_to(JmpOp::Le, R1, i as i32, skip);
            self.follow(k, off, span)?;
            self.follow(v, off, span)?;
            self.b.bind(skip);
            self.b.emit(mov64_imm(R0, 0));
        }
        Ok(())
    }
}
