//! The command line (clap): `gtrace [OPTIONS] (-e TEXT | SCRIPT.gt | LIBRARY) TARGET`.

use crate::lower::maps::MapSize;
use crate::output::Format;
use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "gtrace",
    version,
    about = "Ask a running Go program a question it was not built to answer.",
    after_help = "Examples:\n  gtrace -e 'on return main.doWork < hist(elapsed) >' -c ./server\n  gtrace -e 'on entry \"main.(*T).Add\" { @calls = count() }' -p 4242\n  gtrace -l 'main.*' -b ./server"
)]
#[command(group(ArgGroup::new("target").args(["pid", "command", "binary", "list_libraries"]).required(true)))]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Cli {
    /// `gtrace run PLAN TARGET`: trace with a plan compiled elsewhere.
    #[command(subcommand)]
    pub run: Option<RunCommand>,

    /// A script file (SCRIPT.gt), or the name of a stdlib library (see --list-libraries).
    pub script: Option<PathBuf>,

    /// The script on the command line.
    #[arg(short = 'e', long = "expr", value_name = "TEXT", conflicts_with = "script")]
    pub expr: Option<std::ffi::OsString>,

    #[command(flatten)]
    pub target: TargetArgs,

    /// List the target's functions matching PATTERN, with their parameters, results and where the ABI puts them.
    #[arg(short = 'l', long = "list", value_name = "PATTERN", num_args = 0..=1, default_missing_value = "*")]
    pub list: Option<String>,

    /// Parse and type-check against the target, print diagnostics, and exit (needs no privileges).
    #[arg(long)]
    pub check: bool,

    /// Print a stage's output instead of running.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub emit: Option<Emit>,

    /// Where `--emit elf` writes the object (default gtrace.o) and `--emit plan` the plan
    /// (default: standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    #[command(flatten)]
    pub trace: TraceArgs,

    /// How many bytes of a Go string to read (longer strings are cut there), 1 to 400.
    #[arg(long, value_name = "BYTES", default_value_t = crate::check::govalues::STRING_LIMIT, value_parser = clap::value_parser!(u32).range(1..=400))]
    pub string_limit: u32,

    /// How deep `print` follows a whole Go value: composite values (structs, arrays,
    /// slices, maps, interfaces' values) nested deeper print as `{...}`.
    #[arg(long, value_name = "LEVELS", default_value_t = crate::capture::DEFAULT_BOUNDS.depth, value_parser = clap::value_parser!(u32).range(0..=8))]
    pub depth: u32,

    /// How many fields of a struct `print` shows (the rest print as `...`).
    #[arg(long = "max-fields", value_name = "N", default_value_t = crate::capture::DEFAULT_BOUNDS.max_fields, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub max_fields: u32,

    /// How many elements of an array, slice or map `print` shows (the rest print as `...`).
    #[arg(long = "max-elems", value_name = "N", default_value_t = crate::capture::DEFAULT_BOUNDS.max_elems, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub max_elems: u32,

    /// DWARF for a stripped binary from this file (what `objcopy --only-keep-debug` writes);
    /// it must be of the same build.
    #[arg(long = "debug-file", value_name = "PATH")]
    pub debug_file: Option<PathBuf>,

    /// Where debug files are found by build id (DIR/.build-id/ab/cdef….debug) when the
    /// binary has no DWARF; repeatable [default: /usr/lib/debug].
    #[arg(long = "debug-dir", value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,

    /// Neither read nor write the cache of what earlier runs learned of the binary
    /// (its DWARF units and lookups and inlined sites, by build id, in $XDG_CACHE_HOME/gtrace or
    /// ~/.cache/gtrace).
    #[arg(long = "no-cache")]
    pub no_cache: bool,

    /// Where `use` looks for libraries.
    #[arg(short = 'I', value_name = "DIR")]
    pub include: Vec<PathBuf>,

    /// Set a `param` of the script or its libraries (e.g. --set threshold=50ms); repeatable.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,

    /// How many keys maps hold: N for every map (default 16384), @NAME=N for one, self=N
    /// for the self variables (default 262144), inflight=N for the tables of timed calls
    /// in flight (default 262144); repeatable. Updates past it are refused, counted and
    /// said at exit.
    #[arg(long = "map-size", value_name = "N|@NAME=N|self=N|inflight=N", value_parser = MapSize::parse)]
    pub map_size: Vec<MapSize>,

    /// At most N printed events (print, printf) a second per probe; the rest are dropped in
    /// the kernel, counted, and said at exit.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub rate: Option<u32>,

    /// List the stdlib's libraries, a line each, and exit.
    #[arg(long = "list-libraries", exclusive = true)]
    pub list_libraries: bool,
}

#[derive(Subcommand, Debug)]
pub enum RunCommand {
    /// Trace with a plan written by `--emit plan -o FILE`, on a host that has the binary
    /// (stripped or not; checked by build id) but perhaps not its DWARF or the script.
    Run(RunArgs),
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("run_target").args(["pid", "command", "binary"]).required(true)))]
pub struct RunArgs {
    /// The plan: what `gtrace --emit plan -o FILE` wrote.
    pub plan: PathBuf,

