//! What each IR item reads and writes, where control goes from it, and from those:
//! which registers (machine and virtual) are live where (a backward dataflow over the
//! program's jumps), and over which items each slot must keep its bytes (its first to
//! its last use, directly or through an address formed from it, stretched over every
//! loop it is used in).

pub use super::locset::Set;
use super::{conv, IrError, Item, SlotId, R};
use crate::bpf::builder::Label;
use crate::bpf::insn::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Machine registers R0-R10 are locations 0-10; virtual register v is 11 + v.
pub const PHYS: usize = 11;

pub fn loc(r: R) -> usize {
    match r {
        R::P(p) => usize::from(p.num()),
        R::V(v) => PHYS + v.0 as usize,
    }
}

/// The locations an item reads and writes (R10 left out: it never changes).
#[derive(Debug, Default)]
pub struct Effects {
    pub uses: Vec<usize>,
    pub defs: Vec<usize>,
}

pub fn effects(item: &Item) -> Effects {
    let mut e = Effects::default();
    match item {
        Item::Op { insn, dst, src, .. } => op_effects(insn, *dst, *src, &mut e),
        Item::Wide { dst, .. } | Item::LdMap { dst, .. } | Item::SlotAddr { dst, .. } => e.defs.push(loc(*dst)),
        Item::Call(id) => {
            e.uses.extend(&conv::locs(conv::ARGS)[..usize::from(crate::bpf::helpers::helper_args(*id))]);
            e.defs.extend(conv::locs(conv::CLOBBERED));
        }
        Item::Kfunc(_) | Item::Guard(_) | Item::SpillSetup { .. } => e.defs.extend(conv::locs(conv::CLOBBERED)),
        Item::Jump { insn, dst, src, .. } => {
            if op(insn.code) != BPF_JA {
                e.uses.push(loc(*dst));
                if source(insn.code) == BPF_X {
                    e.uses.push(loc(*src));
                }
            }
        }
        Item::Exit => e.uses.push(usize::from(conv::RESULT.num())),
        Item::Bind(_) | Item::Comment(_) => {}
    }
    e.uses.retain(|&l| l != 10);
    e.defs.retain(|&l| l != 10);
    e
}

/// Does `insn` read a register through its source field? (An immediate operation's
/// source field must be 0: the verifier refuses one with "reserved fields".)
pub fn reads_src_field(insn: &Insn) -> bool {
    match class(insn.code) {
        BPF_ALU | BPF_ALU64 => source(insn.code) == BPF_X && !matches!(op(insn.code), BPF_NEG | BPF_END),
        BPF_LDX | BPF_STX => true,
        _ => false,
    }
}

fn op_effects(insn: &Insn, dst: R, src: R, e: &mut Effects) {
    let (d, s) = (loc(dst), loc(src));
    match class(insn.code) {
        BPF_ALU | BPF_ALU64 => {
            match op(insn.code) {
                BPF_MOV => {}
                _ => e.uses.push(d),
            }
            if reads_src_field(insn) {
                e.uses.push(s);
            }
            e.defs.push(d);
        }
        BPF_LDX => {
            e.uses.push(s);
            e.defs.push(d);
        }
        BPF_ST => e.uses.push(d),
        BPF_STX => {
            e.uses.extend([d, s]);
            if mode(insn.code) == BPF_ATOMIC {
                if insn.imm == BPF_CMPXCHG {
                    e.uses.push(0);
                    e.defs.push(0);
                } else if insn.imm & BPF_FETCH != 0 {
                    e.defs.push(s);
                }
            }
        }
        _ => {}
    }
}

/// Where each label is bound (the index of its `Bind`).
pub fn label_positions(items: &[Item]) -> HashMap<Label, usize> {
    items.iter().enumerate().filter_map(|(i, it)| if let Item::Bind(l) = it { Some((*l, i)) } else { None }).collect()
}

/// The items control may go to after item `i`.
pub fn successors(items: &[Item], labels: &HashMap<Label, usize>, i: usize) -> Vec<usize> {
    let next = (i + 1 < items.len()).then_some(i + 1);
    match &items[i] {
        Item::Jump { insn, target, .. } => {
            let to = labels.get(target).copied();
            if op(insn.code) == BPF_JA {
                to.into_iter().collect()
            } else {
                next.into_iter().chain(to).collect()
            }
        }
        Item::Exit => Vec::new(),
        _ => next.into_iter().collect(),
    }
}

/// The locations live on entry to and on exit from each item.
pub struct Liveness {
    pub live_in: Vec<Set>,
    pub live_out: Vec<Set>,
}

pub fn liveness(items: &[Item], effects: &[Effects], nlocs: usize) -> Result<Liveness, IrError> {
    let labels = label_positions(items);
    let succs: Vec<Vec<usize>> = (0..items.len()).map(|i| successors(items, &labels, i)).collect();
    let mut live_in = vec![Set::new(); items.len()];
    let mut live_out = vec![Set::new(); items.len()];
    let mut changed = true;
    while changed {
        changed = false;
        for i in (0..items.len()).rev() {
            let mut out = Set::new();
            for &s in &succs[i] {
                out.union(&live_in[s]);
            }
            let mut inn = out.clone();
            for &d in &effects[i].defs {
                inn.remove(d);
            }
            for &u in &effects[i].uses {
                inn.add(u);
            }
            changed |= live_in[i].union(&inn);
            live_out[i] = out;
        }
    }
    if let Some(first) = live_in.first() {
        if let Some(v) = first.iter().find(|&l| (PHYS..nlocs).contains(&l)) {
            let at = (0..items.len()).find(|&i| effects[i].uses.contains(&v)).unwrap_or(0);
            return Err(IrError::Undefined { at, reg: (v - PHYS) as u32 });
        }
    }
    Ok(Liveness { live_in, live_out })
}

