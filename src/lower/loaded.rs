//! What a program's prologue loaded, handed to its body as one value (`Loaded`).
//!
//! Each program kind's prologue (programs.rs, unwind.rs) returns what it found: the
//! goroutine, its record of calls in flight (frames.rs), this call's frame (a return's,
//! or one a panic ended), its entry record (carry.rs), the process's load bias
//! (globals.rs). The body reads only what its kind loaded; asking for what it did not
//! (`elapsed` at an entry) is an error at that construct, never a default slot.
//! Beside it, `Attached`: what a program knows of its function when it is lowered.

use super::LowerError;
use crate::arch::abi::Location;
use crate::check::Carried;
use crate::syntax::ast::Span;

/// A stack slot (its virtual offset from R10) holding one 8-byte value.
pub type Slot = i16;

/// A goroutine's record of calls in flight, found: the slots of its key (its g pointer
/// and process, layout.rs `K_*`) and of the record's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub g: Slot,
    pub rec: Slot,
}

/// This call's frame in its goroutine's record: the slot of its index there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallFrame {
    pub record: Record,
    pub index: Slot,
}

/// At a return of a timed call: its frame, found and popped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Returned {
    pub at: CallFrame,
    /// The frame's address.
    pub frame: Slot,
    pub elapsed: Slot,
    /// The call's entry record (what its entry carried), where the probe reads it.
    pub entry: Option<Slot>,
}

/// In `on panic`, for one frame the panic ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Panicked {
    pub at: CallFrame,
    pub elapsed: Slot,
    /// The ended frame's function (`func`).
    pub func: Slot,
    /// The panic's value: 16 bytes (type, data).
    pub value: Slot,
    pub recovered: Slot,
}

/// The call a program runs for, as far as its prologue followed it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Call {
    /// Nothing of it: begin, end, interval, or a probe that reads no goroutine state.
    #[default]
    None,
    /// The goroutine only (`goid`, `self`): the slot of its key (g pointer first).
    Goroutine {
        g: Slot,
    },
    /// At the entry of a timed call: the frame it pushed.
    Entered(CallFrame),
    Returned(Returned),
    Panicked(Panicked),
}

/// Everything a program's prologue loaded for its body.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    pub call: Call,
    /// The process's load bias (a PIE's), where the program reads package variables.
    pub bias: Option<Slot>,
}

impl Call {
    /// The slot of the goroutine's key (its g pointer first, then layout.rs `K_*`),
    /// where the prologue loaded it.
    pub fn g(&self) -> Option<Slot> {
        match self {
            Call::None => None,
            Call::Goroutine { g } => Some(*g),
            Call::Entered(at) => Some(at.record.g),
            Call::Returned(r) => Some(r.at.record.g),
            Call::Panicked(p) => Some(p.at.record.g),
        }
    }

    /// This call's frame in its goroutine's record.
    pub fn frame(&self, span: Span) -> Result<CallFrame, LowerError> {
        match self {
            Call::Entered(at) => Ok(*at),
            Call::Returned(r) => Ok(r.at),
            Call::Panicked(p) => Ok(p.at),
            _ => Err(LowerError::unsupported(span, "this outside a timed call (a return probe or `on panic`)")),
        }
    }

    /// The slot of `elapsed`.
    pub fn elapsed(&self, span: Span) -> Result<Slot, LowerError> {
        match self {
            Call::Returned(r) => Ok(r.elapsed),
            Call::Panicked(p) => Ok(p.elapsed),
            _ => Err(LowerError::unsupported(span, "elapsed outside a return probe")),
        }
    }

    /// The ended frame, in `on panic`.
    pub fn panicked(&self) -> Option<&Panicked> {
        match self {
            Call::Panicked(p) => Some(p),
            _ => None,
        }
    }

    /// The popped frame, at a return.
    pub fn returned(&self) -> Option<&Returned> {
        match self {
            Call::Returned(r) => Some(r),
            _ => None,
        }
    }
}

/// What a program knows of the function it is attached at, fixed when it is lowered.
#[derive(Clone, Debug, Default)]
pub struct Attached {
    /// The function's index in `Plan::functions`, when the program is attached at that
    /// one function only (`func` is then a constant, not read from the attach cookie).
    pub index: Option<u32>,
    /// Where the dictionary of the shape function is, when `func` names the
    /// instantiation (generics.rs).
    pub dictionary: Option<DictAt>,
    /// The parameters its entry carries, with their offsets in the entry record.
    pub carried: Vec<(Carried, u32)>,
}

/// Where a program finds the dictionary.
#[derive(Clone, Debug)]
pub enum DictAt {
    /// At the function's entry: in its register or stack slot.
    Entry(Location),
    /// At a return: carried from the entry.
    Carried,
}
