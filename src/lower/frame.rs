//! The stack frame of one eBPF program: slots below R10 for locals, map keys, values
//! and temporaries, within the kernel's 512-byte limit.

/// The kernel's stack limit for one eBPF program.
pub const MAX_STACK: i32 = 512;

#[derive(Debug, Default)]
pub struct Frame {
    /// Bytes used so far (slots grow downward from R10).
    used: i32,
}

#[derive(Debug, thiserror::Error)]
#[error("the probe needs {needed} bytes of stack; eBPF allows {MAX_STACK}")]
pub struct FrameFull {
    pub needed: i32,
}

impl Frame {
    /// A slot of `size` bytes (rounded up to 8); returns its offset from R10 (negative).
    pub fn alloc(&mut self, size: u32) -> Result<i16, FrameFull> {
        let needed = i64::from(self.used) + (i64::from(size) + 7) / 8 * 8;
        if needed > i64::from(MAX_STACK) {
            return Err(FrameFull { needed: i32::try_from(needed).unwrap_or(i32::MAX) });
        }
        self.used = needed as i32;
        Ok(-self.used as i16)
    }

    /// Where the frame is now, to `release` back to after a temporary is done.
    pub fn mark(&self) -> i32 {
        self.used
    }

    pub fn release(&mut self, mark: i32) {
        self.used = mark;
    }
}
