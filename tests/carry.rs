//! Parameters read in `on return` probes: gtrace reads them at the entry of the same call
//! and carries them to its return, keyed by the call's activation (goid, g.stack.hi −
//! SP). Against tests/go/carry's own truth: a recursive function (each level its own
//! values), and a function running on 32 goroutines at once that sleeps inside, so calls
//! return on other threads than they began on (the program counts how many did), whose
//! parameters are integers, a string, a pointer, a struct in registers and a struct on
//! the stack. On the local toolchain, the oldest supported release and the newest; and
//! by position on a stripped binary.

mod support;

use support::toolchain::{build, build_plain, toolchains, Kind, NotBuilt, PLAIN};
use support::{gtrace, map_value, privileged, truth};

const SCRIPT: &str = "
on return main.fib { @fib = sum(n); @calls = count(); @byn[n] = count() }
on return main.hop {
    @ids = sum(id); @px = sum(p.X); @pty = sum(pt.Y); @bigb = sum(bg.B)
    @labels[label] = count(); @len = sum(len(label)); @hops = count(); @lat = max(elapsed)
}";

#[test]
fn parameters_at_returns_are_their_values_at_entry() {
    if !privileged("parameters_at_returns_are_their_values_at_entry") {
        return;
    }
    for toolchain in toolchains() {
        let Some(bin) = build_plain("carry", &toolchain) else { continue };
        let run = gtrace(&["-e", SCRIPT, "-c", &format!("{} 200", bin.display())]);
        let out = &run.stdout;
        assert_eq!(run.code, 0, "{toolchain}:\n{out}\n{}", run.stderr);
        assert!(truth(out, "migrated") > 0, "{toolchain}: no call returned on another thread:\n{out}");
        assert_eq!(map_value(out, "@calls"), truth(out, "fib_calls"), "{toolchain}:\n{out}");
        assert_eq!(map_value(out, "@fib"), truth(out, "fib_sum"), "{toolchain}:\n{out}");
        for n in 0..12 {
            assert_eq!(map_value(out, &format!("@byn[{n}]")), truth(out, &format!("fib_n{n}")), "{toolchain} n={n}");
        }
        assert_eq!(map_value(out, "@hops"), truth(out, "hop_calls"), "{toolchain}:\n{out}");
        assert_eq!(map_value(out, "@ids"), truth(out, "hop_id_sum"), "{toolchain}:\n{out}");
        assert_eq!(map_value(out, "@px"), truth(out, "hop_px_sum"), "{toolchain}: through a pointer");
        assert_eq!(map_value(out, "@pty"), truth(out, "hop_pty_sum"), "{toolchain}: a struct in registers");
        assert_eq!(map_value(out, "@bigb"), truth(out, "hop_bigb_sum"), "{toolchain}: a struct on the stack");
        assert_eq!(map_value(out, "@len"), truth(out, "labels"), "{toolchain}:\n{out}");
        for l in ["l0", "l1", "l2"] {
            assert_eq!(map_value(out, &format!("@labels[{l}]")), truth(out, &format!("label_{l}")), "{toolchain}");
        }
    }
}

/// Without DWARF, parameters are machine words by position: `arg0` at a return too.
#[test]
fn positional_parameters_at_returns_of_a_stripped_binary() {
    if !privileged("positional_parameters_at_returns_of_a_stripped_binary") {
        return;
    }
    let bin = match build("carry", "local", Kind { stripped: true, ..PLAIN }) {
        Ok(b) => b,
        Err(NotBuilt::NoToolchain(e)) => panic!("the local toolchain builds: {e}"),
    };
    let run = gtrace(&[
        "-e",
        "on return main.fib { @fib = sum(arg0); @calls = count() }",
        "-c",
        &format!("{} 100", bin.display()),
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(map_value(&run.stdout, "@calls"), truth(&run.stdout, "fib_calls"));
    assert_eq!(map_value(&run.stdout, "@fib"), truth(&run.stdout, "fib_sum"));
}

/// One map update at each entry: a function whose returns read parameters gets an entry
/// program of its own that writes the time and those parameters, and no other.
#[test]
fn only_the_parameters_returns_read_are_carried() {
    let bin = support::go_build("carry", &[]);
    let script = "on return main.hop { @ids = sum(id) } on return main.hop { @bigb = sum(bg.B) } on return main.fib { @lat = max(elapsed) }";
    let run = gtrace(&["-e", script, "--emit", "asm", "-b", bin.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let programs: Vec<&str> = run.stdout.lines().filter(|l| l.starts_with("; program ")).collect();
    assert!(programs.iter().any(|p| p.contains("entry record of main.hop (time, id, bg)")), "{programs:?}");
    assert!(programs.iter().any(|p| p.contains("entry times for elapsed")), "{programs:?}");
    let hop_entry = run.stdout.split("; program ").find(|p| p.contains("entry record of main.hop")).unwrap();
    // The carried parameters' map is used once: by one update, with no lookup before it
    // (the frame itself is pushed on the goroutine's record, as for every timed call).
    assert_eq!(hop_entry.matches("map[carried]").count(), 1, "{hop_entry}");
    assert!(!hop_entry.contains("carry `label`"), "{hop_entry}");
}