    #[command(flatten)]
    pub target: TargetArgs,

    #[command(flatten)]
    pub trace: TraceArgs,
}

/// What to trace: one of these.
#[derive(Args, Debug, Clone, Default)]
pub struct TargetArgs {
    /// Trace a running Go process.
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pid: Option<u32>,

    /// Start CMD (split like a shell would) with every probe attached before it runs; stop when it exits.
    #[arg(short = 'c', long = "command", value_name = "CMD")]
    pub command: Option<String>,

    /// Trace every process that runs this Go executable.
    #[arg(short = 'b', long = "binary", value_name = "PATH")]
    pub binary: Option<PathBuf>,
}

/// How a trace runs and prints.
#[derive(Args, Debug, Clone)]
pub struct TraceArgs {
    /// Output format.
    #[arg(short = 'f', long = "format", value_enum, default_value = "text")]
    pub format: Format,

    /// Stop after this long (e.g. 30s, 500ms, 2m).
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// At exit, print per probe: hits, eBPF time per hit, estimated cost and share of a
    /// CPU, events dropped, map updates refused.
    #[arg(long)]
    pub stats: bool,

    /// Keep what tracing costs the target under PCT of one CPU (e.g. 2%): past it, the
    /// costliest probes are detached. `off` for none. Default: 5% with -p and -b, off with -c.
    #[arg(long, value_name = "PCT|off", value_parser = Budget::parse)]
    pub budget: Option<Budget>,

    /// While tracing, serve every map at http://ADDR/metrics (Prometheus text format).
    /// ADDR is HOST:PORT, or :PORT for 127.0.0.1 (the traced values stay on the host).
    #[arg(long, value_name = "ADDR")]
    pub prometheus: Option<String>,

    /// Push the maps as metrics, and printed lines as log records, to an OpenTelemetry
    /// collector over OTLP/HTTP: URL/v1/metrics and URL/v1/logs (e.g. http://127.0.0.1:4318).
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,

    /// Scope every probe to the processes of one cgroup (v2) and the cgroups below it: a
    /// container, a Kubernetes pod (e.g. /sys/fs/cgroup/kubepods.slice/...). Others return
    /// at once.
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<PathBuf>,

    /// How often --otlp pushes (and once more at exit).
    #[arg(long, value_name = "D", default_value = "10s", value_parser = parse_duration)]
    pub otlp_interval: Duration,

    /// At exit, write every map keyed by ustack as a pprof profile (gzipped profile.proto)
    /// for `go tool pprof FILE`: count() gives calls, sum(elapsed) wall nanoseconds; the
    /// other keys are labels.
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,

    /// At exit, draw every map keyed by ustack as an SVG flame graph.
    #[arg(long, value_name = "FILE")]
    pub flamegraph: Option<PathBuf>,

    /// Redraw the maps in the terminal every second (full screen: each map sorted by
    /// value with rates per second and percentiles, each probe's cost, the budget); q
    /// quits and prints the maps as usual. Standard output must be a terminal; a -c
    /// command's output is shown in the view and written whole when it closes.
    #[arg(long)]
    pub live: bool,

    /// The script as pictures' titles name it (set by the driver, not an option).
    #[arg(skip)]
    pub script: String,
}

/// `--budget`: a share of one CPU, or no budget.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    Percent(f64),
    Off,
}

impl Budget {
    /// The budget where none is given: an SRE leaving gtrace on a live process (-p) or on
    /// every process of a binary (-b) gets one; a command gtrace starts (-c) is a test run.
    pub const DEFAULT_PERCENT: f64 = 5.0;

    /// `2%`, `2`, `0.5%`, `off`.
    pub fn parse(text: &str) -> Result<Budget, String> {
        if text == "off" || text == "none" {
            return Ok(Budget::Off);
        }
        let n = text.strip_suffix('%').unwrap_or(text);
        match n.parse::<f64>() {
            Ok(p) if p > 0.0 && p <= 100.0 => Ok(Budget::Percent(p)),
            _ => Err(format!(
                "`{text}` is not a share of one CPU: give a percentage above 0 and at most 100 (2%, 0.5%), or off"
            )),
        }
    }

    /// The percentage in force for a trace of a command (`-c`) or not.
    pub fn percent(budget: Option<Budget>, command: bool) -> Option<f64> {
        match budget {
            Some(Budget::Percent(p)) => Some(p),
            Some(Budget::Off) => None,
            None if command => None,
            None => Some(Budget::DEFAULT_PERCENT),
        }
    }
}

impl TraceArgs {
    /// Whether gtrace's own numbers (hits, costs) will be read: `--stats`, a budget in
    /// force, or an export of gtrace's own metrics. Then probes count their hits and the
    /// trap is calibrated.
    pub fn wants_costs(&self, command: bool) -> bool {
        self.stats
            || self.live
            || Budget::percent(self.budget, command).is_some()
            || self.prometheus.is_some()
            || self.otlp.is_some()
    }

