//! The allocator's own tests: liveness, registers around calls, moves that disappear,
//! slots sharing bytes once dead, spills (of registers to slots, of slots to the spill
//! map), registers borrowed where none is free, label resolution.

use super::*;
use crate::bpf::disasm::disasm;
use crate::bpf::helpers::*;
use crate::bpf::interp::{run, World};

/// Every instruction of a finished program as `--emit asm` shows it.
fn text(f: &Finished) -> String {
    disasm(&f.program)
}

#[test]
fn a_value_live_across_a_call_gets_a_callee_saved_register() {
    let mut f = Func::new();
    let v = f.vreg();
    f.op(mov64_imm(R0, 7), v, v);
    f.push(Item::Call(BPF_FUNC_ktime_get_ns));
    f.op(alu64_reg(AluOp::Add, R0, R0), R0, v);
    f.push(Item::Exit);
    let out = f.finish().unwrap();
    // R1-R5 are clobbered and R0 is the call's result: R7 is the first callee-saved
    // register handed out.
    assert!(text(&out).contains("r7 = 7"), "{}", text(&out));
    assert!(text(&out).contains("r0 += r7"), "{}", text(&out));
}

#[test]
fn a_value_not_live_across_a_call_gets_a_caller_saved_register() {
    let mut f = Func::new();
    let v = f.vreg();
    f.emit(mov64_imm(R0, 1));
    f.op(mov64_imm(R0, 7), v, v);
    f.op(alu64_reg(AluOp::Add, R0, R0), R0, v);
    f.push(Item::Exit);
    let out = f.finish().unwrap();
    assert!(text(&out).contains("1: r1 = 7"), "{}", text(&out));
}

#[test]
fn registers_are_reused_once_their_values_die() {
    let mut f = Func::new();
    let (a, b) = (f.vreg(), f.vreg());
    f.emit(mov64_imm(R0, 0));
    f.op(mov64_imm(R0, 1), a, a);
    f.op(alu64_reg(AluOp::Add, R0, R0), R0, a);
    f.op(mov64_imm(R0, 2), b, b);
    f.op(alu64_reg(AluOp::Add, R0, R0), R0, b);
    f.push(Item::Exit);
    let out = text(&f.finish().unwrap());
    assert!(out.contains("r1 = 1") && out.contains("r1 = 2"), "{out}");
}

#[test]
fn a_value_set_from_a_register_that_dies_there_takes_it_and_the_move_disappears() {
    let mut f = Func::new();
    let v = f.vreg();
    f.emit(mov64_imm(R3, 5));
    f.op(mov64_reg(R0, R0), v, R3);
    f.op(alu64_imm(AluOp::Add, R0, 1), v, R0);
    f.op(mov64_reg(R0, R0), R0, v);
    f.push(Item::Exit);
    let out = f.finish().unwrap();
    let t = text(&out);
    // v takes r3 (which dies where v is set) or r0 (set from v where v dies): one
    // move of the two is left.
    assert_eq!(out.program.insns.len(), 4, "{t}");
    assert_eq!(run(&out.program, &World::default(), 0), Ok(6), "{t}");
}

#[test]
fn an_immediate_operation_on_a_value_named_as_its_own_source_leaves_the_source_field_0() {
    let mut f = Func::new();
    let v = f.vreg();
    f.emit(mov64_imm(R0, 1));
    f.op(mov64_imm(R0, 5), v, R0);
    f.op(alu64_imm(AluOp::Add, R0, 16), v, v);
    f.op(alu64_reg(AluOp::Add, R0, R0), R0, v);
    f.push(Item::Exit);
    let out = f.finish().unwrap();
    let t = text(&out);
    // The kernel refuses an immediate ALU instruction with a source register
    // ("BPF_ALU uses reserved fields"); the disassembler shows one as `.insn`.
    let immediate_alu = |i: &Insn| matches!(i.code & 0x07, BPF_ALU | BPF_ALU64) && i.code & BPF_X == 0;
    assert!(out.program.insns.iter().filter(|i| immediate_alu(i)).all(|i| i.src == 0), "{t}");
    assert!(!t.contains(".insn"), "{t}");
    assert_eq!(run(&out.program, &World::default(), 0), Ok(22), "{t}");
}

#[test]
fn machine_registers_the_code_names_are_worked_around() {
    let mut f = Func::new();
    let v = f.vreg();
    f.emit(mov64_imm(R1, 5));
    f.op(mov64_imm(R0, 9), v, v);
    f.emit(mov64_reg(R2, R1));
    f.op(alu64_reg(AluOp::Add, R2, R0), R2, v);
    f.emit(mov64_reg(R0, R2));
    f.push(Item::Exit);
    let out = text(&f.finish().unwrap());
    // R1 is live over v's range, R2 set there: v takes R3.
    assert!(out.contains("r3 = 9") && out.contains("r2 += r3"), "{out}");
}

