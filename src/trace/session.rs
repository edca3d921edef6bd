//! One trace from load to exit, in its three phases: `start` loads the object, starts a
//! -c command held at its exec, attaches and opens the outputs; `Running::begin` and
//! `Running::run` release the command and run until a stop condition; `Running::finish`
//! drains what is left, prints the maps and what was lost, and detaches. Where the
//! order of two steps matters, the step says why.

use super::calibration::{self, Calibration};
use super::symbols::TargetSymbols;
use super::{
    budget, drain, live, live_title, pictures, print_maps, report_skipped, run_until_stopped, seed_load_biases, stats,
    untraced_baseline, written, Drained, Halt, Process,
};
use crate::cli::TraceArgs;
use crate::export::{Export, Traced};
use crate::gobin::Target;
use crate::output::{self, Sink};
use crate::plan::{Bundle, Plan};
use crate::runtime::{self, Captured, HeldChild, Loaded, Scope};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A trace attached and its outputs open: what each later phase needs.
pub(super) struct Running<'a> {
    plan: &'a Plan,
    process: &'a Process,
    args: &'a TraceArgs,
    loaded: Loaded,
    /// A -c command, held at its exec until `begin` has run `on begin`.
    child: Option<HeldChild>,
    /// With --live, the command's output, shown by the view.
    captured: Option<Captured>,
    stop: &'static AtomicBool,
    costs: budget::Costs,
    symbols: Arc<TargetSymbols>,
    export: Export,
    sink: Box<dyn Sink>,
    /// With --live, what the script printed while the view held the terminal.
    recent: Arc<Mutex<output::live::deferred::Recent>>,
}

/// Loads the object, starts a -c command (held), attaches, says what it could not, and
/// opens the outputs.
pub(super) fn start<'a>(
    bundle: &'a Bundle,
    mut target: Target,
    process: &'a Process,
    args: &'a TraceArgs,
) -> Result<Running<'a>, Halt> {
    if args.live {
        live::check()?;
    }
    let stop = runtime::signals::install();
    let plan = &bundle.plan;
    let command = process.command.is_some();
    // An address in use or a name that cannot be exported fails before anything loads.
    let mut export = Export::prepare(&args.export(), plan)?;
    // The calibration's link is made while the programs load, its measurement once the
    // probes are attached (`calibration`).
    let mut calibration = None;
    let mut maps_made = || calibration = Some(calibration::begin(args.wants_costs(command)));
    let mut loaded =
        runtime::load_with(&bundle.object, plan, &mut maps_made).map_err(|e| super::verifier::failure(e, plan))?;
    let mut calibration = calibration.unwrap_or_else(Calibration::none);
    // The cache file the driver wrote while this loaded: written, or said not to be.
    if let Err(e) = crate::cache::written() {
        eprintln!("gtrace: {e} ({})", e.hint());
    }
    let budget = crate::cli::Budget::percent(args.budget, command);
    stats::hold_kernel_hits(&mut loaded, plan)?;
    calibration::run_stats_on(&mut loaded, &calibration);
    // With --live the command's output comes through pipes: the view holds the terminal.
    let (child, captured) = match &process.command {
        Some(argv) => {
            let (child, captured) = runtime::spawn_held_with(argv, args.live)?;
            (Some(child), captured)
        }
        None => (None, None),
    };
    let scope = match (process.pid, &child) {
        (Some(pid), _) => Scope::Process(pid),
        (None, Some(c)) => Scope::Process(c.pid()),
        (None, None) => Scope::AllProcesses,
    };
    let (attached, baseline) = attach(&mut loaded, plan, process, args, scope)?;
    // From the attach to the budget's first look, not held back by the host's load
    // (`budget::Costs::raised_until_first_look`).
    let raised = budget.map(|_| runtime::priority::raise());
    // Measured beside what follows and the trace's first turns: the meter's first
    // reading of a cost waits for it.
    calibration.measure();
    let mut meter = stats::Meter::new(plan, calibration, budget);
    let traced_pid = process.pid.or(child.as_ref().map(|c| c.pid()));
    if let Some(pid) = traced_pid {
        let before = baseline.or(process.cpu_before.map(crate::trace::measured::Baseline::Quiet));
        meter.watch_cpu(pid, before, process.cpu_before);
    }
    // The breaker's first window begins as the probes attach, whenever its first look
    // comes: after the start-up below, and the calibration it waits for.
    let mut costs = budget::Costs::new(meter, plan);
    costs.begin_window(&loaded, plan);
    costs.raised_until_first_look(raised);
    // A trace may run for days: the compiler's tables go now.
    target.release_compiler_tables();
    // What was freed goes back to the system, not only to the allocator.
    runtime::trim_heap();
    warn_unguarded(&loaded, process);
    report_skipped(&loaded, plan)?;
    // One symbolizer for the output, the pictures and the exporters' threads.
    let symbols = Arc::new(TargetSymbols::new(target, plan, traced_pid));
    // The exporters read symbols from the file the probes are attached to.
    let file = loaded.target_file().unwrap_or(&process.binary).to_path_buf();
    let module = plan.binary.module.as_deref();
    let traced = Traced { binary: &file, name: &process.shown, pid: traced_pid, module, symbols: symbols.clone() };
    export.start(&loaded, attached, &traced)?;
    // With --live, what the script prints is kept while the view holds the terminal
    // (printed lines still reach --otlp as they come).
    let recent = Arc::new(Mutex::new(output::live::deferred::Recent::default()));
    let mut out = output::sink(args.format);
    if args.live {
        out = Box::new(output::live::deferred::Deferred::new(out, recent.clone()));
    }
    let sink = export.sink(out);
    Ok(Running { plan, process, args, loaded, child, captured, stop, costs, symbols, export, sink, recent })
}

