//! Go's calling conventions (src/cmd/compile/abi-internal.md): where each parameter of
//! a function is at its entry, and each result at a RET.
//!
//! The register ABI (ABIInternal): each value is split into its base pieces (a string
//! into pointer and length, a slice into three words, an interface into two, a struct
//! field by field, an array of length 1 into its element); integer-like pieces take the
//! next of the architecture's integer registers (9 on amd64, 16 on arm64), float pieces
//! the next float register (15, 16). A value with an array of length > 1 in it, or whose
//! pieces do not all fit in the registers left, goes wholly to the stack and gives its
//! registers back. Results are assigned afresh from the first registers; their stack
//! slots follow the arguments' stack area, aligned to 8. The stack ABI (ABI0: assembly,
//! and every Go function on arm64 before Go 1.18) is the same with no registers.

use crate::arch::{Arch, Reg, PTR_SIZE};
use crate::gotypes::{TypeId, TypeKind, Types};
use serde::Serialize;

/// A calling convention: Go's register ABI on an architecture, or its stack ABI. An
/// `Arch` is its register ABI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv {
    pub arch: Arch,
    /// Whether arguments and results go in registers (ABIInternal) or all on the stack
    /// (ABI0).
    pub registers: bool,
}

impl Conv {
    /// The stack ABI of `arch`.
    pub fn stack(arch: Arch) -> Conv {
        Conv { arch, registers: false }
    }

    /// How the Go functions of a binary built by Go 1.`minor` take their arguments
    /// (unknown version: the register ABI).
    pub fn for_go(arch: Arch, minor: Option<u32>) -> Conv {
        Conv { arch, registers: minor.is_none_or(|m| m >= arch.register_abi_since()) }
    }

    /// The integer registers values are passed in, in order (none for the stack ABI).
    pub fn int_regs(self) -> &'static [Reg] {
        if self.registers {
            self.arch.int_arg_regs()
        } else {
            &[]
        }
    }

    fn float_regs(self) -> usize {
        if self.registers {
            self.arch.float_arg_regs()
        } else {
            0
        }
    }
}

impl From<Arch> for Conv {
    fn from(arch: Arch) -> Conv {
        Conv { arch, registers: true }
    }
}

/// Where one value (a parameter or a result) is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Location {
    /// In registers: each piece is `size` bytes of the value at `offset` within it.
    Regs(Vec<RegPiece>),
    /// On the stack at `offset` bytes above SP where the probe is. At a function's entry
    /// 8 is the first stack argument (0(SP) is the return address on amd64, the caller's
    /// saved-LR slot on arm64); at a RET, SP is back at the entry value, so result offsets
    /// are relative to the same SP; inside the function (a line, an inlined call) DWARF's
    /// frame-relative places are turned into offsets from SP at the probe's address.
    Stack { offset: i64 },
    /// Pieces of one value in different places (DWARF's `DW_OP_piece`): some in
    /// registers, some on the stack, some nowhere (optimized away there).
    Pieces(Vec<Piece>),
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

/// `size` bytes of a value at `offset` within it, and where they are.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Piece {
    pub offset: u64,
    pub size: u64,
    pub at: PieceAt,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum PieceAt {
    Reg(Reg),
    /// On the stack, `offset` bytes above SP at the probe.
    Stack {
        offset: i64,
    },
    /// Not kept there: optimized away.
    Missing,
}

/// The locations of a whole call: every argument at entry, every result at a RET.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallLayout {
    pub params: Vec<Location>,
    pub results: Vec<Location>,
}

/// Assign locations to `values` (parameters in order, receiver first) the way the Go
/// compiler does under `conv`. For results use `assign_results` (or `assign_call`):
/// their stack slots depend on the arguments.
pub fn assign(conv: impl Into<Conv>, values: &[TypeId], types: &Types) -> Vec<Location> {
    let mut frame = Frame::new(conv.into());
    values.iter().map(|v| frame.assign(*v, types)).collect()
}

/// Locations of `results` at a RET of a function whose parameters (receiver first) are
/// `params`.
pub fn assign_results(conv: impl Into<Conv>, params: &[TypeId], results: &[TypeId], types: &Types) -> Vec<Location> {
    assign_call(conv, params, results, types).results
}

/// Locations of the parameters (at entry) and results (at a RET) of one function.
pub fn assign_call(conv: impl Into<Conv>, params: &[TypeId], results: &[TypeId], types: &Types) -> CallLayout {
    let mut frame = Frame::new(conv.into());
    let params = params.iter().map(|v| frame.assign(*v, types)).collect();
    frame.stack = align_to(frame.stack, PTR_SIZE);
    frame.ints = 0;
    frame.floats = 0;
    let results = results.iter().map(|v| frame.assign(*v, types)).collect();
    CallLayout { params, results }
}

