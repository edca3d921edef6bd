//! Attaching the loaded programs: uprobes at file offsets of the target (with the
//! function's index as attach cookie), `on begin`/`on end`/`on interval` on gtrace's own
//! trigger functions, and detaching some of it (detach.rs takes them all off).
//!
//! The target offsets of one program go into multi-uprobe links when the kernel has
//! them (`uprobe_multi`): one syscall a link to attach, one to detach, at most
//! `MULTI_CHUNK` offsets a link (a function's offsets in one), so that detaching some
//! functions of a wide wildcard replaces only their links. Otherwise, or if the
//! kernel refuses that link for any reason, each offset gets its own perf-event link
//! (which also names the offending function when an offset is bad).
//!
//! A probe point the kernel refuses (ENOTSUPP for an instruction it will not step,
//! EINVAL, ENOEXEC) is left out and recorded (`Loaded::refused`): one bad site never
//! stops the others. Missing privileges and a vanished process still end the attach.

use super::detach::release;
use super::error::{has_errno, permission_error, RuntimeError};
use super::events::IntervalTimer;
use super::file_guard::{Change, FileGuard, FileStamp, Strength};
use super::loader::Loaded;
use super::maps::MapHandle;
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

/// One attachment of one program; dropping it detaches.
pub(crate) struct Link {
    pub program: String,
    /// The target's probe points it covers (none for gtrace's own triggers).
    pub points: Vec<AttachPoint>,
    pub kind: LinkKind,
}

