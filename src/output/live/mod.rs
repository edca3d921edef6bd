//! `--live`: the maps redrawn in the terminal every second, full screen, instead of
//! printed only at exit (the model is bpftop and htop). Each map is sorted by value,
//! largest first, with its rate per second and, for a `hist()`, its percentiles; above
//! them the budget's state and each probe's hits and cost. q (or Esc, or Ctrl-C) closes
//! the view: the terminal is given back as it was, and the maps print as usual.
//!
//! `terminal` holds the screen (crossterm through ratatui), `view` makes the lines of a
//! redraw from the maps and gtrace's own numbers (pure), `rates` the rates between two
//! redraws, `deferred` keeps what the script prints while the view is open, `command`
//! what a command started with -c writes meanwhile.

pub mod command;
pub mod deferred;
pub mod rates;
pub mod terminal;
pub mod view;

use crate::output::stats::Stats;
use crate::output::MapDump;
use deferred::Recent;
use ratatui::text::Line;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
pub use terminal::TerminalError;
use terminal::{Key, Screen};

/// How often the view is redrawn.
pub const PERIOD: Duration = Duration::from_secs(1);

/// The open view. Its fields drop in order: the terminal is given back before the
/// command's kept output is written.
pub struct Live {
    screen: Screen,
    title: String,
    started: Instant,
    next: Instant,
    rates: rates::Rates,
    scroll: u16,
    recent: Arc<Mutex<Recent>>,
    /// The lines of the last redraw, drawn again when a key scrolls them.
    last: Vec<Line<'static>>,
    /// The output of a command started with -c.
    command: Option<command::CommandOutput>,
}

/// What the view asks of the trace after its keys were read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    Nothing,
    Quit,
}

impl Live {
    /// Checks that standard output is a terminal, before anything loads.
    pub fn check() -> Result<(), TerminalError> {
        Screen::check()
    }

    /// Opens the view; the first redraw is at once. `recent` is what the script's
    /// `Deferred` sink shows of its printed lines; `captured`, the output of a command
    /// started with -c.
    pub fn open(
        title: String,
        recent: Arc<Mutex<Recent>>,
        captured: Option<crate::runtime::Captured>,
    ) -> Result<Live, TerminalError> {
        let screen = Screen::open()?;
        let now = Instant::now();
        let rates = rates::Rates::new(now);
        let command = captured.map(command::CommandOutput::start);
        Ok(Live { screen, title, started: now, next: now, rates, scroll: 0, recent, last: Vec::new(), command })
    }

    /// Whether a redraw is due.
    pub fn due(&self) -> bool {
        Instant::now() >= self.next
    }

    /// Reads the keys pressed: scrolls the last redraw, and says when the view should
    /// close.
    pub fn keys(&mut self) -> Result<Asked, TerminalError> {
        let keys = self.screen.keys()?;
        for key in &keys {
            match key {
                Key::Quit => return Ok(Asked::Quit),
                Key::Scroll(n) => self.scroll = (i32::from(self.scroll) + n).clamp(0, i32::from(u16::MAX)) as u16,
                Key::Home => self.scroll = 0,
                Key::Redraw => {}
            }
        }
        if !keys.is_empty() {
            self.screen.draw(self.last.clone(), self.scroll)?;
        }
        Ok(Asked::Nothing)
    }

    /// Redraws with the maps as they are now and gtrace's own numbers; rates are over
    /// the time since the last redraw.
    pub fn draw(&mut self, maps: &[MapDump], stats: Option<&Stats>) -> Result<(), TerminalError> {
        let now = Instant::now();
        self.rates.tick(now);
        self.next = now + PERIOD;
        let (printed, total) = match self.recent.lock() {
            Ok(r) => (r.lines.iter().cloned().collect::<Vec<_>>(), r.total),
            Err(_) => (Vec::new(), 0),
        };
        let command = self.command.as_ref().map(|c| c.recent()).unwrap_or_default();
        let snapshot = view::Snapshot {
            title: &self.title,
            elapsed: now.saturating_duration_since(self.started),
            maps,
            stats,
            printed: &printed,
            printed_total: total,
            command: self.command.as_ref().map(|_| command.as_slice()),
        };
        self.last = view::lines(&snapshot, &mut self.rates, self.screen.width());
        self.screen.draw(self.last.clone(), self.scroll)
    }
}
