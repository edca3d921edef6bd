//! The pipeline in one place: the order of the passes, from a command line to a running
//! trace. parse → check → lower → object → load → attach → run → print. Each pass stops
//! the pipeline when it reports an error; every error is rendered by `diag`.

use crate::arch::abi::{self, Location};
use crate::check;
use crate::cli::{Cli, Emit};
use crate::diag::{self, Diagnostic, Diagnostics, Sources};
use crate::library;
use crate::lower::{self, Lowered};
use crate::object::{self, BpfObject, MapDef, ProgramCode};
use crate::output::{self, Event, Sink};
use crate::plan::{MapRole, Plan};
use crate::runtime::{self, HeldChild, Loaded, RuntimeError, Scope};
use crate::syntax::ast::Script;
use crate::target::Target;
use clap::Parser;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Why gtrace stopped early, ready to render.
pub enum Failure {
    /// Problems in the script, with the sources they point into.
    Script { sources: Sources, diags: Vec<Diagnostic> },
    /// A problem outside the script: a cause and what to do.
    System { cause: String, hint: Option<String> },
}

impl Failure {
    fn system(cause: impl ToString, hint: Option<&str>) -> Failure {
        Failure::System { cause: cause.to_string(), hint: hint.map(str::to_string) }
    }
    pub fn render(&self) -> String {
        match self {
            Failure::Script { sources, diags } => diag::render_with(sources, diags, color_stderr()),
            Failure::System { cause, hint } => diag::render_system(cause, hint.as_deref()),
        }
    }
}

impl From<RuntimeError> for Failure {
    fn from(e: RuntimeError) -> Failure {
        let mut cause = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            cause.push_str(&format!(": {s}"));
            src = s.source();
        }
        Failure::System { cause, hint: e.hint().map(str::to_string) }
    }
}

fn color_stderr() -> bool {
    std::env::var_os("NO_COLOR").is_none() && unsafe_free_isatty()
}

fn unsafe_free_isatty() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}

pub fn main() -> i32 {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(code) => code,
        Err(f) => {
            eprint!("{}", f.render());
            1
        }
    }
}

/// What the command line says to trace.
struct TargetSpec {
    binary: PathBuf,
    pid: Option<u32>,
    command: Option<Vec<String>>,
}

fn target_spec(cli: &Cli) -> Result<TargetSpec, Failure> {
    if let Some(pid) = cli.pid {
        return Ok(TargetSpec { binary: runtime::process_exe(pid)?, pid: Some(pid), command: None });
    }
    if let Some(cmd) = &cli.command {
        let argv = shlex::split(cmd)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| Failure::system(format!("cannot split the command `{cmd}`"), Some("check its quotes")))?;
        return Ok(TargetSpec { binary: runtime::resolve_command(&argv[0])?, pid: None, command: Some(argv) });
    }
    let binary = cli.binary.clone().unwrap_or_default();
    Ok(TargetSpec { binary, pid: None, command: None })
}