/// The items over which each slot's bytes must be kept: (first, last), None for a
/// slot nothing uses.
pub fn slot_ranges(items: &[Item], effects: &[Effects], nslots: usize) -> Vec<Option<(usize, usize)>> {
    let mut ranges: Vec<Option<(usize, usize)>> = vec![None; nslots];
    let mut touch = |s: SlotId, i: usize| {
        let r = &mut ranges[s.0 as usize];
        *r = Some(r.map_or((i, i), |(a, b)| (a.min(i), b.max(i))));
    };
    let escaped = pointers(items, effects, &mut touch);
    let last = items.len().saturating_sub(1);
    for s in escaped {
        ranges[s as usize] = Some((0, last));
    }
    stretch_over_loops(items, &mut ranges);
    ranges
}

/// The slots whose address each location may hold, for the locations that hold one
/// (kept sparse: a probe has tens of thousands of locations and of labels).
type Pointers = BTreeMap<usize, BTreeSet<u32>>;

/// Follows the addresses formed from slots (forward, to a fixed point over the jumps):
/// calls `touch` for each item using a slot directly or through a register holding its
/// address; returns the slots whose address is stored to memory (kept live throughout).
fn pointers(items: &[Item], effects: &[Effects], touch: &mut impl FnMut(SlotId, usize)) -> BTreeSet<u32> {
    let mut at_label: HashMap<Label, Pointers> = HashMap::new();
    let mut escaped = BTreeSet::new();
    loop {
        let mut changed = false;
        let mut state = Pointers::new();
        for (i, item) in items.iter().enumerate() {
            if let Item::Bind(l) = item {
                for (&loc, theirs) in at_label.get(l).into_iter().flatten() {
                    state.entry(loc).or_default().extend(theirs.iter().copied());
                }
            }
            for u in &effects[i].uses {
                for &s in state.get(u).into_iter().flatten() {
                    touch(SlotId(s), i);
                }
            }
            pointer_step(item, &effects[i], &mut state, &mut escaped, |s| touch(s, i));
            if let Item::Jump { insn, target, .. } = item {
                let merged = at_label.entry(*target).or_default();
                for (&loc, s) in &state {
                    let m = merged.entry(loc).or_default();
                    let before = m.len();
                    m.extend(s.iter().copied());
                    changed |= m.len() != before;
                }
                if op(insn.code) == BPF_JA {
                    state.clear();
                }
            }
            if matches!(item, Item::Exit) {
                state.clear();
            }
        }
        if !changed {
            return escaped;
        }
    }
}

fn pointer_step(
    item: &Item,
    fx: &Effects,
    state: &mut Pointers,
    escaped: &mut BTreeSet<u32>,
    mut touch: impl FnMut(SlotId),
) {
    let keep: Option<BTreeSet<u32>> = match item {
        Item::SlotAddr { slot, .. } => {
            touch(*slot);
            Some([slot.0].into())
        }
        Item::Op { insn, dst, src, slot } => {
            if let Some(s) = slot {
                touch(*s);
            }
            let (d, s) = (loc(*dst), loc(*src));
            let c = class(insn.code);
            let held = |l: usize| state.get(&l).cloned().unwrap_or_default();
            if c == BPF_STX {
                escaped.extend(held(s));
            }
            let x = source(insn.code) == BPF_X;
            match (c, op(insn.code)) {
                (BPF_ALU64, BPF_MOV) if x => Some(held(s)),
                (BPF_ALU64, BPF_ADD | BPF_SUB) => {
                    let mut p = held(d);
                    if x {
                        p.extend(held(s));
                    }
                    Some(p)
                }
                _ => None,
            }
        }
        _ => None,
    };
    for &d in &fx.defs {
        match &keep {
            Some(p) if !p.is_empty() => state.insert(d, p.clone()),
            _ => state.remove(&d),
        };
    }
}

/// Stretches each range that meets a loop (a jump back to `t` from `j`) over all of it:
/// a value used in a loop may be read on a later turn.
fn stretch_over_loops(items: &[Item], ranges: &mut [Option<(usize, usize)>]) {
    let labels = label_positions(items);
    let loops: Vec<(usize, usize)> = items
        .iter()
        .enumerate()
        .filter_map(|(j, it)| match it {
            Item::Jump { target, .. } => labels.get(target).filter(|&&t| t <= j).map(|&t| (t, j)),
            _ => None,
        })
        .collect();
    for r in ranges.iter_mut().flatten() {
        loop {
            let before = *r;
            for &(t, j) in &loops {
                if r.0 <= j && r.1 >= t {
                    *r = (r.0.min(t), r.1.max(j));
                }
            }
            if *r == before {
                break;
            }
        }
    }
}

/// Each virtual register's range: its first to its last item where it is set, read or
/// live (None for one never used).
pub fn vreg_ranges(live: &Liveness, effects: &[Effects], nvregs: usize) -> Vec<Option<(usize, usize)>> {
    let mut ranges: Vec<Option<(usize, usize)>> = vec![None; nvregs];
    for (i, fx) in effects.iter().enumerate() {
        let mut mark = |l: usize| {
            if l >= PHYS {
                let r = &mut ranges[l - PHYS];
                *r = Some(r.map_or((i, i), |(a, b)| (a.min(i), b.max(i))));
            }
        };
        fx.uses.iter().chain(&fx.defs).for_each(|&l| mark(l));
        live.live_in[i].iter().filter(|&l| (PHYS..PHYS + nvregs).contains(&l)).for_each(&mut mark);
    }
    ranges
}
