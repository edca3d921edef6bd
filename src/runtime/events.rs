//! Waiting for work: draining the event ring buffer in order, and firing `on interval`
//! programs that run as uprobes on gtrace's own trigger functions when their time comes.

use super::error::RuntimeError;
use super::loader::Loaded;
use super::trigger::Trigger;
use aya::maps::{Map, MapData, RingBuf};
use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The ring buffer of print/printf/exit events.
pub(crate) struct Events {
    ring: RingBuf<MapData>,
}

impl Events {
    pub fn new(name: &str, map: Map) -> Result<Events, RuntimeError> {
        let ring = RingBuf::try_from(map)
            .map_err(|source| RuntimeError::RingBuf { map: name.to_string(), source: Box::new(source) })?;
        Ok(Events { ring })
    }

    /// Calls `f` on the records now in the buffer, at most `most` of them; returns how
    /// many.
    fn drain(&mut self, most: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let mut n = 0;
        while n < most {
            let Some(item) = self.ring.next() else { break };
            f(&item);
            n += 1;
        }
        n
    }
}

/// An `on interval` program fired from user space.
pub(crate) struct IntervalTimer {
    pub trigger: Trigger,
    pub period: Duration,
    pub next: Instant,
}

/// Waits for the ring buffer's fd (or nothing) up to `timeout`; `false` if a signal woke us.
fn wait_readable(fd: Option<i32>, timeout: Duration) -> Result<bool, RuntimeError> {
    let millis = poll_millis(timeout);
    let mut pfd = libc::pollfd { fd: fd.unwrap_or(-1), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd (a negative fd is ignored by poll, which then just sleeps).
    let ret = unsafe { libc::poll(&mut pfd, 1, millis) };
    if ret < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINTR) {
            return Ok(false);
        }
        return Err(RuntimeError::Poll { source: err });
    }
    Ok(true)
}

/// `timeout` in poll's whole milliseconds, rounded up: rounded down, the last
/// millisecond before a deadline was a poll of 0 ms again and again (a busy loop: about
/// 3% of a CPU for a trace doing nothing, which waits 20 ms at a time).
fn poll_millis(timeout: Duration) -> i32 {
    timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32
}

impl Loaded {
    /// Calls `f` on the event records, in order, at most `most` of them, waiting up to
    /// `timeout` for the first; returns how many. Returns early once records were
    /// delivered, or when a signal arrives (check `signals::stop_requested`). Due `on
    /// interval` programs run meanwhile. The bound keeps what a caller holds at once
    /// bounded: a buffer that probes fill as fast as it is read is never empty.
    pub fn poll_events(
        &mut self,
        timeout: Duration,
        most: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<usize, RuntimeError> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut delivered = self.events.as_mut().map_or(0, |e| e.drain(most, f));
            let now = Instant::now();
            for timer in &mut self.intervals {
                if timer.next <= now {
                    timer.trigger.fire();
                    // Skip missed periods rather than firing in a burst.
                    while timer.next <= now {
                        timer.next += timer.period;
                    }
                }
            }
            delivered += self.events.as_mut().map_or(0, |e| e.drain(most - delivered, f));
            if delivered > 0 || now >= deadline {
                return Ok(delivered);
            }
            let wake = self.intervals.iter().map(|t| t.next).fold(deadline, Instant::min);
            let fd = self.events.as_ref().map(|e| e.ring.as_raw_fd());
            if !wait_readable(fd, wake.saturating_duration_since(Instant::now()))? {
                return Ok(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::poll_millis;
    use std::time::Duration;

    #[test]
    fn a_wait_shorter_than_a_millisecond_is_not_a_poll_of_zero() {
        assert_eq!(poll_millis(Duration::ZERO), 0);
        assert_eq!(poll_millis(Duration::from_nanos(1)), 1);
        assert_eq!(poll_millis(Duration::from_micros(999)), 1);
        assert_eq!(poll_millis(Duration::from_millis(1)), 1);
        assert_eq!(poll_millis(Duration::from_micros(19_001)), 20);
        assert_eq!(poll_millis(Duration::from_secs(u64::MAX)), i32::MAX);
    }
}
