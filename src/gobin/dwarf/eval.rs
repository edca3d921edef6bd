//! DWARF location expressions evaluated at one address, symbolically: nothing of the
//! running process is known when a script is compiled, so an expression becomes where
//! each piece of the value will be when the probe fires: a register, memory at a base
//! (the CFA, a register, or an absolute address) plus a constant, or nowhere.
//!
//! What Go writes: `DW_OP_regN` (a whole value, or a piece of one, in a register),
//! `DW_OP_fbreg N` with the subprogram's frame base `DW_OP_call_frame_cfa` (a stack
//! slot), `DW_OP_piece N` (a value split over several places; a piece with no location
//! before it is optimized away there), `DW_OP_addr` (package variables). Also evaluated:
//! `DW_OP_call_frame_cfa` and `DW_OP_bregN` themselves, constants, `DW_OP_plus_uconst`
//! and `DW_OP_plus`/`DW_OP_minus` of a constant. Anything else (a computed value, a
//! dereference) is refused with the operation's name.

use super::R;
use gimli::Operation;

/// The base of an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Base {
    /// The canonical frame address of the function at the probe's address.
    Cfa,
    /// The value of a register (DWARF number).
    Reg(u16),
    /// None: the offset is the address (a package variable).
    Absolute,
}

/// An address at the probe: `base + offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Addr {
    pub base: Base,
    pub offset: i64,
}

/// Where one piece of a value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Where {
    /// In a register (DWARF number).
    Reg(u16),
    /// In memory at this address.
    Mem(Addr),
    /// Nowhere: this piece is optimized away here.
    Missing,
}

/// A piece of a value: `size` bytes (None: the whole value) at byte `offset` of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub offset: u64,
    pub size: Option<u64>,
    pub at: Where,
}

/// How the subprogram's frame base (`DW_AT_frame_base`) is computed, for `DW_OP_fbreg`.
pub(crate) type FrameBase = Option<Addr>;

/// Evaluates the frame base expression of a subprogram: Go's is `DW_OP_call_frame_cfa`;
/// a register (`DW_OP_regN`, whose value is the base) and `DW_OP_bregN off` also work.
pub(crate) fn frame_base(expr: gimli::Expression<R>, encoding: gimli::Encoding) -> Result<Addr, String> {
    let mut ops = expr.operations(encoding);
    let mut base: Option<Addr> = None;
    while let Some(op) = ops.next().map_err(|e| e.to_string())? {
        base = Some(match (op, base) {
            (Operation::CallFrameCFA, None) => Addr { base: Base::Cfa, offset: 0 },
            (Operation::Register { register }, None) => Addr { base: Base::Reg(register.0), offset: 0 },
            (Operation::RegisterOffset { register, offset, base_type }, None) if base_type.0 == 0 => {
                Addr { base: Base::Reg(register.0), offset }
            }
            (Operation::PlusConstant { value }, Some(a)) => Addr { offset: a.offset.wrapping_add(value as i64), ..a },
            (op, _) => return Err(format!("a frame base computed by {}", name(&op))),
        });
    }
    base.ok_or_else(|| "an empty frame base".to_string())
}

