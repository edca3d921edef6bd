//! A big binary's functions kept in address order (the order its symbol table and
//! function table mostly have already), found by name without sorting every name: exact
//! names through a table of name hashes, patterns by one scan whose few matches are then
//! sorted; the name order of every function (a listing, "did you mean") is made only
//! when asked. Each table is built on first use. Answers are those of `symbols` on the
//! functions sorted by name: same functions, same order. The names are slices of one
//! buffer (`arena`).

use super::symbols;
use crate::gobin::Function;
use std::cell::OnceCell;

/// Functions sorted by address (then name, then size), each once, with the lookups by
/// name built on first use.
#[derive(Default)]
pub(crate) struct Functions {
    all: Vec<Function>,
    /// (hash of the name, index into `all`), sorted; made once names were looked up
    /// `SCANS_BEFORE_TABLE` times.
    by_hash: OnceCell<Vec<(u64, u32)>>,
    /// The names looked up by a pass over `all` so far.
    scans: std::cell::Cell<u32>,
    /// Indexes into `all` in name order (then address, then size).
    by_name: OnceCell<Vec<u32>>,
}

impl Functions {
    /// `all` sorted by address, name and size, its repeats dropped.
    pub(crate) fn new(mut all: Vec<Function>) -> Functions {
        // Mostly in this order already (Caddy's 71,580: five runs): merged, not sorted.
        all.sort_by(|a, b| a.addr.cmp(&b.addr).then_with(|| a.name.cmp(&b.name)).then(a.size.cmp(&b.size)));
        all.dedup();
        Functions { all, by_hash: OnceCell::new(), scans: std::cell::Cell::new(0), by_name: OnceCell::new() }
    }

    pub(crate) fn all_mut(&mut self) -> &mut [Function] {
        &mut self.all
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Every function in name order (then address, then size).
    pub(crate) fn sorted_by_name(&self) -> Vec<&Function> {
        self.by_name().iter().map(|i| &self.all[*i as usize]).collect()
    }

    fn by_name(&self) -> &[u32] {
        self.by_name.get_or_init(|| {
            let mut order: Vec<u32> = (0..self.all.len() as u32).collect();
            order.sort_unstable_by(|a, b| {
                let (a, b) = (&self.all[*a as usize], &self.all[*b as usize]);
                a.name.cmp(&b.name).then(a.addr.cmp(&b.addr)).then(a.size.cmp(&b.size))
            });
            order
        })
    }

    fn by_hash(&self) -> &[(u64, u32)] {
        self.by_hash.get_or_init(|| {
            let mut table: Vec<(u64, u32)> =
                self.all.iter().enumerate().map(|(i, f)| (name_hash(&f.name), i as u32)).collect();
            table.sort_unstable();
            table
        })
    }

    /// The functions named `name` exactly, by address (then size): their order by name.
    /// The first lookups pass over every function (a name of another length is passed
    /// without reading it); the table of hashes is made for the next ones.
    pub(crate) fn named(&self, name: &str) -> Vec<&Function> {
        if self.by_hash.get().is_none() && self.scans.get() < SCANS_BEFORE_TABLE {
            self.scans.set(self.scans.get() + 1);
            return self.all.iter().filter(|f| f.name == name).collect();
        }
        let table = self.by_hash();
        let hash = name_hash(name);
        let start = table.partition_point(|(h, _)| *h < hash);
        // Indexes ascend within one hash: address order.
        table[start..]
            .iter()
            .take_while(|(h, _)| *h == hash)
            .map(|(_, i)| &self.all[*i as usize])
            .filter(|f| f.name == name)
            .collect()
    }

    /// What `symbols::find` answers on these functions sorted by name.
    pub(crate) fn find(&self, pattern: &str) -> Vec<&Function> {
        let exact = self.named(pattern);
        if !exact.is_empty() || !symbols::is_pattern(pattern) {
            return exact;
        }
        let matcher = symbols::Matcher::new(pattern);
        let mut found: Vec<&Function> = self.all.iter().filter(|f| matcher.matches(&f.name)).collect();
        found.sort_unstable_by(|a, b| a.name.cmp(&b.name).then(a.addr.cmp(&b.addr)).then(a.size.cmp(&b.size)));
        found
    }

    /// Whether some function's name starts with `prefix`: a search in the name order
    /// when it is made, else one pass (cheaper than making it).
    pub(crate) fn any_starting_with(&self, prefix: &str) -> bool {
        let Some(order) = self.by_name.get() else { return self.all.iter().any(|f| f.name.starts_with(prefix)) };
        let start = order.partition_point(|i| self.all[*i as usize].name.as_str() < prefix);
        order.get(start).is_some_and(|i| self.all[*i as usize].name.starts_with(prefix))
    }

    /// The function whose first instruction is at `addr` (the first by name when several
    /// names share it).
    pub(crate) fn at(&self, addr: u64) -> Option<&Function> {
        let i = self.all.partition_point(|f| f.addr < addr);
        self.all.get(i).filter(|f| f.addr == addr)
    }

    /// The function whose code holds `addr` (the last by name among those starting at the
    /// same address).
    pub(crate) fn containing(&self, addr: u64) -> Option<&Function> {
        let i = self.all.partition_point(|f| f.addr <= addr);
        let f = self.all.get(i.checked_sub(1)?)?;
        (addr < f.addr + f.size.max(1)).then_some(f)
    }

    /// Drops the lookups by name (a trace keeps the functions to symbolize addresses).
    pub(crate) fn release_lookups(&mut self) {
        self.by_hash.take();
        self.by_name.take();
    }
}

/// Lookups by name that pass over every function before the table of hashes is made:
/// a pass costs about a fortieth of making the table (Caddy: 0.2 ms against 9 ms), and
/// a script names a few functions.
const SCANS_BEFORE_TABLE: u32 = 32;

/// FNV-1a, 64 bits: only to group names in memory, never stored.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gobin::Abi;

