//! Where functions were inlined: every inlined call of the pclntab inline trees (present
//! stripped or not), the instruction its entry probe goes to (inlentry.rs, placed on the
//! caller's control flow graph), and where DWARF keeps its parameters there.

use super::cfg::Cfg;
use super::inlentry::{self, InlinedEntry, Placement};
use crate::gobin::elf::{pclntab, symbols};
use crate::gobin::{Param, Target, TargetError, ValueLocation};

/// A place where a function was inlined into another.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InlinedSite {
    /// The inlined function: `main.triple`.
    pub callee: String,
    /// The function whose code holds it.
    pub caller: String,
    /// Where the entry probe for this call goes: an instruction every call passes once
    /// (see inlentry.rs). Its parameters are not in ABI registers there.
    pub addr: u64,
    /// How `addr` was chosen.
    pub how: Placement,
    /// The lowest address of its inlined body: what names this call in DWARF.
    pub body: u64,
}

/// Whether a call of `function` never returns: the runtime functions the compiler calls
/// to panic or to die (cmd/compile ends a block after them).
pub(super) fn never_returns(function: &str) -> bool {
    let name = function.strip_suffix(".abi0").unwrap_or(function);
    let Some(name) = name.strip_prefix("runtime.") else { return false };
    matches!(name, "gopanic" | "throw" | "fatal" | "fatalthrow" | "fatalpanic" | "panicwrap")
        || name.starts_with("goPanic")
        || name.starts_with("panic") && !name.starts_with("panicCheck")
}

/// Which functions' inline trees name which callees: what finding a pattern's inlined
/// calls starts from, so that only the trees of the callers it names are decoded.
#[derive(Default)]
pub(crate) struct InlinedTable {
    /// `(callee name offset, caller index in the function records)`, sorted: every
    /// entry of every tree that may have code (`Pclntab::inline_callees`).
    callees: Vec<(i32, u32)>,
    funcnametab: u64,
    gofunc: Option<u64>,
}

/// The order calls are kept in: by callee (its name's offset), then body, then the rest,
/// so that equal calls end up side by side.
fn call_order(a: &pclntab::InlinedCall, b: &pclntab::InlinedCall) -> std::cmp::Ordering {
    (a.callee.cmp(&b.callee).then_with(|| a.body.cmp(&b.body)))
        .then_with(|| (a.caller, a.caller_code, a.parent_pc).cmp(&(b.caller, b.caller_code, b.parent_pc)))
}

/// How much of `.gopclntab` `code_crc` reads before giving its pages back.
const CRC_PIECE: usize = 1 << 20;

impl Target {
    /// The callee index of every inline tree; read once, no name read.
    fn inlined_calls(&self) -> &InlinedTable {
        self.inlined.get_or_init(|| {
            let table = self.read_inlined().unwrap_or_default();
            // Every inline tree was read: most of `.gopclntab` (Caddy: 23 MB), whose pages
            // leave the RSS now (the few read again come back from the page cache).
            self.data.shed();
            table
        })
    }

    fn read_inlined(&self) -> Option<InlinedTable> {
        let image = self.image();
        let (table, _) = self.pclntab(&image, self.layout.pclntab?).ok()?;
        let gofunc = self.gofunc();
        if table.format != pclntab::Format::Go116 && gofunc.is_none() {
            return None;
        }
        Some(InlinedTable { callees: table.inline_callees(gofunc), funcnametab: table.funcnametab(), gofunc })
    }

    /// The inlined calls with code in the functions `callers` (indexes into the function
    /// records) whose callee is one of `callees` (sorted name offsets), in `call_order`
    /// without repeats.
    fn inlined_calls_in(&self, callers: &[u32], callees: &[i32]) -> Vec<pclntab::InlinedCall> {
        let table = self.inlined_calls();
        let image = self.image();
        let Some(Ok((pcln, _))) = self.layout.pclntab.map(|at| self.pclntab(&image, at)) else { return Vec::new() };
        let mut calls: Vec<pclntab::InlinedCall> = callers
            .iter()
            .filter_map(|i| Some((*i as usize, pcln.function(u64::from(*i)).ok()?)))
            .flat_map(|(i, f)| pcln.inlined_calls(&f, i, table.gofunc))
            .filter(|c| callees.binary_search(&c.callee).is_ok())
            .collect();
        calls.sort_unstable_by(call_order);
        calls.dedup();
        calls
    }

