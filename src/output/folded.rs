//! `-f folded`: standard output holds only folded stacks, what flame graph tools read,
//! written when the trace ends from every map keyed by `ustack` (crate::profile). This
//! sink keeps everything else readable on standard error, as text: printed events, maps
//! without a stack key, `--stats`. A `print(@m)` of a stack map while tracing writes a
//! line saying its stacks come at the end.

use super::value::Value;
use super::{text, write_out, Event, MapDump, OutputError, Sink};

#[derive(Default)]
pub struct FoldedSink {
    /// Stack maps whose `print` was answered with the note, each said once.
    noted: Vec<String>,
}

/// Whether a map is keyed by a stack.
fn has_stack(dump: &MapDump) -> bool {
    dump.entries.iter().any(|e| e.keys.iter().any(|k| matches!(k, Value::Stack { .. })))
}

impl Sink for FoldedSink {
    fn event(&mut self, event: &Event) -> Result<(), OutputError> {
        let s = match event {
            Event::Printf { format, values } => text::printf(format, values),
            Event::Print { labels, values } => format!("{}\n", text::labelled(labels, values)),
            _ => return Ok(()),
        };
        write_out(&mut std::io::stderr(), s.as_bytes())
    }
    fn map(&mut self, dump: &MapDump) -> Result<(), OutputError> {
        if !has_stack(dump) {
            return write_out(&mut std::io::stderr(), text::map(dump).as_bytes());
        }
        if self.noted.contains(&dump.name) {
            return Ok(());
        }
        self.noted.push(dump.name.clone());
        let note = format!(
            "{}: its stacks go to standard output as folded lines when the trace ends (-f folded)\n",
            dump.name
        );
        write_out(&mut std::io::stderr(), note.as_bytes())
    }
    fn stats(&mut self, stats: &super::stats::Stats) -> Result<(), OutputError> {
        write_out(&mut std::io::stderr(), stats.table().as_bytes())
    }
    fn flush(&mut self) -> Result<(), OutputError> {
        write_out(&mut std::io::stdout(), b"")
    }
}
