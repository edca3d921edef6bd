//! Where an inlined call's entry probe goes: an instruction that every call of the
//! inlined body passes exactly once.
//!
//! The lowest address of the body is not one: the register allocator puts reloads and
//! moves that serve the body (with the body's source position) at the end of the blocks
//! that lead to it, so the lowest address can sit on one branch of an `if` before the
//! call. The inline tree's `parentPc` is not always one either: the compiler's inline
//! mark is a NOP placed right before the body, but when another instruction has the
//! call's line the compiler uses that instruction as the mark instead (cmd/compile's
//! genssa), and that one can be on any path through the line.
//!
//! So: the body's instructions (and the mark, when it is a true NOP) are found in the
//! caller's control flow graph; the block among them that dominates the others is where
//! the body begins. Blocks that no other body block dominates but that only lead, one
//! straight successor after another, into another such block are those edge moves, and
//! are passed over, and so are blocks where the body has only moves and constants (the
//! register allocator's reloads), unless that is all it has. The probe goes on the first
//! body instruction of the block where the body begins (or the mark); when that block is
//! the header of a loop of the body itself, in the single block that enters the loop.
//! When no single block stands out, the lowest address is kept and the caller warns.

use super::cfg::Cfg;

/// How the entry was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Placement {
    /// The compiler's inline mark, a NOP right before the body (the block where the body
    /// begins has no instruction of the body).
    Mark,
    /// The first instruction of the body's entry block that belongs to the body.
    Body,
    /// The body starts with a loop: in the one block that enters it, the first body
    /// instruction, else its last instruction.
    Preheader,
    /// The control flow did not single out one place: the lowest address of the body,
    /// which may miss calls.
    Lowest,
}

/// The probe address of one inlined call and how it was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InlinedEntry {
    pub addr: u64,
    pub how: Placement,
}

/// How many straight successors an edge move may be away from the body's entry.
const EDGE_CHAIN_MAX: usize = 16;

