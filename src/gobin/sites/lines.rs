//! Source lines: where a line of a file starts (`on line "FILE:LINE"`), in every function
//! and inlined copy that holds it (`linesites` chooses the instructions), and the locals
//! in scope there. All from DWARF: the line table, each function's scopes, the location
//! evaluator.

use super::linesites::{self, Position};
use crate::gobin::dwarf::{LineTable, ScopeKind, Scopes};
use crate::gobin::{Target, TargetError, ValueLocation};
use crate::gotypes::TypeId;
use std::sync::Arc;

/// A place where a source line starts: one probe site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineSite {
    /// The file's path as the line table names it.
    pub file: String,
    pub line: u32,
    /// Where the probe goes.
    pub addr: u64,
    /// The function whose code holds it.
    pub function: String,
    /// The function the line is in: `function` itself, or the function inlined there.
    pub frame: String,
    /// The line is in a copy of `frame` inlined into `function`.
    pub inlined: bool,
    /// The frame's scope among `function`'s scopes.
    pub(crate) scope: usize,
    /// False when one execution of the line can pass this site and another of the same
    /// copy (the compiler's layout leaves no single place): it may be counted twice.
    pub exact: bool,
}

/// Why a source line has no place to probe.
#[derive(Debug)]
pub enum LineError {
    /// The binary has no DWARF line table.
    NoDwarf,
    /// No file of the line table ends with the name; the closest file names.
    NoFile { close: Vec<String> },
    /// Several files end with the name.
    Ambiguous { candidates: Vec<String> },
    /// The file has no statement at that line; the nearest lines that have some.
    NoCode { path: String, before: Option<u32>, after: Option<u32> },
    /// The DWARF cannot be read.
    Target(TargetError),
}

/// A local variable or parameter of the function a line is in.
#[derive(Clone, Debug, PartialEq)]
pub struct Local {
    pub name: String,
    pub ty: Option<TypeId>,
    pub decl_line: Option<u32>,
    /// A parameter (or result) of the function, not a variable of its body.
    pub param: bool,
    pub state: LocalState,
}

#[derive(Clone, Debug, PartialEq)]
pub enum LocalState {
    /// In scope at the line, and where it is (or that it is nowhere: optimized away).
    InScope(ValueLocation),
    /// Declared after the line, in a scope that holds it.
    NotYet,
    /// Declared in a block of the function that does not hold the line.
    OutOfScope,
}

/// Whether `path` is `file`, or ends with `/file`.
fn names(path: &str, file: &str) -> bool {
    path == file || path.strip_suffix(file).is_some_and(|p| p.ends_with('/'))
}

impl Target {
    /// The line table and the scopes of `function` (None: DWARF does not describe it).
    fn line_dwarf(&self, function: Option<&str>) -> Result<(Arc<LineTable>, Option<Arc<Scopes>>), LineError> {
        let mut state = self.dwarf.borrow_mut();
        let (path, data) = self.dwarf_source();
        let bad = LineError::Target;
        let dwarf = Self::dwarf_mut(&mut state, path, data).map_err(bad)?.ok_or(LineError::NoDwarf)?;
        let table = dwarf.line_table(data).map_err(bad)?;
        let scopes = match function {
            Some(f) => dwarf.scopes(data, f).map_err(bad)?,
            None => None,
        };
        Ok((table, scopes))
    }

