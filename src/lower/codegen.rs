//! The generator of one program (`Gen`): what it reads (the checker's facts, the maps,
//! the binary's layouts), what it keeps while it emits (locals, what the prologue
//! loaded, span state, accounting), stack slots, and every program's prologue and
//! epilogue. Each construct's lowering is an `impl Gen` of its own module: expressions
//! in expr.rs, statements in stmts.rs, Go values in values/, and so on.
//!
//! Conventions: R6 holds the program's context (`struct pt_regs *`) for the whole
//! program (`ir::conv::CTX`); helpers are called through `Func::call`, which puts their
//! arguments where the eBPF calling convention says (ir/conv.rs); an expression leaves
//! its value in R0; values that must survive a helper call
//! live in stack slots (`ir::Frame`); R8 points at the event record being built. What
//! lives in a virtual register (an aggregation's map value while it is updated, the
//! attach cookie while accounting checks it, a binary operator's left side) gets its
//! machine register from the IR's allocator.

use super::ir::{conv, Arg, Func, Item, R};
use super::loaded::{Attached, Loaded};
use super::maps::Maps;
use super::LowerError;
use crate::arch::{Arch, Reg as MReg};
use crate::bpf::builder::Label;
use crate::bpf::insn::*;
use crate::bpf::kfuncs::Kfunc;
use crate::check::binary::BinaryFacts;
use crate::check::{Facts, Name};
use crate::diag::Sources;
use crate::gotypes::Types;
use crate::plan::EventSpec;
use crate::syntax::ast::*;
use std::collections::HashMap;

pub struct Gen<'a> {
    pub b: Func,
    pub(super) facts: &'a Facts,
    pub(super) types: &'a Types,
    pub(super) maps: &'a Maps,
    pub(super) sources: &'a Sources,
    /// Every event format of the script; a record's first u64 indexes it.
    pub events: &'a mut Vec<EventSpec>,
    pub(super) locals: HashMap<String, i16>,
    /// What the program's prologue loaded for its body (loaded.rs).
    pub loaded: Loaded,
    /// What the checker learned of the binary: the runtime's layouts (g, maps), its
    /// fallback hash's constants.
    pub binary: &'a BinaryFacts,
    /// The runtime's aeshash keys, when `m[k]` hashes (maplookup.rs); None: it scans.
    pub aes: Option<crate::gobin::AesGlobals>,
    /// How much of a whole Go value `print` copies.
    pub bounds: crate::capture::Bounds,
    /// The program runs in one process only: a goroutine's key holds process 0.
    pub one_process: bool,
    /// Whole values cut for want of room in their record: where, and how many parts
    /// (said as warnings when the script compiles).
    pub notes: Vec<(Span, u32)>,
    /// What the program knows of the function it is attached at.
    pub attached: Attached,
    /// What `span()` and the trace contexts need here (spans.rs).
    pub spans: SpanState,
    /// Where the program ends (r0 = 0; exit).
    pub done: Label,
    /// Where it ends before anything was counted (a failed lookup of the spill map):
    /// past the count of failed reads (unread.rs), which starts after it.
    pub(super) unstarted: Label,
    /// Where the count of failed reads starts (right after the prologue).
    pub(super) reads_start: usize,
    /// The script's `self` variables.
    pub self_vars: &'a std::collections::BTreeMap<String, crate::check::SelfVar>,
    /// gtrace's own counters and limits (`accounting`); `None` generates none.
    pub acct: Option<super::accounting::ProgramAcct<'a>>,
    /// The slots of pointer paths read once and reused (paths.rs), by expression.
    pub(super) paths: HashMap<ExprId, i16>,
    /// The fields read from a span of their object read once (coalesce.rs), by
    /// expression.
    pub(super) coalesced: HashMap<ExprId, super::coalesce::Coalesced>,
}

/// An ended span's start, error and parent (`span(start: t0, error: e, parent: tp)`);
/// `parent_ctx`: the parent is a `context.Context` (the SDK's span in it), not a
/// traceparent.
#[derive(Clone)]
pub struct Ended {
    pub start: crate::syntax::ast::Expr,
    pub error: Option<crate::syntax::ast::Expr>,
    pub parent: Option<crate::syntax::ast::Expr>,
    pub parent_ctx: bool,
}

/// What a program's generator keeps for spans and trace contexts.
#[derive(Default)]
pub struct SpanState {
    /// A return probe of a function whose calls make spans: its `hist()` updates leave
    /// exemplars.
    pub spanned_call: bool,
    /// The OpenTelemetry SDK's layout in the target, and (at the entry of a function
    /// with a span) where its `context.Context` parameter is (sdkcontext.rs).
    pub otel: Option<crate::gobin::OtelContext>,
    pub ctx: Option<crate::arch::abi::Location>,
    /// At a function's entry, its `trace_context` body is being lowered; then the slot
    /// of the header it parsed (context.rs).
    pub reading_context: bool,
    pub context_parsed: Option<i16>,
    /// The `span(start: ..., error: ..., parent: ...)` being lowered.
    pub ended: Option<Ended>,
}