    fn f(name: &str, addr: u64, size: u64) -> Function {
        Function { name: name.into(), addr, size, abi: Abi::Internal }
    }

    /// The functions as `symbols` wants them: sorted by name, address and size, once each.
    fn name_sorted(all: &[Function]) -> Vec<Function> {
        let mut v = all.to_vec();
        v.sort_unstable_by(|a, b| a.name.cmp(&b.name).then(a.addr.cmp(&b.addr)).then(a.size.cmp(&b.size)));
        v.dedup();
        v
    }

    fn sample() -> Vec<Function> {
        vec![
            f("net/http.(*conn).serve", 0x300, 0x40),
            f("main.main", 0x100, 0x20),
            f("main.(*T).Add", 0x120, 0x10),
            f("main.Sum[go.shape.int]", 0x140, 0x10),
            f("main.Sum[go.shape.float64]", 0x150, 0x10),
            // Two names of one address, one name at two addresses, and a repeat.
            f("runtime.memmove", 0x200, 0x30),
            f("runtime.memmove.abi0", 0x200, 0x30),
            f("main.dup", 0x400, 0x8),
            f("main.dup", 0x180, 0x8),
            f("main.dup", 0x180, 0x8),
            f("main.dup", 0x180, 0x4),
            f("net/http.(*Client).Do", 0x500, 0x10),
            f("net/http.(*Client).do", 0x510, 0x10),
        ]
    }

    #[test]
    fn finds_what_symbols_finds_on_the_name_order() {
        let all = sample();
        let sorted = name_sorted(&all);
        let fs = Functions::new(all.clone());
        let patterns = [
            "main.main",
            "main.dup",
            "main.(*T).Add",
            "main.Sum[...]",
            "main.*",
            "*",
            "net/http.(*Client).*",
            "*memmove*",
            "nosuch",
            "*nosuch*",
            "runtime.memmove",
        ];
        for p in patterns {
            assert_eq!(fs.find(p), symbols::find(&sorted, p), "pattern {p:?}");
        }
        let listed: Vec<Function> = fs.sorted_by_name().into_iter().cloned().collect();
        assert_eq!(listed, sorted);
    }

    /// `sample` with its names in one buffer, as a symbol table's are read.
    fn sample_in_one_buffer() -> Vec<Function> {
        let mut b = super::super::arena::Builder::default();
        for f in sample() {
            b.push(f.name.as_bytes(), f.addr, f.size, f.abi);
        }
        b.finish()
    }