#[test]
fn a_value_read_before_it_is_set_is_an_error() {
    let mut f = Func::new();
    let v = f.vreg();
    f.op(mov64_reg(R0, R0), R0, v);
    f.push(Item::Exit);
    assert!(matches!(f.finish(), Err(IrError::Undefined { reg: 0, .. })));
}

#[test]
fn when_every_register_is_taken_a_value_spills_to_a_slot() {
    let mut f = Func::new();
    let vs: Vec<VReg> = (0..6).map(|_| f.vreg()).collect();
    for (i, v) in vs.iter().enumerate() {
        f.op(mov64_imm(R0, i as i32), *v, *v);
    }
    // A call between: only R6-R9 survive it, and R6 holds the context.
    f.emit(mov64_reg(R6, R1));
    f.push(Item::Call(BPF_FUNC_ktime_get_ns));
    f.emit(mov64_imm(R0, 0));
    for v in &vs {
        f.op(alu64_reg(AluOp::Add, R0, R0), R0, *v);
    }
    f.emit(alu64_reg(AluOp::Add, R0, R6));
    f.push(Item::Exit);
    let out = f.finish().unwrap();
    let t = text(&out);
    // Three in R7-R9, three in slots: stored when set, reloaded where read.
    assert_eq!(t.matches(") = r0").count(), 3, "{t}");
    assert_eq!(t.matches("= *(u64 *)(r10 -").count(), 3, "{t}");
    assert_eq!(out.stack, 24, "{t}");
}

#[test]
fn slots_share_bytes_once_their_values_are_dead() {
    let mut f = Func::new();
    let a = f.frame.alloc(256).unwrap();
    f.emit(store_imm(Size::DW, R10, a, 1));
    f.emit(load(Size::DW, R0, R10, a));
    let mark = f.frame.mark();
    // A second large slot, allocated while the first is still open (virtually 512
    // bytes deep) but used only after the first's last use: it takes the same bytes.
    let b = f.frame.alloc(256).unwrap();
    f.emit(store_imm(Size::DW, R10, b, 2));
    f.emit(mov64_reg(R1, R10));
    f.emit(alu64_imm(AluOp::Add, R1, i32::from(b) + 8));
    f.emit(load(Size::DW, R0, R1, 0));
    f.frame.release(mark);
    f.push(Item::Exit);
    let out = f.finish().unwrap();
    assert_eq!(out.stack, 256);
    assert_eq!(out.spilled, 0);
    let t = text(&out);
    assert!(t.contains("*(u64 *)(r10 -256) = 1") && t.contains("*(u64 *)(r10 -256) = 2"), "{t}");
    assert!(t.contains("r1 += -248"), "{t}");
}

#[test]
fn a_slot_used_through_its_address_stays_live_until_the_address_is_used() {
    let mut f = Func::new();
    let a = f.frame.alloc(8).unwrap();
    let b = f.frame.alloc(8).unwrap();
    f.emit(mov64_reg(R1, R10));
    f.emit(alu64_imm(AluOp::Add, R1, i32::from(a)));
    f.emit(store_imm(Size::DW, R10, b, 5));
    f.emit(load(Size::DW, R0, R10, b));
    // The helper reads `a` through R1: `b` was live while `a`'s address was held.
    f.emit(mov64_imm(R2, 8));
    f.emit(mov64_imm(R3, 0));
    f.push(Item::Call(BPF_FUNC_probe_read_user));
    f.push(Item::Exit);
    let out = f.finish().unwrap();
    assert_eq!(out.stack, 16, "{}", text(&out));
}

#[test]
fn a_slot_used_in_a_loop_is_kept_over_the_whole_loop() {
    let mut f = Func::new();
    let top = f.new_label();
    let out = f.new_label();
    let a = f.frame.alloc(8).unwrap();
    let b = f.frame.alloc(8).unwrap();
    f.emit(store_imm(Size::DW, R10, b, 0));
    f.emit(mov64_imm(R1, 0));
    f.bind(top);
    f.jmp_imm_to(JmpOp::Ge, R1, 4, out);
    // `a` is read before it is written on every turn after the first.
    f.emit(load(Size::DW, R2, R10, a));
    f.emit(store_reg(Size::DW, R10, a, R1));
    f.emit(alu64_imm(AluOp::Add, R1, 1));
    f.ja_to(top);
    f.bind(out);
    f.emit(load(Size::DW, R0, R10, b));
    f.push(Item::Exit);
    let out = f.finish().unwrap();
    assert_eq!(out.stack, 16, "{}", text(&out));
}