/// The entry of the inlined call whose body is `body` (address ranges) in the function
/// whose graph is `cfg`; `parent_pc` is its inline-tree `parentPc`.
pub(crate) fn place(cfg: &Cfg, body: &[(u64, u64)], parent_pc: Option<u64>) -> Option<InlinedEntry> {
    let in_body = |addr: u64| {
        let i = body.partition_point(|r| r.1 <= addr);
        body.get(i).is_some_and(|r| r.0 <= addr)
    };
    let mark = parent_pc.and_then(|pc| cfg.insn_at(pc)).filter(|&k| cfg.insns[k].nop);
    // The blocks holding the body's own work (or the mark), apart from the blocks where
    // it has only moves and constants, which the register allocator may put anywhere;
    // those count only when the body has nothing else.
    let mut real: Vec<usize> = Vec::new();
    let mut moves: Vec<usize> = Vec::new();
    for (k, ins) in cfg.insns.iter().enumerate() {
        let b = cfg.block_of_insn(k);
        if !cfg.reached(b) {
            continue;
        }
        if Some(k) == mark || in_body(ins.addr) && !ins.shuffle {
            if real.last() != Some(&b) {
                real.push(b);
            }
        } else if in_body(ins.addr) && moves.last() != Some(&b) {
            moves.push(b);
        }
    }
    let lowest = body.first()?.0;
    let fallback = InlinedEntry { addr: lowest, how: Placement::Lowest };
    let members = if real.is_empty() { moves } else { real };
    let mut roots: Vec<usize> =
        members.iter().copied().filter(|&b| !members.iter().any(|&m| m != b && cfg.dominates(m, b))).collect();
    if roots.len() > 1 {
        let leads_into_another = |r: usize, roots: &[usize]| {
            let mut x = r;
            for _ in 0..EDGE_CHAIN_MAX {
                let [next] = cfg.blocks[x].succs[..] else { return false };
                if next != r && roots.contains(&next) {
                    return true;
                }
                x = next;
            }
            false
        };
        let kept: Vec<usize> = roots.iter().copied().filter(|&r| !leads_into_another(r, &roots)).collect();
        roots = kept;
    }
    let [entry] = roots[..] else { return Some(fallback) };
    // A loop of the body's own: a block that the entry dominates goes back to it, and
    // that jump (or the last instruction before falling into it) is the body's.
    let ends_in_body = |p: usize| {
        let b = &cfg.blocks[p];
        (b.first..b.end).rev().map(|k| &cfg.insns[k]).find(|i| !i.shuffle).is_some_and(|i| in_body(i.addr))
    };
    let body_loop = cfg.blocks[entry].preds.iter().any(|&p| cfg.dominates(entry, p) && ends_in_body(p));
    if body_loop && Some(entry) != mark.map(|k| cfg.block_of_insn(k)) {
        let outside: Vec<usize> =
            cfg.blocks[entry].preds.iter().copied().filter(|&p| !cfg.dominates(entry, p)).collect();
        return Some(match outside[..] {
            [p] if cfg.blocks[p].succs == [entry] => {
                let b = &cfg.blocks[p];
                let k = (b.first..b.end).find(|&k| in_body(cfg.insns[k].addr)).unwrap_or(b.end - 1);
                InlinedEntry { addr: cfg.insns[k].addr, how: Placement::Preheader }
            }
            _ => fallback,
        });
    }
    // The body's first instruction in that block (DWARF describes the parameters best
    // inside the body), else the mark.
    let block = &cfg.blocks[entry];
    match (block.first..block.end).find(|&k| in_body(cfg.insns[k].addr)) {
        Some(k) => Some(InlinedEntry { addr: cfg.insns[k].addr, how: Placement::Body }),
        None => Some(InlinedEntry { addr: cfg.insns[mark?].addr, how: Placement::Mark }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{Flow, FlowInsn};

    fn insn(addr: u64, flow: Flow) -> FlowInsn {
        FlowInsn { addr, next: addr + 1, flow, nop: false, shuffle: false, sp_store: None }
    }

    /// `if timed { t0 = now(); reload x }; note(x) { body }; ret`: 0 branch to 4;
    /// 1..3 timed path with the reload at 3 (body); 4, 5 body; 6 ret.
    fn timed() -> Cfg {
        Cfg::new(
            vec![
                insn(0, Flow::Branch(4)),
                insn(1, Flow::Next),
                insn(2, Flow::Next),
                insn(3, Flow::Next),
                insn(4, Flow::Next),
                insn(5, Flow::Next),
                insn(6, Flow::Stop),
            ],
            |_| false,
        )
    }

    #[test]
    fn a_reload_on_one_path_is_passed_over() {
        let at = place(&timed(), &[(3, 6)], Some(2)).unwrap();
        assert_eq!(at, InlinedEntry { addr: 4, how: Placement::Body });
    }

    #[test]
    fn a_true_inline_mark_is_used_when_its_block_has_no_body() {
        let mut insns = timed().insns;
        insns[4].nop = true;
        // The body at 3 and 5, the mark at 4: the first body instruction of 4's block.
        let at = place(&Cfg::new(insns.clone(), |_| false), &[(3, 4), (5, 6)], Some(4)).unwrap();
        assert_eq!(at, InlinedEntry { addr: 5, how: Placement::Body });
        // An empty body but for an edge move at 3 on one path.
        let at = place(&Cfg::new(insns, |_| false), &[(3, 4)], Some(4)).unwrap();
        assert_eq!(at, InlinedEntry { addr: 4, how: Placement::Mark });
    }

    #[test]
    fn a_body_that_starts_with_its_own_loop_is_entered_before_it() {
        // 0: caller; 1: jump to 3 (preheader); 2: loop body (callee); 3: header (callee),
        // branch back to 2; 4: ret.
        let g = Cfg::new(
            vec![
                insn(0, Flow::Next),
                insn(1, Flow::Jump(3)),
                insn(2, Flow::Next),
                insn(3, Flow::Branch(2)),
                insn(4, Flow::Stop),
            ],
            |_| false,
        );
        let at = place(&g, &[(2, 4)], None).unwrap();
        assert_eq!(at, InlinedEntry { addr: 1, how: Placement::Preheader });
    }

    #[test]
    fn a_call_in_the_callers_loop_is_at_its_body() {
        // 0: jump to 3; 1, 2: body of the call in the loop; 3: caller's condition, back to 1.
        let g = Cfg::new(
            vec![
                insn(0, Flow::Jump(3)),
                insn(1, Flow::Next),
                insn(2, Flow::Next),
                insn(3, Flow::Branch(1)),
                insn(4, Flow::Stop),
            ],
            |_| false,
        );
        assert_eq!(place(&g, &[(1, 3)], None).unwrap(), InlinedEntry { addr: 1, how: Placement::Body });
    }
}
