//! The byte layouts of gtrace's own records: what its maps hold and its span events
//! carry, read by the programs that write them and by whoever reads them back (the map
//! specs in maps.rs, the plan's checks in plan/validate, the span reader in output).
//!
//! - A goroutine's key (frames.rs): its g and its process, as the tables of calls in
//!   flight, deep frames, carried parameters and `self` variables are keyed.
//! - A goroutine's record of the calls in flight (frames.rs): its g, the frame stack's
//!   top, the base positions are relative to, its process, then `INLINE` frames; with
//!   `on panic` probes, the panic state after them (unwind.rs).
//! - A call's entry record with a span (carry.rs, spans.rs): the span's context first,
//!   then the parameters the return reads.
//! - An exemplar of a `hist()` bucket, and the header of a span event (spans.rs).

// A goroutine's key (frames.rs): 16 bytes, the g (u64), an index (u32: a frame's, a
// `self` variable's, 0 for the record itself), the process (the tgid, u32). Under `-b`
// two processes of a binary whose heap is at a fixed address (Go before 1.26) have
// goroutines at the same g: the process tells them apart.

pub const K_G: i16 = 0;
pub const K_INDEX: i16 = 8;
pub const K_TGID: i16 = 12;
pub const KEY: u32 = 16;

// A goroutine's record (frames.rs).

/// Frames kept in the goroutine's record; deeper ones go to the `frames` map.
pub const INLINE: i32 = 8;
/// A frame: its entry time, its position (`rel`), the function's index in the plan.
pub const FRAME: i32 = 24;
pub const F_TIME: i16 = 0;
pub const F_REL: i16 = 8;
pub const F_FUNC: i16 = 16;

/// The record: its goroutine's g, frames in flight (u32), frames the last panic ended
/// (u32, above `top`), the base of positions, the old stack top of a copy not yet
/// applied, the goroutine's process (u32; an array slot is its goroutine's when both
/// the g and the process match), the frames.
pub const R_G: i16 = 0;
pub const R_TOP: i16 = 8;
pub const R_GONE: i16 = 12;
pub const R_BASE: i16 = 16;
pub const R_MOVED: i16 = 24;
pub const R_TGID: i16 = 32;
pub const R_FRAMES: i16 = 40;
/// log2 of the slots of the `goroutines` array.
pub const SLOT_BITS: u32 = 14;
/// A goroutine's slot in it: the top SLOT_BITS bits of (g xor its process's tgid) times
/// this (2^64/phi, Fibonacci hashing), so that two processes' goroutines at one g
/// rarely share a slot.
pub const SLOT_HASH: u64 = 0x9E37_79B9_7F4A_7C15;
/// The record without panic state.
pub const RECORD: u32 = R_FRAMES as u32 + (INLINE * FRAME) as u32;

// The panic state after a record's frames (unwind.rs).

/// The panic state after the frames: recovered (u32), panics under way (u32), the value
/// of the panic that ended the last frames (type, data), the panics under way (type,
/// data, position of gopanic).
pub const P_RECOVERED: i16 = RECORD as i16;
pub const P_NPANICS: i16 = P_RECOVERED + 4;
pub const P_VALUE: i16 = P_RECOVERED + 8;
pub const P_LIST: i16 = P_VALUE + 16;
/// Panics under way the record keeps, and the bytes of each.
pub const PANICS: i32 = 4;
pub const PANIC: i32 = 24;
/// The record with panic state.
pub const RECORD_WITH_PANICS: u32 = P_LIST as u32 + (PANICS * PANIC) as u32;

// A call's entry record with a span, and what spans send (spans.rs, context.rs).

/// Offsets in the entry record: the frame's time (which validates the record), the
/// trace id (16 bytes), the span id, the parent's span id, the flags.
pub const C_TIME: i16 = 0;
pub const C_TRACE: i16 = 8;
pub const C_SPAN: i16 = 24;
pub const C_PARENT: i16 = 32;
pub const C_FLAGS: i16 = 40;
/// Where the parameters a spanned function carries start in its record.
pub const CONTEXT_END: u32 = 48;
/// The flags: the trace is sampled (W3C trace-flags bit 0); the parent is the program's
/// own span, from another process or from its own SDK (OTLP's "is remote").
pub const FLAG_SAMPLED: i32 = 1;
pub const FLAG_REMOTE_PARENT: i32 = 2;
/// On a context record (context.rs): the spans below it have a remote parent.
pub const FLAG_CHILD_REMOTE: i32 = 4;

/// An exemplar (`MapRole::Exemplars`): the value, the kernel time, the trace id (16),
/// the span id.
pub const EXEMPLAR: u32 = 40;

/// The span record's header, after the event id: entry time, return time, trace id (16),
/// span id, parent span id, flags, function index.
pub const H_START: i16 = 8;
pub const H_END: i16 = 16;
pub const H_TRACE: i16 = 24;
pub const H_SPAN: i16 = 40;
pub const H_PARENT: i16 = 48;
pub const H_FLAGS: i16 = 56;
pub const H_FUNC: i16 = 64;
pub const HEADER_END: u32 = 72;
