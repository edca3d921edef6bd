//! The command line's flow: from `Cli` to a listing, a check, an emitted stage, or a
//! running trace. The passes are `compile::compile`; the live trace is `trace::run`.
//! Every failure is a `diag::Failure`, rendered once, in `main`.

mod cached;
mod linelocals;
mod listing;
mod scope;

use crate::cli::{Cli, Emit, RunArgs, RunCommand};
use crate::compile::{self, Compiled};
use crate::diag::Failure;
use crate::gobin::Target;
use crate::library::{self, Root};
use crate::lower;
use crate::lower::maps::GOROUTINES_SPILL;
use crate::plan::{Binary, Bundle};
use crate::runtime;
use crate::trace;
use clap::Parser;
use std::path::PathBuf;

pub use listing::functions as list;

pub fn main() -> i32 {
    let cli = Cli::parse();
    let ran = run(&cli);
    // A cache file a trace wrote meanwhile is whole before the process ends (written
    // by now unless the trace failed before loading).
    cached::written();
    match ran {
        Ok(code) => code,
        Err(f) => {
            eprint!("{}", f.render(color_stderr()));
            1
        }
    }
}

fn color_stderr() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal()
}

pub fn run(cli: &Cli) -> Result<i32, Failure> {
    if let Some(RunCommand::Run(args)) = &cli.run {
        return run_plan(args);
    }
    let tracing = !cli.check && cli.emit.is_none() && cli.list.is_none() && !cli.list_libraries;
    if tracing {
        // Loading will need aya's loader, whose set-up (parsing the kernel's BTF) can
        // overlap the compilation.
        runtime::prewarm();
    }
    if cli.list_libraries {
        print_stdout(&library::stdlib::listing())?;
        return Ok(0);
    }
    let mut opts = compile::Options {
        include: cli.include.clone(),
        sets: cli.set.clone(),
        otlp: cli.trace.otlp.is_some(),
        string_limit: cli.string_limit,
        lowering: lowering(cli),
    };
    // A listing prints each function's parameters.
    let mut reads_dwarf = true;
    // A trace's key for the large maps the cache keeps (`cached::plan_key`).
    let mut key = None;
    if cli.list.is_none() {
        // The script (and the libraries it uses) is parsed before the target is opened:
        // a syntax error is said as one, whatever the target.
        let root = root(cli)?;
        key = tracing.then(|| cached::plan_key(&root, &opts));
        let (_, script) = compile::parse(root, &opts)?;
        if cli.emit == Some(Emit::Ast) {
            print_stdout(&format!("{}\n", serde_json::to_string_pretty(&script).unwrap_or_default()))?;
            return Ok(0);
        }
        reads_dwarf = crate::check::govalues::may_read_dwarf(&script);
    }
    let process = scope::process(&cli.target, cli.trace.cgroup.as_deref())?;
    let search = scope::debug_search(cli.debug_file.as_ref(), &cli.debug_dir, &process);
    // The cache file is read as soon as the binary's build ids are (`cached::Early`).
    // A trace's large maps, as the last trace of this script had them, are made from
    // then on, beside the reading of the binary and the compile (used only if the
    // compiled object's are exactly these); a first run that will read DWARF inflates
    // it while the rest of the binary is read.
    let (mut early_read, mut asked) = (None, false);
    let mut early = |ids: &crate::gobin::BuildIds, size: u64| {
        asked = true;
        early_read = cached::read_early(cli, ids, size);
        if let Some(defs) = key.and_then(|k| early_read.as_ref()?.maps_for(k)) {
            runtime::premake(defs.to_vec());
        }
        reads_dwarf && cached::Early::absent(early_read.as_ref())
    };
    // Not freed when a listing or a check ends: the process is ending, and freeing a big
    // binary's tables cost a sixth of a check (a trace takes it, and keeps it to its end).
    let mut target = std::mem::ManuallyDrop::new(Target::open_inflating(&process.binary, &search, &mut early)?);
    // Written once, then dropped: a trace holds no cache file open.
    let cached = cached::open(cli, &target, early_read);
    // Build ids not read early (`--debug-file`): the maps are made ahead from here.
    if let Some(defs) = key.filter(|_| !asked).and_then(|k| cached.as_ref()?.maps_for(k)) {
        runtime::premake(defs.to_vec());
    }
    let seeded = cached.as_ref().is_some_and(|c| c.has_dwarf());
    let cache = std::cell::Cell::new(cached);
    let save = |target: &Target| cache.take().iter().for_each(|c| c.save(target, false, None));
    if let Some(pattern) = &cli.list {
        return list_functions(&target, pattern, &save);
    }
    if let Some(name) = stdlib_by_name(cli) {
        library::applies::check(name, &target).map_err(|e| Failure::message(e.to_string(), Some(&e.hint())))?;
    }
    let grown = size_to_target(&mut opts.lowering, &process, &target);
    let reopen = || Target::open_with(&process.binary, &search);
    let compiled = compile_seeded(cli, &opts, &mut target, seeded, &reopen)?;
    library::forget_reads();
    // A trace writes the cache while it loads (`trace::session` waits for it), with its
    // large maps for the next trace of the script to make ahead.
    let maps = key.map(|k| (k, runtime::large_maps(&compiled.object)));
    cache.take().iter().for_each(|c| c.save(&target, tracing, maps.clone()));
    check_map_sizes(cli, &compiled)?;
    say_grown(grown, &compiled);
    if !compiled.warnings.diagnostics.is_empty() {
        eprint!("{}", compiled.warnings.render(color_stderr()));
    }
    if cli.check {
        return checked(cli, &compiled);
    }
    emit_or_trace(cli, compiled, target, process)
}