#[test]
fn what_the_stack_cannot_hold_spills_to_the_scratch_map() {
    let mut f = Func::new();
    let fail = f.new_label();
    f.emit(mov64_reg(R6, R1));
    f.push(Item::SpillSetup { fail });
    let a = f.frame.alloc(400).unwrap();
    let b = f.frame.alloc(200).unwrap();
    f.emit(store_imm(Size::DW, R10, b, 2));
    f.emit(store_imm(Size::DW, R10, a, 1));
    f.emit(mov64_reg(R1, R10));
    f.emit(alu64_imm(AluOp::Add, R1, i32::from(a)));
    f.emit(mov64_imm(R2, 400));
    f.emit(mov64_imm(R3, 0));
    f.push(Item::Call(BPF_FUNC_probe_read_user));
    f.emit(load(Size::DW, R0, R10, b));
    f.bind(fail);
    f.push(Item::Exit);
    let out = f.finish().unwrap();
    let t = text(&out);
    // Both live at once: 600 bytes. The one that overflows goes to the map, its
    // pointer at r10-8.
    assert_eq!(out.spilled, 400, "{t}");
    assert_eq!(out.stack, 208, "{t}");
    assert!(t.contains("call bpf_map_lookup_elem"), "{t}");
    // The address passed to the helper is the map element's.
    assert!(t.contains("r1 = *(u64 *)(r10 -8)"), "{t}");
    assert_eq!(out.program.relocations.len(), 1);
}

#[test]
fn a_direct_access_to_a_spilled_slot_goes_through_a_free_register() {
    let mut f = Func::new();
    let fail = f.new_label();
    f.emit(mov64_reg(R6, R1));
    f.push(Item::SpillSetup { fail });
    let a = f.frame.alloc(504).unwrap();
    let b = f.frame.alloc(16).unwrap();
    f.emit(store_imm(Size::DW, R10, a, 1));
    f.emit(store_imm(Size::DW, R10, b, 2));
    f.emit(load(Size::DW, R0, R10, a));
    f.emit(load(Size::DW, R1, R10, b));
    f.emit(alu64_reg(AluOp::Add, R0, R1));
    f.bind(fail);
    f.push(Item::Exit);
    let out = f.finish().unwrap();
    let t = text(&out);
    // The first slot fills the stack below the pointer; the second, used directly, is
    // reached through the pointer loaded into a register free there.
    assert_eq!((out.stack, out.spilled), (512, 16), "{t}");
    assert!(t.contains("r0 = *(u64 *)(r10 -8)\n  11: *(u64 *)(r0 +0) = 2"), "{t}");
    assert!(t.contains("r2 = *(u64 *)(r10 -8)\n  14: r1 = *(u64 *)(r2 +0)"), "{t}");
}

/// Sets R0-R9 to 0-9: every register live from here to `sum_registers`.
fn fill_registers(f: &mut Func) {
    for (i, r) in REGS[..10].iter().enumerate() {
        f.emit(mov64_imm(*r, i as i32));
    }
}

/// R0 += R1 + ... + R9.
fn sum_registers(f: &mut Func) {
    for r in &REGS[1..10] {
        f.emit(alu64_reg(AluOp::Add, R0, *r));
    }
}

#[test]
fn a_value_in_a_slot_read_where_every_register_is_live_borrows_one() {
    let mut f = Func::new();
    let out = f.new_label();
    fill_registers(&mut f);
    // No register is free over v's range: it lives in a slot, and each item that sets
    // or reads it borrows a register it does not name, put back after it (on both
    // ways out of the jump).
    let v = f.vreg();
    f.op(mov64_imm(R0, 100), v, v);
    f.op(alu64_reg(AluOp::Add, R0, R0), R0, v);
    f.jmp_imm_to(JmpOp::Ne, v, 100, out);
    sum_registers(&mut f);
    f.bind(out);
    f.push(Item::Exit);
    let done = f.finish().unwrap();
    let t = text(&done);
    assert_eq!(run(&done.program, &World::default(), 0), Ok(100 + (0..10).sum::<u64>()), "{t}");
    // The one borrowed is one of R6-R9 (callee-saved), which the program writes at
    // entry so that the verifier sees it written on every path before it is saved.
    let borrowed = (6..10).find(|r| t.contains(&format!("*(u64 *)(r10 -8) = r{r}"))).unwrap_or_else(|| panic!("{t}"));
    assert!(t.contains(&format!("r{borrowed} = *(u64 *)(r10 -8)")), "{t}");
    assert!(t.starts_with("   0: r6 = 0\n   1: r7 = 0\n   2: r8 = 0\n   3: r9 = 0\n"), "{t}");
}