pub fn run(cli: &Cli) -> Result<i32, Failure> {
    if !cli.check && cli.emit.is_none() && cli.list.is_none() && !cli.list_libraries {
        // Loading will need aya's loader, whose set-up (parsing the kernel's BTF) can
        // overlap the compilation.
        runtime::prewarm();
    }
    if cli.list_libraries {
        print_stdout(&library::stdlib::listing());
        return Ok(0);
    }
    let spec = target_spec(cli)?;
    let target = Target::open(&spec.binary).map_err(|e| {
        let hint = match &e {
            crate::target::TargetError::NotGo { .. } => Some("gtrace traces Go executables (Go 1.17 or later)"),
            crate::target::TargetError::WrongArch { .. } => Some("gtrace traces x86-64 executables on this machine"),
            crate::target::TargetError::TooOld { .. } => {
                Some("gtrace needs Go's register ABI: rebuild the program with Go 1.17 or later")
            }
            crate::target::TargetError::BadPclntab { .. } => {
                Some("the function table could not be read; if this is a Go binary, please report it")
            }
            _ => None,
        };
        Failure::system(e, hint)
    })?;
    if let Some(pattern) = &cli.list {
        print_stdout(&list(&target, pattern));
        return Ok(0);
    }

    let (sources, script) = parse(cli)?;
    if cli.emit == Some(Emit::Ast) {
        print_stdout(&format!("{}\n", serde_json::to_string_pretty(&script).unwrap_or_default()));
        return Ok(0);
    }
    let mut diags = Diagnostics::default();
    let checked = if diags.has_errors() { None } else { check::check(&script, &target, &mut diags, cli.string_limit) };
    let Some(checked) = checked else {
        return Err(Failure::Script { sources, diags: diags.items });
    };
    if !diags.is_empty() {
        eprint!("{}", diag::render_with(&sources, &diags.items, color_stderr()));
    }
    if cli.check {
        let probes: usize = checked.instances.len();
        eprintln!("{}: ok, {} probe{}", script_name(cli), probes, if probes == 1 { "" } else { "s" });
        return Ok(0);
    }

    let lowered = lower::lower(&script, &checked, &target, &sources).map_err(|e| match e.diagnostic() {
        Some(d) => Failure::Script { sources: std::mem::take(&mut Sources::default()), diags: vec![d] },
        None => Failure::system(e, None),
    });
    let lowered = match lowered {
        Ok(l) => l,
        // A lowering error that points into the script is rendered against its sources.
        Err(Failure::Script { diags, .. }) => return Err(Failure::Script { sources, diags }),
        Err(f) => return Err(f),
    };
    if cli.emit == Some(Emit::Asm) {
        print_stdout(&listing(&lowered));
        return Ok(0);
    }
    if cli.emit == Some(Emit::Plan) {
        print_stdout(&format!("{}\n", serde_json::to_string_pretty(&lowered.plan).unwrap_or_default()));
        return Ok(0);
    }
    let bytes = object::write(&object_of(&lowered)).map_err(|e| Failure::system(e, None))?;
    if cli.emit == Some(Emit::Elf) {
        std::fs::write(&cli.output, &bytes)
            .map_err(|e| Failure::system(format!("cannot write {}: {e}", cli.output.display()), None))?;
        eprintln!("wrote {} ({} bytes)", cli.output.display(), bytes.len());
        return Ok(0);
    }
    trace(cli, spec, &lowered, &bytes, &target)
}

/// Writes to stdout, ignoring a closed pipe (`gtrace -l | head`).
fn print_stdout(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().write_all(text.as_bytes());
}

fn script_name(cli: &Cli) -> String {
    match &cli.script {
        Some(p) => p.display().to_string(),
        None => "<-e>".into(),
    }
}

fn parse(cli: &Cli) -> Result<(Sources, Script), Failure> {
    let mut sources = Sources::default();
    let root = match (&cli.expr, &cli.script) {
        // `use` in -e text looks in the current folder after the -I folders.
        (Some(e), _) => library::Root { name: "<-e>".into(), text: e.clone(), dir: Some(PathBuf::new()) },
        (None, Some(path)) => match path.to_str().filter(|_| !path.exists()).and_then(library::root_from_stdlib) {
            Some(root) => root,
            None => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    Failure::system(
                        format!("cannot read script {}: {e}", path.display()),
                        Some("give a .gt file, a stdlib library (see --list-libraries), or the script with -e"),
                    )
                })?;
                let dir = path.parent().map(PathBuf::from);
                library::Root { name: path.display().to_string(), text, dir }
            }
        },
        (None, None) => {
            return Err(Failure::system(
                "no script",
                Some("give one with -e 'on entry main.F { ... }' or as a .gt file"),
            ))
        }
    };
    let opts = library::Options { include: cli.include.clone(), sets: cli.set.clone() };
    match library::load(root, &opts, &mut sources) {
        Ok(script) => Ok((sources, script)),
        Err(diags) => Err(Failure::Script { sources, diags }),
    }
}