/// What a compiled script is for: printed (`--emit`) or traced.
fn emit_or_trace(
    cli: &Cli,
    compiled: compile::Compiled,
    target: std::mem::ManuallyDrop<Target>,
    process: trace::Process,
) -> Result<i32, Failure> {
    match cli.emit {
        Some(Emit::Asm) => print_stdout(&listing::assembly(&compiled))?,
        Some(Emit::Plan) => emit_plan(&compiled, cli.output.as_ref())?,
        Some(Emit::Elf) => {
            let path = cli.output.clone().unwrap_or_else(|| PathBuf::from("gtrace.o"));
            write_file(&path, &compiled.object)?;
            eprintln!("wrote {} ({} bytes)", path.display(), compiled.object.len());
        }
        Some(Emit::Ast) | None => {
            let bundle = Bundle { plan: compiled.plan, object: compiled.object };
            let mut args = cli.trace.clone();
            args.script = script_title(cli);
            args.pictures(&process.shown).check(&bundle.plan)?;
            scope::pid_namespace_warning();
            scope::shared_addresses_warning(&process, &target, &bundle.plan);
            return trace::run(&bundle, std::mem::ManuallyDrop::into_inner(target), process, &args);
        }
    }
    Ok(0)
}

/// The script compiled for `target`. When `seeded` (DWARF from a cache is in use) and
/// the binary's DWARF is said to be bad, that DWARF may be what is bad (a forged file
/// can pass its checksums): compiled again for the binary as `reopen` opens it,
/// without the cache, which is then written again.
fn compile_seeded(
    cli: &Cli,
    opts: &compile::Options,
    target: &mut std::mem::ManuallyDrop<Target>,
    seeded: bool,
    reopen: &dyn Fn() -> Result<Target, crate::gobin::TargetError>,
) -> Result<compile::Compiled, Failure> {
    match compile::compile(root(cli)?, &**target, opts) {
        Err(report) if seeded && bad_dwarf(&report).is_some() => {
            let why = bad_dwarf(&report).unwrap_or_default();
            eprintln!("gtrace: {why}, with the DWARF the cache held; compiled again without the cache");
            *target = std::mem::ManuallyDrop::new(reopen()?);
            Ok(compile::compile(root(cli)?, &**target, opts)?)
        }
        compiled => Ok(compiled?),
    }
}

/// The first error of `report` that says the binary's DWARF is bad.
fn bad_dwarf(report: &crate::diag::Report) -> Option<String> {
    let bad = |d: &&crate::diag::Diagnostic| {
        d.severity == crate::diag::Severity::Error && d.message.starts_with("bad DWARF in ")
    };
    report.diagnostics.iter().find(bad).map(|d| d.message.clone())
}

