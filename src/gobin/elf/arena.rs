//! Function names as slices of one buffer: a big binary's symbol table names 70,000
//! functions, and a `String` each cost a heap allocation, its first-touch page faults
//! and a UTF-8 check each (Caddy: about 15 ms, and 5 MB kept while tracing). `Builder`
//! copies every name into one buffer and checks it once; a `Name` is that buffer (shared)
//! and where in it the name is, and reads as a `&str`.

use crate::gobin::{Abi, Function};
use std::sync::Arc;

/// A function's name: a slice of a buffer of names, shared by every `Name` of the table
/// it was built with. It reads as the `str` it holds (`Deref`), and compares, orders,
/// hashes and prints as that `str`.
#[derive(Clone)]
pub struct Name {
    all: Arc<String>,
    start: u32,
    len: u32,
}

impl Name {
    pub fn as_str(&self) -> &str {
        let start = self.start as usize;
        // On character boundaries (`Builder::finish` checked): this cannot fail.
        self.all.get(start..start + self.len as usize).unwrap_or_default()
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

/// A name of its own (tests, fakes): a buffer holding only it.
impl From<&str> for Name {
    fn from(name: &str) -> Name {
        Name::from(name.to_string())
    }
}

impl From<String> for Name {
    fn from(name: String) -> Name {
        let len = u32::try_from(name.len()).unwrap_or(u32::MAX);
        let mut name = name;
        name.truncate(len as usize);
        Name { all: Arc::new(name), start: 0, len }
    }
}

impl From<Name> for String {
    fn from(name: Name) -> String {
        name.as_str().to_string()
    }
}

// Lengths first: a pass over every function for one name (`names::Functions::named`)
// skips a name of another length without reading its bytes, as with a `String`.
impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.len == other.len && self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.len as usize == other.len() && self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        *self == *other.as_str()
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, other: &Name) -> bool {
        *other == *self
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        *other == **self
    }
}

impl PartialEq<Name> for String {
    fn eq(&self, other: &Name) -> bool {
        *other == *self.as_str()
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self.as_str(), f)
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Functions whose names are gathered into one buffer: `push` each (its name's bytes as
/// the file holds them), then `finish`.
#[derive(Default)]
pub(crate) struct Builder {
    text: Vec<u8>,
    /// (start, length) in `text`, address, size, ABI.
    entries: Vec<(u32, u32, u64, u64, Abi)>,
}

impl Builder {
    pub(crate) fn with_capacity(functions: usize) -> Builder {
        Builder { text: Vec::new(), entries: Vec::with_capacity(functions) }
    }

    /// Adds a function; a name that would take the buffer past 4 GiB is not added
    /// (`finish` counts what was left out).
    pub(crate) fn push(&mut self, name: &[u8], addr: u64, size: u64, abi: Abi) {
        let (Ok(start), Ok(len)) = (u32::try_from(self.text.len()), u32::try_from(name.len())) else { return };
        if start.checked_add(len).is_none() {
            return;
        }
        self.text.extend_from_slice(name);
        self.entries.push((start, len, addr, size, abi));
    }

    /// The functions, in the order pushed, but for those whose name is not UTF-8 (as a
    /// `str` each on its own would be refused: the buffer is checked once, and a name is
    /// UTF-8 when the checked buffer has a character boundary at both its ends).
    pub(crate) fn finish(self) -> Vec<Function> {
        let Builder { text, entries } = self;
        match String::from_utf8(text) {
            Ok(all) => {
                let all = Arc::new(all);
                let whole = |s: usize, e: usize| all.is_char_boundary(s) && all.is_char_boundary(e);
                entries
                    .into_iter()
                    .filter(|(start, len, ..)| whole(*start as usize, (*start + *len) as usize))
                    .map(|(start, len, addr, size, abi)| Function {
                        name: Name { all: all.clone(), start, len },
                        addr,
                        size,
                        abi,
                    })
                    .collect()
            }
            // Some name is not UTF-8: each is checked on its own, and those that are
            // make a buffer that is.
            Err(e) => {
                let text = e.into_bytes();
                let mut valid = Builder::with_capacity(entries.len());
                for (start, len, addr, size, abi) in entries {
                    let name = &text[start as usize..(start + len) as usize];
                    if std::str::from_utf8(name).is_ok() {
                        valid.push(name, addr, size, abi);
                    }
                }
                valid.finish()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(names: &[&[u8]]) -> Vec<Function> {
        let mut b = Builder::default();
        for (i, n) in names.iter().enumerate() {
            b.push(n, 0x100 + i as u64, 8, Abi::Unknown);
        }
        b.finish()
    }

    #[test]
    fn names_read_as_the_bytes_pushed() {
        let names: [&[u8]; 5] = [b"main.main", b"", "main.π".as_bytes(), b"net/http.(*conn).serve", b"main.main"];
        let fs = built(&names);
        let got: Vec<&str> = fs.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(got, ["main.main", "", "main.π", "net/http.(*conn).serve", "main.main"]);
        assert_eq!(fs.iter().map(|f| f.addr).collect::<Vec<_>>(), [0x100, 0x101, 0x102, 0x103, 0x104]);
        // One buffer for all.
        assert!(fs.windows(2).all(|w| Arc::ptr_eq(&w[0].name.all, &w[1].name.all)));
        // Compared, ordered, hashed and printed as the text, wherever it lies.
        assert_eq!(fs[0].name, fs[4].name);
        assert_eq!(fs[0].name, Name::from("main.main"));
        assert_eq!(fs[0].name, "main.main");
        assert_eq!(fs[2].name.len(), "main.π".len());
        assert!(fs[1].name < fs[0].name && fs[0].name < fs[3].name);
        assert_eq!(format!("{} {:?}", fs[2].name, fs[2].name), "main.π \"main.π\"");
        let set: std::collections::HashSet<Name> = fs.iter().map(|f| f.name.clone()).collect();
        assert_eq!(set.len(), 4);
        assert!(set.contains("main.main"));
    }

    #[test]
    fn a_name_that_is_not_utf8_is_left_out_as_before() {
        // Invalid alone, and invalid pieces that would make a valid text together
        // (0xc3 0xa9 is `é`): each name is judged on its own, as `str::from_utf8` would.
        let names: [&[u8]; 6] = [b"a.ok", b"a.bad\xff", b"a.split\xc3", b"\xa9tail", "b.é".as_bytes(), b"c.last"];
        let kept: Vec<String> = built(&names).iter().map(|f| f.name.to_string()).collect();
        let alone: Vec<String> = names.iter().filter_map(|n| std::str::from_utf8(n).ok()).map(str::to_string).collect();
        assert_eq!(kept, alone);
        assert_eq!(kept, ["a.ok", "b.é", "c.last"]);
        // Split pieces alone in a buffer that is otherwise valid: still left out.
        let names: [&[u8]; 3] = [b"x\xc3", b"\xa9y", b"z"];
        let kept: Vec<String> = built(&names).iter().map(|f| f.name.to_string()).collect();
        assert_eq!(kept, ["z"]);
    }
}