/// One piece of a value in a register: integer register index or float register index.
enum AbiPiece {
    Int { index: usize, offset: u64, size: u64 },
    Float { index: usize },
}

/// The assignment state: next integer and float register, bytes of stack used so far.
struct Frame {
    conv: Conv,
    ints: usize,
    floats: usize,
    stack: u64,
}

impl Frame {
    fn new(conv: Conv) -> Frame {
        Frame { conv, ints: 0, floats: 0, stack: 0 }
    }

    fn assign(&mut self, ty: TypeId, types: &Types) -> Location {
        let t = types.get(ty);
        let (ints, floats) = (self.ints, self.floats);
        if t.size == 0 {
            self.stack = align_to(self.stack, alignment(ty, types));
            return Location::Empty;
        }
        let mut pieces = Vec::new();
        if self.register_assign(ty, 0, types, &mut pieces) {
            return located(self.conv.arch, pieces);
        }
        self.ints = ints;
        self.floats = floats;
        self.stack = align_to(self.stack, alignment(ty, types));
        let offset = self.conv.arch.stack_args_offset() + self.stack;
        self.stack += t.size;
        Location::Stack { offset: offset as i64 }
    }

    /// Register-assigns the value of type `ty` found at `offset` of the whole value;
    /// false when it cannot be (an array of length > 1, or no registers left).
    fn register_assign(&mut self, ty: TypeId, offset: u64, types: &Types, out: &mut Vec<AbiPiece>) -> bool {
        let t = types.get(ty);
        match &t.kind {
            TypeKind::Int { .. } | TypeKind::Bool => self.int(offset, t.size, out),
            TypeKind::Pointer { .. }
            | TypeKind::UnsafePointer
            | TypeKind::Map { .. }
            | TypeKind::Chan
            | TypeKind::Func => self.int(offset, PTR_SIZE, out),
            TypeKind::Float => self.float(out),
            TypeKind::Complex => self.float(out) && self.float(out),
            TypeKind::String | TypeKind::Interface { .. } => {
                self.int(offset, PTR_SIZE, out) && self.int(offset + PTR_SIZE, PTR_SIZE, out)
            }
            TypeKind::Slice { .. } => (0..3).all(|i| self.int(offset + i * PTR_SIZE, PTR_SIZE, out)),
            TypeKind::Struct { fields } => {
                fields.iter().all(|f| self.register_assign(f.ty, offset + f.offset, types, out))
            }
            TypeKind::Array { len: 0, .. } => true,
            TypeKind::Array { elem, len: 1 } => self.register_assign(*elem, offset, types, out),
            TypeKind::Array { .. } => false,
            // A type gtrace does not model: a word-sized one goes in a register, anything
            // else is treated as memory (on the stack), which a reader will refuse to read.
            TypeKind::Other if t.size <= PTR_SIZE => self.int(offset, t.size, out),
            TypeKind::Other => false,
        }
    }

    fn int(&mut self, offset: u64, size: u64, out: &mut Vec<AbiPiece>) -> bool {
        if self.ints >= self.conv.int_regs().len() {
            return false;
        }
        out.push(AbiPiece::Int { index: self.ints, offset, size });
        self.ints += 1;
        true
    }

    fn float(&mut self, out: &mut Vec<AbiPiece>) -> bool {
        if self.floats >= self.conv.float_regs() {
            return false;
        }
        out.push(AbiPiece::Float { index: self.floats });
        self.floats += 1;
        true
    }
}

/// A register-assigned value: readable pieces, or unreadable if any piece is in a float
/// register (pt_regs holds no vector registers).
fn located(arch: Arch, pieces: Vec<AbiPiece>) -> Location {
    if let Some(x) = pieces.iter().find_map(|p| match p {
        AbiPiece::Float { index } => Some(*index),
        AbiPiece::Int { .. } => None,
    }) {
        return Location::Unreadable {
            reason: format!("it is passed in {}, a float register, which uprobes cannot read", arch.float_reg_name(x)),
        };
    }
    let regs = pieces
        .into_iter()
        .filter_map(|p| match p {
            AbiPiece::Int { index, offset, size } => Some(RegPiece { reg: arch.int_arg_regs()[index], offset, size }),
            AbiPiece::Float { .. } => None,
        })
        .collect();
    Location::Regs(regs)
}

/// The alignment of a Go type (the same on amd64 and arm64).
pub fn alignment(ty: TypeId, types: &Types) -> u64 {
    let t = types.get(ty);
    match &t.kind {
        TypeKind::Int { .. } | TypeKind::Float => t.size.clamp(1, PTR_SIZE),
        TypeKind::Bool => 1,
        TypeKind::Complex => (t.size / 2).clamp(1, PTR_SIZE),
        TypeKind::Array { elem, .. } => alignment(*elem, types),
        TypeKind::Struct { fields } => fields.iter().map(|f| alignment(f.ty, types)).max().unwrap_or(1),
        TypeKind::Other => {
            if t.size >= PTR_SIZE {
                PTR_SIZE
            } else {
                t.size.max(1).next_power_of_two()
            }
        }
        _ => PTR_SIZE,
    }
}

