//! The builtin names of the language and their types.

use super::ty::{Ty, I64, U64};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// Time since the matching entry of this call (return probes only).
    Elapsed,
    /// Monotonic time in nanoseconds.
    Nsecs,
    Goid,
    Pid,
    Tid,
    Cpu,
    Comm,
    /// The probed function's name.
    Func,
    /// The value of the panic that ended the call (`on panic` only).
    Panic,
    /// Whether a recover() stopped that panic (`on panic` only).
    Recovered,
}

pub const NAMES: &[&str] =
    &["elapsed", "nsecs", "goid", "pid", "tid", "cpu", "comm", "func", "args", "ustack", "ret", "panic", "recovered"];

impl Builtin {
    pub fn from_name(name: &str) -> Option<Builtin> {
        Some(match name {
            "elapsed" => Builtin::Elapsed,
            "nsecs" => Builtin::Nsecs,
            "goid" => Builtin::Goid,
            "pid" => Builtin::Pid,
            "tid" => Builtin::Tid,
            "cpu" => Builtin::Cpu,
            "comm" => Builtin::Comm,
            "func" => Builtin::Func,
            "panic" => Builtin::Panic,
            "recovered" => Builtin::Recovered,
            _ => return None,
        })
    }
    pub fn ty(self) -> Ty {
        match self {
            Builtin::Elapsed => Ty::Duration,
            Builtin::Nsecs => U64,
            Builtin::Goid => I64,
            Builtin::Pid | Builtin::Tid | Builtin::Cpu => Ty::Int { size: 4, signed: false },
            Builtin::Comm => Ty::Str { max: 16 },
            Builtin::Func => Ty::Func,
            Builtin::Panic => Ty::Interface,
            Builtin::Recovered => Ty::Bool,
        }
    }
}