impl<'a> Gen<'a> {
    pub fn new(
        binary: &'a BinaryFacts,
        facts: &'a Facts,
        types: &'a Types,
        maps: &'a Maps,
        self_vars: &'a std::collections::BTreeMap<String, crate::check::SelfVar>,
        sources: &'a Sources,
        events: &'a mut Vec<EventSpec>,
    ) -> Gen<'a> {
        let mut b = Func::new();
        let done = b.new_label();
        let unstarted = b.new_label();
        Gen {
            b,
            binary,
            facts,
            types,
            maps,
            sources,
            events,
            locals: HashMap::new(),
            loaded: Loaded::default(),
            aes: None,
            bounds: crate::capture::Bounds::default(),
            one_process: false,
            notes: Vec::new(),
            attached: Attached::default(),
            spans: SpanState::default(),
            done,
            unstarted,
            reads_start: 0,
            self_vars,
            acct: None,
            paths: HashMap::new(),
            coalesced: HashMap::new(),
        }
    }

    /// The target's instruction set: where registers are in the context.
    pub fn arch(&self) -> Arch {
        self.binary.binary.arch
    }

    /// A stack slot of `size` bytes (a temporary is released with `frame.release`).
    pub(super) fn slot(&mut self, size: u32, span: Span) -> Result<i16, LowerError> {
        self.b.frame.alloc(size).map_err(|e| LowerError::Stack { span, needed: e.needed })
    }

    /// A slot where no span is at hand (an overflow then points at the probe's start).
    pub(super) fn frame_slot(&mut self, size: u32) -> Result<i16, LowerError> {
        self.slot(size, Span::default())
    }

    /// The stack slot of the local that `e` names.
    pub(super) fn local_slot(&self, e: &Expr) -> Result<i16, LowerError> {
        match self.facts.names.get(&e.id) {
            Some(Name::Local(l)) => self
                .locals
                .get(l)
                .copied()
                .ok_or_else(|| LowerError::unsupported(e.span, "a local read before it is set")),
            _ => Err(LowerError::unsupported(e.span, "this value")),
        }
    }

    /// r6 = ctx; preemption off. Every program starts here: before anything touches
    /// the stack (on 6.13+ a per-CPU private stack) or a per-CPU map (the `scratch`
    /// record, aggregations), so that no other task on this CPU runs a program of
    /// gtrace's in between (uprobe programs run with only migration disabled). Where the
    /// kernel has no `bpf_preempt_disable` (before 6.10) the runtime makes the call a
    /// no-op (runtime/kfuncs.rs). A program that does not need the guard is finished
    /// without it (guard.rs says which).
    pub fn prologue(&mut self) {
        self.b.emit(mov64_reg(conv::CTX, conv::ARGS[0]));
        self.b.guard(Kfunc::PreemptDisable);
        // Slots the stack cannot hold are reached through a pointer looked up here.
        self.b.push(Item::SpillSetup { fail: self.unstarted });
        self.reads_start = self.b.len();
    }

    /// The failed reads counted; preemption back on; r0 = 0; exit. Every program ends
    /// here: its one exit, so the guard is balanced on every path (the verifier checks
    /// it).
    pub fn epilogue(&mut self) -> Result<(), LowerError> {
        self.b.bind(self.done);
        self.count_failed_reads()?;
        self.b.bind(self.unstarted);
        self.b.guard(Kfunc::PreemptEnable);
        self.b.emit(mov64_imm(R0, 0));
        self.b.push(Item::Exit);
        Ok(())
    }

    /// `dst = *(u64 *)(ctx + offset of reg)`.
    pub(super) fn load_ctx_reg(&mut self, dst: Reg, reg: MReg) {
        self.load_reg(dst, reg)
    }

    pub(super) fn load_reg(&mut self, dst: impl Into<R>, reg: MReg) {
        self.b.op(load(Size::DW, R0, R0, reg.pt_regs_offset()), dst, conv::CTX);
    }

    /// Copies 8 bytes of target memory at `addr + off` into stack slot `slot` (`addr`
    /// as it was: the sum is a value of its own); a failure counted (unread.rs).
    pub(super) fn read_user(&mut self, slot: i16, addr: impl Into<R>, off: i32) -> Result<(), LowerError> {
        let src = self.b.vreg();
        self.b.op(mov64_reg(R0, R0), src, addr);
        if off != 0 {
            self.b.op(alu64_imm(AluOp::Add, R0, off), src, R0);
        }
        self.read_target(&[Arg::Stack(slot), Arg::Imm(8), src.into()])
    }
}