fn align_to(n: u64, align: u64) -> u64 {
    n.div_ceil(align) * align
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::x86_64::Reg as X;
    use crate::gotypes::{GoType, StructField};

    const A: Arch = Arch::X86_64;

    fn assign(values: &[TypeId], types: &Types) -> Vec<Location> {
        super::assign(A, values, types)
    }

    struct T {
        types: Types,
    }

    impl T {
        fn new() -> T {
            T { types: Types::default() }
        }
        fn add(&mut self, name: &str, size: u64, kind: TypeKind) -> TypeId {
            self.types.add(GoType { name: name.to_string(), size, kind })
        }
        fn int(&mut self) -> TypeId {
            self.add("int", 8, TypeKind::Int { signed: true })
        }
        fn u8(&mut self) -> TypeId {
            self.add("uint8", 1, TypeKind::Int { signed: false })
        }
        fn int32(&mut self) -> TypeId {
            self.add("int32", 4, TypeKind::Int { signed: true })
        }
        fn string(&mut self) -> TypeId {
            self.add("string", 16, TypeKind::String)
        }
        fn float(&mut self) -> TypeId {
            self.add("float64", 8, TypeKind::Float)
        }
        fn array(&mut self, elem: TypeId, len: u64) -> TypeId {
            let size = self.types.get(elem).size * len;
            self.add("[n]T", size, TypeKind::Array { elem, len })
        }
        fn strukt(&mut self, fields: &[(TypeId, u64)], size: u64) -> TypeId {
            let fields = fields
                .iter()
                .map(|(ty, offset)| StructField { name: "f".into(), ty: *ty, offset: *offset, embedded: false })
                .collect();
            self.add("S", size, TypeKind::Struct { fields })
        }
    }

    fn regs(list: &[(X, u64, u64)]) -> Location {
        Location::Regs(
            list.iter()
                .map(|(reg, offset, size)| RegPiece { reg: Reg::X86(*reg), offset: *offset, size: *size })
                .collect(),
        )
    }

    #[test]
    fn ints_take_registers_in_order_then_the_stack() {
        let mut t = T::new();
        let int = t.int();
        let locs = assign(&[int; 11], &t.types);
        assert_eq!(locs[0], regs(&[(X::Rax, 0, 8)]));
        assert_eq!(locs[3], regs(&[(X::Rdi, 0, 8)]));
        assert_eq!(locs[8], regs(&[(X::R11, 0, 8)]));
        assert_eq!(locs[9], Location::Stack { offset: 8 });
        assert_eq!(locs[10], Location::Stack { offset: 16 });
    }

    #[test]
    fn small_ints_keep_their_size() {
        let mut t = T::new();
        let (a, b) = (t.u8(), t.int32());
        assert_eq!(assign(&[a, b], &t.types), vec![regs(&[(X::Rax, 0, 1)]), regs(&[(X::Rbx, 0, 4)])]);
    }

    #[test]
    fn strings_and_slices_take_two_and_three_registers() {
        let mut t = T::new();
        let s = t.string();
        let u8 = t.u8();
        let sl = t.add("[]uint8", 24, TypeKind::Slice { elem: u8 });
        let locs = assign(&[s, sl], &t.types);
        assert_eq!(locs[0], regs(&[(X::Rax, 0, 8), (X::Rbx, 8, 8)]));
        assert_eq!(locs[1], regs(&[(X::Rcx, 0, 8), (X::Rdi, 8, 8), (X::Rsi, 16, 8)]));
    }

    /// The example of abi-internal.md: a value that does not fit goes to the stack and
    /// gives back its registers, so a later value still gets one.
    #[test]
    fn a_value_that_does_not_fit_goes_wholly_to_the_stack() {
        let mut t = T::new();
        let int = t.int();
        let s = t.string();
        let mut values = vec![int; 8];
        values.push(s);
        values.push(int);
        let locs = assign(&values, &t.types);
        assert_eq!(locs[8], Location::Stack { offset: 8 });
        assert_eq!(locs[9], regs(&[(X::R11, 0, 8)]));
    }

    #[test]
    fn structs_split_field_by_field_and_arrays_go_to_the_stack() {
        let mut t = T::new();
        let (int, i32) = (t.int(), t.int32());
        let pair = t.strukt(&[(int, 0), (i32, 8)], 16);
        let arr = t.array(i32, 4);
        let big = t.strukt(&[(int, 0), (arr, 8)], 24);
        let locs = assign(&[int, pair, big, int], &t.types);
        assert_eq!(locs[1], regs(&[(X::Rbx, 0, 8), (X::Rcx, 8, 4)]));
        assert_eq!(locs[2], Location::Stack { offset: 8 });
        assert_eq!(locs[3], regs(&[(X::Rdi, 0, 8)]));
    }

    #[test]
    fn arrays_of_zero_and_one() {
        let mut t = T::new();
        let s = t.string();
        let one = t.array(s, 1);
        let zero = t.array(s, 0);
        let locs = assign(&[zero, one], &t.types);
        assert_eq!(locs[0], Location::Empty);
        assert_eq!(locs[1], regs(&[(X::Rax, 0, 8), (X::Rbx, 8, 8)]));
    }

    #[test]
    fn stack_slots_are_aligned() {
        let mut t = T::new();
        let (int, u8, i32) = (t.int(), t.u8(), t.int32());
        let arr = t.array(u8, 3);
        let mut values = vec![int; 9];
        values.extend([arr, i32]);
        let locs = assign(&values, &t.types);
        assert_eq!(locs[9], Location::Stack { offset: 8 });
        assert_eq!(locs[10], Location::Stack { offset: 12 });
    }

    #[test]
    fn floats_are_unreadable_and_do_not_use_int_registers() {
        let mut t = T::new();
        let (f, int) = (t.float(), t.int());
        let locs = assign(&[f, int, f], &t.types);
        assert!(matches!(&locs[0], Location::Unreadable { reason } if reason.contains("X0")));
        assert_eq!(locs[1], regs(&[(X::Rax, 0, 8)]));
        assert!(matches!(&locs[2], Location::Unreadable { reason } if reason.contains("X1")));
    }

    #[test]
    fn results_restart_at_rax_and_stack_after_the_arguments() {
        let mut t = T::new();
        let (int, i32) = (t.int(), t.int32());
        let arr = t.array(i32, 3);
        let layout = assign_call(A, &[int, arr], &[int, arr], &t.types);
        assert_eq!(layout.params[1], Location::Stack { offset: 8 });
        assert_eq!(layout.results[0], regs(&[(X::Rax, 0, 8)]));
        // The arguments take 12 bytes, rounded up to 16.
        assert_eq!(layout.results[1], Location::Stack { offset: 24 });
        assert_eq!(assign_results(A, &[int, arr], &[int, arr], &t.types), layout.results);
    }

    #[test]
    fn arm64_has_sixteen_int_registers_and_f_floats() {
        use crate::arch::arm64::Reg as A;
        let mut t = T::new();
        let (int, f, s) = (t.int(), t.float(), t.string());
        let mut values = vec![int; 15];
        values.extend([s, f, int]);
        let locs = super::assign(Arch::Arm64, &values, &t.types);
        let r = |n: u8| RegPiece { reg: Reg::Arm64(A::R(n)), offset: 0, size: 8 };
        assert_eq!(locs[0], Location::Regs(vec![r(0)]));
        assert_eq!(locs[14], Location::Regs(vec![r(14)]));
        // The string needs two registers, only R15 is left: the stack, R15 given back.
        assert_eq!(locs[15], Location::Stack { offset: 8 });
        assert!(matches!(&locs[16], Location::Unreadable { reason } if reason.contains("F0")));
        assert_eq!(locs[17], Location::Regs(vec![r(15)]));
    }

    /// Go 1.17 on arm64: every argument and result on the stack, results after the
    /// arguments (objdump of `func add(a, b int) int`: 8(RSP), 16(RSP), result 24(RSP)).
    #[test]
    fn the_stack_abi_puts_everything_on_the_stack() {
        let mut t = T::new();
        let (int, u8, s) = (t.int(), t.u8(), t.string());
        let stack = Conv::stack(Arch::Arm64);
        let layout = assign_call(stack, &[int, int], &[int], &t.types);
        assert_eq!(layout.params, vec![Location::Stack { offset: 8 }, Location::Stack { offset: 16 }]);
        assert_eq!(layout.results, vec![Location::Stack { offset: 24 }]);
        let layout = assign_call(stack, &[u8, s], &[u8, int], &t.types);
        assert_eq!(layout.params, vec![Location::Stack { offset: 8 }, Location::Stack { offset: 16 }]);
        assert_eq!(layout.results, vec![Location::Stack { offset: 32 }, Location::Stack { offset: 40 }]);
        assert_eq!(Conv::for_go(Arch::Arm64, Some(17)), stack);
        assert_eq!(Conv::for_go(Arch::Arm64, Some(18)), Conv::from(Arch::Arm64));
        assert_eq!(Conv::for_go(Arch::X86_64, Some(17)), Conv::from(Arch::X86_64));
        assert_eq!(Conv::for_go(Arch::Arm64, None), Conv::from(Arch::Arm64));
    }
}
