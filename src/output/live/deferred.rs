//! What the script prints while the live view holds the terminal: kept, and written in
//! its order when the view has closed (the first `flush`), so that nothing printed is
//! drawn over or lost. The last lines are also shown in the view. At most `KEEP` outputs
//! are kept (the oldest go first); how many went is said when the rest are written.

use crate::output::numbers::thousands;
use crate::output::stats::Stats;
use crate::output::{text, Event, MapDump, OutputError, Sink};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Outputs kept while the view is open.
pub const KEEP: usize = 100_000;
/// Printed lines shown in the view.
pub const SHOWN: usize = 8;

enum Held {
    Event(Event),
    Map(MapDump),
    Stats(Box<Stats>),
}

/// The last printed lines, for the view, and how many were printed in all.
#[derive(Default)]
pub struct Recent {
    pub lines: VecDeque<String>,
    pub total: u64,
}

/// A sink that holds everything until its first flush, then writes through.
pub struct Deferred {
    inner: Box<dyn Sink>,
    held: Option<VecDeque<Held>>,
    dropped: u64,
    recent: Arc<Mutex<Recent>>,
}

impl Deferred {
    pub fn new(inner: Box<dyn Sink>, recent: Arc<Mutex<Recent>>) -> Deferred {
        Deferred { inner, held: Some(VecDeque::new()), dropped: 0, recent }
    }

    fn hold(&mut self, item: Held) {
        if let Some(held) = &mut self.held {
            if held.len() == KEEP {
                held.pop_front();
                self.dropped += 1;
            }
            held.push_back(item);
        }
    }
}

impl Sink for Deferred {
    fn event(&mut self, event: &Event) -> Result<(), OutputError> {
        if self.held.is_none() {
            return self.inner.event(event);
        }
        let line = match event {
            Event::Printf { format, values } => Some(text::printf(format, values)),
            Event::Print { labels, values } => Some(text::labelled(labels, values)),
            _ => None,
        };
        if let (Some(line), Ok(mut recent)) = (line, self.recent.lock()) {
            recent.total += 1;
            recent.lines.extend(line.lines().map(String::from));
            while recent.lines.len() > SHOWN {
                recent.lines.pop_front();
            }
        }
        self.hold(Held::Event(event.clone()));
        Ok(())
    }
    fn map(&mut self, dump: &MapDump) -> Result<(), OutputError> {
        if self.held.is_none() {
            return self.inner.map(dump);
        }
        self.hold(Held::Map(dump.clone()));
        Ok(())
    }
    fn stats(&mut self, stats: &Stats) -> Result<(), OutputError> {
        if self.held.is_none() {
            return self.inner.stats(stats);
        }
        self.hold(Held::Stats(Box::new(stats.clone())));
        Ok(())
    }
    fn flush(&mut self) -> Result<(), OutputError> {
        if let Some(held) = self.held.take() {
            if self.dropped > 0 {
                eprintln!(
                    "--live: the first {} outputs printed while the view was open are not kept (it keeps the last {})",
                    thousands(self.dropped),
                    thousands(KEEP as u64)
                );
            }
            for item in held {
                match item {
                    Held::Event(e) => self.inner.event(&e)?,
                    Held::Map(m) => self.inner.map(&m)?,
                    Held::Stats(s) => self.inner.stats(&s)?,
                }
            }
        }
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that records what reaches it.
    #[derive(Default)]
    struct Record(Arc<Mutex<Vec<String>>>);

    impl Sink for Record {
        fn event(&mut self, event: &Event) -> Result<(), OutputError> {
            self.0.lock().unwrap().push(format!("{event:?}"));
            Ok(())
        }
        fn map(&mut self, dump: &MapDump) -> Result<(), OutputError> {
            self.0.lock().unwrap().push(dump.name.clone());
            Ok(())
        }
        fn stats(&mut self, _: &Stats) -> Result<(), OutputError> {
            Ok(())
        }
        fn flush(&mut self) -> Result<(), OutputError> {
            Ok(())
        }
    }

    #[test]
    fn printed_lines_are_kept_until_the_first_flush_then_written_in_order() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recent = Arc::new(Mutex::new(Recent::default()));
        let mut d = Deferred::new(Box::new(Record(seen.clone())), recent.clone());
        let printf = |s: &str| Event::Printf { format: s.into(), values: vec![] };
        let dump = MapDump {
            name: "@m".into(),
            agg: None,
            durations: false,
            key_names: vec![],
            entries: vec![],
            partial: None,
        };
        for i in 0..10 {
            d.event(&printf(&format!("line {i}\n"))).unwrap();
        }
        d.map(&dump).unwrap();
        assert!(seen.lock().unwrap().is_empty(), "written while the view is open");
        {
            let r = recent.lock().unwrap();
            assert_eq!(r.total, 10);
            assert_eq!(r.lines.len(), SHOWN);
            assert_eq!(r.lines.back().map(String::as_str), Some("line 9"));
        }
        d.flush().unwrap();
        d.event(&printf("after\n")).unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 12);
        assert!(seen[0].contains("line 0") && seen[9].contains("line 9"), "{seen:?}");
        assert_eq!(seen[10], "@m");
        assert!(seen[11].contains("after"));
    }
}
