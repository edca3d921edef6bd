//! Which instructions of a function a line probe goes to, so that it fires once each time
//! the line runs: where control comes to the line's code from elsewhere (another line,
//! the function's start), when the line's code reached from there (without leaving the
//! line) holds one of its statement starts.
//!
//! Neither "every instruction of the line" nor "every statement start" counts right: Go
//! puts several statement starts on one line in straight code (each part of a call's
//! arguments), moves a line's reloads and spills into a loop that runs before or after
//! it, and gives a `for` header's code to three places (its init before the loop, its
//! condition and post statement in it, the init often under the line before). Arrivals
//! at the line count one execution each: the body of a loop once per iteration, its
//! header once as the loop starts and once per iteration, the line after it once. An
//! arrival that reaches no statement start of the line (a reload the register allocator
//! placed there) is not the line running. Calls made on the line, and code inlined
//! into it, return to it without leaving it.

use super::cfg::Cfg;

/// A source position: (file, line).
pub(crate) type Position = (u32, u32);

/// Where a line's probes go in one function or copy, and whether one execution of the
/// line can pass two of them (counted twice).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Arrivals {
    pub sites: Vec<usize>,
    pub exact: bool,
}

/// The instructions (indexes into `cfg.insns`) where control arrives at the line whose
/// instructions `in_line` says, from an instruction not in it or from the function's
/// start, and goes on through the line's code to an instruction `is_stmt` says starts
/// one of its statements. An arrival from which every way through the line passes
/// another arrival is left to that one (Go 1.17 jumps from a `range` header's init to its
/// condition, which the loop's body also comes back to).
pub(crate) fn arrivals(
    cfg: &Cfg,
    in_line: impl Fn(usize) -> bool,
    is_stmt: impl Fn(usize) -> bool,
    any_stmt: impl Fn(usize) -> bool,
) -> Arrivals {
    let n = cfg.insns.len();
    let mut found = Vec::new();
    // Code of other lines that starts no statement, between two parts of this line (a
    // spill the compiler put there): the line goes on through it, not arriving again.
    let mut interludes = false;
    for k in (0..n).filter(|k| in_line(*k)) {
        let b = cfg.block_of_insn(k);
        if !cfg.reached(b) {
            continue;
        }
        let outside: Vec<usize> = preds(cfg, k).into_iter().filter(|p| !in_line(*p)).collect();
        let quiet: Vec<(bool, bool)> =
            outside.iter().map(|p| from_line_quietly(cfg, *p, &in_line, &is_stmt, &any_stmt)).collect();
        let arrives = k == 0 || quiet.iter().any(|(_, all)| !all);
        interludes |= arrives && quiet.iter().any(|(some, _)| *some);
        if arrives && reaches(cfg, k, &in_line, |j| is_stmt(j), None) {
            found.push(k);
        }
    }
    let mut sites = found.clone();
    for a in found {
        let others: Vec<usize> = sites.iter().copied().filter(|b| *b != a).collect();
        // Every way from `a` through the line passes another site: can `a` leave the
        // line (or stop) without passing one?
        let leaves = |j: usize| succs(cfg, j).iter().any(|s| !in_line(*s)) || succs(cfg, j).is_empty();
        if !others.is_empty() && !reaches(cfg, a, &in_line, leaves, Some(&others)) {
            sites.retain(|s| *s != a);
        }
    }
    // A site goes to the line's statement start when straight code leads there from the
    // arrival: what DWARF describes best (Go 1.17 spills an inlined call's argument on
    // the line, and says it is in the slot from the line's first instruction on).
    for a in &mut sites {
        *a = statement_after(cfg, *a, &in_line, &is_stmt);
    }
    // One execution passes two sites when one is reachable from another in the line.
    let exact = sites.iter().all(|a| {
        let others: Vec<usize> = sites.iter().copied().filter(|b| b != a).collect();
        !succs(cfg, *a).iter().any(|s| in_line(*s) && reaches(cfg, *s, &in_line, |j| others.contains(&j), None))
    });
    Arrivals { sites, exact: exact && !interludes }
}

/// The ways back from `p` (outside the line) through instructions that start no
/// statement: (some reach code of the line that ran a statement of it, all do). Where
/// all do, control at `p` is still the line's execution, in code the compiler
/// scheduled among it (a spill for the line before).
fn from_line_quietly(
    cfg: &Cfg,
    p: usize,
    in_line: &impl Fn(usize) -> bool,
    is_stmt: &impl Fn(usize) -> bool,
    any_stmt: &impl Fn(usize) -> bool,
) -> (bool, bool) {
    let (mut some, mut all) = (false, true);
    let mut seen = vec![false; cfg.insns.len()];
    let mut stack = vec![p];
    seen[p] = true;
    while let Some(k) = stack.pop() {
        let back = preds(cfg, k);
        if any_stmt(k) || back.is_empty() {
            all = false;
            continue;
        }
        for q in back {
            if in_line(q) {
                let ran = line_ran_before(cfg, q, in_line, is_stmt, any_stmt);
                some |= ran;
                all &= ran;
            } else if !seen[q] {
                seen[q] = true;
                stack.push(q);
            }
        }
    }
    (some, all && some)
}