    #[test]
    fn names_in_one_buffer_answer_as_names_of_their_own() {
        let own = Functions::new(sample());
        let shared = Functions::new(sample_in_one_buffer());
        let same = |a: Vec<&Function>, b: Vec<&Function>| {
            let key = |v: Vec<&Function>| v.iter().map(|f| (f.name.to_string(), f.addr, f.size)).collect::<Vec<_>>();
            assert_eq!(key(a), key(b));
        };
        for p in
            ["main.main", "main.dup", "main.Sum[...]", "main.*", "*", "*memmove*", "nosuch", "net/http.(*Client).*"]
        {
            same(own.find(p), shared.find(p));
            same(own.named(p), shared.named(p));
            assert_eq!(own.any_starting_with(p), shared.any_starting_with(p), "{p}");
        }
        same(own.sorted_by_name(), shared.sorted_by_name());
        for addr in [0x50, 0x100, 0x101, 0x180, 0x186, 0x200, 0x210, 0x400, 0x600] {
            assert_eq!(own.at(addr), shared.at(addr), "{addr:#x}");
            assert_eq!(own.containing(addr), shared.containing(addr), "{addr:#x}");
        }
        for typo in ["main.mian", "net/http.(*Client).Dox", "nosuch.memmove"] {
            assert_eq!(
                symbols::closest(&own.sorted_by_name(), typo, 3),
                symbols::closest(&shared.sorted_by_name(), typo, 3),
                "{typo}"
            );
        }
        // The hashed lookups too (made after `SCANS_BEFORE_TABLE` scans).
        for _ in 0..=SCANS_BEFORE_TABLE {
            own.named("main.main");
            shared.named("main.main");
        }
        same(own.named("main.dup"), shared.named("main.dup"));
    }

    #[test]
    fn names_are_found_the_same_before_and_after_the_table_is_made() {
        let fs = Functions::new(sample());
        let names = ["main.dup", "main.main", "runtime.memmove", "nosuch", "main.Sum[go.shape.int]"];
        let scanned: Vec<Vec<Function>> = names.iter().map(|n| fs.named(n).into_iter().cloned().collect()).collect();
        for _ in 0..SCANS_BEFORE_TABLE {
            fs.named("main.main");
        }
        assert!(fs.by_hash.get().is_some());
        let hashed: Vec<Vec<Function>> = names.iter().map(|n| fs.named(n).into_iter().cloned().collect()).collect();
        assert_eq!(scanned, hashed);
        assert_eq!(
            hashed[0].iter().map(|f| (f.addr, f.size)).collect::<Vec<_>>(),
            [(0x180, 4), (0x180, 8), (0x400, 8)]
        );
    }

    #[test]
    fn addresses_answer_as_the_name_order_did() {
        let fs = Functions::new(sample());
        // The first name of a shared address, and the last for an address inside it.
        assert_eq!(fs.at(0x200).map(|f| f.name.as_str()), Some("runtime.memmove"));
        assert_eq!(fs.containing(0x210).map(|f| f.name.as_str()), Some("runtime.memmove.abi0"));
        assert_eq!(fs.at(0x180).map(|f| f.size), Some(0x4));
        assert_eq!(fs.containing(0x186).map(|f| f.size), Some(0x8));
        assert!(fs.at(0x101).is_none());
        assert!(fs.containing(0x50).is_none());
        assert!(fs.containing(0x600).is_none());
    }

    #[test]
    fn a_prefix_is_found_with_and_without_the_name_order() {
        let fs = Functions::new(sample());
        let asked = ["main.", "net/http.", "runtime.memmove.", "net/", "zzz.", "main.dup", ""];
        let before: Vec<bool> = asked.iter().map(|p| fs.any_starting_with(p)).collect();
        assert_eq!(before, [true, true, true, true, false, true, true]);
        fs.sorted_by_name();
        let after: Vec<bool> = asked.iter().map(|p| fs.any_starting_with(p)).collect();
        assert_eq!(before, after);
    }
}
