//! A duty cycle's probes taken off the target and put back (the budget's duty.rs), never
//! on the trace loop's time: `park_target` takes every link on the target's file and hands
//! them to a thread of their own, which releases them (each close waits for the kernel's
//! grace period, tens of milliseconds on a busy host), empties the tables a duty cycle
//! clears (`clear`: 10-35 ms for http's 4,096 slots one element at a time), waits until
//! the time given, and makes the links again from the programs already loaded, at the
//! same points with the same cookies (a program that checks generations gets its slots'
//! live ones: its old links are gone by then, so no hit is counted twice). The loop
//! takes the new links when the thread is done (`unparked`). Probes on perf-event links
//! (a kernel without multi-uprobe links) are made again by the loop itself.
//!
//! Under -b the file guard hears both ways (`file_guard::Cycling`): off once they are
//! released, and before they are made again, which it refuses when the file was changed
//! in place meanwhile (they stay off: an error for the loop).
//!
//! `forget_parked` keeps them off: a thread still waiting is told to stop, one that made
//! links meanwhile has them released. Every way out (`detach_all`, `wait_left`) joins it.

use super::attach::{cookie_slot, multi_link, AttachTarget, Link, LinkKind};
use super::detach::release;
use super::error::RuntimeError;
use super::loader::Loaded;
use super::maps::MapHandle;
use crate::plan::AttachPoint;
use aya::maps::MapData;
use aya::programs::uprobe::UProbeScope;
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Instant;

/// One link's worth of probe points off the target for now.
pub(crate) struct Parked {
    pub program: String,
    pub points: Vec<AttachPoint>,
    /// A multi-uprobe link (else a perf-event link a point).
    multi: bool,
}

/// The thread that has the parked links and makes them again.
pub(crate) struct Parking {
    thread: JoinHandle<Result<Back, String>>,
    /// Dropped (or sent to) to wake the thread early and stop it.
    stop: Option<Sender<()>>,
}

/// What the thread ends with.
enum Back {
    /// The links made again, and when.
    Links(Vec<Link>, Instant),
    /// Stopped before making any.
    Stopped,
}

/// A multi-uprobe link to make: its program (a copy of the fd), points and cookies.
struct Remake {
    program: String,
    fd: OwnedFd,
    points: Vec<AttachPoint>,
    generations: Vec<u8>,
}

