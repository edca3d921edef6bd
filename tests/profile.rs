//! Pictures of stack maps, end to end: tests/go/profile (a program that calls main.leaf
//! through known call paths and records each call's stack with the Go runtime's own
//! unwinder) traced by the real gtrace binary with `--pprof`, `-f folded` and
//! `--flamegraph`. The profile is read back by `go tool pprof -raw`, the SVG parsed as
//! XML, and each is compared with the stacks, counts, file:line and times the program
//! reports itself. Needs root (CAP_BPF + CAP_PERFMON): without it these tests say SKIP,
//! except on CI (CI=true), where they fail.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{gtrace, privileged, truth, Run};

/// A frame: function, file, line.
type Frame = (String, String, u32);

/// One stack as the program saw it, root first from main.main on.
#[derive(Debug)]
struct Stack {
    frames: Vec<Frame>,
    calls: i64,
    even: i64,
    ns: i64,
}

/// The program's `stack` lines (on its standard error, passed through by gtrace).
fn program_stacks(stderr: &str) -> Vec<Stack> {
    let word = |line: &str, key: &str| -> i64 {
        let w = line.split_whitespace().find_map(|w| w.strip_prefix(&format!("{key}="))).expect(key);
        w.parse().expect(key)
    };
    let stacks: Vec<Stack> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("stack "))
        .map(|l| {
            let path = l.split_whitespace().next().unwrap();
            let frames = path
                .split(';')
                .map(|f| {
                    let (function, place) = f.split_once('@').unwrap();
                    let (file, line) = place.rsplit_once(':').unwrap();
                    (function.to_string(), file.to_string(), line.parse().unwrap())
                })
                .collect();
            Stack { frames, calls: word(l, "calls"), even: word(l, "even"), ns: word(l, "ns") }
        })
        .collect();
    assert_eq!(stacks.len(), 3, "the program reports one stack per call path:\n{stderr}");
    stacks
}

/// Calls through viaA, viaB, inlined; microseconds each call sleeps.
const ARGS: &str = "3 5 8 200";

/// The program built with `go build FLAGS`.
fn binary(flags: &[&str]) -> PathBuf {
    support::go_build("profile", flags)
}

/// Traces the program with `script` and `extra` options; checks that it ran.
fn trace(program: &Path, script: &str, extra: &[&str]) -> Run {
    support::trace_attached(&[&["-e", script][..], extra].concat(), program, ARGS)
}