    /// The inlined calls whose callee matches `pattern`, with the callee's name, in
    /// callee then address order: each distinct name read once, and only the trees of
    /// functions that name a matching callee decoded.
    fn inlined_matching(&self, pattern: &str) -> Vec<(&str, pclntab::InlinedCall)> {
        let matcher = symbols::is_pattern(pattern).then(|| symbols::Matcher::new(pattern));
        self.inlined_named(|name| match &matcher {
            Some(m) => m.matches(name),
            None => name == pattern,
        })
    }

    /// The inlined calls whose callee's name `wanted` takes, as `inlined_matching` gives
    /// them.
    fn inlined_named(&self, wanted: impl Fn(&str) -> bool) -> Vec<(&str, pclntab::InlinedCall)> {
        let table = self.inlined_calls();
        let image = self.image();
        let mut names: Vec<(i32, &str)> = Vec::new();
        let mut callers: Vec<u32> = Vec::new();
        for group in table.callees.chunk_by(|a, b| a.0 == b.0) {
            let Some(name) = pclntab::name_at(&image, table.funcnametab, group[0].0) else { continue };
            if wanted(name) {
                names.push((group[0].0, name));
                callers.extend(group.iter().map(|c| c.1));
            }
        }
        if names.is_empty() {
            return Vec::new();
        }
        callers.sort_unstable();
        callers.dedup();
        let offsets: Vec<i32> = names.iter().map(|n| n.0).collect();
        let name_of = |off: i32| names.binary_search_by_key(&off, |n| n.0).map_or("", |i| names[i].1);
        let mut out: Vec<(&str, pclntab::InlinedCall)> =
            self.inlined_calls_in(&callers, &offsets).into_iter().map(|c| (name_of(c.callee), c)).collect();
        out.sort_by(|a, b| a.0.cmp(b.0).then(a.1.body.cmp(&b.1.body)));
        out
    }

    /// The places where functions matching `pattern` (as in `find`) were inlined, each
    /// with its entry probe's address, in callee then address order. Each pattern's
    /// answer is kept (and cached for the next run: `inlined_learned`): finding it reads
    /// every inline tree of the binary.
    pub fn find_inlined(&self, pattern: &str) -> Vec<InlinedSite> {
        if let Some(found) = self.inlined_found.borrow().get(pattern) {
            return found.clone();
        }
        let found = self.place_inlined(pattern);
        self.inlined_found.borrow_mut().insert(pattern.to_string(), found.clone());
        found
    }

    /// What `find_inlined` answers for each of `names`, found together: the inline trees'
    /// callee index is read once for them all, not once per name (a plan of a wide
    /// wildcard names thousands of functions: one pass each took 9 s on Caddy). Not kept
    /// for the cache. A name that reads as a pattern is asked of `find_inlined` alone.
    pub fn find_inlined_each(&self, names: &[&str]) -> std::collections::HashMap<String, Vec<InlinedSite>> {
        let mut out: std::collections::HashMap<String, Vec<InlinedSite>> = std::collections::HashMap::new();
        let mut literal: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for name in names {
            let kept = self.inlined_found.borrow().get(*name).cloned();
            if let Some(found) = kept {
                out.insert(name.to_string(), found);
            } else if symbols::is_pattern(name) {
                out.insert(name.to_string(), self.find_inlined(name));
            } else {
                literal.insert(name);
            }
        }
        for name in &literal {
            out.insert(name.to_string(), Vec::new());
        }
        if !literal.is_empty() {
            for site in self.place(self.inlined_named(|name| literal.contains(name))) {
                out.entry(site.callee.clone()).or_default().push(site);
            }
        }
        out
    }