/// `-l PATTERN`: the functions whose names match, printed as they are found (a closed
/// output stops the listing), or `-l FILE:LINE`: the locals live at that line.
fn list_functions(target: &Target, pattern: &str, save: &dyn Fn(&Target)) -> Result<i32, Failure> {
    // A name quoted as a script quotes it (`-l '"net/http.(*Client).Do"'`) is meant
    // as the name inside the quotes.
    let pattern = match pattern.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
        Some(inner) if !inner.is_empty() => inner,
        _ => pattern,
    };
    if let Some((file, line)) = linelocals::parse(pattern) {
        let listing = linelocals::listing(target, file, line).map_err(|e| Failure::message(e, None))?;
        save(target);
        print_stdout(&listing)?;
        return Ok(0);
    }
    let mut failed = None;
    // Printed as it goes; a closed output (`| head`) stops the listing.
    let listed = listing::functions_to(target, pattern, &mut |lines| match crate::output::write_out(
        &mut std::io::stdout(),
        lines.as_bytes(),
    ) {
        Ok(()) => true,
        Err(crate::output::OutputError::Closed) => false,
        Err(e) => {
            failed = Some(Failure::system(&e, Some("check where standard output goes (a full disk?)")));
            false
        }
    });
    save(target);
    if let Some(e) = failed {
        return Err(e);
    }
    if listed == 0 {
        return Err(nothing_listed(target, pattern));
    }
    Ok(0)
}

/// `--check`: says the script is ok, with how many probes, programs and sites, what the
/// verifier said, and which sites were skipped.
fn checked(cli: &Cli, compiled: &Compiled) -> Result<i32, Failure> {
    let verified = verify(compiled)?;
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let (probes, programs, sites) = (compiled.script_probes, compiled.programs.len(), compiled.uprobe_sites());
    eprintln!(
        "{}: ok, {probes} probe{} ({programs} program{} at {sites} uprobe site{}); {verified}",
        script_name(cli),
        plural(probes),
        plural(programs),
        plural(sites)
    );
    if let Some(line) = crate::check::skips::summary(&compiled.plan.skipped) {
        eprintln!("{line}");
        eprint!("{}", crate::check::skips::listing(&compiled.plan.skipped));
    }
    Ok(0)
}

/// `--check`: where gtrace may load BPF, the kernel's verifier judges every program
/// (nothing attaches); without privileges, or for a binary of another architecture than
/// this kernel's (its programs read that architecture's registers), that step is skipped,
/// and said.
fn verify(compiled: &Compiled) -> Result<String, Failure> {
    let arch = compiled.plan.binary.arch;
    if crate::arch::Arch::host() != Some(arch) {
        return Ok(format!("not verified by the kernel (the programs are for {}, this kernel is not)", arch.goarch()));
    }
    match runtime::verify(&compiled.object, &compiled.plan) {
        Ok(()) => Ok("the kernel's verifier accepts every program".into()),
        Err(runtime::RuntimeError::Permission { .. }) => {
            Ok("not verified by the kernel (loading BPF needs root, or CAP_BPF and CAP_PERFMON)".into())
        }
        Err(e) => Err(trace::verifier::failure(e, &compiled.plan)),
    }
}

/// With -p and no `--map-size inflight=N`: the tables of calls in flight sized to the
/// target's goroutines when it has had many (returned: how many, and the size).
fn size_to_target(settings: &mut lower::Settings, process: &trace::Process, target: &Target) -> Option<(u64, u32)> {
    let grown = settings.map_sizes.inflight.is_none().then(|| scope::inflight_size(process, target)).flatten();
    settings.map_sizes.inflight = settings.map_sizes.inflight.or(grown.map(|(_, size)| size));
    grown
}

/// Says that the tables of calls in flight were sized to the target, when the script
/// has them.
fn say_grown(grown: Option<(u64, u32)>, compiled: &Compiled) {
    let Some((goroutines, size)) = grown else { return };
    if compiled.plan.maps.iter().any(|m| m.object_name == GOROUTINES_SPILL) {
        let n = crate::output::numbers::thousands;
        eprintln!(
            "gtrace: the process has had {} goroutines: the tables of calls in flight hold {} (--map-size inflight=N)",
            n(goroutines),
            n(size.into())
        );
    }
}

/// Whether this process may turn the kernel's BPF statistics on: CAP_SYS_ADMIN, what
/// BPF_ENABLE_STATS asks (asked, not tried: turning them on and off patches the kernel's
/// text). Yes when the capabilities cannot be read (the runtime then says why not).
fn may_hold_kernel_stats() -> bool {
    use crate::runtime::capabilities::{missing_here, Capability};
    missing_here(&[Capability::SysAdmin]).is_empty()
}

