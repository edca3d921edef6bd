//! Go's ABIInternal register assignment on amd64 (src/cmd/compile/abi-internal.md):
//! where each parameter of a function is at its entry, and each result at a RET.

use crate::arch::Reg;
use crate::target::types::{TypeId, Types};
use serde::Serialize;

/// Where one value (a parameter or a result) is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Location {
    /// In registers: each piece is `size` bytes of the value at `offset` within it.
    Regs(Vec<RegPiece>),
    /// On the stack at `offset` bytes above SP at the function's entry (8 is the first
    /// stack argument: 0(SP) is the return address).
    Stack { offset: i64 },
    /// A value eBPF cannot read at the probe, and why (a float in an XMM register).
    Unreadable { reason: String },
    /// A zero-sized value.
    Empty,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegPiece {
    pub reg: Reg,
    pub offset: u64,
    pub size: u64,
}

/// Assign locations to `values` (parameters in order, receiver first; or results) the
/// way the Go compiler does for an ABIInternal function.
pub fn assign(values: &[TypeId], types: &Types) -> Vec<Location> {
    let _ = (values, types);
    unimplemented!("arch::abi::assign is being written")
}