    /// Every place where `file:line` starts: per function and inlined copy holding the
    /// line, each instruction where control comes to the line from elsewhere and goes on
    /// to a statement start of it (see linesites.rs), sorted by address.
    pub fn line_sites(&self, file: &str, line: u32) -> Result<Vec<LineSite>, LineError> {
        let (table, _) = self.line_dwarf(None)?;
        let matched: Vec<u32> =
            (0..table.files.len() as u32).filter(|f| names(&table.files[*f as usize], file)).collect();
        let id = match matched.as_slice() {
            [one] => *one,
            [] => {
                let bases = table.files.iter().map(|p| p.rsplit('/').next().unwrap_or(p));
                let close = crate::diag::closest(file.rsplit('/').next().unwrap_or(file), bases, 3);
                return Err(LineError::NoFile { close: close.into_iter().map(str::to_string).collect() });
            }
            many => {
                let mut candidates: Vec<String> = many.iter().map(|f| table.files[*f as usize].clone()).collect();
                candidates.sort();
                return Err(LineError::Ambiguous { candidates });
            }
        };
        // Every row of the line: where its code starts, statement start or not.
        let starts: Vec<(u64, bool)> =
            table.rows.iter().filter(|r| !r.end && r.file == id && r.line == line).map(|r| (r.addr, r.stmt)).collect();
        if starts.is_empty() {
            let lines = table.rows.iter().filter(|r| r.stmt && !r.end && r.file == id).map(|r| r.line);
            let before = lines.clone().filter(|l| *l < line).max();
            let after = lines.filter(|l| *l > line).min();
            return Err(LineError::NoCode { path: table.files[id as usize].clone(), before, after });
        }
        let mut functions: Vec<&crate::gobin::Function> =
            starts.iter().filter_map(|(a, _)| self.function_containing(*a)).collect();
        functions.dedup_by_key(|f| f.addr);
        functions.sort_by_key(|f| f.addr);
        functions.dedup_by_key(|f| f.addr);
        let mut sites = Vec::new();
        for f in functions {
            let (_, scopes) = self.line_dwarf(Some(&f.name))?;
            sites.extend(self.sites_in(f, &table, scopes.as_deref(), (id, line), &starts));
        }
        sites.sort_by_key(|s| s.addr);
        sites.dedup_by_key(|s| s.addr);
        Ok(sites)
    }

    /// The sites of `at` (file id, line) in function `f`, one group per copy of the line;
    /// `starts` are the addresses of the line's rows, with whether each starts a statement.
    fn sites_in(
        &self,
        f: &crate::gobin::Function,
        table: &LineTable,
        scopes: Option<&Scopes>,
        at: (u32, u32),
        starts: &[(u64, bool)],
    ) -> Vec<LineSite> {
        let Some(cfg) = self.cfg_of(f) else { return Vec::new() };
        let chains: Vec<Vec<usize>> =
            cfg.insns.iter().map(|i| scopes.map_or_else(|| vec![0], |s| s.frames_at(i.addr))).collect();
        // The source position of instruction `k` seen from the frame `chain`: its own
        // line in that frame, the line of the call for code inlined from it, or None
        // outside the frame.
        let position = |k: usize, chain: &[usize]| -> Option<Position> {
            let own = &chains[k];
            if own.len() < chain.len() || own[..chain.len()] != *chain {
                return None;
            }
            if own.len() == chain.len() {
                return table.at(cfg.insns[k].addr).map(|r| (r.file, r.line));
            }
            match &scopes?.scopes[own[chain.len()]].kind {
                ScopeKind::Inlined { call_file, call_line, .. } => Some(((*call_file)?, *call_line)),
                _ => None,
            }
        };
        let row_at = |k: usize| starts.iter().find(|(a, _)| *a == cfg.insns[k].addr).map(|(_, stmt)| *stmt);
        let mut frames: Vec<Vec<usize>> = Vec::new();
        for k in (0..cfg.insns.len()).filter(|k| row_at(*k).is_some()) {
            if !frames.contains(&chains[k]) {
                frames.push(chains[k].clone());
            }
        }
        // The lines of the function with a statement start marked somewhere in it.
        let marked_lines: std::collections::HashSet<Position> = (cfg.insns.iter())
            .filter_map(|i| table.at(i.addr).filter(|r| r.addr == i.addr && r.stmt).map(|r| (r.file, r.line)))
            .collect();
        let mut out = Vec::new();
        for chain in frames {
            // The statement starts of this copy; where the compiler marked none (Go 1.17
            // leaves some loop bodies unmarked), every row of the line starts it.
            let marked = (0..cfg.insns.len()).any(|k| chains[k] == chain && row_at(k) == Some(true));
            let is_stmt = |k: usize| chains[k] == chain && row_at(k).is_some_and(|stmt| stmt || !marked);
            let entry = self.probe_sites(f).map(|s| s.entry).unwrap_or(f.addr);
            // A statement start of any line, in any frame: where another line's execution
            // begins; for a line with none marked in the function (Go 1.17 leaves some
            // loop bodies unmarked), each of its rows.
            let any_stmt = |k: usize| {
                let addr = cfg.insns[k].addr;
                table.at(addr).is_some_and(|r| r.addr == addr && (r.stmt || !marked_lines.contains(&(r.file, r.line))))
            };
            let found = linesites::arrivals(&cfg, |k| position(k, &chain) == Some(at), is_stmt, any_stmt);
            for k in found.sites {
                let addr = if cfg.insns[k].addr == f.addr { entry } else { cfg.insns[k].addr };
                let scope = *chain.last().expect("a frame");
                let frame = match scopes.map(|s| &s.scopes[scope].kind) {
                    Some(ScopeKind::Inlined { name, .. }) => name.clone(),
                    _ => f.name.to_string(),
                };
                out.push(LineSite {
                    file: table.files[at.0 as usize].clone(),
                    line: at.1,
                    addr,
                    function: f.name.to_string(),
                    inlined: chain.len() > 1,
                    frame,
                    scope,
                    exact: found.exact,
                });
            }
        }
        out
    }

