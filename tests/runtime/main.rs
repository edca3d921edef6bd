//! The runtime against the real kernel: objects built with the instruction builder and
//! the object writer are loaded, attached to a small Go program (started held with
//! `spawn_held`) or to gtrace's own triggers, and their maps and events read back.
//!
//! These need CAP_BPF and CAP_PERFMON. Without them a test prints `SKIP` and passes,
//! unless CI=true, where it fails.
//!
//! Here the Go target and the objects the tests load; attach.rs, triggers.rs and
//! loading.rs hold the tests.

mod attach;
mod loading;
#[path = "../support/mod.rs"]
mod support;
mod triggers;

use gtrace::bpf::builder::{Builder, Program};
use gtrace::bpf::helpers::*;
use gtrace::bpf::insn::*;
use gtrace::object::{write, BpfObject, MapDef, ProgramCode};
use gtrace::plan::{AttachPoint, MapKind, MapRole, MapSpec, Plan, ProbeAttach, ProbeSpec};
use gtrace::runtime::{self, failing_insn, Loaded, RuntimeError, Scope};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- the Go target

const GO_MAIN: &str = r#"package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

//go:noinline
func work(i int) int { return i*3 + 1 }

func main() {
	n := 5
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	// A gate: the loop starts once the file os.Args[2] exists (at most a minute).
	if len(os.Args) > 2 {
		for i := 0; ; i++ {
			if _, err := os.Stat(os.Args[2]); err == nil {
				break
			}
			if i == 60000 {
				os.Exit(3)
			}
			time.Sleep(time.Millisecond)
		}
	}
	s := 0
	for i := 0; i < n; i++ {
		s += work(i)
	}
	fmt.Printf("calls %d sum %d\n", n, s)
}
"#;

/// Builds the Go target once per test run; returns its path.
fn go_target() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("runtime-go");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("main.go"), GO_MAIN).unwrap();
        std::fs::write(dir.join("go.mod"), "module example.com/runtimetarget\n\ngo 1.22\n").unwrap();
        support::go_build_at(&dir, "runtime-go", &[])
    })
}

/// File offset of the entry of `symbol` in `binary`, from its ELF symbol table.
fn entry_offset(binary: &Path, symbol: &str) -> u64 {
    use object::{Object, ObjectSection, ObjectSymbol};
    let data = std::fs::read(binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let sym = file.symbols().find(|s| s.name() == Ok(symbol)).unwrap_or_else(|| panic!("no {symbol}"));
    let section = file.section_by_index(sym.section_index().unwrap()).unwrap();
    let (file_start, _) = section.file_range().unwrap();
    sym.address() - section.address() + file_start
}

/// Runs the target with `calls` as its argument, held until `loaded` is attached to it;
/// returns the number of calls it printed.
fn run_target(loaded: Option<&mut Loaded>, calls: u32) -> u64 {
    let argv = [go_target().display().to_string(), calls.to_string()];
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("runtime-out-{}", std::process::id()));
    // The child's stdout goes to a file: run through sh so the runtime's argv stays plain.
    let sh = vec![
        "sh".to_string(),
        "-c".to_string(),
        format!("exec \"$0\" \"$1\" > {}", out.display()),
        argv[0].clone(),
        argv[1].clone(),
    ];
    let mut child = runtime::spawn_held(&sh).unwrap();
    if let Some(loaded) = loaded {
        let n = loaded.attach(go_target(), Scope::Process(child.pid()), None).unwrap();
        assert_eq!(n, 1);
    }
    child.release().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let text = std::fs::read_to_string(&out).unwrap();
    let printed = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    std::fs::remove_file(&out).unwrap();
    printed
}

// ---------------------------------------------------------------- objects and plans

const COUNTS: &str = "counts";
const EVENTS: &str = "events";

fn map_spec(name: &str, kind: MapKind, key_size: u32, value_size: u32, max_entries: u32, role: MapRole) -> MapSpec {
    MapSpec { object_name: name.into(), kind, key_size, value_size, max_entries, role }
}

fn counts_map() -> MapSpec {
    map_spec(COUNTS, MapKind::PercpuHash, 8, 8, 64, MapRole::Scratch)
}

fn events_map() -> MapSpec {
    map_spec(EVENTS, MapKind::Ringbuf, 0, 0, 4096 * 4, MapRole::Events)
}

/// `counts[attach cookie] += 1` in a per-CPU hash.
fn count_by_cookie() -> Program {
    let mut b = Builder::new();
    let insert = b.new_label();
    let done = b.new_label();
    b.emit(call(BPF_FUNC_get_attach_cookie));
    b.emit(store_reg(Size::DW, R10, -8, R0));
    b.ld_map(R1, COUNTS);
    b.emit(mov64_reg(R2, R10));
    b.emit(alu64_imm(AluOp::Add, R2, -8));
    b.emit(call(BPF_FUNC_map_lookup_elem));
    b.jmp_imm_to(JmpOp::Eq, R0, 0, insert);
    b.emit(load(Size::DW, R1, R0, 0));
    b.emit(alu64_imm(AluOp::Add, R1, 1));
    b.emit(store_reg(Size::DW, R0, 0, R1));
    b.ja_to(done);
    b.bind(insert);
    b.emit(store_imm(Size::DW, R10, -16, 1));
    b.ld_map(R1, COUNTS);
    b.emit(mov64_reg(R2, R10));
    b.emit(alu64_imm(AluOp::Add, R2, -8));
    b.emit(mov64_reg(R3, R10));
    b.emit(alu64_imm(AluOp::Add, R3, -16));
    b.emit(mov64_imm(R4, BPF_ANY));
    b.emit(call(BPF_FUNC_map_update_elem));
    b.bind(done);
    b.emit(mov64_imm(R0, 0));
    b.emit(exit());
    b.finish().unwrap()
}

