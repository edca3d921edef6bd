//! Parameters read in `on return` probes, what needs code: the entry programs `--emit
//! asm` shows carry only the parameters the returns read. That the values carried are
//! the program's own (on every toolchain, and by position stripped) is
//! tests/cases/carry.cases.

mod support;

use support::gtrace;

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
