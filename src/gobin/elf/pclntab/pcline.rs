//! Source positions from `.gopclntab` (present stripped or not): at a pc, the function,
//! file and line of every frame there, the innermost inlined one first, as the runtime's
//! `CallersFrames` gives them (runtime/symtab.go `funcline1`, runtime/symtabinl.go). The
//! `pcfile` and `pcln` tables of the function whose code holds the pc give the innermost
//! frame's position; the inline tree entry that `PCDATA_InlTreeIndex` names there gives
//! the inlined function's name and its call site (`parentPc`), where the same tables give
//! the caller's position; and so on out to the function itself.

use super::{Format, FuncRecord, Pclntab, FUNCDATA_INL_TREE, NAME_MAX, PCDATA_INL_TREE_INDEX};

/// Deeper inlining than this is not followed (the compiler's own limit is far lower).
const MAX_INLINE_DEPTH: usize = 64;

/// One frame at a pc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFrame {
    /// The function as the table names it: `main.(*T).Add`, `main.Sum[go.shape.int]`.
    pub function: String,
    /// The source file's path as the compiler recorded it; `?` when the table has none.
    pub file: String,
    pub line: u32,
    /// The line of the function's `func` keyword: from Go 1.20 on; 0 before.
    pub start_line: u32,
}

/// The pc-value table runs hold the value at `pc`.
fn value_at(runs: &[(u64, u64, i32)], pc: u64) -> Option<i32> {
    let i = runs.partition_point(|(_, hi, _)| *hi <= pc);
    runs.get(i).filter(|(lo, _, _)| *lo <= pc).map(|r| r.2)
}

impl Pclntab<'_> {
    /// Every frame at `pc` inside `f`, the innermost first; empty when `f` has no line
    /// table. `gofunc` is `moduledata.gofunc` (Go 1.18 on), without which inlined frames
    /// cannot be told apart: then only the outermost is given, at the line of the pc.
    pub fn source_frames(&self, f: &FuncRecord, pc: u64, gofunc: Option<u64>) -> Vec<SourceFrame> {
        let go116 = self.format == Format::Go116;
        let field = |at: u64| self.image.u32(f.record + at);
        let table =
            |off: Option<u32>| off.filter(|o| *o != 0).and_then(|o| self.pc_values(self.pctab + u64::from(o), f.entry));
        let files = table(field(if go116 { 24 } else { 20 })).unwrap_or_default();
        let Some(lines) = table(field(if go116 { 28 } else { 24 })) else { return Vec::new() };
        let cu = field(if go116 { 36 } else { 32 }).unwrap_or(u32::MAX);
        let own_start = if self.format == Format::Go120 { field(36).unwrap_or(0) } else { 0 };
        let tree = self.funcdata(f.record, FUNCDATA_INL_TREE, gofunc);
        let inl = tree.and_then(|_| self.pcdata(f.record, f.entry, PCDATA_INL_TREE_INDEX)).unwrap_or_default();
        let mut out = Vec::new();
        let mut at = pc;
        while out.len() < MAX_INLINE_DEPTH {
            let file = value_at(&files, at).and_then(|i| self.file_name(cu, i)).unwrap_or("?").to_string();
            let line = value_at(&lines, at).and_then(|l| u32::try_from(l).ok()).unwrap_or(0);
            let node = match (tree, value_at(&inl, at)) {
                (Some(tree), Some(i)) if i >= 0 => self.inline_node(tree, i),
                _ => None,
            };
            let Some((function, parent_pc, start_line)) = node else {
                out.push(SourceFrame { function: f.name.clone(), file, line, start_line: own_start });
                break;
            };
            out.push(SourceFrame { function: function.to_string(), file, line, start_line });
            match f.entry.checked_add_signed(i64::from(parent_pc)).filter(|p| (f.entry..f.end).contains(p)) {
                Some(p) => at = p,
                None => break,
            }
        }
        out
    }

    /// File `index` of the compilation unit whose files start at `cu` in `cutab`.
    fn file_name(&self, cu: u32, index: i32) -> Option<&str> {
        let slot = u64::from(cu).checked_add(u64::try_from(index).ok()?)?;
        let off = self.image.u32(self.cutab.checked_add(4 * slot)?)?;
        if off == u32::MAX {
            return None;
        }
        self.image.c_string(self.filetab.checked_add(u64::from(off))?, NAME_MAX)
    }

    /// Inline tree entry `i`: the inlined function's name, its `parentPc` (from the
    /// outer function's entry) and its start line (Go 1.20 on; 0 before).
    fn inline_node(&self, tree: u64, i: i32) -> Option<(&str, i32, u32)> {
        let (size, name, parent_pc) = if self.format == Format::Go120 { (16, 4, 8) } else { (20, 12, 16) };
        let at = tree.checked_add(size * u64::try_from(i).ok()?)?;
        let start_line = if self.format == Format::Go120 { self.image.u32(at + 12)? } else { 0 };
        Some((self.name(self.image.u32(at + name)? as i32)?, self.image.u32(at + parent_pc)? as i32, start_line))
    }
}

#[cfg(test)]
mod tests {
    use super::value_at;

    #[test]
    fn runs_are_searched_by_pc() {
        let runs = [(0x400, 0x404, 7), (0x404, 0x410, 9)];
        assert_eq!(value_at(&runs, 0x3ff), None);
        assert_eq!(value_at(&runs, 0x400), Some(7));
        assert_eq!(value_at(&runs, 0x403), Some(7));
        assert_eq!(value_at(&runs, 0x404), Some(9));
        assert_eq!(value_at(&runs, 0x410), None);
    }
}