/// Evaluates a location expression into the pieces of the value it describes, in order.
/// An expression without `DW_OP_piece` gives one piece of the whole value; an empty one,
/// one missing piece.
pub(crate) fn evaluate(
    expr: gimli::Expression<R>,
    encoding: gimli::Encoding,
    frame_base: FrameBase,
) -> Result<Vec<Piece>, String> {
    let mut ops = expr.operations(encoding);
    let mut stack: Vec<Addr> = Vec::new();
    let mut register: Option<u16> = None;
    let mut pieces = Vec::new();
    let mut offset = 0u64;
    while let Some(op) = ops.next().map_err(|e| e.to_string())? {
        if register.is_some() && !matches!(op, Operation::Piece { .. }) {
            return Err("a register location followed by an operation".to_string());
        }
        match op {
            Operation::Register { register: r } => register = Some(r.0),
            Operation::RegisterOffset { register: r, offset, base_type } if base_type.0 == 0 => {
                stack.push(Addr { base: Base::Reg(r.0), offset })
            }
            Operation::FrameOffset { offset } => {
                let base = frame_base.ok_or_else(|| "DW_OP_fbreg without a frame base".to_string())?;
                stack.push(Addr { offset: base.offset.wrapping_add(offset), ..base });
            }
            Operation::CallFrameCFA => stack.push(Addr { base: Base::Cfa, offset: 0 }),
            Operation::Address { address } => stack.push(Addr { base: Base::Absolute, offset: address as i64 }),
            Operation::UnsignedConstant { value } => stack.push(Addr { base: Base::Absolute, offset: value as i64 }),
            Operation::SignedConstant { value } => stack.push(Addr { base: Base::Absolute, offset: value }),
            Operation::PlusConstant { value } => {
                let top = stack.last_mut().ok_or_else(|| "DW_OP_plus_uconst on an empty stack".to_string())?;
                top.offset = top.offset.wrapping_add(value as i64);
            }
            Operation::Plus | Operation::Minus => {
                let (Some(b), Some(a)) = (stack.pop(), stack.pop()) else {
                    return Err(format!("{} on a stack of fewer than two values", name(&op)));
                };
                let sum = match (a.base, b.base, &op) {
                    (_, Base::Absolute, Operation::Plus) => Addr { offset: a.offset.wrapping_add(b.offset), ..a },
                    (Base::Absolute, _, Operation::Plus) => Addr { offset: b.offset.wrapping_add(a.offset), ..b },
                    (_, Base::Absolute, _) => Addr { offset: a.offset.wrapping_sub(b.offset), ..a },
                    _ => return Err(format!("{} of two addresses", name(&op))),
                };
                stack.push(sum);
            }
            Operation::Nop => {}
            Operation::Piece { size_in_bits, bit_offset: None } if size_in_bits % 8 == 0 => {
                let at = match (register.take(), stack.pop()) {
                    (Some(r), _) => Where::Reg(r),
                    (None, Some(addr)) => Where::Mem(addr),
                    (None, None) => Where::Missing,
                };
                let size = size_in_bits / 8;
                pieces.push(Piece { offset, size: Some(size), at });
                offset += size;
            }
            op => return Err(name(&op)),
        }
    }
    if pieces.is_empty() {
        let at = match (register, stack.pop()) {
            (Some(r), _) => Where::Reg(r),
            (None, Some(addr)) => Where::Mem(addr),
            (None, None) => Where::Missing,
        };
        pieces.push(Piece { offset: 0, size: None, at });
    } else if register.is_some() || !stack.is_empty() {
        return Err("a location after the last DW_OP_piece".to_string());
    }
    Ok(pieces)
}

