//! Parameters carried from a call's entry to its return. At a RET Go has reused the
//! parameters' registers, so what a return probe reads of them is read at the entry of
//! the same call and kept beside its frame (frames.rs): in the `carried` map under (g,
//! the frame's index), which the return finds once it has found its frame. A record is
//! 8 bytes (unused) then the parameters the function's return probes read, at offsets
//! fixed per function; one map update at entry writes it all.

use super::codegen::Gen;
use super::ir::Arg;
use super::loaded::{CallFrame, Slot};
use super::values::Place;
use super::{maps, LowerError};
use crate::arch::abi::{Location, PieceAt};
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::check::{Carried, Checked};
use crate::syntax::ast::Span;
use std::collections::BTreeMap;

/// The most bytes of parameters one function carries from entry to return (the record
/// is built on the eBPF stack, 512 bytes in all).
pub const MAX_CARRIED: u64 = 256;

/// What the entry of each probed function records.
#[derive(Debug, Default)]
pub struct EntryRecords {
    /// The parameters each function carries, with their offsets in its record.
    pub functions: BTreeMap<String, Vec<(Carried, u32)>>,
    /// The size of every record (the entry map's value size): the time and the most
    /// that any function carries, in whole words.
    pub size: u32,
    /// The functions whose calls open a span (spans.rs): their records hold its context
    /// before the parameters.
    pub spanned: std::collections::BTreeSet<String>,
    /// The functions whose entry reads the program's trace context (context.rs), with
    /// the index of the `on entry` instance that does.
    pub contexts: BTreeMap<String, usize>,
    /// The spanned functions' `context.Context` parameters, where they are at entry.
    pub span_ctx: BTreeMap<String, Location>,
}

impl EntryRecords {
    /// The records the return probes of `checked` need: every parameter one of a
    /// function's return probes reads, once, after the time.
    pub fn new(checked: &Checked) -> Result<EntryRecords, LowerError> {
        let mut records = EntryRecords { size: 8, ..EntryRecords::default() };
        for inst in checked.instances.iter().filter(|i| i.facts.spans_calls()) {
            for f in &inst.functions {
                records.spanned.insert(f.name.clone());
                if let Some(at) = &inst.facts.span_ctx {
                    records.span_ctx.insert(f.name.clone(), at.clone());
                }
                records.functions.entry(f.name.clone()).or_default();
                records.size = records.size.max(super::layout::CONTEXT_END);
            }
        }
        for (i, inst) in checked.instances.iter().enumerate().filter(|(_, i)| i.reads_context()) {
            for f in &inst.functions {
                records.contexts.insert(f.name.clone(), i);
                records.functions.entry(f.name.clone()).or_default();
                records.size = records.size.max(super::layout::CONTEXT_END);
            }
        }
        for inst in checked.instances.iter().filter(|i| !i.carried.is_empty()) {
            for f in &inst.functions {
                let head = records.spanned.contains(&f.name) || records.contexts.contains_key(&f.name);
                let first = if head { u64::from(super::layout::CONTEXT_END) } else { 8 };
                let fields = records.functions.entry(f.name.clone()).or_default();
                for c in &inst.carried {
                    if fields.iter().any(|(have, _)| have.name == c.name) {
                        continue;
                    }
                    let end =
                        fields.last().map_or(first, |(last, off)| u64::from(*off) + last.size.next_multiple_of(8));
                    if end + c.size - 8 > MAX_CARRIED {
                        return Err(LowerError::TooMuchCarried { span: inst.span, function: f.name.clone() });
                    }
                    fields.push((c.clone(), end as u32));
                }
                let used = fields.last().map_or(first, |(last, off)| u64::from(*off) + last.size.next_multiple_of(8));
                records.size = records.size.max(used as u32);
            }
        }
        Ok(records)
    }

    /// The functions whose entries carry parameters or open a span, with their fields.
    pub fn carrying(&self) -> impl Iterator<Item = (&String, &Vec<(Carried, u32)>)> {
        self.functions
            .iter()
            .filter(|(name, f)| !f.is_empty() || self.spanned.contains(*name) || self.contexts.contains_key(*name))
    }
}