/// What the programs need beyond the script: map sizes, the rate, and hit counting when
/// `--stats`, a budget or an export will read it (a plan written for elsewhere always
/// has it).
fn lowering(cli: &Cli) -> lower::Settings {
    let accounting = cli.trace.wants_costs(cli.target.command.is_some()) || cli.emit == Some(Emit::Plan);
    lower::Settings {
        map_sizes: lower::maps::MapSizes::from_args(&cli.map_size),
        rate: cli.rate,
        accounting,
        // Where the kernel's statistics can be held (CAP_SYS_ADMIN), a program at one
        // function takes its hits from them. Not in a plan or an object written for
        // elsewhere: the host that runs it may grant less (CAP_BPF and CAP_PERFMON
        // alone), and such a plan would have to be refused there.
        kernel_hits: accounting && !matches!(cli.emit, Some(Emit::Plan | Emit::Elf)) && may_hold_kernel_stats(),
        bounds: crate::capture::Bounds {
            depth: cli.depth,
            max_fields: cli.max_fields,
            max_elems: cli.max_elems,
            string_limit: cli.string_limit,
        },
        cgroup: cli.trace.cgroup.is_some(),
        // -p and -c trace one process; -b every process of the file, and a plan may be
        // run with -b.
        one_process: (cli.target.pid.is_some() || cli.target.command.is_some()) && cli.emit != Some(Emit::Plan),
        cpus: crate::runtime::possible_cpus().map_or(0, |n| n as u32),
    }
}

/// `--map-size @NAME=N` must name a map of the script.
fn check_map_sizes(cli: &Cli, compiled: &Compiled) -> Result<(), Failure> {
    let unknown = lower::maps::MapSizes::from_args(&cli.map_size).unknown(&compiled.plan);
    let Some(first) = unknown.first() else { return Ok(()) };
    let maps: Vec<String> = (compiled.plan.maps.iter())
        .filter_map(|m| match &m.role {
            crate::plan::MapRole::User { name, .. } => Some(format!("@{name}")),
            _ => None,
        })
        .collect();
    let hint =
        if maps.is_empty() { "the script has no maps".to_string() } else { format!("its maps: {}", maps.join(", ")) };
    Err(Failure::message(format!("--map-size {first}=...: the script has no map {first}"), Some(&hint)))
}

/// `gtrace run PLAN TARGET`: a plan compiled elsewhere, on this host's binary.
fn run_plan(args: &RunArgs) -> Result<i32, Failure> {
    runtime::prewarm();
    let bundle = Bundle::read(&args.plan)?;
    let process = scope::process(&args.target, args.trace.cgroup.as_deref())?;
    let target = Target::open(&process.binary)?;
    let here = Binary {
        path: process.binary.clone(),
        build_ids: target.build_ids().clone(),
        arch: target.arch(),
        module: target.module_path().map(str::to_string),
        link_base: None,
    };
    check_same_build(&bundle.plan.binary, &here)?;
    // A plan is code to run as root in another process: only what gtrace would have
    // compiled for this binary goes further.
    crate::plan::validate::validate(&bundle, &target)?;
    scope::check_plan_cgroup(&bundle.plan, &process)?;
    let mut trace_args = args.trace.clone();
    trace_args.script = format!("run {}", args.plan.display());
    trace_args.pictures(&process.shown).check(&bundle.plan)?;
    scope::pid_namespace_warning();
    scope::shared_addresses_warning(&process, &target, &bundle.plan);
    trace::run(&bundle, target, process, &trace_args)
}

/// Probes attach by file offset: a plan runs only on the build it was compiled for.
fn check_same_build(planned: &Binary, here: &Binary) -> Result<(), Failure> {
    // Without an id both builds carry, only the same file will do.
    let same = planned.build_ids.same_build(&here.build_ids).unwrap_or(planned.path == here.path);
    if same {
        return Ok(());
    }
    let show = |b: &Binary| format!("{} ({})", b.path.display(), b.build_ids);
    Err(Failure::message(
        format!("the plan was compiled for {}, not {}", show(planned), show(here)),
        Some(
            "compile the plan against the same build of the program that runs here; a build with -ldflags='-s -w' has \
             other build ids than one without: build once without -s -w, compile the plan against it, and ship that \
             binary stripped (`objcopy --strip-debug`, `objcopy --only-keep-debug` to keep its DWARF aside: the build \
             ids stay)",
        ),
    ))
}

/// The stdlib library the script is, when it is given by name (`gtrace http`).
fn stdlib_by_name(cli: &Cli) -> Option<&str> {
    match (&cli.expr, &cli.script) {
        (None, Some(path)) if !path.exists() => path.to_str().filter(|n| library::stdlib::get(n).is_some()),
        _ => None,
    }
}

