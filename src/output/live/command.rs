//! The output of a command started with -c while the live view holds the terminal: its
//! stdout and stderr come through pipes, each read by a thread of its own; the last
//! lines are shown in the view, and everything is kept (up to `KEEP_BYTES`) and written
//! to gtrace's own stdout and stderr when the view closes (each stream in its order).
//! From then on it passes straight through.

use crate::output::numbers::thousands;
use crate::output::quote;
use crate::runtime::Captured;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

/// Bytes of output kept while the view is open; the oldest go first.
pub const KEEP_BYTES: usize = 16 << 20;
/// Lines shown in the view.
pub const SHOWN: usize = 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    Out,
    Err,
}

#[derive(Default)]
struct State {
    /// What came while the view was open; None once written.
    held: Option<VecDeque<(Stream, Vec<u8>)>>,
    held_bytes: usize,
    dropped: u64,
    recent: VecDeque<String>,
}

/// The command's output, read as it comes.
pub struct CommandOutput {
    state: Arc<Mutex<State>>,
}

impl CommandOutput {
    /// Starts a reader on each pipe.
    pub fn start(captured: Captured) -> CommandOutput {
        let state = Arc::new(Mutex::new(State { held: Some(VecDeque::new()), ..State::default() }));
        for (stream, pipe) in [(Stream::Out, captured.stdout), (Stream::Err, captured.stderr)] {
            let state = state.clone();
            std::thread::spawn(move || read(pipe, stream, &state));
        }
        CommandOutput { state }
    }

    /// The last lines the command wrote, escaped for the terminal (oldest first).
    pub fn recent(&self) -> Vec<String> {
        self.state.lock().map(|s| s.recent.iter().cloned().collect()).unwrap_or_default()
    }
}

/// Reads `pipe` to its end: kept while the view is open, written through after.
fn read(mut pipe: std::fs::File, stream: Stream, state: &Mutex<State>) {
    let mut buf = vec![0u8; 64 << 10];
    let mut line = Vec::new();
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let Ok(mut s) = state.lock() else { return };
        if s.held.is_none() {
            drop(s);
            let _ = write(stream, &buf[..n]);
            continue;
        }
        for b in &buf[..n] {
            if *b == b'\n' {
                s.recent.push_back(quote::escape(&line));
                line.clear();
            } else {
                line.push(*b);
            }
        }
        while s.recent.len() > SHOWN {
            s.recent.pop_front();
        }
        s.held_bytes += n;
        s.held.get_or_insert_with(VecDeque::new).push_back((stream, buf[..n].to_vec()));
        while s.held_bytes > KEEP_BYTES {
            let Some((_, old)) = s.held.as_mut().and_then(VecDeque::pop_front) else { break };
            s.held_bytes -= old.len();
            s.dropped += old.len() as u64;
        }
    }
}

fn write(stream: Stream, bytes: &[u8]) -> std::io::Result<()> {
    match stream {
        Stream::Out => std::io::stdout().write_all(bytes),
        Stream::Err => std::io::stderr().write_all(bytes),
    }
}

impl Drop for CommandOutput {
    /// The view has closed: what was kept is written, the rest passes through.
    fn drop(&mut self) {
        let Ok(mut s) = self.state.lock() else { return };
        let Some(held) = s.held.take() else { return };
        if s.dropped > 0 {
            eprintln!(
                "--live: the first {} bytes the command wrote while the view was open are not kept (it keeps the last {})",
                thousands(s.dropped),
                thousands(KEEP_BYTES as u64)
            );
        }
        for (stream, bytes) in held {
            let _ = write(stream, &bytes);
        }
    }
}
