//! A function's control flow graph: basic blocks from its decoded instructions, their
//! edges, and dominators (Cooper, Harvey and Kennedy, "A Simple, Fast Dominance
//! Algorithm"). Used to place an inlined call's entry probe where every call passes once.
//!
//! Calls fall through, but for calls of functions that never return (runtime.gopanic,
//! runtime.panicIndex, runtime.throw...: the caller says which), which end their block.
//! Blocks that nothing reaches but a computed jump (a switch's jump table) are treated as
//! successors of every block that ends in one.

use crate::arch::{Flow, FlowInsn};

/// A basic block: `insns[first..end]` of the function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub first: usize,
    pub end: usize,
    pub succs: Vec<usize>,
    pub preds: Vec<usize>,
}

pub(crate) struct Cfg {
    pub insns: Vec<FlowInsn>,
    pub blocks: Vec<Block>,
    /// The immediate dominator of each block; None for blocks the entry does not reach
    /// (and for the entry itself, which is its own).
    idom: Vec<Option<usize>>,
    /// Position of each block in reverse postorder (usize::MAX when unreached).
    rpo_index: Vec<usize>,
}

impl Cfg {
    /// The graph of a function whose first instruction is `insns[0]`; `noreturn` says
    /// whether a call's target never returns.
    pub fn new(mut insns: Vec<FlowInsn>, noreturn: impl Fn(u64) -> bool) -> Cfg {
        for ins in &mut insns {
            ins.flow = match ins.flow {
                Flow::Call(t) if noreturn(t) => Flow::Stop,
                Flow::Call(_) => Flow::Next,
                other => other,
            };
        }
        let index_of = |addr: u64| insns.binary_search_by_key(&addr, |i| i.addr).ok();
        let mut leader = vec![false; insns.len()];
        if !insns.is_empty() {
            leader[0] = true;
        }
        for (k, ins) in insns.iter().enumerate() {
            if let Flow::Jump(t) | Flow::Branch(t) = ins.flow {
                if let Some(j) = index_of(t) {
                    leader[j] = true;
                }
            }
            if ins.flow != Flow::Next && k + 1 < insns.len() {
                leader[k + 1] = true;
            }
        }
        let mut blocks: Vec<Block> = Vec::new();
        let mut block_of = vec![0usize; insns.len()];
        for k in 0..insns.len() {
            if leader[k] {
                blocks.push(Block { first: k, end: k, succs: Vec::new(), preds: Vec::new() });
            }
            let b = blocks.len() - 1;
            blocks[b].end = k + 1;
            block_of[k] = b;
        }
        let mut indirect = Vec::new();
        for b in 0..blocks.len() {
            let last = insns[blocks[b].end - 1];
            let fall = (blocks[b].end < insns.len()).then(|| block_of[blocks[b].end]);
            let succs: Vec<usize> = match last.flow {
                Flow::Next => fall.into_iter().collect(),
                Flow::Jump(t) => index_of(t).map(|j| block_of[j]).into_iter().collect(),
                Flow::Branch(t) => fall.into_iter().chain(index_of(t).map(|j| block_of[j])).collect(),
                Flow::Indirect => {
                    indirect.push(b);
                    Vec::new()
                }
                Flow::Stop | Flow::Call(_) => Vec::new(),
            };
            blocks[b].succs = succs;
        }
        // Jump-table targets: blocks with no way in, but for alignment padding (NOPs
        // after a jump).
        let mut has_pred = vec![false; blocks.len()];
        blocks.iter().flat_map(|b| b.succs.iter()).for_each(|&s| has_pred[s] = true);
        let padding = |b: &Block| insns[b.first..b.end].iter().all(|i| i.nop);
        let targets: Vec<usize> = (1..blocks.len()).filter(|&t| !has_pred[t] && !padding(&blocks[t])).collect();
        for &b in &indirect {
            blocks[b].succs = targets.clone();
        }
        for b in 0..blocks.len() {
            let succs = blocks[b].succs.clone();
            for s in succs {
                if !blocks[s].preds.contains(&b) {
                    blocks[s].preds.push(b);
                }
            }
        }
        let mut cfg = Cfg { insns, blocks, idom: Vec::new(), rpo_index: Vec::new() };
        cfg.dominators();
        cfg
    }

    /// The block holding instruction `k`.
    pub fn block_of_insn(&self, k: usize) -> usize {
        self.blocks.partition_point(|b| b.end <= k)
    }

    /// The index of the instruction at `addr`, if one starts there.
    pub fn insn_at(&self, addr: u64) -> Option<usize> {
        self.insns.binary_search_by_key(&addr, |i| i.addr).ok()
    }

    /// Whether the entry reaches block `b`.
    pub fn reached(&self, b: usize) -> bool {
        self.rpo_index.get(b).is_some_and(|i| *i != usize::MAX)
    }

