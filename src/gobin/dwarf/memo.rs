//! The answers of the lookups that may walk every unit (`index.rs`), kept for a cache
//! (src/cache) and brought back by one: each key (`f NAME`, `t NAME`, `c OFFSET`, ...)
//! with its answer, in the order first asked, which is the order a cache file holds them
//! in (the same lookups make the same file, and nothing is sorted: 150,000 keys after
//! `-l '*'` on Caddy). A key asked is written into one buffer and found by its hash: no
//! string is made for a lookup the memo answers.

use hashbrown::{DefaultHashBuilder, HashTable};
use std::fmt::Write;
use std::hash::BuildHasher;

/// A lookup's answer: where the DIE is (and a second word some kinds keep), or None
/// when there is none.
pub(super) type Answer = Option<[u64; 2]>;

#[derive(Default)]
pub(super) struct Memo {
    /// Every key and its answer, in the order first kept.
    entries: Vec<(String, Answer)>,
    /// The index in `entries` of each key, by the key's hash.
    table: HashTable<u32>,
    hasher: DefaultHashBuilder,
    /// The key `recall` was last asked.
    asked: String,
}

impl Memo {
    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The keys and answers, in the order first kept.
    pub fn entries(&self) -> &[(String, Answer)] {
        &self.entries
    }

    /// The answer kept for the key `kind name` (`f main.main`, `c 1234`), if any; the key
    /// stays asked, for `keep`.
    pub fn recall(&mut self, kind: &str, name: impl std::fmt::Display) -> Option<Answer> {
        self.asked.clear();
        let _ = write!(self.asked, "{kind} {name}");
        let hash = self.hasher.hash_one(self.asked.as_str());
        let (entries, asked) = (&self.entries, &self.asked);
        self.table.find(hash, |i| entries[*i as usize].0 == *asked).map(|i| entries[*i as usize].1)
    }

    /// Keeps `answer` for the key `recall` was last asked (nothing else may be recalled
    /// in between), in place of one kept before.
    pub fn keep(&mut self, answer: Answer) {
        let key = self.asked.clone();
        self.insert(key, answer);
    }

    /// Keeps `answer` for `key`, in place of one kept before.
    pub fn insert(&mut self, key: String, answer: Answer) {
        let hash = self.hasher.hash_one(key.as_str());
        let (entries, hasher) = (&mut self.entries, &self.hasher);
        if let Some(i) = self.table.find(hash, |i| entries[*i as usize].0 == key) {
            entries[*i as usize].1 = answer;
            return;
        }
        let at = u32::try_from(entries.len()).expect("fewer than 2^32 lookups");
        self.table.insert_unique(hash, at, |i| hasher.hash_one(entries[*i as usize].0.as_str()));
        entries.push((key, answer));
    }
}

impl Extend<(String, Answer)> for Memo {
    fn extend<I: IntoIterator<Item = (String, Answer)>>(&mut self, iter: I) {
        let iter = iter.into_iter();
        let more = iter.size_hint().0;
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.table.reserve(more, |i| hasher.hash_one(entries[*i as usize].0.as_str()));
        self.entries.reserve(more);
        for (key, answer) in iter {
            self.insert(key, answer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Memo;

    #[test]
    fn keys_are_found_without_being_made_and_kept_in_the_order_first_asked() {
        let mut memo = Memo::default();
        assert_eq!(memo.recall("f", "main.main"), None);
        memo.keep(Some([10, 0]));
        assert_eq!(memo.recall("c", 10), None);
        memo.keep(None);
        memo.extend([("t main.T".to_string(), Some([20, 0])), ("f main.main".to_string(), Some([30, 0]))]);
        assert_eq!(memo.recall("f", "main.main"), Some(Some([30, 0])));
        assert_eq!(memo.recall("c", 10), Some(None));
        assert_eq!(memo.recall("t", "main.T"), Some(Some([20, 0])));
        assert_eq!(memo.recall("t", "main"), None);
        let keys: Vec<&str> = memo.entries().iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["f main.main", "c 10", "t main.T"]);
        assert_eq!(memo.len(), 3);
    }
}