/// Attaches every probe (scoped to the cgroup, after the baseline of the target's CPU
/// is taken: `untraced_baseline`) and says how many. Returns how many were attached, and
/// the target's share of a CPU untraced.
fn attach(
    loaded: &mut Loaded,
    plan: &Plan,
    process: &Process,
    args: &TraceArgs,
    scope: Scope,
) -> Result<(usize, Option<crate::trace::measured::Baseline>), Halt> {
    // Before attaching, so that processes already running read their package variables
    // from the first hit; after, for those that started meanwhile (from now on the
    // entry-point probe learns them).
    seed_load_biases(loaded, plan, &process.binary, scope)?;
    if let Some(cgroup) = &process.cgroup {
        loaded.scope_to_cgroup(&plan.cgroup, cgroup)?;
    }
    let wanted = args.wants_costs(process.command.is_some());
    let baseline = match (process.pid, process.cpu_before) {
        (Some(pid), Some(started)) if wanted => untraced_baseline(pid, started),
        _ => None,
    };
    // A -p process that ended while gtrace compiled: its pid may be another's now. Asked
    // again once attached (it may end in between): then every probe is detached as the
    // error drops `loaded`, before an event of the other process is read.
    still_running(process)?;
    let attached = loaded.attach(&process.binary, scope, process.read_as)?;
    still_running(process)?;
    seed_load_biases(loaded, plan, &process.binary, scope)?;
    // The user's probes: not the one gtrace adds at a PIE's entry point.
    let attached = attached - loaded.attached_functions(crate::lower::globals::LOAD_BIAS_PROGRAM).len();
    eprintln!("Attached {attached} probe{}", if attached == 1 { "" } else { "s" });
    Ok((attached, baseline))
}

/// With -p, that the process read is still the one running (`Process::alive`).
fn still_running(process: &Process) -> Result<(), runtime::RuntimeError> {
    match (process.pid, &process.alive) {
        (Some(pid), Some(alive)) if !alive.is_alive() => Err(runtime::RuntimeError::EndedBeforeAttach { pid }),
        _ => Ok(()),
    }
}

/// Says what guards the trace could not have: a file guard that only the loop keeps,
/// a kernel whose preemption the probes cannot guard against.
fn warn_unguarded(loaded: &Loaded, process: &Process) {
    if loaded.file_guard() == Some(runtime::file_guard::Strength::LoopOnly) {
        eprintln!("{}", output::losses::file_guard_weak(&process.shown));
    }
    if let Some(model) = loaded.unguarded_preemption() {
        eprintln!("{}", output::losses::unguarded_preemption(model.name()));
    }
}

