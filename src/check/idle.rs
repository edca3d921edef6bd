//! Probes with nothing to do in this binary: a body whose every statement sits in a
//! branch of `if defined(...)` that this binary does not take (a library's probe meant
//! for other builds: `on return F { if !defined(reason) { ... } }` in a binary with
//! DWARF). Such a probe is not attached at all, so it costs the target nothing, not even
//! its trap. A body written empty (`on entry F {}`, hits counted by `--stats`) is kept.

use super::Checked;
use crate::syntax::ast::{Block, Else, ExprId, Item, Script, Stmt, StmtKind};
use std::collections::HashMap;

/// Drops the instances whose probe does nothing here.
pub fn drop_idle(script: &Script, checked: &mut Checked) {
    checked.instances.retain(|inst| {
        let Some(Item::Probe(p)) = script.items.get(inst.item) else { return true };
        p.body.stmts.is_empty() || acts(&p.body, &inst.facts.static_conds)
    });
}

/// Whether running `block` can do anything, given the `defined(...)` conditions known.
fn acts(block: &Block, known: &HashMap<ExprId, bool>) -> bool {
    block.stmts.iter().any(|s| stmt_acts(s, known))
}

fn stmt_acts(s: &Stmt, known: &HashMap<ExprId, bool>) -> bool {
    let StmtKind::If { cond, then, otherwise } = &s.kind else { return true };
    let taken = known.get(&cond.id).copied();
    let then_acts = taken != Some(false) && acts(then, known);
    let else_acts = taken != Some(true)
        && match otherwise {
            Some(Else::Block(b)) => acts(b, known),
            Some(Else::If(s)) => stmt_acts(s, known),
            None => false,
        };
    then_acts || else_acts
}