impl Gen<'_> {
    /// At a function's entry, after its frame is pushed: carried[(g, frame)] = the
    /// parameters its returns read, built on the stack and written with one map update;
    /// first the span it opens (`spanned`) and the trace context read before the frame
    /// was pushed (`read_context`).
    /// `trace_context(...)`'s body (context.rs), at the very start of the entry
    /// program: the header parsed while the stack is still empty.
    pub fn read_context(&mut self, body: &crate::syntax::ast::Block, span: Span) -> Result<(), LowerError> {
        // The parsed header outlives the statement (whose slots are freed after it).
        let parsed = self.slot(32, span)?;
        for i in 0..4 {
            self.b.emit(store_imm(Size::DW, R10, parsed + 8 * i, 0));
        }
        self.spans.context_parsed = Some(parsed);
        self.spans.reading_context = true;
        self.block(body)?;
        self.spans.reading_context = false;
        Ok(())
    }

    pub fn store_carried(
        &mut self,
        fields: &[(Carried, u32)],
        size: u32,
        spanned: bool,
        span: Span,
    ) -> Result<(), LowerError> {
        let record = self.slot(size, span)?;
        for i in 0..(size / 8) as i16 {
            self.b.emit(store_imm(Size::DW, R10, record + 8 * i, 0));
        }
        if spanned {
            self.open_span(record, span)?;
        }
        if let Some(parsed) = self.spans.context_parsed.take() {
            self.apply_trace_context(parsed, record, spanned, span)?;
        }
        for (c, off) in fields {
            self.b.comment(format!("carry `{}` to the return", c.name));
            self.copy_at_entry(&c.location, record + *off as i16, c.size, span)?;
        }
        let at = self.loaded.call.frame(span)?;
        let key = self.frame_key(at, span)?;
        self.b.call(
            BPF_FUNC_map_update_elem,
            &[Arg::Map(maps::CARRIED), Arg::Stack(key), Arg::Stack(record), Arg::Imm(BPF_ANY)],
        );
        self.count_refused_update(maps::CARRIED, span)?;
        Ok(())
    }

    /// Copies the `size`-byte value at `location` (at the function's entry) to the stack
    /// at `to`.
    pub(super) fn copy_at_entry(
        &mut self,
        location: &Location,
        to: i16,
        size: u64,
        span: Span,
    ) -> Result<(), LowerError> {
        match location {
            Location::Regs(pieces) => {
                for p in pieces {
                    self.load_ctx_reg(R1, p.reg);
                    self.store_piece(to + p.offset as i16, p.size, span)?;
                }
            }
            Location::Stack { offset } => {
                let src = self.b.vreg();
                self.load_reg(src, self.arch().stack_pointer());
                self.b.op(alu64_imm(AluOp::Add, R0, *offset as i32), src, R0);
                self.read_target(&[Arg::Stack(to), Arg::Imm(size as i32), src.into()])?;
            }
            Location::Pieces(pieces) => {
                for p in pieces {
                    match &p.at {
                        PieceAt::Reg(reg) => {
                            self.load_ctx_reg(R1, *reg);
                            self.store_piece(to + p.offset as i16, p.size, span)?;
                        }
                        PieceAt::Stack { offset } => {
                            let src = self.b.vreg();
                            self.load_reg(src, self.arch().stack_pointer());
                            self.b.op(alu64_imm(AluOp::Add, R0, *offset as i32), src, R0);
                            let at = Arg::Stack(to + p.offset as i16);
                            self.read_target(&[at, Arg::Imm(p.size as i32), src.into()])?;
                        }
                        PieceAt::Missing => {}
                    }
                }
            }
            Location::Empty => {}
            Location::Unreadable { reason } => return Err(LowerError::unsupported(span, reason)),
        }
        Ok(())
    }

    /// Stores the low `size` bytes of R1 at R10 + `to`.
    fn store_piece(&mut self, to: i16, size: u64, span: Span) -> Result<(), LowerError> {
        let width = match size {
            1 => Size::B,
            2 => Size::H,
            4 => Size::W,
            8 => Size::DW,
            _ => return Err(LowerError::unsupported(span, "a register piece of this size")),
        };
        self.b.emit(store_reg(width, R10, to, R1));
        Ok(())
    }

    /// At a return, after its frame `at` was found: a slot holding a pointer to the
    /// parameters its entry carried (skipping the probe when there are none: the entry
    /// was not seen).
    pub fn load_carried(&mut self, at: CallFrame, span: Span) -> Result<Slot, LowerError> {
        let record = self.slot(8, span)?;
        self.b.comment("the parameters this call's entry carried");
        let key = self.frame_key(at, span)?;
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(maps::CARRIED), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, self.done);
        self.b.emit(store_reg(Size::DW, R10, record, R0));
        Ok(record)
    }

    /// Where the carried parameter `name` is: in the entry record.
    pub fn carried_place(&self, name: &str, span: Span) -> Result<Place, LowerError> {
        let offset = self
            .attached
            .carried
            .iter()
            .find(|(c, _)| c.name == name)
            .map(|(_, off)| *off)
            .ok_or_else(|| LowerError::unsupported(span, "a parameter that was not carried from the entry"))?;
        Ok(Place::Carried { offset: u64::from(offset) })
    }

    /// R0 = the `size`-byte scalar at `offset` in the entry record.
    pub(super) fn read_carried(&mut self, offset: u64, size: u64, span: Span) -> Result<(), LowerError> {
        let record = self.loaded.call.returned().and_then(|r| r.entry);
        let record = record.ok_or_else(|| LowerError::unsupported(span, "parameters outside a return"))?;
        let (width, off) = match size {
            1 => (Size::B, offset),
            2 => (Size::H, offset),
            4 => (Size::W, offset),
            _ => (Size::DW, offset),
        };
        let off = i16::try_from(off).map_err(|_| LowerError::TooLarge { span, bytes: off as usize })?;
        self.b.emit(load(Size::DW, R1, R10, record));
        self.b.emit(load(width, R0, R1, off));
        Ok(())
    }
}
