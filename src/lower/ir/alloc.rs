//! The allocator: virtual registers onto R0-R9 (linear scan over their ranges, around
//! the machine registers the code names and the registers calls clobber; an 8-byte slot
//! when none is free), then every slot onto the stack, sharing bytes between slots
//! whose ranges do not meet, and onto the spill map what the 512 bytes cannot hold.
//!
//! Reaching a value kept in a slot, or a slot in the spill map, takes a register for
//! the instruction (emit.rs). Where none may be free there, the allocator reserves
//! stack words to borrow one in: its value is saved before the instruction and put
//! back after it (`Allocation::borrow`), so no access is ever left without a register.

use super::flow::{self, Effects, Liveness, PHYS};
use super::frame::MAX_STACK;
use super::{conv, IrError, Item, SlotId, R};
use crate::bpf::insn::{Reg, REGS};

/// Where a slot's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// At R10 + this offset.
    Stack(i16),
    /// At this offset in the spill map's element.
    Spill(u32),
    /// Nowhere: nothing uses the slot.
    Unused,
}

/// Where a virtual register lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Home {
    Reg(Reg),
    Slot(SlotId),
    Unused,
}

#[derive(Debug)]
pub struct Allocation {
    pub homes: Vec<Home>,
    pub places: Vec<Place>,
    /// The machine registers (bits 0-10) each item may not use as a temporary.
    pub busy: Vec<u16>,
    /// R10 + this holds the spill map's element pointer, when anything spilled.
    pub spill_pointer: Option<i16>,
    /// R10 + these hold the registers an item borrows when none is free at it.
    pub borrow: Vec<i16>,
    pub stack: u32,
    pub spilled: u32,
}

pub fn allocate(items: &[Item], slot_sizes: &[u32], nvregs: u32) -> Result<Allocation, IrError> {
    let nvregs = nvregs as usize;
    let nlocs = PHYS + nvregs;
    let effects: Vec<Effects> = items.iter().map(flow::effects).collect();
    let live = flow::liveness(items, &effects, nlocs)?;
    for (i, item) in items.iter().enumerate() {
        let regs: Vec<u8> = (0..6u8).filter(|&r| live.live_out[i].has(usize::from(r))).collect();
        if matches!(item, Item::SpillSetup { .. }) && !regs.is_empty() {
            return Err(IrError::SpillSetupClobbers { regs });
        }
    }
    let mut busy: Vec<u16> = (0..items.len()).map(|i| touched(&live, &effects[i], i)).collect();
    let vranges = flow::vreg_ranges(&live, &effects, nvregs);
    let mut sizes = slot_sizes.to_vec();
    let mut ranges = flow::slot_ranges(items, &effects, sizes.len());
    let handover: Vec<(u16, u16)> = (0..items.len()).map(|i| handover(&live, &effects[i], i)).collect();
    let homes = assign_registers(&vranges, &handover, &live, &mut busy, &mut sizes, &mut ranges);
    let words = (0..items.len()).map(|i| shortfall(&items[i], &homes, busy[i])).max().unwrap_or(0);
    let placed = place_slots(&sizes, &ranges, words);
    Ok(Allocation {
        homes,
        places: placed.places,
        busy,
        spill_pointer: placed.spill_pointer,
        borrow: placed.borrow,
        stack: placed.stack,
        spilled: placed.spilled,
    })
}

/// The register operands of an item (a jump's, an instruction's, a definition's).
pub fn operands(item: &Item) -> Vec<R> {
    match item {
        Item::Op { dst, src, .. } | Item::Jump { dst, src, .. } => vec![*dst, *src],
        Item::Wide { dst, .. } | Item::LdMap { dst, .. } | Item::SlotAddr { dst, .. } => vec![*dst],
        _ => Vec::new(),
    }
}

/// How many more registers item `i` may need than are free at it (`busy`): two for each
/// virtual register of it kept in a slot (its value, and the spill pointer when that
/// slot is in the spill map), one for a slot it reaches that may be spilled.
fn shortfall(item: &Item, homes: &[Home], busy: u16) -> u32 {
    let mut slotted: Vec<u32> = (operands(item).into_iter())
        .filter_map(|r| match r {
            R::V(v) if matches!(homes[v.0 as usize], Home::Slot(_)) => Some(v.0),
            _ => None,
        })
        .collect();
    slotted.dedup();
    let spilled_base = matches!(item, Item::Op { slot: Some(_), .. });
    let needed = 2 * slotted.len() as u32 + u32::from(spilled_base);
    let free = 10 - (busy & 0x3ff).count_ones();
    needed.saturating_sub(free)
}

/// The machine registers item `i` reads, writes, or that are live across it.
fn touched(live: &Liveness, fx: &Effects, i: usize) -> u16 {
    let mut m = live.live_in[i].phys() | live.live_out[i].phys() | 1 << 10;
    for &l in fx.uses.iter().chain(&fx.defs) {
        if l < PHYS {
            m |= 1 << l;
        }
    }
    m
}

/// The machine registers item `i` hands over: those it reads for the last time (and
/// does not set), and those it sets without reading. A virtual register set at `i` may
/// take one of the first (`v = r3` where r3 dies: r3 itself), one whose last use is at
/// `i` one of the second (`r1 = v`: v in r1), and the move between them disappears.
fn handover(live: &Liveness, fx: &Effects, i: usize) -> (u16, u16) {
    let bits = |ls: &[usize]| ls.iter().filter(|&&l| l < 10).fold(0u16, |m, &l| m | 1 << l);
    let (uses, defs) = (bits(&fx.uses), bits(&fx.defs));
    let dying = uses & !defs & !live.live_out[i].phys();
    (dying, defs & !uses)
}

