//! A live trace: load the compiled object, attach its probes to the target, run until a
//! stop condition (Ctrl-C, SIGTERM, --duration, `exit()`, the target's end, the budget
//! leaving nothing attached to a -p or -b target), print events as they come and every map at the end, then
//! whatever was lost (`stats`). Every probe is detached on every way out
//! (`runtime::Loaded` owns the links) and a started command never outlives the trace.

pub mod budget;
mod calibration;
pub mod correction;
mod ended;
mod live;
pub mod measured;
pub mod paired;
mod pictures;
mod session;
pub mod stats;
pub(crate) mod symbols;
pub mod verifier;
pub mod woken;

use crate::arch::Arch;
use crate::cli::TraceArgs;
use crate::diag::Failure;
use crate::export::Export;
use crate::gobin::Target;
use crate::output::{self, Event, Sink};
use crate::plan::{Bundle, MapRole, Plan};
use crate::runtime::{self, HeldChild, Loaded, Scope};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use symbols::TargetSymbols;

/// What to trace: every process running `binary`, one process, or a command started here.
pub struct Process {
    /// The file read and attached to: the path given to -b or -c, `/proc/PID/exe` for -p
    /// (the very file the process runs, whatever its mount namespace).
    pub binary: PathBuf,
    /// The binary as labels name it: the canonical path given to -b or -c, or the path a
    /// -p process has for its executable in its own mount namespace (`/app/server`).
    pub shown: PathBuf,
    pub pid: Option<u32>,
    /// With -p, the process as it was when gtrace read it (its `/proc/PID/stat` held
    /// open): the probes attach only while it runs, and the trace ends when it does, a
    /// new process that takes its pid meanwhile not taken for it.
    pub alive: Option<runtime::Liveness>,
    pub command: Option<Vec<String>>,
    /// `--cgroup`: every probe runs only for tasks in this cgroup or below it.
    pub cgroup: Option<runtime::Cgroup>,
    /// With -p, the process's CPU time when gtrace started: its share of a CPU untraced
    /// is the baseline the probes' cost is measured against (`measured`).
    pub cpu_before: Option<measured::Reading>,
    /// The file's identity before gtrace read it: the file attached to must have it.
    pub read_as: Option<runtime::file_guard::FileStamp>,
}

/// Why a trace ended before its natural end.
enum Halt {
    /// The output's reader went away: stop quietly, print nothing more.
    OutputClosed,
    Failure(Failure),
}

impl<E: Into<Failure>> From<E> for Halt {
    fn from(e: E) -> Halt {
        Halt::Failure(e.into())
    }
}

/// Writes to the sink; a closed pipe halts the trace quietly.
fn written(r: Result<(), output::OutputError>) -> Result<(), Halt> {
    match r {
        Ok(()) => Ok(()),
        Err(output::OutputError::Closed) => Err(Halt::OutputClosed),
        Err(e) => Err(Halt::Failure(Failure::system(&e, Some("check where standard output goes (a full disk?)")))),
    }
}

/// Loads, attaches, runs until a stop condition, and prints the maps. Returns the exit
/// code: 0, also when the output's reader went away (`gtrace ... | head -1`: gtrace
/// detaches and ends, printing nothing more); when the target died of a signal, said,
/// and for a -c command 128 + the signal, as a shell does.
pub fn run(bundle: &Bundle, target: Target, process: Process, args: &TraceArgs) -> Result<i32, Failure> {
    check_host(bundle.plan.binary.arch)?;
    let name = process.shown.file_name().unwrap_or(process.shown.as_os_str()).to_string_lossy().into_owned();
    let command = process.command.is_some();
    match session(bundle, target, process, args) {
        Ok(Some(runtime::Ended::Signaled(signal))) => {
            eprintln!("{name} ended by {}", runtime::signal_name(signal));
            Ok(if command { 128 + signal } else { 0 })
        }
        Ok(_) | Err(Halt::OutputClosed) => Ok(0),
        Err(Halt::Failure(f)) => Err(f),
    }
}

