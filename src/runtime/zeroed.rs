//! A shared buffer of zeroed bytes the system has not touched: allocated zeroed
//! (calloc, whose large blocks are fresh pages), so a buffer sized from a file's claim
//! costs only the pages later written. The DWARF reader inflates `.debug_info` into one
//! (src/gobin/dwarf/units.rs); here because only the runtime holds unsafe code.

use std::sync::Arc;

/// `size` zero bytes, shared.
pub fn zeroed(size: usize) -> Arc<[u8]> {
    // SAFETY: all-zero memory is a valid [u8].
    unsafe { Arc::<[u8]>::new_zeroed_slice(size).assume_init() }
}
