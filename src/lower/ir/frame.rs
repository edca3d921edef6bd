//! The virtual stack frame of one program: each `alloc` is a slot of its own
//! (`SlotId`), handed out as a virtual offset below R10 that code may still compute
//! with (`slot + 8 * i`). `release` ends the slots allocated since a mark: their
//! virtual bytes are handed out again, to new slots. Where slots really live is decided
//! by liveness when the program is finished (alloc.rs), not here: the virtual frame may
//! grow past eBPF's 512 bytes.

/// How far the virtual frame may grow (offsets are 16 bits).
pub const MAX_VIRTUAL: i32 = 16 * 1024;

/// The kernel's stack limit for one eBPF program.
pub const MAX_STACK: i32 = 512;

/// A stack slot: a value's bytes, placed by the allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SlotId(pub u32);

#[derive(Debug, thiserror::Error)]
#[error("the probe needs {needed} bytes of stack for values live at once")]
pub struct FrameFull {
    pub needed: i32,
}

#[derive(Debug, Default)]
pub struct Frame {
    /// Virtual bytes used so far (slots grow downward from R10).
    used: i32,
    /// Every slot's size (indexed by SlotId).
    sizes: Vec<u32>,
    /// The slots allocated and not released: (virtual offset, slot), innermost last.
    open: Vec<(i32, SlotId)>,
}

impl Frame {
    /// A slot of `size` bytes (rounded up to 8); returns its virtual offset from R10
    /// (negative).
    pub fn alloc(&mut self, size: u32) -> Result<i16, FrameFull> {
        let (_, off) = self.alloc_slot(size)?;
        Ok(off)
    }

    /// A slot of `size` bytes (rounded up to 8), and its virtual offset.
    pub fn alloc_slot(&mut self, size: u32) -> Result<(SlotId, i16), FrameFull> {
        let rounded = (i64::from(size) + 7) / 8 * 8;
        let needed = i64::from(self.used) + rounded.max(8);
        if needed > i64::from(MAX_VIRTUAL) {
            return Err(FrameFull { needed: i32::try_from(needed).unwrap_or(i32::MAX) });
        }
        self.used = needed as i32;
        let slot = SlotId(self.sizes.len() as u32);
        self.sizes.push(rounded.max(8) as u32);
        self.open.push((-self.used, slot));
        Ok((slot, -self.used as i16))
    }

    /// Where the frame is now, to `release` back to after a temporary is done.
    pub fn mark(&self) -> i32 {
        self.used
    }

    /// Ends the slots allocated since `mark`.
    pub fn release(&mut self, mark: i32) {
        self.used = mark;
        while self.open.last().is_some_and(|&(off, _)| -off > mark) {
            self.open.pop();
        }
    }

    /// The open slot holding the `bytes` at virtual offset `off` (0 bytes: an address),
    /// and the offset within it.
    pub fn slot_at(&self, off: i32, bytes: u32) -> Option<(SlotId, i16)> {
        self.open.iter().rev().find_map(|&(start, slot)| {
            let size = self.sizes[slot.0 as usize] as i32;
            let within = off - start;
            (within >= 0 && within + bytes.max(1) as i32 <= size).then_some((slot, within as i16))
        })
    }

    /// Every slot's size, indexed by `SlotId`.
    pub fn slots(&self) -> Vec<u32> {
        self.sizes.clone()
    }
}