/// Whether every way back from `q` through the line's code passes one of its statement
/// starts before leaving it: the line was running at `q`, not just a reload given to it.
/// Instructions of other lines that start no statement (reloads the register allocator
/// scheduled among the line's code, often among the code of a call inlined into it) do
/// not end the line; a statement start of another line does.
fn line_ran_before(
    cfg: &Cfg,
    q: usize,
    in_line: &impl Fn(usize) -> bool,
    is_stmt: &impl Fn(usize) -> bool,
    any_stmt: &impl Fn(usize) -> bool,
) -> bool {
    let mut seen = vec![false; cfg.insns.len()];
    let mut stack = vec![q];
    seen[q] = true;
    while let Some(k) = stack.pop() {
        if is_stmt(k) {
            continue;
        }
        let back = preds(cfg, k);
        if back.is_empty() || back.iter().any(|b| !in_line(*b) && any_stmt(*b)) {
            return false;
        }
        for b in back {
            if !seen[b] {
                seen[b] = true;
                stack.push(b);
            }
        }
    }
    true
}

/// The first statement start on straight code from `a` (each instruction in the line,
/// the only way to the next, which has no other way in), or `a` itself.
fn statement_after(cfg: &Cfg, a: usize, in_line: &impl Fn(usize) -> bool, is_stmt: &impl Fn(usize) -> bool) -> usize {
    let mut k = a;
    while !is_stmt(k) {
        match succs(cfg, k).as_slice() {
            [next] if in_line(*next) && preds(cfg, *next) == [k] => k = *next,
            _ => return a,
        }
    }
    k
}

/// The instructions control can come to `k` from.
fn preds(cfg: &Cfg, k: usize) -> Vec<usize> {
    let b = cfg.block_of_insn(k);
    if k > cfg.blocks[b].first {
        return vec![k - 1];
    }
    cfg.blocks[b].preds.iter().filter(|p| cfg.reached(**p)).map(|p| cfg.blocks[*p].end - 1).collect()
}

/// The instructions control can go to from `k`.
fn succs(cfg: &Cfg, k: usize) -> Vec<usize> {
    let b = cfg.block_of_insn(k);
    if k + 1 < cfg.blocks[b].end {
        return vec![k + 1];
    }
    cfg.blocks[b].succs.iter().map(|s| cfg.blocks[*s].first).collect()
}

