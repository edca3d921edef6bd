//! Where a code address is in the source, read from `.gopclntab` as the Go runtime reads
//! it for its own tracebacks and profiles: the frames at the address (the functions
//! inlined there, innermost first, then the function whose code holds it), each with its
//! file and line. The same in a stripped binary, which keeps the table.

use super::moduledata;
use super::pclntab::{self, SourceFrame};
use crate::gobin::Target;

impl Target {
    /// The frames at the link-time address `pc`, innermost first; empty outside every
    /// function of the table.
    pub fn source_frames(&self, pc: u64) -> Vec<SourceFrame> {
        let records = self.records.get_or_init(|| self.func_records().unwrap_or_default());
        let Some(i) = records.partition_point(|r| r.entry <= pc).checked_sub(1) else { return Vec::new() };
        let f = &records[i];
        let (Some(addr), true) = (self.layout.pclntab, pc < f.end) else { return Vec::new() };
        let image = self.image();
        let Ok(table) = pclntab::Pclntab::parse(&image, addr, self.layout.text) else { return Vec::new() };
        table.source_frames(f, pc, self.gofunc())
    }

    /// The loaded segment that holds the code: `[start, end)` at link-time addresses,
    /// and the file offset it is mapped from (a profile's mapping).
    pub fn text_segment(&self) -> Option<(u64, u64, u64)> {
        let text = self.layout.text;
        let s = self.segments.iter().find(|s| s.vaddr <= text && text < s.vaddr + s.filesz)?;
        Some((s.vaddr, s.vaddr + s.filesz, s.offset))
    }

    /// `moduledata.gofunc`, which Go 1.18+ inline trees are found from (None before 1.18,
    /// where funcdata are pointers, and when no candidate fits); found once.
    pub(crate) fn gofunc(&self) -> Option<u64> {
        *self.gofunc.get_or_init(|| {
            let image = self.image();
            let (table, md) = self.pclntab(&image, self.layout.pclntab?).ok()?;
            if table.format == pclntab::Format::Go116 {
                return None;
            }
            let candidates = moduledata::gofunc_candidates(&image, md?, self.layout.rodata?);
            candidates.into_iter().find(|g| table.gofunc_fits(*g))
        })
    }
}
