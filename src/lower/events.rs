//! Events: `print`, `printf`, `print(@m)`, `clear(@m)` and `exit()` as records sent
//! through the ring buffer, built in the per-CPU scratch buffer. Printed events pass
//! `--rate` first; a record the full ring buffer refuses is counted.

use super::codegen::Gen;
use super::ir::{Arg, VReg};
use super::maps;
use super::LowerError;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::check::ty::Ty;
use crate::plan::{EventKind, EventSpec, Field, ValueType};
use crate::syntax::ast::*;

/// What goes in an event record: an argument, a parameter (for `args`, or a span's
/// error), or the panic's value (a span that a panic ended).
enum Item<'e> {
    Expr(&'e Expr),
    Arg(crate::check::ArgInfo),
    Panic,
}

/// An event record's items, and the span header it begins with.
#[derive(Default)]
struct Record<'e> {
    items: Vec<Item<'e>>,
    /// Bytes of span header after the event's id.
    header: u32,
    /// A call's span: where its frame and its record are (`span_sources`).
    sources: Option<(i16, i16)>,
    /// An ended span: the slot of its start.
    start: Option<i16>,
    /// An ended span's parent: its parsed slot, and whether it came from a traceparent.
    parent: Option<(i16, bool)>,
}

impl Gen<'_> {
    /// Sends an event record [id, values...] through the ring buffer, built in the
    /// per-CPU scratch buffer.
    pub(super) fn event(&mut self, mut kind: EventKind, args: &[Expr], span: Span) -> Result<(), LowerError> {
        let ended = self.spans.ended.take();
        let mut rec = self.span_items(&mut kind, ended.as_ref(), span)?;
        let mut labels = Vec::new();
        for a in args {
            if *self.facts.ty(a.id) == Ty::Args {
                for info in &self.facts.args {
                    labels.push(Some(info.name.clone()));
                    rec.items.push(Item::Arg(info.clone()));
                }
            } else {
                labels.push(None);
                rec.items.push(Item::Expr(a));
            }
        }
        if let EventKind::Print { labels: l } = &mut kind {
            *l = labels;
        }
        let (fields, size) = self.event_fields(&kind, &rec, span)?;
        let limited = matches!(kind, EventKind::Printf { .. } | EventKind::Print { .. });
        let id = self.events.len();
        self.events.push(EventSpec { kind, fields: fields.clone(), size });
        let skip = self.b.new_label();
        if limited {
            self.rate_limit(skip, span)?;
        }
        let zkey = self.slot(8, span)?;
        self.b.emit(store_imm(Size::DW, R10, zkey, 0));
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(maps::SCRATCH), Arg::Stack(zkey)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, skip);
        self.b.emit(mov64_reg(R8, R0));
        self.b.emit(store_imm(Size::DW, R8, 0, id as i32));
        self.write_items(&rec, &fields, span)?;
        let flags = self.wake_flags();
        let args = [Arg::Map(maps::EVENTS), R8.into(), Arg::Imm(size as i32), flags.into()];
        self.b.call(BPF_FUNC_ringbuf_output, &args);
        // A full ring buffer refuses the record: counted, said at exit.
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, skip);
        if let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) {
            self.count(crate::plan::Counter::EventsLost { program }, span)?;
        }
        self.b.bind(skip);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// A span's record: its header, then its status (an ended span's `error:`, a call's
    /// panic or error result); an ended span's start and parent are evaluated here.
    fn span_items<'e>(
        &mut self,
        kind: &mut EventKind,
        ended_span: Option<&'e super::codegen::Ended>,
        span: Span,
    ) -> Result<Record<'e>, LowerError> {
        let mut rec = Record::default();
        if let (EventKind::Span { status, ended, .. }, Some(e)) = (&mut *kind, ended_span) {
            // An ended span: its start, now; its status, `error:`; its parent, `parent:`.
            let slot = self.slot(8, span)?;
            self.expr(&e.start)?;
            self.b.emit(store_reg(Size::DW, R10, slot, R0));
            rec.start = Some(slot);
            if let Some(tp) = &e.parent {
                let parsed = self.slot(32, span)?;
                for i in 0..4 {
                    self.b.emit(store_imm(Size::DW, R10, parsed + 8 * i, 0));
                }
                if e.parent_ctx {
                    self.sdk_parent_of(tp, parsed, span)?;
                } else {
                    self.parse_traceparent(tp, parsed, span)?;
                }
                rec.parent = Some((parsed, !e.parent_ctx));
            }
            rec.header = super::layout::HEADER_END - 8;
            *ended = true;
            if let Some(e) = &e.error {
                rec.items.push(Item::Expr(e));
            }
            *status = !rec.items.is_empty();
        } else if let EventKind::Span { status, panic, .. } = kind {
            rec.sources = Some(self.span_sources(span)?);
            rec.header = super::layout::HEADER_END - 8;
            *panic = self.loaded.call.panicked().is_some();
            if *panic {
                rec.items.push(Item::Panic);
            } else if let Some(e) = &self.facts.span_error {
                rec.items.push(Item::Arg(e.clone()));
            }
            *status = !rec.items.is_empty();
        }
        Ok(rec)
    }

    /// The fields of `rec`'s items, after its id and header, and the record's size: a
    /// whole Go value captured in the room the record has left.
    fn event_fields(&mut self, kind: &EventKind, rec: &Record, span: Span) -> Result<(Vec<Field>, u32), LowerError> {
        let items = &rec.items;
        let verbs = printf_verbs(kind);
        let mut fields = Vec::new();
        let mut offset: u32 = 8 + rec.header;
        for (i, item) in items.iter().enumerate() {
            let (ty, at) = match item {
                Item::Expr(a) => {
                    let t = self.facts.ty(a.id).clone();
                    let verb = verbs.get(i).copied().unwrap_or('v');
                    match self.whole_value(a, &t, verb) {
                        Some(id) => {
                            // What is left of the record (each field is written at a
                            // 16-bit offset), less room for the values after this one.
                            let after = 64 * (items.len() - i - 1) as u32;
                            let room = (i16::MAX as u32).saturating_sub(offset + after);
                            let capture = crate::capture::plan(self.types, id, self.bounds, room);
                            if capture.cut_for_room > 0 {
                                self.notes.push((a.span, capture.cut_for_room));
                            }
                            (ValueType::Go { capture }, a.span)
                        }
                        None => (t.value_type(), a.span),
                    }
                }
                Item::Arg(info) => (info.ty.value_type(), span),
                Item::Panic => (crate::plan::ValueType::Interface, span),
            };
            let size = ty.size().saturating_add(7) / 8 * 8;
            fields.push(Field { offset, ty });
            offset = offset.saturating_add(size);
            // Every field is written at an instruction's 16-bit offset from the record.
            super::offset(at, 0, offset as usize)?;
        }
        Ok((fields, offset))
    }

    /// Writes the span header and the items of `rec` at their `fields` in the record R8
    /// points at.
    fn write_items(&mut self, rec: &Record, fields: &[Field], span: Span) -> Result<(), LowerError> {
        if let Some((frame, record)) = rec.sources {
            self.span_header(frame, record, span)?;
        }
        if let Some(start) = rec.start {
            self.ended_span_header(start, rec.parent, span)?;
        }
        for (item, f) in rec.items.iter().zip(fields) {
            match (item, &f.ty) {
                (Item::Panic, _) => {
                    let value = self.loaded.call.panicked().map_or(0, |p| p.value);
                    let place = super::values::Place::Stack { slot: value, offset: 0 };
                    self.interface_from_place(&place, true, R8, f.offset as i16, span)?;
                }
                // Checked above: every field ends within an i16 offset.
                (Item::Expr(a), ValueType::Go { capture }) => self.capture_to(a, capture, f.offset as i16)?,
                (Item::Expr(a), _) => self.value_to(a, R8, f.offset as i16)?,
                (Item::Arg(info), _) => self.arg_to(info, R8, f.offset as i16, span)?,
            }
        }
        Ok(())
    }

    /// The ring buffer's wake-up flag for a record: none (the trace loop drains the
    /// buffer every few milliseconds; a wake-up costs the probe over a microsecond) until
    /// a quarter of the buffer waits, then a forced one, so that a burst is read before
    /// the buffer fills. Clobbers R0-R5.
    fn wake_flags(&mut self) -> VReg {
        self.b.call(BPF_FUNC_ringbuf_query, &[Arg::Map(maps::EVENTS), Arg::Imm(BPF_RB_AVAIL_DATA)]);
        let flags = self.b.vreg();
        self.b.op(mov64_imm(R0, BPF_RB_NO_WAKEUP), flags, R0);
        let quiet = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Lt, R0, (maps::EVENTS_BYTES / 4) as i32, quiet);
        self.b.op(mov64_imm(R0, BPF_RB_FORCE_WAKEUP), flags, R0);
        self.b.bind(quiet);
        flags
    }

    /// The Go type of `e` when it is printed whole with `verb`: structs, arrays, slices,
    /// maps, channels and funcs always, pointers with `%v` (fmt prints `&{...}`).
    fn whole_value(&self, e: &Expr, t: &Ty, verb: char) -> Option<crate::gotypes::TypeId> {
        match t {
            Ty::Go(id) => Some(*id),
            // An interface prints its dynamic value as fmt does (%s keeps its own record).
            Ty::Pointer { elem: Some(_) } | Ty::Interface if verb == 'v' && self.is_go_value(e) => self.go_type_of(e),
            _ => None,
        }
    }

    /// Writes one parameter of `args` at `base + off`.
    fn arg_to(&mut self, info: &crate::check::ArgInfo, base: Reg, off: i16, span: Span) -> Result<(), LowerError> {
        let mark = self.b.frame.mark();
        let place = if info.at_entry {
            self.carried_place(&info.name, span)?
        } else {
            self.location_place(&info.name, &info.location, span)?
        };
        match &info.ty {
            Ty::Str { max } => self.string_from_place(&place, base, off, *max, span)?,
            Ty::Interface => {
                let empty =
                    matches!(self.types.get(info.type_id).kind, crate::gotypes::TypeKind::Interface { empty: true });
                self.interface_from_place(&place, empty, base, off, span)?;
            }
            t => {
                let size = self.types.get(info.type_id).size.clamp(1, 8);
                self.read_scalar(&place, size, t.is_signed())?;
                self.b.emit(store_reg(Size::DW, base, off, R0));
            }
        }
        self.b.frame.release(mark);
        Ok(())
    }
}

/// The verb each value of a `printf` is printed with (whole Go values are copied for
/// `%v`); none for `print`.
fn printf_verbs(kind: &EventKind) -> Vec<char> {
    let EventKind::Printf { format } = kind else { return Vec::new() };
    let Ok(pieces) = crate::syntax::format::parse(format) else { return Vec::new() };
    pieces
        .into_iter()
        .filter_map(|p| match p {
            crate::syntax::format::Piece::Verb(v) => Some(v.verb),
            _ => None,
        })
        .collect()
}