#[test]
fn a_spilled_slot_reached_where_every_register_is_live_borrows_one_for_its_pointer() {
    let mut f = Func::new();
    let fail = f.new_label();
    f.emit(mov64_reg(R6, R1));
    f.push(Item::SpillSetup { fail });
    let a = f.frame.alloc(480).unwrap();
    let b = f.frame.alloc(40).unwrap();
    f.emit(store_imm(Size::DW, R10, a, 1));
    fill_registers(&mut f);
    f.emit(store_imm(Size::DW, R10, b, 1000));
    // R0-R8 live over it, R9 set by it: its pointer takes a borrowed register.
    f.emit(load(Size::DW, R9, R10, b));
    sum_registers(&mut f);
    f.emit(load(Size::DW, R1, R10, a));
    f.emit(alu64_reg(AluOp::Add, R0, R1));
    f.bind(fail);
    f.push(Item::Exit);
    let done = f.finish().unwrap();
    let t = text(&done);
    // `b` overflows the stack into the spill map; with every register live its
    // pointer goes through a borrowed one.
    assert_eq!(done.spilled, 40, "{t}");
    let world = World { maps: vec![(SPILL.to_string(), vec![0; 40])], ..World::default() };
    assert_eq!(run(&done.program, &world, 0), Ok((0..9).sum::<u64>() + 1000 + 1), "{t}");
    // Below the spill pointer (r10 -8), the word a borrowed register waits in.
    assert!(t.contains("*(u64 *)(r10 -16) = r") && t.contains("= *(u64 *)(r10 -16)"), "{t}");
}

#[test]
fn labels_resolve_with_no_anchor_instruction() {
    let mut f = Func::new();
    let (a, b) = (f.new_label(), f.new_label());
    f.emit(mov64_imm(R0, 0));
    f.jmp_imm_to(JmpOp::Eq, R0, 0, a);
    f.emit(mov64_imm(R0, 1));
    // Two labels bound at one place, with no `+= 0` between.
    f.bind(a);
    f.bind(b);
    f.push(Item::Exit);
    let out = f.finish().unwrap();
    assert_eq!(out.program.insns.len(), 4);
    assert_eq!(out.program.insns[1].off, 1);
}

#[test]
fn comments_stay_with_their_instruction() {
    let mut f = Func::new();
    f.comment("@n = count()");
    f.emit(mov64_imm(R0, 0));
    f.push(Item::Exit);
    let out = f.finish().unwrap();
    assert_eq!(out.program.comments, vec![(0, "@n = count()".to_string())]);
}

#[test]
fn an_r10_access_outside_every_slot_is_an_error() {
    let mut f = Func::new();
    f.emit(store_imm(Size::DW, R10, -16, 0));
    f.push(Item::Exit);
    assert!(matches!(f.finish(), Err(IrError::NoSlot { off: -16, .. })));
}

/// A probe of tens of thousands of operations: what its liveness keeps grows with what
/// is live at each item, not with items times registers (dense sets took 13 GB and 100 s
/// for 2,730 `hist()`s in one probe), and the program still comes out right.
#[test]
fn the_liveness_of_many_short_lived_values_keeps_a_few_words_an_item() {
    const VALUES: u64 = 40_000;
    let mut f = Func::new();
    f.emit(mov64_imm(R0, 0));
    for k in 0..VALUES {
        let v = f.vreg();
        f.op(mov64_imm(R0, (k % 3) as i32), v, v);
        f.op(alu64_reg(AluOp::Add, R0, R0), R0, v);
    }
    f.push(Item::Exit);
    let effects: Vec<_> = f.items.iter().map(flow::effects).collect();
    let live = flow::liveness(&f.items, &effects, flow::PHYS + VALUES as usize).unwrap();
    let words: usize = live.live_in.iter().chain(&live.live_out).map(|s| s.words()).sum();
    // Two sets an item, each of R0's word and perhaps one value's: dense, 626 words each.
    assert!(words <= 4 * f.items.len(), "{words} words for {} items", f.items.len());
    let out = f.finish().unwrap();
    assert_eq!(run(&out.program, &World::default(), 0), Ok((0..VALUES).map(|k| k % 3).sum::<u64>()));
}
