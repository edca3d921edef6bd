//! Attaching the loaded programs: uprobes at file offsets of the target (with the
//! function's index as attach cookie), `on begin`/`on end`/`on interval` on gtrace's own
//! trigger functions, and detaching all of it.
//!
//! All the target offsets of one program go into one multi-uprobe link when the kernel
//! has them (`uprobe_multi`): one syscall to attach, one to detach. Otherwise, or if the
//! kernel refuses that link for any reason, each offset gets its own perf-event link
//! (which also names the offending function when an offset is bad).
//!
//! A probe point the kernel refuses (ENOTSUPP for an instruction it will not step,
//! EINVAL, ENOEXEC) is left out and recorded (`Loaded::refused`): one bad site never
//! stops the others. Missing privileges and a vanished process still end the attach.

use super::error::{has_errno, permission_error, RuntimeError};
use super::events::IntervalTimer;
use super::loader::Loaded;
use super::trigger::Trigger;
use super::uprobe_multi::{self, MultiLink};
use crate::plan::MAX_INTERVAL_PROBES;
use crate::plan::{AttachPoint, ProbeAttach};
use aya::programs::uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeLink, UProbeScope};
use aya::programs::Program;
use std::num::NonZeroU32;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Which processes the target's uprobes fire in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One process (and what it execs).
    Process(u32),
    /// Every process that runs the binary.
    AllProcesses,
}

/// One attachment; dropping it detaches.
pub(crate) enum Link {
    // Held only to be dropped.
    Uprobe(#[allow(dead_code)] UProbeLink),
    /// Many offsets of one program.
    Multi(MultiLink),
}

impl Link {
    /// How many probe points the link attaches.
    fn points(&self) -> usize {
        match self {
            Link::Multi(m) => m.points(),
            Link::Uprobe(_) => 1,
        }
    }
}

/// A probe point the kernel refused to attach, and its errno.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedPoint {
    /// The program that was to run there.
    pub program: String,
    pub function: String,
    pub address: u64,
    pub file_offset: u64,
    pub errno: i32,
}

/// The errnos with which the kernel refuses one probe point rather than the whole attach.
const REFUSED_POINT_ERRNOS: [i32; 3] = [524 /* ENOTSUPP */, libc::EINVAL, libc::ENOEXEC];

impl Loaded {
    /// The probe points the kernel refused during `attach` (each left out; the others
    /// are attached).
    pub fn refused(&self) -> &[RefusedPoint] {
        &self.refused
    }

    /// Attaches every probe of the plan: the target's uprobes in `binary` within `scope`,
    /// begin/end triggers in gtrace itself, interval probes. Returns how many probe points
    /// were attached. On failure everything attached so far is detached.
    pub fn attach(&mut self, binary: &Path, scope: Scope) -> Result<usize, RuntimeError> {
        let result = self.attach_all(binary, scope);
        if result.is_err() {
            self.detach_all();
        }
        result
    }

    fn attach_all(&mut self, binary: &Path, scope: Scope) -> Result<usize, RuntimeError> {
        let binary = attach_path(binary);
        let target_scope = match scope {
            Scope::Process(pid) => {
                UProbeScope::OneProcess(NonZeroU32::new(pid).ok_or(RuntimeError::NoSuchProcess { pid })?)
            }
            Scope::AllProcesses => UProbeScope::AllProcesses,
        };
        let before = self.attached();
        let mut intervals = 0;
        for probe in self.plan_probes.clone() {
            match &probe.attach {
                ProbeAttach::Uprobe(points) => {
                    if self.attach_multi(&probe.program, points, &binary, scope) {
                        continue;
                    }
                    for point in points {
                        match self.attach_uprobe(&probe.program, point, &binary, target_scope) {
                            Err(RuntimeError::Attach { source, .. })
                                if REFUSED_POINT_ERRNOS.iter().any(|e| has_errno(&*source, *e)) =>
                            {
                                let errno = REFUSED_POINT_ERRNOS.into_iter().find(|e| has_errno(&*source, *e));
                                self.refused.push(RefusedPoint {
                                    program: probe.program.clone(),
                                    function: point.function.clone(),
                                    address: point.address,
                                    file_offset: point.file_offset,
                                    errno: errno.unwrap_or(0),
                                });
                            }
                            other => other?,
                        }
                    }
                }
                ProbeAttach::Begin => self.attach_trigger(&probe.program, Trigger::Begin)?,
                ProbeAttach::End => self.attach_trigger(&probe.program, Trigger::End)?,
                ProbeAttach::Interval { nanos } => {
                    self.attach_interval(&probe.program, *nanos, intervals)?;
                    intervals += 1;
                }
            }
        }
        Ok(self.attached() - before)
    }