    /// Whether `a` dominates `b` (every path from the entry to `b` passes `a`); a block
    /// dominates itself.
    pub fn dominates(&self, a: usize, b: usize) -> bool {
        if !self.reached(a) || !self.reached(b) {
            return false;
        }
        let mut x = b;
        loop {
            if x == a {
                return true;
            }
            match self.idom[x] {
                Some(d) if d != x => x = d,
                _ => return false,
            }
        }
    }

    fn dominators(&mut self) {
        let n = self.blocks.len();
        self.idom = vec![None; n];
        self.rpo_index = vec![usize::MAX; n];
        if n == 0 {
            return;
        }
        // Reverse postorder by an explicit-stack DFS.
        let mut post = Vec::with_capacity(n);
        let mut seen = vec![false; n];
        let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
        seen[0] = true;
        while let Some((b, i)) = stack.pop() {
            if let Some(&s) = self.blocks[b].succs.get(i) {
                stack.push((b, i + 1));
                if !seen[s] {
                    seen[s] = true;
                    stack.push((s, 0));
                }
            } else {
                post.push(b);
            }
        }
        let rpo: Vec<usize> = post.into_iter().rev().collect();
        for (i, &b) in rpo.iter().enumerate() {
            self.rpo_index[b] = i;
        }
        self.idom[0] = Some(0);
        let mut changed = true;
        while changed {
            changed = false;
            for &b in rpo.iter().skip(1) {
                let mut new: Option<usize> = None;
                for &p in &self.blocks[b].preds {
                    if self.idom[p].is_none() {
                        continue;
                    }
                    new = Some(match new {
                        None => p,
                        Some(q) => self.intersect(p, q),
                    });
                }
                if new.is_some() && self.idom[b] != new {
                    self.idom[b] = new;
                    changed = true;
                }
            }
        }
    }

    fn intersect(&self, mut a: usize, mut b: usize) -> usize {
        while a != b {
            while self.rpo_index[a] > self.rpo_index[b] {
                a = self.idom[a].expect("processed");
            }
            while self.rpo_index[b] > self.rpo_index[a] {
                b = self.idom[b].expect("processed");
            }
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(addr: u64, flow: Flow) -> FlowInsn {
        FlowInsn { addr, next: addr + 1, flow, nop: false, shuffle: false, sp_store: None }
    }

    /// 0: branch to 3; 1; 2: jump to 4; 3; 4: ret — an if/else joining at 4.
    fn diamond() -> Cfg {
        Cfg::new(
            vec![
                insn(0, Flow::Branch(3)),
                insn(1, Flow::Next),
                insn(2, Flow::Jump(4)),
                insn(3, Flow::Next),
                insn(4, Flow::Stop),
            ],
            |_| false,
        )
    }

    #[test]
    fn blocks_and_edges() {
        let g = diamond();
        let spans: Vec<(usize, usize)> = g.blocks.iter().map(|b| (b.first, b.end)).collect();
        assert_eq!(spans, [(0, 1), (1, 3), (3, 4), (4, 5)]);
        assert_eq!(g.blocks[0].succs, [1, 2]);
        assert_eq!(g.blocks[3].preds, [1, 2]);
        assert_eq!(g.block_of_insn(2), 1);
    }

    #[test]
    fn dominance_of_a_diamond() {
        let g = diamond();
        assert!(g.dominates(0, 3) && g.dominates(0, 1) && g.dominates(3, 3));
        assert!(!g.dominates(1, 3) && !g.dominates(2, 3) && !g.dominates(1, 2));
    }

    #[test]
    fn jump_table_targets_hang_off_the_indirect_jump() {
        // 0: branch to 3; 1: jmp [table]; 2: nop (padding); 3: ret; 4: ret (only the
        // table reaches it).
        let mut insns = vec![
            insn(0, Flow::Branch(3)),
            insn(1, Flow::Indirect),
            insn(2, Flow::Next),
            insn(3, Flow::Stop),
            insn(4, Flow::Stop),
        ];
        insns[2].nop = true;
        let g = Cfg::new(insns, |_| false);
        assert_eq!(g.blocks[1].succs, [4]);
        assert!(g.reached(4) && g.dominates(1, 4) && !g.reached(2));
    }

    #[test]
    fn a_call_that_never_returns_ends_its_block() {
        // 0: branch to 3; 1: call panic; 2: ret; 3: ret
        let insns = vec![insn(0, Flow::Branch(3)), insn(1, Flow::Call(0x99)), insn(2, Flow::Stop), insn(3, Flow::Stop)];
        let g = Cfg::new(insns.clone(), |t| t == 0x99);
        assert!(g.blocks[1].succs.is_empty() && !g.reached(2));
        // Otherwise the call falls through to the RET in the same block.
        let g = Cfg::new(insns, |_| false);
        assert_eq!((g.blocks[1].first, g.blocks[1].end), (1, 3));
    }

    #[test]
    fn unreached_blocks_dominate_nothing() {
        let g = Cfg::new(vec![insn(0, Flow::Stop), insn(1, Flow::Stop)], |_| false);
        assert!(!g.reached(1) && !g.dominates(1, 1) && !g.dominates(0, 1));
    }
}