/// The operation as DWARF names it, for messages.
fn name(op: &Operation<R>) -> String {
    let n = match op {
        Operation::Deref { .. } => "DW_OP_deref",
        Operation::StackValue => "DW_OP_stack_value",
        Operation::ImplicitValue { .. } => "DW_OP_implicit_value",
        Operation::ImplicitPointer { .. } => "DW_OP_implicit_pointer",
        Operation::EntryValue { .. } => "DW_OP_entry_value",
        Operation::Piece { .. } => "DW_OP_bit_piece",
        Operation::RegisterOffset { .. } => "DW_OP_bregx with a type",
        Operation::Plus => "DW_OP_plus",
        Operation::Minus => "DW_OP_minus",
        Operation::CallFrameCFA => "DW_OP_call_frame_cfa",
        Operation::PlusConstant { .. } => "DW_OP_plus_uconst",
        Operation::Register { .. } => "DW_OP_reg",
        Operation::TLS => "DW_OP_form_tls_address",
        Operation::Call { .. } => "DW_OP_call",
        Operation::Bra { .. } | Operation::Skip { .. } => "a branch (DW_OP_bra, DW_OP_skip)",
        _ => return format!("the DWARF operation {op:?}"),
    };
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gimli::constants as dw;

    fn encoding() -> gimli::Encoding {
        gimli::Encoding { address_size: 8, format: gimli::Format::Dwarf32, version: 4 }
    }

    fn expr(bytes: &[u8]) -> gimli::Expression<R> {
        gimli::Expression(R::new(std::sync::Arc::from(bytes), gimli::LittleEndian))
    }

    fn eval(bytes: &[u8]) -> Result<Vec<Piece>, String> {
        evaluate(expr(bytes), encoding(), Some(Addr { base: Base::Cfa, offset: 0 }))
    }

    fn piece(offset: u64, size: u64, at: Where) -> Piece {
        Piece { offset, size: Some(size), at }
    }

    const CFA: Base = Base::Cfa;

    #[test]
    fn a_register_holds_the_whole_value() {
        assert_eq!(eval(&[dw::DW_OP_reg3.0]).unwrap(), vec![Piece { offset: 0, size: None, at: Where::Reg(3) }]);
    }

    #[test]
    fn fbreg_is_relative_to_the_frame_base() {
        // DW_OP_fbreg -40 (SLEB128 0x58)
        let got = eval(&[dw::DW_OP_fbreg.0, 0x58]).unwrap();
        assert_eq!(got, vec![Piece { offset: 0, size: None, at: Where::Mem(Addr { base: CFA, offset: -40 }) }]);
        let rbp = Some(Addr { base: Base::Reg(6), offset: 16 });
        let got = evaluate(expr(&[dw::DW_OP_fbreg.0, 0x58]), encoding(), rbp).unwrap();
        assert_eq!(got[0].at, Where::Mem(Addr { base: Base::Reg(6), offset: -24 }));
        assert!(evaluate(expr(&[dw::DW_OP_fbreg.0, 0x58]), encoding(), None).is_err());
    }

    #[test]
    fn pieces_in_registers_in_memory_and_missing() {
        // What Go writes for a struct {X, Y int; Name string} partly spilled:
        // DW_OP_piece 8, DW_OP_fbreg -40, DW_OP_piece 8, DW_OP_reg3, DW_OP_piece 8, DW_OP_reg2, DW_OP_piece 8
        let bytes = [
            dw::DW_OP_piece.0,
            8,
            dw::DW_OP_fbreg.0,
            0x58,
            dw::DW_OP_piece.0,
            8,
            dw::DW_OP_reg3.0,
            dw::DW_OP_piece.0,
            8,
            dw::DW_OP_reg2.0,
            dw::DW_OP_piece.0,
            8,
        ];
        assert_eq!(
            eval(&bytes).unwrap(),
            vec![
                piece(0, 8, Where::Missing),
                piece(8, 8, Where::Mem(Addr { base: CFA, offset: -40 })),
                piece(16, 8, Where::Reg(3)),
                piece(24, 8, Where::Reg(2)),
            ]
        );
    }

    #[test]
    fn cfa_breg_addr_and_constants() {
        assert_eq!(eval(&[dw::DW_OP_call_frame_cfa.0]).unwrap()[0].at, Where::Mem(Addr { base: CFA, offset: 0 }));
        // DW_OP_breg7 (rsp) +16
        assert_eq!(eval(&[dw::DW_OP_breg7.0, 16]).unwrap()[0].at, Where::Mem(Addr { base: Base::Reg(7), offset: 16 }));
        // DW_OP_addr 0x4a0000
        let mut a = vec![dw::DW_OP_addr.0];
        a.extend_from_slice(&0x4a_0000u64.to_le_bytes());
        assert_eq!(eval(&a).unwrap()[0].at, Where::Mem(Addr { base: Base::Absolute, offset: 0x4a_0000 }));
        // DW_OP_call_frame_cfa, DW_OP_plus_uconst 8, DW_OP_lit8, DW_OP_minus
        let b = [dw::DW_OP_call_frame_cfa.0, dw::DW_OP_plus_uconst.0, 8, dw::DW_OP_lit8.0, dw::DW_OP_minus.0];
        assert_eq!(eval(&b).unwrap()[0].at, Where::Mem(Addr { base: CFA, offset: 0 }));
    }

    #[test]
    fn an_empty_expression_is_optimized_away() {
        assert_eq!(eval(&[]).unwrap(), vec![Piece { offset: 0, size: None, at: Where::Missing }]);
    }

    #[test]
    fn computed_values_and_dereferences_are_refused_by_name() {
        assert_eq!(eval(&[dw::DW_OP_fbreg.0, 0x58, dw::DW_OP_deref.0]).unwrap_err(), "DW_OP_deref");
        assert_eq!(eval(&[dw::DW_OP_lit1.0, dw::DW_OP_stack_value.0]).unwrap_err(), "DW_OP_stack_value");
        assert!(eval(&[dw::DW_OP_reg0.0, dw::DW_OP_reg1.0]).is_err());
    }

    #[test]
    fn go_frame_base_is_the_cfa() {
        let fb = frame_base(expr(&[dw::DW_OP_call_frame_cfa.0]), encoding()).unwrap();
        assert_eq!(fb, Addr { base: CFA, offset: 0 });
        assert!(frame_base(expr(&[dw::DW_OP_lit1.0, dw::DW_OP_deref.0]), encoding()).is_err());
    }
}