    /// Attaches `program` at all `points` with one multi-uprobe link; false when there is
    /// no multi-uprobe copy of the program or the kernel refuses the link (the caller then
    /// attaches point by point, and reports a real error from there).
    fn attach_multi(&mut self, program: &str, points: &[AttachPoint], binary: &Path, scope: Scope) -> bool {
        let Some(fd) = self.multi.get(program) else {
            return false;
        };
        if points.is_empty() {
            return false;
        }
        let offsets: Vec<u64> = points.iter().map(|p| p.file_offset).collect();
        let cookies: Vec<u64> = points.iter().map(|p| p.cookie).collect();
        let pid = match scope {
            Scope::Process(pid) => pid,
            Scope::AllProcesses => 0,
        };
        match uprobe_multi::attach(fd.as_fd(), binary, &offsets, &cookies, pid) {
            Ok(link) => {
                self.links.push(Link::Multi(link));
                true
            }
            Err(_) => false,
        }
    }

    fn uprobe(&mut self, program: &str) -> Result<&mut aya::programs::UProbe, RuntimeError> {
        match self.ebpf.program_mut(program) {
            Some(Program::UProbe(p)) => Ok(p),
            Some(_) => Err(RuntimeError::BadProgram { program: program.to_string(), problem: "is not a uprobe" }),
            None => Err(RuntimeError::BadProgram { program: program.to_string(), problem: "is not in the object" }),
        }
    }

    fn attach_uprobe(
        &mut self,
        program: &str,
        point: &AttachPoint,
        binary: &Path,
        scope: UProbeScope,
    ) -> Result<(), RuntimeError> {
        let p = self.uprobe(program)?;
        let at = UProbeAttachPoint {
            location: UProbeAttachLocation::AbsoluteOffset(point.file_offset),
            cookie: Some(point.cookie),
        };
        let link =
            p.attach(at, binary, scope).and_then(|id| p.take_link(id)).map_err(|source| {
                match permission_error(&source) {
                    Some(io) => RuntimeError::Permission {
                        action: format!("attaching a uprobe to {}", point.function),
                        source: io,
                    },
                    None if matches!(scope, UProbeScope::OneProcess(_)) && has_errno(&source, libc::ESRCH) => {
                        let pid = match scope {
                            UProbeScope::OneProcess(pid) => pid.get(),
                            _ => 0,
                        };
                        RuntimeError::NoSuchProcess { pid }
                    }
                    None => RuntimeError::Attach {
                        function: point.function.clone(),
                        offset: point.file_offset,
                        binary: binary.to_path_buf(),
                        source: Box::new(source),
                    },
                }
            })?;
        self.links.push(Link::Uprobe(link));
        Ok(())
    }

    fn attach_trigger(&mut self, program: &str, trigger: Trigger) -> Result<(), RuntimeError> {
        let (exe, offset) = trigger.location()?;
        let point = AttachPoint { function: trigger.name().to_string(), address: 0, file_offset: offset, cookie: 0 };
        let own = NonZeroU32::new(std::process::id()).ok_or(RuntimeError::NoSuchProcess { pid: 0 })?;
        self.attach_uprobe(program, &point, &exe, UProbeScope::OneProcess(own))
    }

    /// An `on interval` program runs on one of gtrace's trigger functions, which
    /// `poll_events` calls every period.
    fn attach_interval(&mut self, program: &str, nanos: u64, slot: usize) -> Result<(), RuntimeError> {
        if nanos == 0 || slot >= MAX_INTERVAL_PROBES {
            return Err(RuntimeError::Unsupported {
                what: format!(
                    "`{program}`: an interval of 0ns, or more than {MAX_INTERVAL_PROBES} `on interval` probes"
                ),
            });
        }
        let trigger = Trigger::Interval(slot);
        self.attach_trigger(program, trigger)?;
        let period = Duration::from_nanos(nanos);
        self.intervals.push(IntervalTimer { trigger, period, next: Instant::now() + period });
        Ok(())
    }

    /// Runs the `on begin` programs once.
    pub fn run_begin(&self) {
        Trigger::Begin.fire();
    }

    /// Runs the `on end` programs once.
    pub fn run_end(&self) {
        Trigger::End.fire();
    }

    /// Detaches every probe (the programs stay loaded, the maps keep their contents).
    pub fn detach_all(&mut self) {
        self.links.clear();
        self.intervals.clear();
    }

    /// How many probe points are attached.
    pub fn attached(&self) -> usize {
        self.links.iter().map(Link::points).sum()
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        self.detach_all();
    }
}

/// aya looks a bare file name up as a library; make sure a path is taken as a path.
fn attach_path(binary: &Path) -> PathBuf {
    if binary.components().count() == 1 && !binary.is_absolute() {
        Path::new(".").join(binary)
    } else {
        binary.to_path_buf()
    }
}
