//! The types of script expressions. Go values keep their DWARF type (`TypeId`) so the
//! checker can follow fields and pointers; everything eBPF computes with is a scalar.

use crate::gotypes::TypeId;
use crate::plan::ValueType;

#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    /// An integer of `size` bytes.
    Int {
        size: u8,
        signed: bool,
    },
    Bool,
    /// An IEEE float of `size` bytes (4 or 8), held as its bits: compared, printed and
    /// used as a key, never computed with (eBPF has no floating point).
    Float {
        size: u8,
    },
    /// Nanoseconds.
    Duration,
    /// A string: a literal, or a Go string read from the target (at most `max` bytes).
    Str {
        max: u32,
    },
    /// A Go pointer (to `elem` when DWARF says what it points to).
    Pointer {
        elem: Option<TypeId>,
    },
    /// The probed function's name (`func`).
    Func,
    /// A Go value that is not a scalar (a struct, slice, array, map, chan, func): it can
    /// be indexed, have its fields read, or be measured with `len`, not computed with.
    Go(TypeId),
    /// A Go interface (`any`, `error`, ...): printed as nil or its dynamic type's address
    /// and data word; compared with `nil`.
    Interface,
    /// `nil`.
    Nil,
    /// `args`: every parameter, for printing.
    Args,
    /// `ustack`: the Go call stack, as return addresses (symbolized when printed).
    Stack,
    /// A statement-only call (`print`, `exit`, ...).
    Void,
}

pub const U64: Ty = Ty::Int { size: 8, signed: false };
pub const I64: Ty = Ty::Int { size: 8, signed: true };

impl Ty {
    pub fn is_integer(&self) -> bool {
        matches!(self, Ty::Int { .. })
    }
    /// Integers, durations and pointers: what arithmetic and comparisons accept.
    pub fn is_numeric(&self) -> bool {
        matches!(self, Ty::Int { .. } | Ty::Duration | Ty::Pointer { .. })
    }
    pub fn is_signed(&self) -> bool {
        matches!(self, Ty::Int { signed: true, .. } | Ty::Duration)
    }
    /// How a value of this type is stored in a map key, value or event record.
    pub fn value_type(&self) -> ValueType {
        match self {
            Ty::Int { size, signed } => ValueType::Int { size: 8.max(*size), signed: *signed },
            Ty::Bool => ValueType::Bool,
            Ty::Float { size } => ValueType::Float { size: *size },
            Ty::Duration => ValueType::Duration,
            Ty::Str { max } => ValueType::Str { max: *max },
            Ty::Pointer { .. } => ValueType::Pointer,
            Ty::Func => ValueType::Func,
            Ty::Interface => ValueType::Interface,
            Ty::Stack => ValueType::Stack,
            Ty::Go(_) | Ty::Nil | Ty::Args | Ty::Void => ValueType::Int { size: 8, signed: false },
        }
    }
    /// Bytes it takes in a record, 8-aligned.
    pub fn record_size(&self) -> u32 {
        self.value_type().size().saturating_add(7) / 8 * 8
    }
    /// A name for messages with its article: `an int64`, `a string`.
    pub fn a(&self) -> String {
        let d = self.describe();
        let article = if d.starts_with(['i', 'a', 'e', 'o']) { "an" } else { "a" };
        format!("{article} {d}")
    }

    /// A name for messages.
    pub fn describe(&self) -> String {
        match self {
            Ty::Int { size, signed } => format!("{}int{}", if *signed { "" } else { "u" }, size * 8),
            Ty::Bool => "bool".into(),
            Ty::Float { size } => format!("float{}", size * 8),
            Ty::Duration => "duration".into(),
            Ty::Str { .. } => "string".into(),
            Ty::Pointer { .. } => "pointer".into(),
            Ty::Func => "function name".into(),
            Ty::Go(_) => "Go value".into(),
            Ty::Interface => "interface".into(),
            Ty::Nil => "nil".into(),
            Ty::Args => "args".into(),
            Ty::Stack => "stack".into(),
            Ty::Void => "nothing".into(),
        }
    }
}