/// Whether an instruction `goal` says is reached from `from` through the line's code,
/// not passing `through` any of `avoid`.
fn reaches(
    cfg: &Cfg,
    from: usize,
    in_line: &impl Fn(usize) -> bool,
    goal: impl Fn(usize) -> bool,
    avoid: Option<&[usize]>,
) -> bool {
    let mut seen = vec![false; cfg.insns.len()];
    let mut stack = vec![from];
    seen[from] = true;
    while let Some(k) = stack.pop() {
        if goal(k) {
            return true;
        }
        for s in succs(cfg, k) {
            if !seen[s] && in_line(s) && !avoid.is_some_and(|a| a.contains(&s)) {
                seen[s] = true;
                stack.push(s);
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{Flow, FlowInsn};

    fn insn(addr: u64, flow: Flow) -> FlowInsn {
        FlowInsn { addr, next: addr + 1, flow, nop: false, shuffle: false, sp_store: None }
    }

    /// Go's `for i := 0; i < n; i++ { body }` as it compiles it (the condition at the
    /// bottom, the init given to the line before), each instruction with its line and
    /// whether it starts a statement.
    fn rotated_loop() -> (Cfg, Vec<(u32, bool)>) {
        let cfg = Cfg::new(
            vec![
                insn(0, Flow::Next),      // 35: i := 0 (given to the line before)
                insn(1, Flow::Jump(5)),   // 37: JMP to the condition
                insn(2, Flow::Next),      // 38: the body
                insn(3, Flow::Next),      // 37: i++
                insn(4, Flow::Next),      // 37: a reload
                insn(5, Flow::Next),      // 37: CMP i, n
                insn(6, Flow::Branch(2)), // 37: JLT body
                insn(7, Flow::Stop),      // 41: after the loop
            ],
            |_| false,
        );
        let lines =
            vec![(35, true), (37, false), (38, true), (37, true), (37, false), (37, true), (37, false), (41, true)];
        (cfg, lines)
    }

    fn sites(cfg: &Cfg, lines: &[(u32, bool)], line: u32) -> Vec<usize> {
        let found = arrivals(cfg, |k| lines[k].0 == line, |k| lines[k] == (line, true), |k| lines[k].1);
        assert!(found.exact, "{found:?}");
        found.sites
    }

    #[test]
    fn a_for_header_arrives_as_the_loop_starts_and_at_each_iteration() {
        let (cfg, lines) = rotated_loop();
        // The JMP (not a statement start) is where the header starts running; the
        // condition at 5 is reached from the header's own code only.
        assert_eq!(sites(&cfg, &lines, 37), vec![1, 3]);
        assert_eq!(sites(&cfg, &lines, 38), vec![2]);
        assert_eq!(sites(&cfg, &lines, 41), vec![7]);
        assert_eq!(sites(&cfg, &lines, 35), vec![0]);
    }

    #[test]
    fn a_reload_given_to_a_line_in_a_loop_is_not_the_line() {
        // 0 (10, stmt); 1 (11, stmt) loop body; 2 (12) a reload for line 12, in the loop;
        // 3 (11) JLT 1; 4 (12, stmt) the line after the loop.
        let cfg = Cfg::new(
            vec![
                insn(0, Flow::Next),
                insn(1, Flow::Next),
                insn(2, Flow::Next),
                insn(3, Flow::Branch(1)),
                insn(4, Flow::Stop),
            ],
            |_| false,
        );
        let lines = vec![(10, true), (11, true), (12, false), (11, false), (12, true)];
        assert_eq!(sites(&cfg, &lines, 12), vec![4]);
    }

    /// Go 1.17's `for _, x := range xs`: the init jumps to the condition, which the body
    /// also comes back to: the init's arrival always passes the condition's.
    #[test]
    fn an_arrival_that_always_passes_another_is_left_to_it() {
        // 0 (44); 1 (46) XOR; 2 (46) JMP 5; 3 (46, stmt) load x; 4 (47, stmt) body;
        // 5 (46, stmt) CMP; 6 (46) JLT 3; 7 (49, stmt) after.
        let cfg = Cfg::new(
            vec![
                insn(0, Flow::Next),
                insn(1, Flow::Next),
                insn(2, Flow::Jump(5)),
                insn(3, Flow::Next),
                insn(4, Flow::Next),
                insn(5, Flow::Next),
                insn(6, Flow::Branch(3)),
                insn(7, Flow::Stop),
            ],
            |_| false,
        );
        let lines =
            vec![(44, true), (46, false), (46, false), (46, true), (47, true), (46, true), (46, false), (49, true)];
        assert_eq!(sites(&cfg, &lines, 46), vec![5]);
    }

    #[test]
    fn a_site_moves_to_the_statement_start_straight_after_it() {
        // 0 (84); 1 (79) spill; 2 (79, stmt) CALL; 3 (80, stmt).
        let cfg =
            Cfg::new(vec![insn(0, Flow::Next), insn(1, Flow::Next), insn(2, Flow::Next), insn(3, Flow::Stop)], |_| {
                false
            });
        let lines = vec![(84, true), (79, false), (79, true), (80, true)];
        assert_eq!(sites(&cfg, &lines, 79), vec![2]);
        // The JMP of a for header to its condition, which the loop also comes back to,
        // stays where it is (tested above: a_for_header_...).
    }

    /// `if err == io.EOF` after `row, err := i.Next()`: the compiler compares the type
    /// word, spills for the line before, then calls runtime.ifaceeq on the line again.
    /// 0 (26, stmt) CALL Next, `first` its flow; 1 (27, stmt) CMP; 2 (27) JNE 6;
    /// 3 (26) spill; 4 (27, stmt) CALL ifaceeq; 5 (27) JEQ 7; 6 (30, stmt); 7 (28, stmt).
    fn ifaceeq(first: Flow) -> (Cfg, Vec<(u32, bool)>) {
        let flows =
            [first, Flow::Next, Flow::Branch(6), Flow::Next, Flow::Next, Flow::Branch(7), Flow::Stop, Flow::Stop];
        let cfg = Cfg::new(flows.into_iter().enumerate().map(|(a, f)| insn(a as u64, f)).collect(), |_| false);
        let lines =
            vec![(26, true), (27, true), (27, false), (26, false), (27, true), (27, false), (30, true), (28, true)];
        (cfg, lines)
    }

    #[test]
    fn a_spill_of_another_line_inside_the_line_is_no_new_arrival() {
        let (cfg, lines) = ifaceeq(Flow::Next);
        assert_eq!(sites(&cfg, &lines, 27), vec![1]);
        // Reached from elsewhere too (line 26's statement jumps to the spill): both
        // arrivals stay, said to be inexact.
        let (cfg, lines) = ifaceeq(Flow::Branch(3));
        let found = arrivals(&cfg, |k| lines[k].0 == 27, |k| lines[k] == (27, true), |k| lines[k].1);
        assert_eq!(found.sites, vec![1, 4]);
        assert!(!found.exact);
    }

    #[test]
    fn two_statement_starts_in_straight_code_are_one_arrival() {
        let cfg =
            Cfg::new(vec![insn(0, Flow::Next), insn(1, Flow::Next), insn(2, Flow::Next), insn(3, Flow::Stop)], |_| {
                false
            });
        let lines = vec![(5, true), (6, true), (6, true), (7, true)];
        assert_eq!(sites(&cfg, &lines, 6), vec![1]);
    }
}