    /// What `find_inlined` answered in this run (and was seeded with), by pattern.
    pub fn inlined_learned(&self) -> Vec<(String, Vec<InlinedSite>)> {
        self.inlined_found.borrow().iter().map(|(p, s)| (p.clone(), s.clone())).collect()
    }

    /// A CRC-32 of `.gopclntab` (the whole file's without one): what a cache's inlined
    /// sites were found in. Build ids do not tell builds apart everywhere: Bazel's
    /// rules_go links every binary with `-buildid=redacted`, and Go derives the GNU
    /// build id from that, so two programs of one size share every id. 3 ms on Caddy's
    /// 21 MB in the page cache (20 ms from the disk), computed only when a cache holds
    /// inlined sites or is written with them. Read a piece at a time, each piece's pages
    /// given back once read (a mapped file's): the whole table in the RSS at once was a
    /// third of a one-probe trace's peak on Caddy.
    pub fn code_crc(&self) -> u32 {
        *self.code_crc.get_or_init(|| {
            let range = crate::gobin::elf::section_range(&self.path, &self.data, ".gopclntab");
            let table = range.and_then(|r| Some((self.bytes_at(r.addr, r.size)?, self.file_offset(r.addr)?)));
            let (table, offset) = table.unwrap_or((&self.data, 0));
            let mut crc = flate2::Crc::new();
            for (i, piece) in table.chunks(CRC_PIECE).enumerate() {
                crc.update(piece);
                if let Ok(start) = usize::try_from(offset) {
                    self.data.shed_range(start + i * CRC_PIECE, piece.len());
                }
            }
            crc.sum()
        })
    }

    /// Takes `crc` as `code_crc`, not computed: a cache's, written from this very file
    /// unchanged since (`input::Stamp`). Nothing if it was computed already.
    pub fn known_code_crc(&self, crc: u32) {
        let _ = self.code_crc.set(crc);
    }

    /// Takes `find_inlined`'s answers from an earlier run on this build, if every site
    /// is where it says, in this binary's code: the caller's function holds its probe
    /// address and its body, and both are starts of instructions of the caller's code
    /// as decoded here (a uprobe in the middle of an instruction would corrupt the
    /// target's code: a cache file is read, not trusted). Returns false (nothing
    /// taken) otherwise.
    pub fn seed_inlined(&self, found: &[(String, Vec<InlinedSite>)]) -> bool {
        // Each caller's instruction starts, decoded once (None: its code cannot be).
        let mut starts: std::collections::HashMap<u64, Option<Vec<u64>>> = std::collections::HashMap::new();
        let mut holds = |s: &InlinedSite| {
            let Some(f) = self.function_containing(s.addr).filter(|f| f.name == s.caller) else { return false };
            if s.callee.is_empty() || self.function_containing(s.body).is_none_or(|g| g.addr != f.addr) {
                return false;
            }
            let at = starts.entry(f.addr).or_insert_with(|| {
                let code = self.code(f)?;
                let insns = self.arch.control_flow(code, f.addr)?;
                Some(insns.iter().map(|i| i.addr).collect())
            });
            at.as_ref().is_some_and(|at| at.binary_search(&s.addr).is_ok() && at.binary_search(&s.body).is_ok())
        };
        if !found.iter().all(|(_, sites)| sites.iter().all(&mut holds)) {
            return false;
        }
        self.inlined_found.borrow_mut().extend(found.iter().cloned());
        true
    }

    /// `find_inlined` without the kept answers.
    fn place_inlined(&self, pattern: &str) -> Vec<InlinedSite> {
        self.place(self.inlined_matching(pattern))
    }