/// A file under target/ for one test's output.
fn out_file(name: &str) -> PathBuf {
    let dir = support::root().join("target/profile-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// What `go tool pprof -raw` prints of a profile.
#[derive(Debug, Default)]
struct Raw {
    types: Vec<String>,
    /// Values, location ids (leaf first), labels (`key:[value]`).
    samples: Vec<(Vec<i64>, Vec<u64>, Vec<String>)>,
    /// Each location's lines, the innermost first.
    locations: HashMap<u64, Vec<Frame>>,
    mappings: Vec<String>,
}

/// `function file:line:column s=N`, the end of a location's line in -raw.
fn raw_frame(text: &str) -> Frame {
    let mut words = text.split_whitespace();
    let function = words.next().unwrap().to_string();
    let place = words.next().unwrap();
    let mut parts = place.rsplitn(3, ':');
    let (_column, line, file) = (parts.next(), parts.next().unwrap(), parts.next().unwrap());
    (function, file.to_string(), line.parse().unwrap())
}

fn pprof_raw(profile: &Path) -> Raw {
    pprof_raw_with(profile, &[])
}

fn pprof_raw_with(profile: &Path, options: &[&str]) -> Raw {
    let out = (Command::new("go").args(["tool", "pprof", "-raw"]).args(options).arg(profile).output())
        .expect("run go tool pprof");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "go tool pprof -raw failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut raw = Raw::default();
    let mut section = "";
    let mut last_location = 0;
    for line in text.lines() {
        match line.trim_end() {
            "Samples:" | "Locations" | "Mappings" => {
                section = line.trim_end();
                continue;
            }
            _ => {}
        }
        let t = line.trim();
        match section {
            "Samples:" if raw.types.is_empty() => {
                raw.types = t.split_whitespace().map(|w| w.trim_end_matches("[dflt]").to_string()).collect();
            }
            "Samples:" if t.contains(":[") => raw.samples.last_mut().unwrap().2.push(t.to_string()),
            "Samples:" => {
                let (values, ids) = t.split_once(':').unwrap();
                raw.samples.push((
                    values.split_whitespace().map(|v| v.parse().unwrap()).collect(),
                    ids.split_whitespace().map(|v| v.parse().unwrap()).collect(),
                    Vec::new(),
                ));
            }
            "Locations" if t.contains(" M=") => {
                let (id, rest) = t.split_once(": ").unwrap();
                last_location = id.parse().unwrap();
                let after_mapping = rest.split_once(" M=").unwrap().1.split_once(' ').unwrap().1;
                raw.locations.insert(last_location, vec![raw_frame(after_mapping)]);
            }
            "Locations" if !t.is_empty() => raw.locations.get_mut(&last_location).unwrap().push(raw_frame(t)),
            "Mappings" if !t.is_empty() => raw.mappings.push(t.to_string()),
            _ => {}
        }
    }
    raw
}

impl Raw {
    /// A sample's frames, root first, from main.main on.
    fn stack(&self, ids: &[u64]) -> Vec<Frame> {
        let mut frames: Vec<Frame> = ids
            .iter()
            .flat_map(|id| self.locations[id].iter().cloned())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let main = frames.iter().position(|f| f.0 == "main.main").expect("main.main in every stack");
        frames.drain(..main);
        frames
    }

    /// The sample whose stack is the program's `stack`: the same functions, files and
    /// lines (the leaf's line excepted: gtrace's probe is at the function's entry, the
    /// program's unwinder at its call of runtime.Callers).
    fn samples_of(&self, stack: &Stack) -> Vec<&(Vec<i64>, Vec<u64>, Vec<String>)> {
        let mut want = stack.frames.clone();
        want.last_mut().unwrap().2 = 0;
        (self.samples.iter())
            .filter(|s| {
                let mut got = self.stack(&s.1);
                if let Some(leaf) = got.last_mut() {
                    leaf.2 = 0;
                }
                got == want
            })
            .collect()
    }
}

/// The GNU build id of a binary, as readelf shows it.
fn gnu_build_id(binary: &Path) -> Option<String> {
    let out = Command::new("readelf").arg("-n").arg(binary).output().expect("run readelf");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")).map(str::to_string)
}

/// A call-count profile of `program` matches the program's own stacks: one sample per
/// call path with its count, every caller frame at the program's file and line, inlined
/// frames expanded, and a mapping with the binary's build id.
fn profile_matches_the_program(test: &str, flags: &[&str]) {
    if !privileged(test) {
        return;
    }
    let program = binary(flags);
    let file = out_file(&format!("{test}.pb.gz"));
    let r = trace(&program, "on entry main.leaf { @[ustack] = count() }", &["--pprof", file.to_str().unwrap()]);
    assert!(
        r.stderr.contains(&format!("--pprof: wrote {} (@: 3 samples; calls/count)", file.display())),
        "{}",
        r.stderr
    );
    let stacks = program_stacks(&r.stderr);
    let raw = pprof_raw(&file);
    assert_eq!(raw.types, ["calls/count"]);
    let total: i64 = raw.samples.iter().map(|s| s.0[0]).sum();
    let calls = r.stderr.lines().find(|l| l.starts_with("calls=")).expect("the program's total");
    assert_eq!(total, truth(calls, "calls"), "the samples add up to the program's calls");
    for stack in &stacks {
        let found = raw.samples_of(stack);
        assert_eq!(found.len(), 1, "one sample for {stack:?} in {raw:#?}");
        assert_eq!(found[0].0, [stack.calls], "{stack:?}");
    }
    // The inlined call's frame shares its location with main.main's line.
    let inlined = raw.locations.values().find(|l| l[0].0 == "main.inlined").expect("a location for main.inlined");
    assert_eq!(inlined.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), ["main.inlined", "main.main"]);
    let id = gnu_build_id(&program).expect("Go writes a GNU build id note");
    let mapping = &raw.mappings[0];
    assert!(mapping.contains(&id) && mapping.contains(&program.display().to_string()), "{mapping}");
    assert!(mapping.ends_with("[FN][FL][LN][IN]"), "symbolized: {mapping}");
    // The mapping lets pprof symbolize the addresses again from the binary itself: the
    // same function holds each one.
    let again = pprof_raw_with(&file, &["-symbolize=force"]);
    for (id, lines) in &raw.locations {
        let outer = |l: &[Frame]| l.last().unwrap().0.clone();
        assert_eq!(outer(&again.locations[id]), outer(lines), "location {id}");
    }
}

#[test]
fn pprof_counts_each_call_path_at_its_lines() {
    profile_matches_the_program("pprof_counts_each_call_path_at_its_lines", &[]);
}

/// A PIE's addresses are the process's: its mapping starts at its load address.
#[test]
fn pprof_of_a_pie_maps_its_load_address() {
    profile_matches_the_program("pprof_of_a_pie_maps_its_load_address", &["-buildmode=pie"]);
}

#[test]
fn pprof_of_a_stripped_binary_is_symbolized_from_pclntab() {
    profile_matches_the_program("pprof_of_a_stripped_binary_is_symbolized_from_pclntab", &["-ldflags=-s -w"]);
}

#[test]
fn pprof_sum_of_elapsed_is_wall_time() {
    let test = "pprof_sum_of_elapsed_is_wall_time";
    if !privileged(test) {
        return;
    }
    let file = out_file(&format!("{test}.pb.gz"));
    let script = "on return main.leaf { @[ustack] = sum(elapsed) }";
    let r = trace(&binary(&[]), script, &["--pprof", file.to_str().unwrap()]);
    let raw = pprof_raw(&file);
    assert_eq!(raw.types, ["wall/nanoseconds"]);
    for stack in program_stacks(&r.stderr) {
        let found = raw.samples_of(&stack);
        let [(values, _, _)] = found.as_slice() else { panic!("one sample for {stack:?}: {raw:#?}") };
        // From entry to return: the body the program timed, and little more.
        let wall = values[0];
        assert!(wall >= stack.ns && wall <= stack.ns + stack.calls * 5_000_000, "{wall} ns for {stack:?}");
    }
}

#[test]
fn pprof_labels_and_several_maps() {
    let test = "pprof_labels_and_several_maps";
    if !privileged(test) {
        return;
    }
    let file = out_file(&format!("{test}.pb.gz"));
    // Two profiles: each file has its first map's name inserted.
    let calls = out_file(&format!("{test}.calls.pb.gz"));
    let slow = out_file(&format!("{test}.slow.pb.gz"));
    let script =
        "on return main.leaf { @calls[parity: n % 2, ustack] = count(); @time[parity: n % 2, ustack] = sum(elapsed); \
                  @slow[ustack] = hist(elapsed); @peak[ustack] = max(elapsed) }";
    let r = trace(&binary(&[]), script, &["--pprof", file.to_str().unwrap()]);
    assert!(r.stderr.contains("@peak: left out of the pictures: a minimum or maximum"), "{}", r.stderr);
    let stacks = program_stacks(&r.stderr);
    assert!(!file.exists(), "FILE itself is not written (no map is @), nor left empty");
    // @calls and @time share their keys: one profile, two sample types, a label.
    let raw = pprof_raw(&calls);
    assert_eq!(raw.types, ["calls/count", "wall/nanoseconds"]);
    for stack in &stacks {
        let found = raw.samples_of(stack);
        let by_parity: BTreeMap<&str, i64> = found.iter().map(|s| (s.2[0].as_str(), s.0[0])).collect();
        let odd = stack.calls - stack.even;
        let want: BTreeMap<&str, i64> =
            [("parity:[0 count]", stack.even), ("parity:[1 count]", odd)].into_iter().filter(|(_, n)| *n > 0).collect();
        assert_eq!(by_parity, want, "{stack:?}");
        let wall: i64 = found.iter().map(|s| s.0[1]).sum();
        assert!(wall >= stack.ns, "{wall} for {stack:?}");
    }
    // @slow has other keys: its own file, with calls and their total time.
    let raw = pprof_raw(&slow);
    assert_eq!(raw.types, ["calls/count", "wall/nanoseconds"]);
    for stack in &stacks {
        assert_eq!(raw.samples_of(stack)[0].0[0], stack.calls, "{stack:?}");
    }
}

#[test]
fn folded_stacks_count_each_call_path() {
    let test = "folded_stacks_count_each_call_path";
    if !privileged(test) {
        return;
    }
    let r = trace(&binary(&[]), "on entry main.leaf { @[ustack] = count() }", &["-f", "folded"]);
    let stacks = program_stacks(&r.stderr);
    let mut lines: BTreeMap<String, i64> = BTreeMap::new();
    for line in r.stdout.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not a folded line: {line:?}"));
        let from_main = &stack[stack.find("main.main").unwrap_or_else(|| panic!("no main.main in {line}"))..];
        assert!(lines.insert(from_main.to_string(), count.parse().unwrap()).is_none(), "one line per stack");
    }
    let want: BTreeMap<String, i64> =
        stacks.iter().map(|s| (s.frames.iter().map(|f| f.0.as_str()).collect::<Vec<_>>().join(";"), s.calls)).collect();
    assert_eq!(lines, want, "stdout:\n{}", r.stdout);
}