/// The object the lowered programs and maps make.
fn object_of(lowered: &Lowered) -> BpfObject {
    BpfObject {
        license: "GPL".into(),
        maps: lowered.plan.maps.iter().map(MapDef::from).collect(),
        programs: lowered
            .programs
            .iter()
            .map(|(name, program)| ProgramCode {
                name: name.clone(),
                section: format!("uprobe/{name}"),
                program: program.clone(),
            })
            .collect(),
    }
}

/// `--emit asm`: every program with where it attaches and its source lines.
fn listing(lowered: &Lowered) -> String {
    let mut out = String::new();
    for (name, program) in &lowered.programs {
        let spec = lowered.plan.probes.iter().find(|p| p.program == *name);
        let (describe, sites) = match spec.map(|s| &s.attach) {
            Some(crate::plan::ProbeAttach::Uprobe(points)) => (
                spec.map(|s| s.describe.as_str()).unwrap_or(""),
                points
                    .iter()
                    .map(|p| format!("{} at {:#x} (file offset {:#x})", p.function, p.address, p.file_offset))
                    .collect::<Vec<_>>(),
            ),
            _ => (spec.map(|s| s.describe.as_str()).unwrap_or(""), Vec::new()),
        };
        out.push_str(&format!("; program {name}: {describe}\n"));
        for s in sites {
            out.push_str(&format!(";   attached at {s}\n"));
        }
        out.push_str(&crate::bpf::disasm::disasm(program));
        out.push('\n');
    }
    out
}