/// The trace itself, and how the traced process ended when it did and that can be known
/// (a -c command's status; a -p process's only while it is a zombie). Every way out
/// detaches (`Loaded` is dropped) and kills a started command that still runs
/// (`HeldChild` is dropped).
fn session(
    bundle: &Bundle,
    target: Target,
    process: Process,
    args: &TraceArgs,
) -> Result<Option<runtime::Ended>, Halt> {
    let mut running = session::start(bundle, target, &process, args)?;
    // `exit()` in `on begin` ends the trace before a -c command starts.
    if !running.begin()? {
        running.run()?;
    }
    running.finish()
}

/// A PIE's package variables need each process's load bias: the entry-point probe
/// learns it for processes that start once it is attached; this stores it for those
/// already running the binary (the traced one, or with -b every one).
fn seed_load_biases(loaded: &Loaded, plan: &Plan, binary: &std::path::Path, scope: Scope) -> Result<(), Halt> {
    let Some(link) = plan.binary.link_base else { return Ok(()) };
    let running = match scope {
        Scope::Process(pid) => runtime::mapping_start(pid, binary).map(|start| vec![(pid, start)]).unwrap_or_default(),
        Scope::AllProcesses => runtime::processes_mapping(binary),
    };
    for (pid, start) in running {
        if !loaded.set_load_bias(pid, start.wrapping_sub(link))? {
            break;
        }
    }
    Ok(())
}

/// The target's share of a CPU untraced, read once gtrace's own work before attaching
/// is done (compiling, loading; the trap's calibration measures after the attach). A window over that work is no
/// measure of it: on every CPU of a small host, the target spent more while gtrace ran
/// (a steady program at 5.6% of a CPU read 7.4-11.6% from gtrace's start:
/// tests/estimate.rs). Its share over its life up to gtrace's start (its CPU time over
/// its age) is, when it is old enough (`measured::LIFETIME_FROM`) and that share agrees
/// with what it spent over gtrace's start-up (checked over `CHECK_WINDOW` at least); so
/// is that start-up share when the target was near idle (`measured::share_at_once`):
/// then the probes attach at once. Otherwise a quiet `measured::SHORTEST_BEFORE` is let
/// pass before the attach, gtrace idle, and the share is read over it. None when the
/// target cannot be read.
fn untraced_baseline(pid: u32, started: measured::Reading) -> Option<measured::Baseline> {
    std::thread::sleep(measured::CHECK_WINDOW.saturating_sub(started.at.elapsed()));
    let now = measured::Reading::now(pid)?;
    let age = runtime::process_age(pid).and_then(|a| a.checked_sub(started.at.elapsed()));
    let lifetime = age.filter(|a| *a >= measured::LIFETIME_FROM).map(|a| started.cpu_ns as f64 / a.as_nanos() as f64);
    if let Some(share) = now.rate_since(&started).and_then(|startup| measured::share_at_once(lifetime, startup)) {
        return Some(measured::Baseline::AtOnce(share));
    }
    std::thread::sleep(measured::SHORTEST_BEFORE);
    Some(measured::Baseline::Quiet(now))
}

/// `SCRIPT on TARGET`, the live view's title.
fn live_title(args: &TraceArgs, process: &Process) -> String {
    let target = match process.pid {
        Some(pid) => format!("{} (pid {pid})", process.shown.display()),
        None => process.shown.display().to_string(),
    };
    format!("{} on {target}", args.script)
}

/// What ends a trace: the traced process (and the command gtrace started), the
/// arguments (--duration), the signal flag, q in the live view.
type Until<'a> = (
    &'a Process,
    Option<&'a mut HeldChild>,
    &'a TraceArgs,
    &'a std::sync::atomic::AtomicBool,
    &'a Export,
    Option<&'a mut output::live::Live>,
);

/// Handles events until a stop condition: `exit()`, a signal, --duration, the end of
/// the traced process, the budget leaving nothing attached (but a -c command runs to its
/// end).
fn run_until_stopped(
    loaded: &mut Loaded,
    plan: &Plan,
    symbols: &TargetSymbols,
    sink: &mut dyn Sink,
    until: Until<'_>,
    costs: &mut budget::Costs,
) -> Result<(), Halt> {
    // Every process of a file (-b): the records of those that end are swept. Stopped
    // when it goes out of scope, on every way out of the loop.
    let sweeper = match until.0.pid.is_none() && until.1.is_none() {
        true => ended::sweep(loaded)?,
        false => None,
    };
    let stats = until.2.stats;
    let result = watch(loaded, plan, symbols, sink, until, costs);
    if let Some(sweeper) = sweeper.filter(|_| stats) {
        eprintln!("{}", output::losses::swept(sweeper.finish()));
    }
    result
}