/// Every element's text under `tag` in an XML document (which must parse).
fn xml_texts(xml: &str, tag: &[u8]) -> Vec<String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut inside, mut texts) = (false, Vec::new());
    loop {
        match reader.read_event().unwrap_or_else(|e| panic!("the SVG is not XML: {e}")) {
            Event::Start(e) if e.name().as_ref() == tag => {
                inside = true;
                texts.push(String::new());
            }
            Event::End(e) if e.name().as_ref() == tag => inside = false,
            Event::Text(t) if inside => texts.last_mut().unwrap().push_str(&t.xml10_content().unwrap()),
            Event::GeneralRef(r) if inside => {
                let c = match r.resolve_char_ref().unwrap() {
                    Some(c) => c,
                    None => match r.as_ref() {
                        b"lt" => '<',
                        b"gt" => '>',
                        b"amp" => '&',
                        b"quot" => '"',
                        b"apos" => '\'',
                        other => panic!("unexpected entity {}", String::from_utf8_lossy(other)),
                    },
                };
                texts.last_mut().unwrap().push(c);
            }
            Event::Eof => return texts,
            _ => {}
        }
    }
}

#[test]
fn flamegraph_has_a_frame_for_each_function() {
    let test = "flamegraph_has_a_frame_for_each_function";
    if !privileged(test) {
        return;
    }
    let file = out_file(&format!("{test}.svg"));
    let program = binary(&[]);
    let r = trace(&program, "on entry main.leaf { @[ustack] = count() }", &["--flamegraph", file.to_str().unwrap()]);
    assert!(r.stderr.contains(&format!("--flamegraph: wrote {} (@: 3 stacks)", file.display())), "{}", r.stderr);
    let stacks = program_stacks(&r.stderr);
    let svg = std::fs::read_to_string(&file).unwrap();
    let titles = xml_texts(&svg, b"title");
    for (function, _, _) in stacks.iter().flat_map(|s| &s.frames) {
        let want = format!("{function} (");
        assert!(titles.iter().any(|t| t.starts_with(&want)), "no frame `{want}` in {titles:#?}");
    }
    // Each path's leaf is a frame of its own, as wide as the path's calls.
    for stack in &stacks {
        let want = format!("main.leaf ({} calls, ", stack.calls);
        assert!(titles.iter().any(|t| t.starts_with(&want)), "no frame `{want}` in {titles:#?}");
    }
    let texts = xml_texts(&svg, b"text");
    let heading = format!("gtrace -e 'on entry main.leaf {{ @[ustack] = count() }}' on {}", program.display());
    assert!(texts.iter().any(|t| *t == heading), "no title {heading:?} in {texts:#?}");
    renders_in_a_browser(&file);
}