pub(crate) enum LinkKind {
    // Held only to be dropped.
    Uprobe(#[allow(dead_code)] UProbeLink),
    /// Many offsets of one program.
    Multi(MultiLink),
}

impl Link {
    /// How many probe points the link attaches.
    fn count(&self) -> usize {
        match &self.kind {
            LinkKind::Multi(m) => m.points(),
            LinkKind::Uprobe(_) => 1,
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

/// Where the target's probes were attached: what a link rebuilt later attaches to.
#[derive(Clone, Debug)]
pub(crate) struct AttachTarget {
    /// `/proc/self/fd/N` of `file`: the very file attached to at first, however its path
    /// changes later (a binary replaced by a deploy, a container's /proc/PID/root gone
    /// with its process).
    pub binary: PathBuf,
    pub scope: Scope,
    /// Keeps `binary` open; what a started command must run (`runs_target`).
    pub file: std::sync::Arc<std::fs::File>,
}

/// Opens the target's executable once: probes attach (and reattach) to that file through
/// `/proc/self/fd/N`, never to whatever the path names later.
fn pin(binary: &Path) -> Result<(std::sync::Arc<std::fs::File>, PathBuf), RuntimeError> {
    use std::os::fd::AsRawFd;
    let file =
        std::fs::File::open(binary).map_err(|source| RuntimeError::Open { path: binary.to_path_buf(), source })?;
    let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    Ok((std::sync::Arc::new(file), path))
}

impl Loaded {
    /// The probe points the kernel refused during `attach` (each left out; the others
    /// are attached).
    pub fn refused(&self) -> &[RefusedPoint] {
        &self.refused
    }

    /// Attaches every probe of the plan: the target's uprobes in `binary` within `scope`,
    /// begin/end triggers in gtrace itself, interval probes. Returns how many probe points
    /// were attached. On failure everything attached so far is detached.
    /// `read_as`: the file's identity before gtrace read it, which the file attached
    /// through must still have.
    pub fn attach(&mut self, binary: &Path, scope: Scope, read_as: Option<FileStamp>) -> Result<usize, RuntimeError> {
        let result = self.attach_all(binary, scope, read_as);
        if result.is_err() {
            self.detach_all();
        }
        result
    }

    fn attach_all(&mut self, given: &Path, scope: Scope, read_as: Option<FileStamp>) -> Result<usize, RuntimeError> {
        let (file, binary) = pin(given)?;
        self.target = Some(AttachTarget { binary: binary.clone(), scope, file });
        // The probes are placed for the file as gtrace read it.
        if read_as.is_some() && read_as != FileStamp::of_path(&binary) {
            return Err(RuntimeError::ChangedSinceRead { path: given.to_path_buf() });
        }
        if scope == Scope::AllProcesses {
            // Before the first probe; from then on it must stay as it is.
            self.file_guard = FileGuard::start(&binary);
        }
        // Errors name the binary by the path the user gave.
        let named = |e: RuntimeError| match e {
            RuntimeError::Attach { function, offset, source, .. } => {
                RuntimeError::Attach { function, offset, binary: given.to_path_buf(), source }
            }
            e => e,
        };
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
                        match self.attach_uprobe(&probe.program, point, &binary, target_scope, false).map_err(named) {
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

    /// Attaches `program` at all `points` with multi-uprobe links of at most
    /// `MULTI_CHUNK` points each (a function's points in one link), so that a budget
    /// cut replaces only the links of the functions it detaches; false when there is no
    /// multi-uprobe copy of the program or the kernel refuses a link (the caller then
    /// attaches point by point, and reports a real error from there).
    fn attach_multi(&mut self, program: &str, points: &[AttachPoint], binary: &Path, scope: Scope) -> bool {
        let Some(fd) = self.multi.get(program) else {
            return false;
        };
        if points.is_empty() {
            return false;
        }
        let mut links = Vec::new();
        for chunk in chunks(points, MULTI_CHUNK) {
            match multi_link(fd.as_fd(), &chunk, binary, scope, &|_| 0) {
                Ok(link) => {
                    links.push(Link { program: program.to_string(), points: chunk, kind: LinkKind::Multi(link) })
                }
                // The links made so far are dropped: the caller attaches every point alone.
                Err(_) => return false,
            }
        }
        self.links.extend(links);
        true
    }

    /// aya's copy of `program`, loaded now if it was not (a program with a multi-uprobe
    /// copy is verified as that alone until a link of it is refused).
    fn uprobe(&mut self, program: &str) -> Result<&mut aya::programs::UProbe, RuntimeError> {
        super::loader::load_named(&mut self.ebpf, program)?;
        match self.ebpf.program_mut(program) {
            Some(Program::UProbe(p)) => Ok(p),
            Some(_) => Err(RuntimeError::BadProgram { program: program.to_string(), problem: "is not a uprobe" }),
            None => Err(RuntimeError::BadProgram { program: program.to_string(), problem: "is not in the object" }),
        }
    }

    /// Attaches `program` at one point; `own` for gtrace's own triggers.
    pub(super) fn attach_uprobe(
        &mut self,
        program: &str,
        point: &AttachPoint,
        binary: &Path,
        scope: UProbeScope,
        own: bool,
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
        let points = if own { Vec::new() } else { vec![point.clone()] };
        self.links.push(Link { program: program.to_string(), points, kind: LinkKind::Uprobe(link) });
        Ok(())
    }

    fn attach_trigger(&mut self, program: &str, trigger: Trigger) -> Result<(), RuntimeError> {
        let (exe, offset) = trigger.location()?;
        let point = AttachPoint { function: trigger.name().to_string(), address: 0, file_offset: offset, cookie: 0 };
        let own = NonZeroU32::new(std::process::id()).ok_or(RuntimeError::NoSuchProcess { pid: 0 })?;
        // A multi-uprobe link where the kernel has them (no CAP_SYS_ADMIN needed), else
        // a perf-event uprobe.
        if let Some(fd) = self.multi.get(program) {
            if let Ok(link) = super::uprobe_multi::attach(fd.as_fd(), &exe, &[offset], &[0], own.get()) {
                self.links.push(Link { program: program.to_string(), points: Vec::new(), kind: LinkKind::Multi(link) });
                return Ok(());
            }
        }
        self.attach_uprobe(program, &point, &exe, UProbeScope::OneProcess(own), true)
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

    /// The file the target's probes are attached to, as `/proc/self/fd/N`: readable for as
    /// long as the trace runs, whatever happens to the path it was given by.
    pub fn target_file(&self) -> Option<&Path> {
        self.target.as_ref().map(|t| t.binary.as_path())
    }

    /// Whether process `pid` runs the file the probes are attached to (not one renamed
    /// over its path since); None when it cannot be told (see `replaced::runs_file`).
    pub fn runs_target(&self, pid: u32) -> Option<bool> {
        super::replaced::runs_file(pid, &self.target.as_ref()?.file)
    }

    /// Runs the `on begin` programs once.
    pub fn run_begin(&self) {
        Trigger::Begin.fire();
    }

    /// Runs the `on end` programs once.
    pub fn run_end(&self) {
        Trigger::End.fire();
    }

    /// Under -b, once the file was changed in place since the probes were placed in it:
    /// every probe on it detached, and the change (with the exec held meanwhile, if any).
    pub fn file_changed(&mut self) -> Option<Change> {
        let guard = self.file_guard.as_ref()?;
        guard.changed()?;
        self.detach_target();
        self.file_guard.as_ref()?.changed()
    }

    /// Under -b, how well the file is guarded (`None`: not at all).
    pub fn file_guard(&self) -> Option<Strength> {
        self.file_guard.as_ref().map(|g| g.strength)
    }

    /// Under -b, held execs whose answer the kernel did not take.
    pub fn file_guard_unanswered(&self) -> u32 {
        self.file_guard.as_ref().map_or(0, |g| g.unanswered())
    }

    /// How many probe points are attached.
    pub fn attached(&self) -> usize {
        self.links.iter().map(Link::count).sum()
    }

    /// The functions at which `program` is attached to the target.
    pub fn attached_functions(&self, program: &str) -> std::collections::HashSet<&str> {
        let links = self.links.iter().filter(|l| l.program == program).map(|l| &l.points);
        let left = self.left_at_end.iter().filter(|(p, _)| p == program).map(|(_, points)| points);
        // A duty cycle's parked probes are still the trace's.
        let parked = self.parked.iter().filter(|p| p.program == program).map(|p| &p.points);
        links.chain(left).chain(parked).flat_map(|points| points.iter().map(|p| p.function.as_str())).collect()
    }

    /// Whether `program` is attached at the target, at `function` (or anywhere).
    pub fn is_attached(&self, program: &str, function: Option<&str>) -> bool {
        self.links
            .iter()
            .filter(|l| l.program == program)
            .any(|l| l.points.iter().any(|p| function.is_none_or(|f| p.function == f)))
    }

    /// Detaches `program` from the target's sites of `functions` (every site for
    /// `None`); its other sites stay attached and their hits are neither missed nor
    /// counted twice: a multi-uprobe link is replaced by one with fewer sites (attached
    /// with its functions' next generations, which become the live ones before the old
    /// link is closed); the program's other links are not touched. Returns how many
    /// probe points were detached. If a smaller link cannot be made, the old link's
    /// other sites are detached too, and the error says how many.
    pub fn detach_sites(&mut self, program: &str, functions: Option<&[String]>) -> Result<usize, RuntimeError> {
        let going: Option<std::collections::HashSet<&str>> =
            functions.map(|fs| fs.iter().map(String::as_str).collect());
        let leaves = |p: &AttachPoint| going.as_ref().is_none_or(|fs| fs.contains(p.function.as_str()));
        let mut detached = 0;
        let mut kept = Vec::new();
        let mut going_links = Vec::new();
        let mut failure = None;
        let mut handed = Vec::new();
        for link in std::mem::take(&mut self.links) {
            if link.program != program || link.points.is_empty() || !link.points.iter().any(leaves) {
                kept.push(link);
                continue;
            }
            let remaining: Vec<AttachPoint> = link.points.iter().filter(|p| !leaves(p)).cloned().collect();
            detached += link.points.len() - remaining.len();
            if !remaining.is_empty() {
                match self.replace_multi(program, remaining.clone(), &mut handed) {
                    Ok(new) => kept.push(new),
                    // The cost must go: the whole link goes, and the caller hears which
                    // sites went with it.
                    Err(e) => failure = Some((e, remaining.len())),
                }
            }
            // Released below: after its replacement is live.
            going_links.push(link);
        }
        self.links = kept;
        release(going_links);
        // The older links are gone, with every hit in flight in them: the newer ones
        // count alone.
        // A handover left unended would stop the newer links counting once the claims
        // fill their map: its failure is said even when a reattach failed too.
        let ended = self.end_handover(&handed);
        let program = program.to_string();
        match (failure, ended) {
            (None, ended) => ended.map(|()| detached),
            (Some((source, sites)), Ok(())) => Err(RuntimeError::Reattach { program, sites, source: Box::new(source) }),
            (Some((reattach, sites)), Err(source)) => Err(RuntimeError::HandoverAfterReattach {
                program,
                sites,
                reattach: reattach.to_string(),
                source: Box::new(source),
            }),
        }
    }

    /// A multi-uprobe link of `program` at `points`, each with its slot's next
    /// generation. Its slots are handed over to it (`GEN_HANDOVER`, added to `handed`)
    /// before it is attached; `end_handover` makes its generations the only live ones
    /// once the link it replaces is gone.
    fn replace_multi(
        &mut self,
        program: &str,
        points: Vec<AttachPoint>,
        handed: &mut Vec<(u32, u8)>,
    ) -> Result<Link, RuntimeError> {
        let unsupported = |what: &str| RuntimeError::Unsupported { what: format!("`{program}`: {what}") };
        let target = self.target.clone().ok_or_else(|| unsupported("not attached"))?;
        let fd = self.multi.get(program).ok_or_else(|| unsupported("no multi-uprobe copy to reattach"))?;
        let checks = self.accounting.checks_generations(program);
        let live = self.generations.clone();
        let live_of = |slot: u32| live.get(&slot).copied().unwrap_or(0);
        let mut slots: Vec<u32> = points.iter().map(|p| cookie_slot(p.cookie)).collect();
        slots.sort_unstable();
        slots.dedup();
        if checks {
            let map = self.generations_map()?;
            for &slot in &slots {
                map.set_array_u64(slot, u64::from(live_of(slot)) | crate::plan::GEN_HANDOVER)?;
                handed.push((slot, live_of(slot)));
            }
        }
        let generation = |p: &AttachPoint| if checks { live_of(cookie_slot(p.cookie)).wrapping_add(1) } else { 0 };
        let link = multi_link(fd.as_fd(), &points, &target.binary, target.scope, &generation)
            .map_err(|source| RuntimeError::Os { action: "attaching a multi-uprobe link with fewer sites", source })?;
        if checks {
            for slot in slots {
                self.generations.insert(slot, live_of(slot).wrapping_add(1));
            }
        }
        Ok(Link { program: program.to_string(), points, kind: LinkKind::Multi(link) })
    }

    /// Ends the handover of each `(slot, generation it had)`: its live generation is the
    /// one `self.generations` holds now (the next one, or the old one where no newer link
    /// was made), and the tasks' claims are dropped.
    fn end_handover(&mut self, handed: &[(u32, u8)]) -> Result<(), RuntimeError> {
        if handed.is_empty() {
            return Ok(());
        }
        let map = self.generations_map()?;
        // Every slot is tried, and the claims cleared, even after a failure: the first
        // failure is the one returned.
        let mut first = Ok(());
        for &(slot, old) in handed {
            let live = self.generations.get(&slot).copied().unwrap_or(old);
            let set = map.set_array_u64(slot, u64::from(live));
            first = first.and(set);
        }
        let name = &self.accounting.handovers;
        let cleared =
            self.maps.get(name).ok_or_else(|| RuntimeError::NoSuchMap { map: name.clone() }).and_then(|m| m.clear());
        first.and(cleared)
    }

    fn generations_map(&self) -> Result<&MapHandle, RuntimeError> {
        let name = &self.accounting.generations;
        self.maps.get(name).ok_or_else(|| RuntimeError::NoSuchMap { map: name.clone() })
    }
}

/// The most probe points one multi-uprobe link holds: a cut that detaches one function
/// of a wildcard of thousands registers at most this many points again.
pub const MULTI_CHUNK: usize = 256;

/// The hit slot an attach cookie carries (see `plan::COOKIE_SLOT_SHIFT`).
pub(super) fn cookie_slot(cookie: u64) -> u32 {
    ((cookie >> crate::plan::COOKIE_SLOT_SHIFT) & crate::plan::COOKIE_SLOT_MASK) as u32
}

/// `points` in groups of at most `max`, each function's points in one group (a function
/// with more points than `max` has a group of its own), functions in the order they
/// first appear.
pub(crate) fn chunks(points: &[AttachPoint], max: usize) -> Vec<Vec<AttachPoint>> {
    let mut by_function: Vec<Vec<AttachPoint>> = Vec::new();
    let mut at: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for p in points {
        let i = *at.entry(p.function.as_str()).or_insert_with(|| {
            by_function.push(Vec::new());
            by_function.len() - 1
        });
        by_function[i].push(p.clone());
    }
    let mut out: Vec<Vec<AttachPoint>> = Vec::new();
    for group in by_function {
        match out.last_mut() {
            Some(last) if last.len() + group.len() <= max => last.extend(group),
            _ => out.push(group),
        }
    }
    out
}

/// One multi-uprobe link of `program` at `points`, each cookie carrying the generation
/// `generation` gives its point (see `plan::COOKIE_GEN_SHIFT`).
pub(super) fn multi_link(
    program: std::os::fd::BorrowedFd<'_>,
    points: &[AttachPoint],
    binary: &Path,
    scope: Scope,
    generation: &dyn Fn(&AttachPoint) -> u8,
) -> std::io::Result<MultiLink> {
    let offsets: Vec<u64> = points.iter().map(|p| p.file_offset).collect();
    let gen_mask = 0xff << crate::plan::COOKIE_GEN_SHIFT;
    let cookies: Vec<u64> = points
        .iter()
        .map(|p| (p.cookie & !gen_mask) | (u64::from(generation(p)) << crate::plan::COOKIE_GEN_SHIFT))
        .collect();
    let pid = match scope {
        Scope::Process(pid) => pid,
        Scope::AllProcesses => 0,
    };
    uprobe_multi::attach(program, binary, &offsets, &cookies, pid)
}