/// Sends a 16-byte record `[7u64, 0x1122334455667788u64]` through the ring buffer.
fn send_event() -> Program {
    let mut b = Builder::new();
    b.emit(store_imm(Size::DW, R10, -16, 7));
    b.emit2(ld_imm64(R1, 0x1122_3344_5566_7788));
    b.emit(store_reg(Size::DW, R10, -8, R1));
    b.ld_map(R1, EVENTS);
    b.emit(mov64_reg(R2, R10));
    b.emit(alu64_imm(AluOp::Add, R2, -16));
    b.emit(mov64_imm(R3, 16));
    b.emit(mov64_imm(R4, 0));
    b.emit(call(BPF_FUNC_ringbuf_output));
    b.emit(mov64_imm(R0, 0));
    b.emit(exit());
    b.finish().unwrap()
}

/// Reads far below the 512-byte stack: the verifier must reject it.
fn out_of_bounds_stack() -> Program {
    let mut b = Builder::new();
    b.emit(mov64_imm(R0, 0));
    b.emit(mov64_imm(R1, 0));
    b.emit(load(Size::DW, R2, R10, -520));
    b.emit(exit());
    b.finish().unwrap()
}

fn probe(program: &str, attach: ProbeAttach) -> ProbeSpec {
    ProbeSpec {
        program: program.into(),
        section: format!("uprobe/{program}"),
        attach,
        describe: format!("test {program}"),
        source_lines: Vec::new(),
        maps: Vec::new(),
    }
}

/// Writes the object for `programs` and `maps` and the matching plan.
fn object_and_plan(programs: Vec<(ProbeSpec, Program)>, maps: Vec<MapSpec>) -> (Vec<u8>, Plan) {
    let obj = BpfObject {
        license: "GPL".into(),
        maps: maps.iter().map(MapDef::from).collect(),
        programs: programs
            .iter()
            .map(|(spec, program)| ProgramCode {
                name: spec.program.clone(),
                section: spec.section.clone(),
                program: program.clone(),
            })
            .collect(),
    };
    let bytes = write(&obj).unwrap();
    let plan = Plan {
        version: gtrace::plan::PLAN_VERSION,
        binary: gtrace::plan::Binary {
            path: go_target().to_path_buf(),
            build_ids: Default::default(),
            arch: gtrace::arch::Arch::X86_64,
            module: None,
            link_base: None,
        },
        maps,
        probes: programs.into_iter().map(|(spec, _)| spec).collect(),
        events: Vec::new(),
        functions: vec!["main.work".into()],
        ..Plan::default()
    };
    (bytes, plan)
}

/// The uprobe on `main.work` with cookie `cookie`.
fn work_probe(cookie: u64) -> ProbeSpec {
    let offset = entry_offset(go_target(), "main.work");
    probe(
        "count",
        ProbeAttach::Uprobe(vec![AttachPoint {
            function: "main.work".into(),
            address: 0,
            file_offset: offset,
            cookie,
        }]),
    )
}

/// Says loudly that a test did not run; straight to stderr, past the test harness's capture.
fn skip(e: &RuntimeError) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\n==== SKIP: not privileged to load BPF programs ({e}); {} ====",
        e.hint().unwrap_or("")
    );
}

/// Loads, or returns `None` after a loud SKIP when privileges are missing outside CI.
fn load_or_skip(bytes: &[u8], plan: &Plan) -> Option<Loaded> {
    match runtime::load(bytes, plan) {
        Ok(loaded) => Some(loaded),
        Err(e @ RuntimeError::Permission { .. }) if std::env::var("CI").as_deref() != Ok("true") => {
            skip(&e);
            None
        }
        Err(e) => panic!("load failed: {e} {e:?}"),
    }
}

/// Uprobes on gtrace's own triggers fire for any thread of this process; tests that run
/// them or count in the Go target must not overlap.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The sum over CPUs of the u64 count under `key`.
fn count_of(loaded: &Loaded, key: u64) -> u64 {
    let entries = loaded.map_entries(COUNTS).unwrap();
    entries
        .iter()
        .filter(|(k, _)| k.as_slice() == key.to_ne_bytes())
        .flat_map(|(_, per_cpu)| per_cpu.iter())
        .map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap()))
        .sum()
}

/// What /proc/self/fdinfo says of each fd this process holds: its fields by name
/// (`prog_type`, `link_type`, `key_size`, ...), each value as written there.
fn fdinfos() -> Vec<std::collections::HashMap<String, String>> {
    let fdinfo = std::fs::read_dir("/proc/self/fdinfo").unwrap().flatten();
    let texts = fdinfo.filter_map(|e| std::fs::read_to_string(e.path()).ok());
    let field = |(name, value): (&str, &str)| (name.to_string(), value.trim().to_string());
    texts.map(|t| t.lines().filter_map(|l| l.split_once(':')).map(field).collect()).collect()
}