/// The SVG renders in a real browser (Debian's chromium, headless): its screenshot holds
/// far more than that of an empty SVG of the same size. (A person looked at one: the
/// frames, their names and the title, as flamegraph.pl draws them.)
fn renders_in_a_browser(svg: &Path) {
    if std::process::Command::new("chromium").arg("--version").output().is_err() {
        assert!(!support::on_ci(), "chromium is not installed (.ci/run installs it)");
        support::skip("renders_in_a_browser", "no chromium");
        return;
    }
    let shot = |input: &Path| -> u64 {
        let png = input.with_extension("png");
        let _ = std::fs::remove_file(&png);
        let status = std::process::Command::new("chromium")
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,600"])
            .arg(format!("--screenshot={}", png.display()))
            .arg(format!("file://{}", input.display()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("chromium runs");
        assert!(status.success(), "chromium failed on {}", input.display());
        std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0)
    };
    let empty = svg.with_file_name("empty-flamegraph.svg");
    std::fs::write(&empty, r#"<svg xmlns="http://www.w3.org/2000/svg" width="1200" height="600"></svg>"#).unwrap();
    let (drawn, blank) = (shot(svg), shot(&empty));
    assert!(blank > 0 && drawn > 3 * blank, "the flame graph's screenshot is {drawn} bytes, an empty SVG's {blank}");
}

#[test]
fn pictures_need_a_stack_map() {
    let program = binary(&[]);
    let cmd = format!("{} {ARGS}", program.display());
    let r = gtrace(&["-e", "on entry main.leaf { @calls = count() }", "--pprof", "/nonexistent/p.pb.gz", "-c", &cmd]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("--pprof draws the maps keyed by ustack, and the script has none"), "{}", r.stderr);
    assert!(!r.stderr.contains("Attached"), "{}", r.stderr);
}

/// gtrace's reading of `.gopclntab` (what profiles are symbolized from, stripped or not)
/// gives, at every instruction of the program's functions, the file and line `go tool
/// objdump` gives, and inlined frames expanded, with the oldest and newest toolchains
/// and for arm64.
#[test]
fn source_lines_match_go_tool_objdump() {
    let arm64 = support::toolchain::build_arm64("profile", "local", support::toolchain::PLAIN);
    let builds = support::toolchain::toolchains()
        .into_iter()
        .map(|t| (support::toolchain::build_plain("profile", &t), t))
        .chain([(arm64, "local arm64".to_string())]);
    for (program, toolchain) in builds {
        let Some(program) = program else { continue };
        let target = gtrace::gobin::Target::open(&program).expect("open the program");
        let mut inlined = false;
        for function in ["main.leaf", "main.viaA", "main.viaB", "main.main", "runtime.main"] {
            for insn in support::objdump(&program, function) {
                let frames = target.source_frames(insn.addr);
                let outer = frames.last().unwrap_or_else(|| panic!("{toolchain}: no frame at {:#x}", insn.addr));
                assert_eq!(outer.function, function, "{toolchain}: {insn:?}");
                let inner = &frames[0];
                let base = inner.file.rsplit('/').next().unwrap();
                assert_eq!(format!("{base}:{}", inner.line), insn.position, "{toolchain}: {insn:?} {frames:?}");
                inlined |= function == "main.main" && inner.function == "main.inlined";
            }
        }
        assert!(inlined, "{toolchain}: main.inlined is an inlined frame somewhere in main.main");
    }
}

#[test]
fn a_picture_that_cannot_be_written_fails_before_tracing() {
    let program = binary(&[]);
    let cmd = format!("{} {ARGS}", program.display());
    let script = "on entry main.leaf { @[ustack] = count() }";
    let r = gtrace(&["-e", script, "--flamegraph", "/nonexistent/f.svg", "-c", &cmd]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("cannot write --flamegraph /nonexistent/f.svg: No such file or directory"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("Attached"), "{}", r.stderr);
}

/// A map that a probe the budget detached wrote is marked partial in the profile's
/// comments and the flame graph's subtitle, as it is in text.
#[test]
fn pictures_of_a_map_the_budget_cut_say_partial() {
    let test = "pictures_of_a_map_the_budget_cut_say_partial";
    if !privileged(test) {
        return;
    }
    let prod = support::go_build("prod", &[]);
    let (file, svg) = (out_file(&format!("{test}.pb.gz")), out_file(&format!("{test}.svg")));
    let cmd = format!("{} hotcold 3000000 20000", prod.display());
    let script = "on entry main.hot { @[ustack] = count() }";
    let (f, s) = (file.to_str().unwrap(), svg.to_str().unwrap());
    // Cut whole, not duty-cycled (a cut that leaves nothing is cycled unless the probe
    // costs over 8x the budget): a fortieth of what it costs this host by the estimate
    // of a shorter run, not a fixed 1% (`support::cost::a_fortieth`). A trace that was
    // duty-cycled all the same (its pace not the measure's) says nothing of the cut:
    // measured and traced again, up to three times.
    let short = format!("{} hotcold 300000 20000", prod.display());
    let mut cycled = Vec::new();
    loop {
        let measured = support::cost::stats_of(&["-e", script, "-c", &short]);
        let budget = support::cost::a_fortieth(support::cost::percent_of_cpu(&measured));
        let r = gtrace(&["-e", script, "--budget", &budget, "--pprof", f, "--flamegraph", s, "-c", &cmd]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        if !r.stderr.contains("duty-cycled instead") {
            let cut =
                r.stderr.lines().any(|l| l.starts_with("detached by --budget ") && l.contains("%: on entry main.hot"));
            assert!(cut, "the budget cut (--budget {budget}): {}", r.stderr);
            break;
        }
        cycled.push(format!("--budget {budget}:\n{}", r.stderr));
        assert!(cycled.len() < 3, "duty-cycled, not cut, in three traces:\n{}", cycled.join("\n"));
    }
    let out = Command::new("go").args(["tool", "pprof", "-comments"]).arg(&file).output().expect("run go tool pprof");
    let comments = String::from_utf8_lossy(&out.stdout);
    assert!(comments.contains("@ partial: on entry main.hot detached by --budget after"), "{comments}");
    let texts = xml_texts(&std::fs::read_to_string(&svg).unwrap(), b"text");
    assert!(texts.iter().any(|t| t.contains("partial: on entry main.hot detached by --budget")), "{texts:#?}");
}