/// The loop of `run_until_stopped`.
fn watch(
    loaded: &mut Loaded,
    plan: &Plan,
    symbols: &TargetSymbols,
    sink: &mut dyn Sink,
    until: Until<'_>,
    costs: &mut budget::Costs,
) -> Result<(), Halt> {
    let (process, mut child, args, stop, export, mut view) = until;
    let started = Instant::now();
    loop {
        symbols.learn_bias(|pid| loaded.load_bias(pid));
        costs.meter.sample_cpu();
        costs.meter.accrue_due(loaded, plan);
        // Short waits, so gtrace notices promptly when the target ends.
        let wait = costs.wait(Duration::from_millis(20));
        if drain(loaded, plan, &costs.meter.detached, symbols, sink, wait)? == Drained::Exit {
            return Ok(());
        }
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(change) = loaded.file_changed() {
            symbols.distrust();
            eprintln!("{}", output::losses::file_changed(&process.shown, change.exec_pid));
            return Ok(());
        }
        if args.duration.is_some_and(|d| started.elapsed() >= d) {
            return Ok(());
        }
        if let Some(c) = child.as_deref_mut() {
            if c.try_wait().is_some() {
                return Ok(());
            }
        }
        if process.alive.as_ref().is_some_and(|l| !l.is_alive()) {
            return Ok(());
        }
        if costs.govern(loaded, plan)? == budget::Left::NothingNow {
            // A started command runs on untouched and ends in its own time; a process
            // traced with -p or -b is left alone now.
            if child.is_none() {
                eprintln!(
                    "--budget: no probe is left attached; ending the trace (a larger --budget, or --budget off, keeps the probes on)"
                );
                return Ok(());
            }
            eprintln!(
                "--budget: no probe is left attached; the command runs on untraced, and the maps print when it ends"
            );
        }
        if export.stats_due() {
            if let Ok(stats) = costs.meter.collect(loaded, plan) {
                export.publish(&stats);
            }
        }
        if let Some(v) = view.as_deref_mut() {
            if live::turn(v, loaded, plan, symbols, costs)? {
                return Ok(());
            }
        }
    }
}

/// The most events decoded and held at once: a ring buffer that probes fill as fast as
/// gtrace reads it is never empty, and its records were all held until it was (a debug
/// build of gtrace, slower than the probes, grew by 30 MB over 600,000 lines under -b).
const BATCH: usize = 4096;

/// What one call of `drain` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Drained {
    /// An event was `exit()`.
    Exit,
    /// A whole batch: more may be waiting.
    More,
    /// Everything that was waiting.
    All,
}

/// Handles the events waiting in the ring buffer, `BATCH` at most.
fn drain(
    loaded: &mut Loaded,
    plan: &Plan,
    detached: &[stats::Detached],
    symbols: &TargetSymbols,
    sink: &mut dyn Sink,
    wait: Duration,
) -> Result<Drained, Halt> {
    let mut events = Vec::new();
    let read = loaded.poll_events(wait, BATCH, &mut |rec| {
        if let Some(e) = output::decode_event(rec, plan) {
            events.push(e);
        }
    })?;
    if !events.is_empty() {
        symbols.learn_bias(|pid| loaded.load_bias(pid));
    }
    let mut exit = false;
    let unix = crate::runtime::clock::unix_minus_monotonic();
    for mut e in events {
        output::name_event(&mut e, symbols);
        if let Event::Span(s) = &mut e {
            s.to_unix(unix);
        }
        match &e {
            Event::Printf { .. } | Event::Print { .. } | Event::Span(_) => written(sink.event(&e))?,
            Event::PrintMap { map } => print_maps(loaded, plan, detached, symbols, sink, Some(map))?,
            Event::ClearMap { map } => loaded.clear_map(map)?,
            Event::Exit => exit = true,
        }
    }
    Ok(match (exit, read) {
        (true, _) => Drained::Exit,
        (false, BATCH) => Drained::More,
        _ => Drained::All,
    })
}