/// The script: `-e TEXT`, a file, or a stdlib library by name.
fn root(cli: &Cli) -> Result<Root, Failure> {
    use std::os::unix::ffi::OsStrExt;
    match (&cli.expr, &cli.script) {
        // `use` in -e text looks in the current folder after the -I folders.
        (Some(e), _) => {
            let text = script_text("<-e>", e.as_bytes().to_vec())?;
            Ok(Root { name: "<-e>".into(), text, dir: Some(PathBuf::new()) })
        }
        (None, Some(path)) => {
            if let Some(root) = path.to_str().filter(|_| !path.exists()).and_then(library::root_from_stdlib) {
                return Ok(root);
            }
            let bytes = crate::input::read_file(path, crate::input::MAX_TEXT).map_err(|e| {
                let e = Failure::system(&e, None).render(false);
                Failure::message(
                    format!("cannot read the script: {}", e.trim_start_matches("error: ").trim_end()),
                    Some("give a .gt file, a stdlib library (see --list-libraries), or the script with -e"),
                )
            })?;
            let name = path.display().to_string();
            let text = script_text(&name, bytes)?;
            Ok(Root { name, text, dir: path.parent().map(PathBuf::from) })
        }
        (None, None) => {
            Err(Failure::message("no script", Some("give one with -e 'on entry main.F { ... }' or as a .gt file")))
        }
    }
}

/// `-l PATTERN` that matches no function: say so, with the closest names.
fn nothing_listed(target: &Target, pattern: &str) -> Failure {
    let close = target.closest(pattern, 3);
    let hint = if close.is_empty() {
        "`gtrace -l` lists every function; `*` matches any run of characters (`-l 'main.*'`)".to_string()
    } else {
        let names: Vec<String> = close.iter().map(|c| format!("`{c}`")).collect();
        format!("did you mean {}? (`*` matches any run of characters: `-l 'main.*'`)", names.join(", "))
    };
    Failure::System {
        cause: format!("no function matches `{pattern}` in {}", target.path().display()),
        hint: Some(hint),
    }
}

/// Script text that must be UTF-8: an error at the first bad byte otherwise.
fn script_text(name: &str, bytes: Vec<u8>) -> Result<String, Failure> {
    let mut sources = crate::diag::Sources::default();
    crate::input::script_text(&mut sources, name, bytes)
        .map_err(|d| Failure::Script(crate::diag::Report { sources, diagnostics: vec![d] }))
}

/// The script as pictures' titles name it: its file, its library, or `-e '...'` (cut
/// short past 80 characters).
fn script_title(cli: &Cli) -> String {
    match &cli.expr {
        Some(e) => {
            let text = e.to_string_lossy();
            let short: String = text.chars().take(80).collect();
            format!("-e '{short}{}'", if short.len() < text.len() { "..." } else { "" })
        }
        None => script_name(cli),
    }
}

fn script_name(cli: &Cli) -> String {
    match &cli.script {
        Some(p) => p.display().to_string(),
        None => "<-e>".into(),
    }
}

/// `--emit plan`: the plan with the object, to a file or standard output.
fn emit_plan(compiled: &Compiled, output: Option<&PathBuf>) -> Result<(), Failure> {
    let bundle = Bundle { plan: compiled.plan.clone(), object: compiled.object.clone() };
    let json = format!("{}\n", bundle.to_json());
    match output {
        Some(path) => {
            write_file(path, json.as_bytes())?;
            eprintln!("wrote {} ({} probes)", path.display(), compiled.plan.probes.len());
        }
        None => print_stdout(&json)?,
    }
    Ok(())
}

fn write_file(path: &PathBuf, bytes: &[u8]) -> Result<(), Failure> {
    std::fs::write(path, bytes).map_err(|e| Failure::message(format!("cannot write {}: {e}", path.display()), None))
}

/// Writes to stdout. A closed pipe (`gtrace -l | head`) is not an error: the reader
/// has what it wanted. Any other failure (a full disk, /dev/full) is.
fn print_stdout(text: &str) -> Result<(), Failure> {
    match crate::output::write_out(&mut std::io::stdout(), text.as_bytes()) {
        Ok(()) | Err(crate::output::OutputError::Closed) => Ok(()),
        Err(e) => Err(Failure::system(&e, Some("check where standard output goes (a full disk?)"))),
    }
}