impl Running<'_> {
    /// Runs `on begin` and prints what it printed. Returns true when it called `exit()`.
    pub(super) fn begin(&mut self) -> Result<bool, Halt> {
        self.loaded.run_begin();
        self.drain()
    }

    /// Releases a -c command and runs until a stop condition, the --live view open.
    pub(super) fn run(&mut self) -> Result<(), Halt> {
        if let Some(c) = self.child.as_mut() {
            c.release()?;
            // Probes attach to the file gtrace opened: a file renamed over the command's
            // path since then runs untraced. Said, and the command ended.
            if self.loaded.runs_target(c.pid()) == Some(false) {
                c.kill();
                return Err(runtime::RuntimeError::Replaced { path: self.process.binary.clone(), pid: c.pid() }.into());
            }
            // A PIE's load bias is read from the child's memory map as soon as it has
            // exec'd, before its events (and its exit) could outrun us.
            let deadline = Instant::now() + Duration::from_millis(200);
            while self.symbols.is_pie() && self.symbols.bias().is_none() && Instant::now() < deadline {
                self.symbols.learn_bias(|pid| self.loaded.load_bias(pid));
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // Opened after the sink: dropped first, so the terminal is back before the
        // sink writes what it kept, on every way out.
        let mut view = match self.args.live {
            true => Some(
                output::live::Live::open(
                    live_title(self.args, self.process),
                    self.recent.clone(),
                    self.captured.take(),
                )
                .map_err(live::failure)?,
            ),
            false => None,
        };
        let until = (self.process, self.child.as_mut(), self.args, self.stop, &self.export, view.as_mut());
        run_until_stopped(&mut self.loaded, self.plan, &self.symbols, self.sink.as_mut(), until, &mut self.costs)?;
        // The terminal back, then what the script printed meanwhile, before the rest.
        drop(view);
        // Under -b no probe stays on the file once the loop is over (nothing would look
        // at it), and a trace that ended otherwise as it changed reads no name from it.
        if self.loaded.file_guard().is_some() {
            if self.loaded.file_changed().is_some() {
                self.symbols.distrust();
            }
            self.loaded.leave_target();
        }
        written(self.sink.flush())
    }

    /// Drains the events left, runs `on end`, prints the maps, the pictures and what was
    /// lost, detaches, and ends a command still running. Returns how the target ended.
    pub(super) fn finish(mut self) -> Result<Option<runtime::Ended>, Halt> {
        // Before gtrace kills a command still running: only its own end is the target's.
        // A Ctrl-C reaches the command too (one process group): then its end is the stop
        // gtrace was asked for, not news.
        let ended = match self.child.as_mut() {
            Some(_) if self.stop.load(Ordering::SeqCst) => None,
            Some(c) => c.ended(),
            None => self.process.pid.filter(|pid| !runtime::is_alive(*pid)).and_then(runtime::ended_zombie),
        };
        // The probes leave the target first (under -b they began to at the stop) and
        // are waited for: until they are gone they fire, and the maps, the lines printed
        // and `--stats` then agree (every hit counted has its event read, every event its
        // count in the maps). It costs the kernel's grace period (about 70 ms) before the
        // maps print.
        // A duty cycle's clock stops with the trace; its parked probes stay off.
        self.costs.stop(&mut self.loaded);
        self.loaded.leave_target();
        self.loaded.wait_left();
        // Events already in the ring buffer belong to the run.
        self.drain()?;
        self.loaded.run_end();
        self.drain()?;
        let (loaded, plan, detached, symbols) = (&self.loaded, self.plan, &self.costs.meter.detached, &self.symbols);
        print_maps(loaded, plan, detached, symbols, self.sink.as_mut(), None)?;
        pictures::write(loaded, plan, detached, symbols, (self.process, self.args))?;
        if let Some(line) = symbols.missing_line() {
            eprintln!("{line}");
        }
        // The last push carries the final counts; what it could not send is a loss.
        if let Ok(stats) = self.costs.meter.collect(&self.loaded, plan) {
            self.export.publish(&stats);
        }
        let unsent = self.export.finish();
        let report =
            stats::report(&mut self.costs.meter, &self.loaded, plan, (self.args.stats, unsent), self.sink.as_mut());
        written(report?)?;
        self.loaded.detach_all();
        if self.loaded.file_guard_unanswered() > 0 {
            eprintln!("{}", output::losses::file_guard_unanswered(self.loaded.file_guard_unanswered()));
        }
        if let Some(c) = self.child.as_mut() {
            if c.try_wait().is_none() {
                c.kill();
            }
        }
        written(self.sink.flush())?;
        Ok(ended)
    }

    /// Prints every event in the ring buffer now, a batch at a time. Returns true when
    /// one was `exit()`.
    fn drain(&mut self) -> Result<bool, Halt> {
        loop {
            let detached = &self.costs.meter.detached;
            match drain(&mut self.loaded, self.plan, detached, &self.symbols, self.sink.as_mut(), Duration::ZERO)? {
                Drained::More => continue,
                Drained::Exit => return Ok(true),
                Drained::All => return Ok(false),
            }
        }
    }
}
