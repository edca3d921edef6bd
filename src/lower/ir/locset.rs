//! A set of locations (machine and virtual registers, flow.rs numbers them) that costs
//! what it holds, not what the program could hold: the words of a bitset that have a
//! bit set, in order, each with its index. The liveness of a program keeps two sets an
//! item, and a probe of thousands of operations has tens of thousands of items and of
//! virtual registers: dense bitsets made that gigabytes (13 GB for 2,730 `hist()` in
//! one probe), while what is live at an item is a few registers close in number.

/// A set of locations: (word index, bits) for each word with a bit set, by index.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Set(Vec<(u32, u64)>);

impl Set {
    pub fn new() -> Set {
        Set(Vec::new())
    }

    fn word(&self, w: u32) -> Option<u64> {
        self.0.binary_search_by_key(&w, |&(i, _)| i).ok().map(|k| self.0[k].1)
    }

    pub fn has(&self, l: usize) -> bool {
        self.word((l / 64) as u32).is_some_and(|w| w & (1 << (l % 64)) != 0)
    }

    pub fn add(&mut self, l: usize) {
        let (w, bit) = ((l / 64) as u32, 1u64 << (l % 64));
        match self.0.binary_search_by_key(&w, |&(i, _)| i) {
            Ok(k) => self.0[k].1 |= bit,
            Err(k) => self.0.insert(k, (w, bit)),
        }
    }

    pub fn remove(&mut self, l: usize) {
        let (w, bit) = ((l / 64) as u32, 1u64 << (l % 64));
        if let Ok(k) = self.0.binary_search_by_key(&w, |&(i, _)| i) {
            self.0[k].1 &= !bit;
            if self.0[k].1 == 0 {
                self.0.remove(k);
            }
        }
    }

    /// Adds `other`'s locations; says whether any was new.
    pub fn union(&mut self, other: &Set) -> bool {
        if other.0.iter().all(|&(w, b)| self.word(w).is_some_and(|mine| b & !mine == 0)) {
            return false;
        }
        let mut merged = Vec::with_capacity(self.0.len() + other.0.len());
        let (mut a, mut b) = (self.0.iter().peekable(), other.0.iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(&&(i, x)), Some(&&(j, y))) if i == j => {
                    (a.next(), b.next());
                    (i, x | y)
                }
                (Some(&&(i, x)), Some(&&(j, _))) if i < j => {
                    a.next();
                    (i, x)
                }
                (_, Some(&&(j, y))) => {
                    b.next();
                    (j, y)
                }
                (Some(&&(i, x)), None) => {
                    a.next();
                    (i, x)
                }
                (None, None) => break,
            };
            merged.push(next);
        }
        self.0 = merged;
        true
    }

    /// The machine registers in the set, as bits 0-10.
    pub fn phys(&self) -> u16 {
        (self.word(0).unwrap_or(0) & 0x7ff) as u16
    }

    /// How many words the set keeps.
    #[cfg(test)]
    pub fn words(&self) -> usize {
        self.0.len()
    }

    /// The locations in the set, in order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0
            .iter()
            .flat_map(|&(w, bits)| (0..64).filter(move |b| bits & (1 << b) != 0).map(move |b| w as usize * 64 + b))
    }
}

#[cfg(test)]
mod tests {
    use super::Set;
    use std::collections::BTreeSet;

    /// Every operation against a BTreeSet's, over a pseudo-random sequence that crosses
    /// words and leaves words empty.
    #[test]
    fn a_set_answers_as_an_ordered_set_does() {
        let (mut mine, mut model) = (Set::new(), BTreeSet::new());
        let mut other = (Set::new(), BTreeSet::new());
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let l = (x % 700) as usize;
            match step % 5 {
                0 | 1 => {
                    mine.add(l);
                    model.insert(l);
                }
                2 => {
                    mine.remove(l);
                    model.remove(&l);
                }
                3 => {
                    other.0.add(l);
                    other.1.insert(l);
                }
                _ => {
                    let grew = mine.union(&other.0);
                    let before = model.len();
                    model.extend(other.1.iter().copied());
                    assert_eq!(grew, model.len() != before, "step {step}");
                    if step % 35 == 4 {
                        other = (Set::new(), BTreeSet::new());
                    }
                }
            }
            assert_eq!(mine.has(l), model.contains(&l), "step {step}");
            assert_eq!(mine.phys(), model.iter().filter(|&&l| l < 11).fold(0, |m, &l| m | 1 << l), "step {step}");
        }
        assert_eq!(mine.iter().collect::<Vec<_>>(), model.into_iter().collect::<Vec<_>>());
        assert!(mine.0.iter().all(|&(_, b)| b != 0), "no empty word is kept");
    }
}