    /// The entry probe of each of the inlined calls `matched`.
    fn place(&self, matched: Vec<(&str, pclntab::InlinedCall)>) -> Vec<InlinedSite> {
        let image = self.image();
        let pcln = self.layout.pclntab.and_then(|at| self.pclntab(&image, at).ok()).map(|(t, _)| t);
        let caller_name = |i: usize| pcln.as_ref().and_then(|t| t.function(i as u64).ok()).map(|f| f.name);
        // Each caller's code is decoded once.
        let mut graphs: std::collections::HashMap<(u64, u64), Option<Cfg>> = std::collections::HashMap::new();
        matched
            .into_iter()
            .map(|(callee, call)| {
                let (entry, end) = call.caller_code;
                let graph = graphs.entry(call.caller_code).or_insert_with(|| {
                    let code = self.bytes_at(entry, end - entry)?;
                    let noreturn = |a: u64| self.function_at(a).is_some_and(|f| never_returns(&f.name));
                    self.arch.control_flow(code, entry).map(|insns| Cfg::new(insns, noreturn))
                });
                let lowest = call.body.first().map_or(entry, |r| r.0);
                let at = graph
                    .as_ref()
                    .and_then(|g| inlentry::place(g, &call.body, call.parent_pc))
                    .unwrap_or(InlinedEntry { addr: lowest, how: Placement::Lowest });
                InlinedSite {
                    callee: callee.to_string(),
                    caller: caller_name(call.caller).unwrap_or_default(),
                    addr: at.addr,
                    how: at.how,
                    body: lowest,
                }
            })
            .collect()
    }

    /// The source lines the function table (.gopclntab, stripped or not) gives the
    /// instruction at `addr`: its own, in the innermost body it belongs to, and the line
    /// of each inlined call whose body holds it (the line of the call's `parentPc`).
    /// What `on line` sites are checked by without DWARF.
    pub fn pc_lines(&self, addr: u64) -> Vec<u32> {
        let records = self.records.get_or_init(|| self.func_records().unwrap_or_default());
        let Some(f) = records.partition_point(|r| r.entry <= addr).checked_sub(1).map(|i| &records[i]) else {
            return Vec::new();
        };
        let image = self.image();
        let table = self.layout.pclntab.and_then(|at| pclntab::Pclntab::parse(&image, at, self.layout.text).ok());
        let Some(runs) = table.filter(|_| addr < f.end).and_then(|t| t.lines(f)) else { return Vec::new() };
        let line_at =
            |pc: u64| runs.iter().find(|(lo, hi, _)| *lo <= pc && pc < *hi).and_then(|r| u32::try_from(r.2).ok());
        // Every record whose code starts there (a function of no size shares its entry).
        let first = records.partition_point(|r| r.entry < f.entry);
        let callers: Vec<u32> = (first..records.partition_point(|r| r.entry <= f.entry)).map(|i| i as u32).collect();
        let mut callees: Vec<i32> =
            self.inlined_calls().callees.iter().filter(|c| callers.contains(&c.1)).map(|c| c.0).collect();
        callees.sort_unstable();
        let calls = self.inlined_calls_in(&callers, &callees);
        let holding = calls.iter().filter(|c| c.body.iter().any(|(lo, hi)| *lo <= addr && addr < *hi));
        line_at(addr).into_iter().chain(holding.filter_map(|c| c.parent_pc.and_then(line_at))).collect()
    }

    /// The parameters of the inlined call at `site`, each with where DWARF puts it at the
    /// site's probe address. None without DWARF, or when DWARF does not describe that
    /// inlined call.
    pub fn inlined_params(&self, site: &InlinedSite) -> Result<Option<Vec<(Param, ValueLocation)>>, TargetError> {
        let params = {
            let mut state = self.dwarf.borrow_mut();
            let (path, data) = self.dwarf_source();
            let Some(dwarf) = Self::dwarf_mut(&mut state, path, data)? else { return Ok(None) };
            let mut types = self.types.borrow_mut();
            match dwarf.inlined_params(data, &site.callee, &site.caller, site.body, site.addr, &mut types)? {
                Some(p) => p,
                None => return Ok(None),
            }
        };
        let sizes: Vec<u64> = params.iter().map(|p| self.types.borrow().get(p.param.ty).size).collect();
        Ok(Some(
            params
                .into_iter()
                .zip(sizes)
                .map(|(p, size)| {
                    let location = self.value_location(&p.location, site.addr, size);
                    (p.param, location)
                })
                .collect(),
        ))
    }
}