/// Linear scan: each virtual register, in the order its range starts, takes a register
/// no item of its range touches and no other virtual register holds there (save one
/// its first item hands over, or its last: `handover`); or a slot. Marks what it hands
/// out in `busy`.
fn assign_registers(
    vranges: &[Option<(usize, usize)>],
    handover: &[(u16, u16)],
    live: &Liveness,
    busy: &mut [u16],
    sizes: &mut Vec<u32>,
    ranges: &mut Vec<Option<(usize, usize)>>,
) -> Vec<Home> {
    let mut homes = vec![Home::Unused; vranges.len()];
    let mut held = vec![0u16; busy.len()];
    let mut order: Vec<usize> = (0..vranges.len()).filter(|&v| vranges[v].is_some()).collect();
    order.sort_by_key(|&v| vranges[v].map(|r| r.0));
    for v in order {
        let Some((a, b)) = vranges[v] else { continue };
        let at = |i: usize, free: u16| busy[i] & !(free & !held[i]);
        let dies = !live.live_out[b].has(PHYS + v);
        let (first, last) = (handover[a].0, if dies { handover[b].1 } else { 0 });
        let mut taken = busy[a..=b].iter().fold(0u16, |m, x| m | x);
        if a < b {
            taken = busy[a + 1..b].iter().fold(at(a, first) | at(b, last), |m, x| m | x);
        }
        // A register handed over comes first: the move it would take is saved.
        let handed = (first | last) & !taken;
        let pick = (0..10).find(|&r| handed & (1 << r) != 0);
        match pick.or_else(|| conv::locs(conv::ORDER).into_iter().find(|&r| taken & (1 << r) == 0)) {
            Some(r) => {
                homes[v] = Home::Reg(REGS[r]);
                busy[a..=b].iter_mut().for_each(|x| *x |= 1 << r);
                held[a..=b].iter_mut().for_each(|x| *x |= 1 << r);
            }
            None => {
                homes[v] = Home::Slot(SlotId(sizes.len() as u32));
                sizes.push(8);
                ranges.push(Some((a, b)));
            }
        }
    }
    homes
}

struct Placed {
    places: Vec<Place>,
    spill_pointer: Option<i16>,
    borrow: Vec<i16>,
    stack: u32,
    spilled: u32,
}

/// Places slots: first on the stack (below `words` words kept for borrowed registers),
/// sharing bytes where ranges do not meet; when the stack cannot hold them all, the
/// largest of those that overflow go to the spill map (8 bytes of stack then hold its
/// pointer, first).
fn place_slots(sizes: &[u32], ranges: &[Option<(usize, usize)>], words: u32) -> Placed {
    let used: Vec<usize> = (0..sizes.len()).filter(|&s| ranges[s].is_some()).collect();
    let mut spill: Vec<usize> = Vec::new();
    let reserved = 8 * words;
    let (mut at, mut top) = pack(&used, sizes, ranges, reserved);
    if top > MAX_STACK as u32 {
        loop {
            let kept: Vec<usize> = used.iter().copied().filter(|s| !spill.contains(s)).collect();
            (at, top) = pack(&kept, sizes, ranges, reserved + 8);
            if top <= MAX_STACK as u32 {
                break;
            }
            let over = kept.iter().copied().filter(|&s| at[s] + sizes[s] > MAX_STACK as u32);
            match over.max_by_key(|&s| (sizes[s], s)) {
                Some(s) => spill.push(s),
                None => break,
            }
        }
    }
    let (spill_at, spilled) = pack(&spill, sizes, ranges, 0);
    let places = (0..sizes.len())
        .map(|s| match () {
            _ if ranges[s].is_none() => Place::Unused,
            _ if spill.contains(&s) => Place::Spill(spill_at[s]),
            _ => Place::Stack(-((at[s] + sizes[s]) as i32) as i16),
        })
        .collect();
    let pointer = (!spill.is_empty()).then_some(-8);
    let below = if spill.is_empty() { 0 } else { 8 };
    let borrow = (1..=words as i32).map(|k| -(below + 8 * k) as i16).collect();
    Placed { places, spill_pointer: pointer, borrow, stack: top, spilled }
}

/// First fit: each slot, in the order its range starts, at the lowest offset (from
/// `base`) where no slot already placed whose range meets its own has bytes. Returns
/// the offsets (by slot) and the height reached.
fn pack(slots: &[usize], sizes: &[u32], ranges: &[Option<(usize, usize)>], base: u32) -> (Vec<u32>, u32) {
    let mut order = slots.to_vec();
    order.sort_by_key(|&s| (ranges[s].map(|r| r.0), std::cmp::Reverse(sizes[s]), s));
    let mut at = vec![0u32; sizes.len()];
    let mut placed: Vec<usize> = Vec::new();
    let mut top = base;
    for s in order {
        let (a, b) = ranges[s].unwrap_or_default();
        let mut blocking: Vec<(u32, u32)> = placed
            .iter()
            .filter(|&&p| ranges[p].is_some_and(|(pa, pb)| pa <= b && a <= pb))
            .map(|&p| (at[p], at[p] + sizes[p]))
            .collect();
        blocking.sort_unstable();
        let mut off = base;
        for (lo, hi) in blocking {
            if off + sizes[s] <= lo {
                break;
            }
            off = off.max(hi);
        }
        at[s] = off;
        top = top.max(off + sizes[s]);
        placed.push(s);
    }
    (at, top)
}
