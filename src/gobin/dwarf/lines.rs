//! The line table (`.debug_line`): which source file and line each instruction belongs
//! to, and where statements start (`is_stmt`). Read once, for the whole binary, when a
//! line probe first needs it, with each unit's file table (what `DW_AT_call_file` of its
//! inlined calls indexes).

use super::*;

/// One row: from `addr` on (to the next row), the code is `file:line`; `stmt` when a
/// statement starts at `addr`; `end` rows end a sequence (no code from there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LineRow {
    pub addr: u64,
    pub file: u32,
    pub line: u32,
    pub stmt: bool,
    pub end: bool,
}

/// Every row of every unit, by address, with the files they name.
#[derive(Debug, Default)]
pub(crate) struct LineTable {
    /// Every file path the rows name, once each.
    pub files: Vec<String>,
    /// Sorted by address; at one address an `end` row comes before the next sequence's.
    pub rows: Vec<LineRow>,
    /// Per unit (as `DwarfInfo::units`): its header's file index → index in `files`.
    pub unit_files: Vec<HashMap<u64, u32>>,
}

impl LineTable {
    /// The row in effect at `pc`: the last row at or before it, unless that ends a sequence.
    pub fn at(&self, pc: u64) -> Option<&LineRow> {
        let i = self.rows.partition_point(|r| r.addr <= pc).checked_sub(1)?;
        let row = &self.rows[i];
        (!row.end).then_some(row)
    }
}

/// A path from a file entry: its name, under its directory when the name is relative.
fn join(dir: Option<String>, name: String) -> String {
    match dir {
        Some(d) if !d.is_empty() && !name.starts_with('/') => format!("{}/{name}", d.trim_end_matches('/')),
        _ => name,
    }
}

impl DwarfInfo {
    /// The line table, read from `.debug_line` on first use (`data` is the ELF).
    pub(crate) fn line_table(&mut self, data: &[u8]) -> Result<Arc<LineTable>, TargetError> {
        if let Some(t) = &self.lines {
            return Ok(t.clone());
        }
        let section = |name: &str| -> Result<R, TargetError> {
            Ok(match elf::section(&self.path, data, name)? {
                Some(bytes) => R::new(Arc::from(&*bytes), gimli::LittleEndian),
                None => R::new(Arc::from(&[][..]), gimli::LittleEndian),
            })
        };
        let debug_line = gimli::DebugLine::from(section(".debug_line")?);
        let line_str = gimli::DebugLineStr::from(section(".debug_line_str")?);
        let mut table = LineTable::default();
        let mut by_path: HashMap<String, u32> = HashMap::new();
        for u in 0..self.units.len() {
            let files = self.unit_lines(u, &debug_line, &line_str, &mut table, &mut by_path)?;
            table.unit_files.push(files);
        }
        table.rows.sort_by_key(|r| (r.addr, !r.end));
        let table = Arc::new(table);
        self.lines = Some(table.clone());
        Ok(table)
    }

    /// Reads unit `u`'s line program into `table`; returns its file index map.
    fn unit_lines(
        &self,
        u: usize,
        debug_line: &gimli::DebugLine<R>,
        line_str: &gimli::DebugLineStr<R>,
        table: &mut LineTable,
        by_path: &mut HashMap<String, u32>,
    ) -> Result<HashMap<u64, u32>, TargetError> {
        let slot = self.unit(u)?;
        let mut entries = slot.header.entries(&slot.abbrevs);
        let Some(root) = entries.next_dfs().map_err(|e| self.bad(e))? else { return Ok(HashMap::new()) };
        let Some(AttributeValue::DebugLineRef(offset)) = root.attr_value(dw::DW_AT_stmt_list) else {
            return Ok(HashMap::new());
        };
        let text = |v: AttributeValue<R>| -> Result<Option<String>, TargetError> {
            match v {
                AttributeValue::DebugLineStrRef(off) => {
                    let r = line_str.get_str(off).map_err(|e| self.bad(e))?;
                    Ok(Some(r.to_string_lossy().map_err(|e| self.bad(e))?.into_owned()))
                }
                v => string(&self.debug_str, v).map_err(|e| self.bad(e)),
            }
        };
        let program = debug_line.program(offset, slot.header.address_size(), None, None).map_err(|e| self.bad(e))?;
        let header = program.header().clone();
        let mut files: HashMap<u64, u32> = HashMap::new();
        let first = if header.version() >= 5 { 0 } else { 1 };
        for (i, entry) in header.file_names().iter().enumerate() {
            let dir = match entry.directory(&header) {
                Some(d) => text(d)?,
                None => None,
            };
            let Some(name) = text(entry.path_name())? else { continue };
            let path = join(dir, name);
            let next = table.files.len() as u32;
            let id = *by_path.entry(path.clone()).or_insert(next);
            if id == next {
                table.files.push(path);
            }
            files.insert(i as u64 + first, id);
        }
        let mut rows = program.rows();
        while let Some((_, row)) = rows.next_row().map_err(|e| self.bad(e))? {
            let file = files.get(&row.file_index()).copied().unwrap_or(u32::MAX);
            let line = row.line().map_or(0, |l| u32::try_from(l.get()).unwrap_or(u32::MAX));
            table.rows.push(LineRow { addr: row.address(), file, line, stmt: row.is_stmt(), end: row.end_sequence() });
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(addr: u64, line: u32, stmt: bool, end: bool) -> LineRow {
        LineRow { addr, file: 0, line, stmt, end }
    }

    #[test]
    fn the_row_in_effect_and_sequence_ends() {
        let mut table = LineTable::default();
        table.rows = vec![row(0x10, 5, true, false), row(0x14, 6, false, false), row(0x20, 6, true, true)];
        assert_eq!(table.at(0x10).map(|r| r.line), Some(5));
        assert_eq!(table.at(0x13).map(|r| r.line), Some(5));
        assert_eq!(table.at(0x1f).map(|r| r.line), Some(6));
        assert!(table.at(0x20).is_none() && table.at(0x0f).is_none());
        // The next sequence starts where the last ended.
        table.rows.push(row(0x20, 9, true, false));
        table.rows.sort_by_key(|r| (r.addr, !r.end));
        assert_eq!(table.at(0x20).map(|r| r.line), Some(9));
    }

    #[test]
    fn relative_names_go_under_their_directory() {
        assert_eq!(join(Some("/src/app".into()), "main.go".into()), "/src/app/main.go");
        assert_eq!(join(Some("/src".into()), "/abs/x.go".into()), "/abs/x.go");
        assert_eq!(join(None, "main.go".into()), "main.go");
    }
}