    /// The locals and parameters of the function (or inlined copy) `site` is in: those
    /// in scope there with where they are, and those that are not with why.
    pub fn locals_at(&self, site: &LineSite) -> Result<Vec<Local>, TargetError> {
        let scopes = match self.line_dwarf(Some(&site.function)) {
            Ok((_, Some(scopes))) => scopes,
            Err(LineError::Target(e)) => return Err(e),
            Ok((_, None)) | Err(_) => return Ok(Vec::new()),
        };
        let frame = site.scope;
        // The frame's own scope and its blocks, innermost first among those holding the site.
        let mut order: Vec<(usize, bool)> = Vec::new();
        for (i, s) in scopes.scopes.iter().enumerate() {
            if scopes.frame_of(i) != frame {
                continue;
            }
            order.push((i, i == frame || s.holds(site.addr)));
        }
        let depth = |mut i: usize| {
            let mut d = 0;
            while let Some(p) = scopes.scopes[i].parent {
                d += 1;
                i = p;
            }
            d
        };
        order.sort_by_key(|(i, holds)| (!holds, std::cmp::Reverse(depth(*i))));
        let mut out: Vec<Local> = Vec::new();
        for (i, holds) in order {
            for var in &scopes.scopes[i].vars {
                if out.iter().any(|l| l.name == var.name) {
                    continue;
                }
                let ty = self.var_type(var.ty)?;
                let state = if !holds {
                    LocalState::OutOfScope
                } else if !var.is_param && var.decl_line.is_some_and(|d| d > site.line) {
                    LocalState::NotYet
                } else {
                    let size = ty.map_or(0, |t| self.types().get(t).size);
                    let location = {
                        let mut state = self.dwarf.borrow_mut();
                        let (path, data) = self.dwarf_source();
                        let dwarf = Self::dwarf_mut(&mut state, path, data)?.expect("read above");
                        dwarf.var_location(data, &scopes, var, site.addr)?
                    };
                    LocalState::InScope(self.value_location(&location, site.addr, size))
                };
                out.push(Local { name: var.name.clone(), ty, decl_line: var.decl_line, param: var.is_param, state });
            }
        }
        Ok(out)
    }

    /// The Go type of a variable's type DIE.
    fn var_type(&self, ty: Option<gimli::DebugInfoOffset>) -> Result<Option<TypeId>, TargetError> {
        let Some(ty) = ty else { return Ok(None) };
        let mut state = self.dwarf.borrow_mut();
        let (path, data) = self.dwarf_source();
        let Some(dwarf) = Self::dwarf_mut(&mut state, path, data)? else { return Ok(None) };
        Ok(Some(dwarf.type_id(ty, &mut self.types.borrow_mut())?))
    }
}

#[cfg(test)]
mod tests {
    use super::names;

    #[test]
    fn a_file_is_named_by_a_suffix_of_its_path() {
        assert!(names("/src/app/main.go", "main.go"));
        assert!(names("/src/app/server/handler.go", "server/handler.go"));
        assert!(names("main.go", "main.go"));
        assert!(!names("/src/app/domain.go", "main.go"));
        assert!(!names("/src/app/main.go", "app/ain.go"));
    }
}