    /// The pictures asked for (`--pprof`, `--flamegraph`, `-f folded`), titled with the
    /// script and `target`.
    pub fn pictures(&self, target: &std::path::Path) -> crate::profile::Pictures {
        crate::profile::Pictures {
            pprof: self.pprof.clone(),
            flamegraph: self.flamegraph.clone(),
            folded: self.format == Format::Folded,
            title: format!("gtrace {} on {}", self.script, target.display()),
        }
    }

    pub fn export(&self) -> crate::export::ExportOptions {
        crate::export::ExportOptions {
            prometheus: self.prometheus.clone(),
            otlp: self.otlp.clone(),
            otlp_interval: self.otlp_interval,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Emit {
    /// The syntax tree, as JSON.
    Ast,
    /// The eBPF assembly of every program, with the source line of each block.
    Asm,
    /// The plan handed to the runtime (maps, probes, events) with the object, as JSON:
    /// what `gtrace run` reads.
    Plan,
    /// The BPF ELF object, written to --output.
    Elf,
}

/// `250ns`, `5us`, `3ms`, `2s`, `1m`, `1h`; a bare number is seconds. Read exactly (in
/// integers, not through a float that rounds), so that the largest duration the message
/// names is one that parses.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let not_one = || format!("`{s}` is not a duration (try 30s, 500ms, 2m)");
    let unit_ns: u128 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "" | "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ if num.is_empty() => return Err(not_one()),
        _ => return Err(format!("unknown unit `{unit}` in `{s}` (use ns, us, ms, s, m or h)")),
    };
    let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
    if (whole.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(not_one());
    }
    let too_long =
        || format!("`{s}` is too long: a duration holds at most {} seconds (about 584 billion years)", u64::MAX);
    // Digits only: parsing fails only past u128, which is too long.
    let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| too_long())? };
    // Digits of a fraction past the 20th are below a nanosecond of any unit.
    let frac = &frac[..frac.len().min(20)];
    let frac_ns =
        if frac.is_empty() { 0 } else { frac.parse::<u128>().unwrap_or(0) * unit_ns / 10u128.pow(frac.len() as u32) };
    let ns = whole.checked_mul(unit_ns).and_then(|n| n.checked_add(frac_ns)).ok_or_else(too_long)?;
    let secs = u64::try_from(ns / 1_000_000_000).map_err(|_| too_long())?;
    Ok(Duration::new(secs, (ns % 1_000_000_000) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets() {
        assert_eq!(Budget::parse("2%"), Ok(Budget::Percent(2.0)));
        assert_eq!(Budget::parse("0.5"), Ok(Budget::Percent(0.5)));
        assert_eq!(Budget::parse("off"), Ok(Budget::Off));
        assert!(Budget::parse("0%").is_err() && Budget::parse("150%").is_err() && Budget::parse("x").is_err());
        assert_eq!(Budget::percent(None, true), None);
        assert_eq!(Budget::percent(None, false), Some(Budget::DEFAULT_PERCENT));
        assert_eq!(Budget::percent(Some(Budget::Off), false), None);
        assert_eq!(Budget::percent(Some(Budget::Percent(1.0)), true), Some(1.0));
    }

    #[test]
    fn map_sizes() {
        assert_eq!(MapSize::parse("100_000"), Ok(MapSize::All(100_000)));
        assert_eq!(MapSize::parse("@paths=10"), Ok(MapSize::Map { name: "paths".into(), entries: 10 }));
        assert_eq!(MapSize::parse("@=10"), Ok(MapSize::Map { name: "".into(), entries: 10 }));
        assert_eq!(MapSize::parse("self=1000000"), Ok(MapSize::SelfVars(1_000_000)));
        assert_eq!(MapSize::parse("inflight=500_000"), Ok(MapSize::Inflight(500_000)));
        for bad in ["0", "paths=3", "@a=x", "@a-b=3", "99999999999"] {
            assert!(MapSize::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("3 parsecs").is_err());
        assert!(parse_duration("99999999999999999999s").unwrap_err().contains("too long"));
        assert_eq!(parse_duration("1.5ms"), Ok(Duration::from_micros(1500)));
        assert_eq!(parse_duration(".25s"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("0.1"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("1.000000000000000000000001h"), Ok(Duration::from_secs(3600)));
        for bad in [".", "", "s", "1.2.3s", "-1s", "1e400s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        // The largest duration the message names parses; one more second does not, and
        // the message says the same bound.
        let max = format!("{}s", u64::MAX);
        assert_eq!(parse_duration(&max), Ok(Duration::new(u64::MAX, 0)));
        let e = parse_duration(&format!("{}s", u128::from(u64::MAX) + 1)).unwrap_err();
        assert!(e.contains(&format!("at most {} seconds", u64::MAX)), "{e}");
        let e = parse_duration("307445734561825861m").unwrap_err(); // 60 × that is past u64::MAX seconds
        assert!(e.contains("too long"), "{e}");
        assert_eq!(parse_duration("307445734561825860m"), Ok(Duration::from_secs(307445734561825860 * 60)));
        assert!(parse_duration("99999999999999999999h").unwrap_err().contains("too long"));
        assert!(parse_duration(&"9".repeat(400)).is_err());
    }
}