/// Prints every non-empty user map (or only `only`), in the order of their names, each
/// marked partial when a probe that writes it was detached.
fn print_maps(
    loaded: &Loaded,
    plan: &Plan,
    detached: &[stats::Detached],
    symbols: &TargetSymbols,
    sink: &mut dyn Sink,
    only: Option<&str>,
) -> Result<(), Halt> {
    for spec in &plan.maps {
        let wanted = match only {
            Some(o) => o == spec.object_name && matches!(spec.role, MapRole::User { .. }),
            None => spec.role.is_shown_user(),
        };
        if !wanted {
            continue;
        }
        if let Some(dump) = read_map(loaded, plan, spec, detached, symbols)?.filter(|d| !d.entries.is_empty()) {
            written(sink.map(&dump))?;
        }
    }
    Ok(())
}

/// A user map as it is now (None for gtrace's own maps): decoded, named, and marked
/// partial when a probe that writes it was detached.
fn read_map(
    loaded: &Loaded,
    plan: &Plan,
    spec: &crate::plan::MapSpec,
    detached: &[stats::Detached],
    symbols: &TargetSymbols,
) -> Result<Option<output::MapDump>, Halt> {
    if !matches!(spec.role, MapRole::User { .. }) {
        return Ok(None);
    }
    let raw = loaded.map_entries(&spec.object_name)?;
    let Some(mut dump) = output::decode_map(spec, &raw, plan) else { return Ok(None) };
    output::name_map(&mut dump, symbols);
    dump.partial = output::stats::partial(plan, &spec.object_name, detached);
    Ok(Some(dump))
}

/// The programs read the registers of the plan's architecture, in the kernel's layout for
/// it: only a kernel of that architecture can run them.
fn check_host(arch: Arch) -> Result<(), Failure> {
    if Arch::host() == Some(arch) {
        return Ok(());
    }
    let name = arch.goarch();
    Err(Failure::message(
        format!("this plan is for {name}; tracing runs on an {name} host"),
        Some("-l, --check and --emit work here; trace on a machine of the binary's architecture (`--emit plan -o FILE`, then `gtrace run FILE` there)"),
    ))
}

/// The one line that says what was passed over, before attaching (the plan's list) and
/// while attaching; an error when the kernel refused every probe point of the target.
fn report_skipped(loaded: &Loaded, plan: &Plan) -> Result<(), Failure> {
    use crate::check::skips::{self, SkipReason, Skipped};
    let refused = loaded.refused();
    let mut all = plan.skipped.clone();
    all.extend(refused.iter().map(|r| Skipped {
        probe: plan.probes.iter().find(|p| p.program == r.program).map(|p| p.describe.clone()).unwrap_or_default(),
        function: r.function.clone(),
        addr: Some(r.address),
        reason: SkipReason::Kernel { errno: r.errno },
    }));
    if let Some(line) = skips::summary(&all) {
        eprintln!("{line}");
    }
    // The user's points: not the one gtrace adds at a PIE's entry point.
    let points = plan.uprobe_points()
        - plan.probes.iter().filter(|p| p.program == crate::lower::globals::LOAD_BIAS_PROGRAM).count();
    let refused: Vec<_> = refused.iter().filter(|r| r.program != crate::lower::globals::LOAD_BIAS_PROGRAM).collect();
    match refused.first() {
        Some(first) if refused.len() == points => Err(Failure::message(
            format!(
                "the kernel refused every probe point ({points} of them), e.g. {} at file offset {:#x}: {}",
                first.function,
                first.file_offset,
                skips::errno_text(first.errno)
            ),
            Some("check that the binary was not replaced since gtrace read it"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_runs_only_on_a_host_of_its_architecture() {
        let host = Arch::host().expect("gtrace's tests run on an architecture it reads");
        assert!(check_host(host).is_ok());
        let other = if host == Arch::X86_64 { Arch::Arm64 } else { Arch::X86_64 };
        let text = check_host(other).unwrap_err().render(false);
        let name = other.goarch();
        assert!(text.contains(&format!("this plan is for {name}; tracing runs on an {name} host")), "{text}");
    }
}