/// `-l PATTERN`: each function as a Go signature with where the ABI puts each value.
pub fn list(target: &Target, pattern: &str) -> String {
    let names: Vec<String> = target.find(pattern).iter().map(|f| f.name.clone()).collect();
    let mut out = String::new();
    for name in names {
        let params = match target.params(&name) {
            Ok(Some(p)) => p,
            Ok(None) if !target.has_dwarf() => {
                let abi0 = target.find(&name).first().is_some_and(|f| f.abi == crate::target::Abi::Abi0);
                let words = if abi0 {
                    "arg0 … as words at 8(SP), 16(SP), …"
                } else {
                    "arg0 … arg8 as words in RAX RBX RCX RDI RSI R8 R9 R10 R11"
                };
                out.push_str(&format!("{name}  (no DWARF: parameters by position, {words})\n"));
                continue;
            }
            Ok(None) => {
                out.push_str(&format!("{name}  (no DWARF for this function: parameters unknown)\n"));
                continue;
            }
            Err(e) => {
                out.push_str(&format!("{name}  ({e})\n"));
                continue;
            }
        };
        let types = &*target.types();
        let (ins, outs): (Vec<_>, Vec<_>) = params.iter().partition(|p| !p.is_result);
        let layout = abi::assign_call(
            &ins.iter().map(|p| p.ty).collect::<Vec<_>>(),
            &outs.iter().map(|p| p.ty).collect::<Vec<_>>(),
            types,
        );
        let show = |ps: &[&crate::target::Param], locs: &[Location]| -> String {
            ps.iter()
                .zip(locs)
                .map(|(p, l)| format!("{} {} {}", p.name, types.get(p.ty).name, location(l)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!("{name}({})", show(&ins, &layout.params)));
        if !outs.is_empty() {
            out.push_str(&format!(" ({})", show(&outs, &layout.results)));
        }
        out.push('\n');
    }
    out
}

fn location(l: &Location) -> String {
    match l {
        Location::Regs(pieces) => format!("[{}]", pieces.iter().map(|p| p.reg.name()).collect::<Vec<_>>().join(" ")),
        Location::Stack { offset } => format!("[{offset}(SP)]"),
        Location::Unreadable { reason } => format!("[unreadable: {reason}]"),
        Location::Empty => "[empty]".into(),
    }
}

/// Loads, attaches, runs until a stop condition, and prints the maps.
fn trace(cli: &Cli, spec: TargetSpec, lowered: &Lowered, bytes: &[u8], target: &Target) -> Result<i32, Failure> {
    let stop = runtime::signals::install();
    let plan = &lowered.plan;
    let mut loaded = runtime::load(bytes, plan).map_err(|e| verifier_failure(e, lowered))?;
    let mut child: Option<HeldChild> = match &spec.command {
        Some(argv) => Some(runtime::spawn_held(argv)?),
        None => None,
    };
    let scope = match (spec.pid, &child) {
        (Some(pid), _) => Scope::Process(pid),
        (None, Some(c)) => Scope::Process(c.pid()),
        (None, None) => Scope::AllProcesses,
    };
    let attached = loaded.attach(&spec.binary, scope)?;
    eprintln!("Attached {attached} probe{}", if attached == 1 { "" } else { "s" });
    let mut sink = output::sink(cli.format);
    let traced_pid = spec.pid.or(child.as_ref().map(|c| c.pid()));
    let mut symbols = TargetSymbols { target, bias: None, pid: traced_pid };
    loaded.run_begin();
    drain(&mut loaded, plan, &mut symbols, sink.as_mut(), Duration::ZERO)?;
    if let Some(c) = child.as_mut() {
        c.release()?;
        // A PIE's load bias is read from the child's memory map as soon as it has
        // exec'd, before its events (and its exit) could outrun us.
        let deadline = Instant::now() + Duration::from_millis(200);
        while target.is_pie() && symbols.bias.is_none() && Instant::now() < deadline {
            symbols.learn_bias();
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let started = Instant::now();
    loop {
        symbols.learn_bias();
        // Short waits, so gtrace notices promptly when the target ends.
        if drain(&mut loaded, plan, &mut symbols, sink.as_mut(), Duration::from_millis(20))? {
            break;
        }
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        if cli.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if let Some(c) = child.as_mut() {
            if c.try_wait().is_some() {
                break;
            }
        }
        if let Some(pid) = spec.pid {
            if !runtime::is_alive(pid) {
                break;
            }
        }
    }
    // Events already in the ring buffer belong to the run.
    drain(&mut loaded, plan, &mut symbols, sink.as_mut(), Duration::ZERO)?;
    loaded.run_end();
    drain(&mut loaded, plan, &mut symbols, sink.as_mut(), Duration::ZERO)?;
    print_maps(&loaded, plan, &symbols, sink.as_mut(), None)?;
    loaded.detach_all();
    if let Some(c) = child.as_mut() {
        if c.try_wait().is_none() {
            c.kill();
        }
    }
    sink.flush();
    Ok(0)
}

/// Handles the events waiting in the ring buffer; true when one was `exit()`.
fn drain(
    loaded: &mut Loaded,
    plan: &Plan,
    symbols: &mut TargetSymbols,
    sink: &mut dyn Sink,
    wait: Duration,
) -> Result<bool, Failure> {
    let mut events = Vec::new();
    loaded.poll_events(wait, &mut |rec| {
        if let Some(e) = output::decode_event(rec, plan) {
            events.push(e);
        }
    })?;
    if !events.is_empty() {
        symbols.learn_bias();
    }
    let mut exit = false;
    for mut e in events {
        output::name_event(&mut e, symbols);
        match &e {
            Event::Printf { .. } | Event::Print { .. } => sink.event(&e),
            Event::PrintMap { map } => print_maps(loaded, plan, symbols, sink, Some(map))?,
            Event::ClearMap { map } => loaded.clear_map(map)?,
            Event::Exit => exit = true,
        }
    }
    Ok(exit)
}

/// Type names and code symbols from the target, for output. Run-time addresses in a
/// PIE are moved back by its load bias (known once the traced process has mapped it;
/// unknown with -b, where every process has its own).
struct TargetSymbols<'a> {
    target: &'a Target,
    bias: Option<u64>,
    /// The traced process, when there is one (-p, -c).
    pid: Option<u32>,
}

impl TargetSymbols<'_> {
    fn link(&self, addr: u64) -> Option<u64> {
        if self.target.is_pie() {
            addr.checked_sub(self.bias?)
        } else {
            Some(addr)
        }
    }

    /// Learns the bias of a PIE from the traced process's memory map.
    fn learn_bias(&mut self) {
        if self.bias.is_some() || !self.target.is_pie() {
            return;
        }
        let (Some(pid), Some(link)) = (self.pid, self.target.vaddr_of_file_offset(0)) else { return };
        self.bias = runtime::mapping_start(pid, self.target.path()).map(|start| start.wrapping_sub(link));
    }
}

impl output::Symbols for TargetSymbols<'_> {
    fn type_name(&self, addr: u64) -> Option<String> {
        self.target.runtime_type_name(self.link(addr)?)
    }
    fn function(&self, pc: u64) -> Option<(String, u64)> {
        let bias = pc - self.link(pc)?;
        self.target.function_containing(pc - bias).map(|f| (f.name.clone(), f.addr + bias))
    }
}

/// Prints every non-empty user map (or only `only`), in the order of their names.
fn print_maps(
    loaded: &Loaded,
    plan: &Plan,
    symbols: &TargetSymbols,
    sink: &mut dyn Sink,
    only: Option<&str>,
) -> Result<(), Failure> {
    for spec in &plan.maps {
        if !matches!(spec.role, MapRole::User { .. }) || only.is_some_and(|o| o != spec.object_name) {
            continue;
        }
        let raw = loaded.map_entries(&spec.object_name)?;
        if raw.is_empty() {
            continue;
        }
        if let Some(mut dump) = output::decode_map(spec, &raw, plan) {
            output::name_map(&mut dump, symbols);
            sink.map(&dump);
        }
    }
    Ok(())
}

/// A verifier rejection, with the source line of the instruction it failed on.
fn verifier_failure(e: RuntimeError, lowered: &Lowered) -> Failure {
    let RuntimeError::Verifier { program, log } = &e else { return e.into() };
    let probe =
        lowered.plan.probes.iter().find(|p| p.program == *program).map(|p| p.describe.clone()).unwrap_or_default();
    let mut cause = format!("the kernel's verifier rejected the program of `{probe}` ({program})");
    if let (Some(at), Some((_, p))) = (runtime::failing_insn(log), lowered.programs.iter().find(|(n, _)| n == program))
    {
        if let Some((_, line)) = p.comments.iter().filter(|(i, _)| *i <= at).last() {
            cause.push_str(&format!("\n  at instruction {at}, compiled from: {line}"));
        }
    }
    let tail: Vec<&str> = log.lines().rev().take(25).collect::<Vec<_>>().into_iter().rev().collect();
    cause.push_str(&format!("\n  verifier log (last lines):\n    {}", tail.join("\n    ")));
    Failure::System {
        cause,
        hint: Some("this is a bug in gtrace's code generation; please report it with `--emit asm` output".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::builder::Program;
    use crate::bpf::insn::{exit, mov64_imm};
    use crate::plan::{ProbeAttach, ProbeSpec};

    #[test]
    fn a_verifier_rejection_names_the_probe_the_source_line_and_the_log() {
        let program = Program {
            insns: vec![mov64_imm(0, 0); 8].into_iter().chain([exit()]).collect(),
            relocations: Vec::new(),
            comments: vec![(0, "<-e>:1:1: on entry main.F".into()), (5, "<-e>:2:5: @n = count()".into())],
        };
        let lowered = Lowered {
            programs: vec![("p0".into(), program)],
            plan: Plan {
                probes: vec![ProbeSpec {
                    program: "p0".into(),
                    attach: ProbeAttach::Begin,
                    describe: "on entry main.F".into(),
                }],
                ..Plan::default()
            },
        };
        let log = "0: R1=ctx() R10=fp0\n0: (bf) r6 = r1\n6: (79) r1 = *(u64 *)(r10 -8)\ninvalid read from stack R10 off=-8 size=8\nprocessed 7 insns";
        let f = verifier_failure(RuntimeError::Verifier { program: "p0".into(), log: log.into() }, &lowered);
        let text = f.render();
        assert!(text.contains("rejected the program of `on entry main.F` (p0)"), "{text}");
        assert!(text.contains("at instruction 6, compiled from: <-e>:2:5: @n = count()"), "{text}");
        assert!(text.contains("invalid read from stack R10 off=-8 size=8"), "{text}");
        assert!(text.contains("hint:"), "{text}");
    }
}
