//! The terminal while the live view is open: raw mode and the alternate screen through
//! crossterm (ratatui's backend), given back as they were when the view closes however
//! it closes (`Drop`), and the keys the view answers to.

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Terminal;
use std::io::{IsTerminal, Stdout};
use std::time::Duration;

/// The terminal could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TerminalError {
    /// `--live` draws on a terminal, and standard output is a pipe or a file.
    #[error("--live draws on a terminal, and standard output is not one")]
    NotATerminal,
    #[error("cannot {action} the terminal for --live")]
    Io {
        action: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// What a key asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Quit,
    /// Scroll by this many lines (negative: up).
    Scroll(i32),
    /// To the top.
    Home,
    /// The terminal changed size: redraw now.
    Redraw,
}

/// The terminal in raw mode on the alternate screen; restored when dropped.
pub struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
}

fn io(action: &'static str) -> impl FnOnce(std::io::Error) -> TerminalError {
    move |source| TerminalError::Io { action, source }
}

impl Screen {
    /// Checks that standard output is a terminal (before anything is changed).
    pub fn check() -> Result<(), TerminalError> {
        if std::io::stdout().is_terminal() {
            Ok(())
        } else {
            Err(TerminalError::NotATerminal)
        }
    }

    /// Raw mode (keys come one by one, Ctrl-C is a key), the alternate screen, no cursor.
    pub fn open() -> Result<Screen, TerminalError> {
        Screen::check()?;
        terminal::enable_raw_mode().map_err(io("set raw mode on"))?;
        // From here on, dropping the screen restores the terminal.
        let mut out = std::io::stdout();
        let entered = execute!(out, terminal::EnterAlternateScreen, cursor::Hide);
        let terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()));
        match (entered, terminal) {
            (Ok(()), Ok(terminal)) => Ok(Screen { terminal }),
            (Err(e), _) | (_, Err(e)) => {
                restore();
                Err(TerminalError::Io { action: "open the alternate screen of", source: e })
            }
        }
    }

    /// Draws `lines` from line `scroll` on, the whole screen written again (so that
    /// whatever else wrote to the terminal meanwhile, e.g. a line on stderr, is gone).
    pub fn draw(&mut self, lines: Vec<Line<'static>>, scroll: u16) -> Result<(), TerminalError> {
        self.terminal.clear().map_err(io("clear"))?;
        let text = Paragraph::new(lines).scroll((scroll, 0));
        self.terminal.draw(|f| f.render_widget(text, f.area())).map_err(io("draw on"))?;
        Ok(())
    }

    /// The width of the screen, in columns.
    pub fn width(&self) -> u16 {
        self.terminal.size().map(|s| s.width).unwrap_or(80)
    }

    /// The keys pressed since the last call (waits for none).
    pub fn keys(&mut self) -> Result<Vec<Key>, TerminalError> {
        let mut keys = Vec::new();
        while event::poll(Duration::ZERO).map_err(io("read keys from"))? {
            match event::read().map_err(io("read keys from"))? {
                Event::Key(k) if k.kind != KeyEventKind::Release => {
                    let ctrl_c = k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c');
                    keys.extend(match k.code {
                        _ if ctrl_c => Some(Key::Quit),
                        KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc => Some(Key::Quit),
                        KeyCode::Up | KeyCode::Char('k') => Some(Key::Scroll(-1)),
                        KeyCode::Down | KeyCode::Char('j') => Some(Key::Scroll(1)),
                        KeyCode::PageUp => Some(Key::Scroll(-20)),
                        KeyCode::PageDown | KeyCode::Char(' ') => Some(Key::Scroll(20)),
                        KeyCode::Home | KeyCode::Char('g') => Some(Key::Home),
                        _ => None,
                    });
                }
                Event::Resize(..) => keys.push(Key::Redraw),
                _ => {}
            }
        }
        Ok(keys)
    }
}

/// Leaves the alternate screen, shows the cursor, ends raw mode; each step tried even
/// when one before it failed (there is no better place to say so than the terminal).
fn restore() {
    let _ = execute!(std::io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
    let _ = terminal::disable_raw_mode();
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}