impl Loaded {
    /// Takes the probes on the target's file off until `at`, emptying `clear` meanwhile;
    /// `unparked` says when they are back. Nothing when none are attached.
    pub fn park_target(&mut self, clear: &[String], at: Instant) -> Result<(), RuntimeError> {
        let links = self.take_target_links();
        if links.is_empty() {
            return Ok(());
        }
        self.join_parking();
        self.parked = (links.iter())
            .map(|l| Parked {
                program: l.program.clone(),
                points: l.points.clone(),
                multi: matches!(l.kind, LinkKind::Multi(_)),
            })
            .collect();
        let maps = clear.iter().filter_map(|name| self.maps.get(name)).map(copy_of).collect::<Result<Vec<_>, _>>();
        let remakes = self.remakes();
        let target = self.target.clone();
        let (maps, remakes, target) = match (maps, remakes, target) {
            (Ok(m), Ok(r), Some(t)) => (m, r, t),
            (Err(e), _, _) | (_, Err(e), _) => {
                self.parked.clear();
                self.release_aside(links);
                return Err(e);
            }
            (_, _, None) => {
                self.parked.clear();
                self.release_aside(links);
                return Err(RuntimeError::Unsupported { what: "a duty cycle: not attached".into() });
            }
        };
        let (stop, stopped) = channel::<()>();
        let guard = self.file_guard.as_ref().and_then(|g| g.cycling());
        let work = move || -> Result<Back, String> {
            release_all(links);
            guard.iter().for_each(|g| g.off());
            for m in &maps {
                m.clear().map_err(|e| e.to_string())?;
            }
            match stopped.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => return Ok(Back::Stopped),
            }
            if guard.as_ref().is_some_and(|g| !g.back_on()) {
                return Err("the file was changed in place while they were off: not attached again".into());
            }
            remake(remakes, &target).map(|links| Back::Links(links, Instant::now()))
        };
        let thread = std::thread::Builder::new()
            .name("gtrace-park".into())
            .spawn(work)
            .map_err(|source| RuntimeError::Os { action: "starting a thread for a duty cycle", source })?;
        self.parking = Some(Parking { thread, stop: Some(stop) });
        Ok(())
    }

    /// When the parked probes are back (their links taken from the thread, perf-event
    /// ones made here), the time they were; `None` while they are off. On failure none
    /// are left half back.
    pub fn unparked(&mut self) -> Result<Option<Instant>, RuntimeError> {
        if self.parked.is_empty() {
            return Ok(Some(Instant::now()));
        }
        if self.parking.as_ref().is_some_and(|p| !p.thread.is_finished()) {
            return Ok(None);
        }
        let back = self.parking.take().map(|p| p.thread.join());
        let parked = std::mem::take(&mut self.parked);
        let result = match back {
            Some(Ok(Ok(Back::Links(links, at)))) => {
                self.links.extend(links);
                self.remake_perf_event(parked).map(|()| Some(at))
            }
            Some(Ok(Err(e))) => Err(RuntimeError::Unsupported { what: format!("a duty cycle: {e}") }),
            _ => Err(RuntimeError::Unsupported { what: "a duty cycle: its thread stopped".into() }),
        };
        if result.is_err() {
            let made = self.take_target_links();
            self.release_aside(made);
        }
        result
    }

    /// The parked probes stay off for good: a thread still waiting stops, links it made
    /// are released (joined on the way out).
    pub fn forget_parked(&mut self) {
        self.parked.clear();
        if let Some(p) = self.parking.as_mut() {
            p.stop.take();
        }
    }

    /// Waits for the parking thread, if any (told to stop first), and releases whatever
    /// it made.
    pub(super) fn join_parking(&mut self) {
        if let Some(mut p) = self.parking.take() {
            p.stop.take();
            if let Ok(Ok(Back::Links(links, _))) = p.thread.join() {
                release_all(links);
            }
        }
    }

    /// Releases `links` on a thread (joined as the parking thread is).
    fn release_aside(&mut self, links: Vec<Link>) {
        let thread = std::thread::Builder::new().name("gtrace-park".into()).spawn(move || {
            release_all(links);
            Ok(Back::Stopped)
        });
        if let Ok(thread) = thread {
            self.parking = Some(Parking { thread, stop: None });
        }
    }

    /// What the thread needs to make the parked multi-uprobe links again.
    fn remakes(&self) -> Result<Vec<Remake>, RuntimeError> {
        let mut out = Vec::new();
        for p in self.parked.iter().filter(|p| p.multi) {
            let fd = self.multi.get(&p.program).ok_or_else(|| RuntimeError::Unsupported {
                what: format!("a duty cycle: no multi-uprobe copy of `{}`", p.program),
            })?;
            let fd = fd
                .try_clone()
                .map_err(|source| RuntimeError::Os { action: "copying a program's fd for a duty cycle", source })?;
            let checks = self.accounting.checks_generations(&p.program);
            let live = |a: &AttachPoint| self.generations.get(&cookie_slot(a.cookie)).copied().unwrap_or(0);
            let generations = p.points.iter().map(|a| if checks { live(a) } else { 0 }).collect();
            out.push(Remake { program: p.program.clone(), fd, points: p.points.clone(), generations });
        }
        Ok(out)
    }

    /// Makes the parked perf-event links again, a point each.
    fn remake_perf_event(&mut self, parked: Vec<Parked>) -> Result<(), RuntimeError> {
        let Some(target) = self.target.clone() else { return Ok(()) };
        for p in parked.into_iter().filter(|p| !p.multi) {
            let scope = match target.scope {
                super::Scope::Process(pid) => {
                    UProbeScope::OneProcess(NonZeroU32::new(pid).ok_or(RuntimeError::NoSuchProcess { pid })?)
                }
                super::Scope::AllProcesses => UProbeScope::AllProcesses,
            };
            for point in &p.points {
                self.attach_uprobe(&p.program, point, &target.binary, scope, false)?;
            }
        }
        Ok(())
    }
}

/// Makes the multi-uprobe links of `remakes` again.
fn remake(remakes: Vec<Remake>, target: &AttachTarget) -> Result<Vec<Link>, String> {
    let mut links = Vec::new();
    for r in remakes {
        let at: HashMap<u64, u8> = r.points.iter().map(|p| p.cookie).zip(r.generations.iter().copied()).collect();
        let generation = |p: &AttachPoint| at.get(&p.cookie).copied().unwrap_or(0);
        match multi_link(r.fd.as_fd(), &r.points, &target.binary, target.scope, &generation) {
            Ok(link) => links.push(Link { program: r.program, points: r.points, kind: LinkKind::Multi(link) }),
            Err(e) => {
                release_all(links);
                return Err(format!("attaching `{}` again: {e}", r.program));
            }
        }
    }
    Ok(links)
}

/// Releases `links`, one as well as many (`release` leaves one to its caller).
fn release_all(links: Vec<Link>) {
    match links.len() {
        1 => drop(links),
        _ => release(links),
    }
}

/// A second handle of `map` (its fd copied), for a thread to clear it.
fn copy_of(map: &MapHandle) -> Result<MapHandle, RuntimeError> {
    let os = |source| RuntimeError::Os { action: "copying a map's fd for a duty cycle", source };
    let fd = map.data.fd().as_fd().try_clone_to_owned().map_err(os)?;
    let data = MapData::from_fd(fd).map_err(|e| RuntimeError::Unsupported { what: format!("a duty cycle: {e}") })?;
    Ok(MapHandle { spec: map.spec.clone(), data })
}
