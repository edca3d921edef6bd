//! Named results with a deferred closure that recovers into `err` (tests/go/results), on
//! the local toolchain, the oldest supported release and the newest: `-l` lists each
//! result once, in the registers Go returns it in, and the results a return probe reads
//! are the ones the program prints. Go 1.26's DWARF lists such results twice.

mod support;

use support::toolchain::{build_plain, toolchains};

const SCRIPT: &str = r#"
on return main.risky { printf("gt risky q=%d err=%s\n", q, err) }
on return main.labelled { printf("gt labelled q=%d label=%s err=%s\n", q, label, err) }
on return main.blank { printf("gt blank q=%d b=%d err=%s\n", q, ret1, err) }
on return main.Pair.Get { printf("gt get q=%d\n", ret0) }
"#;

#[test]
fn each_result_is_listed_once_where_go_returns_it() {
    for toolchain in toolchains() {
        let Some(bin) = build_plain("results", &toolchain) else { continue };
        let b = bin.display().to_string();
        let list = support::gtrace(&["-l", "main.*", "-b", &b]);
        assert_eq!(list.code, 0, "{toolchain}: {}", list.stderr);
        for want in [
            "main.risky(n int [RAX]) (q int [RAX], err error [RBX RCX])",
            "main.labelled(n int [RAX], s string [RBX RCX]) (q int [RAX], label string [RBX RCX], err error [RDI RSI])",
        ] {
            assert!(list.stdout.lines().any(|l| l == want), "{toolchain}: no `{want}` in\n{}", list.stdout);
        }
        // The blank result: named ~r1 where DWARF names it, in RBX either way.
        let blank = list.stdout.lines().find(|l| l.starts_with("main.blank(")).expect("main.blank listed");
        assert!(blank.ends_with(" int [RBX], err error [RCX RDI])"), "{toolchain}: {blank}");
        // Inlined at one call and kept out of line for a method value: its results too.
        let get = list.stdout.lines().find(|l| l.starts_with("main.Pair.Get(")).expect("main.Pair.Get listed");
        assert!(get.ends_with("(~r0 int [RAX], ~r1 error [RBX RCX])"), "{toolchain}: {get}");
    }
}

#[test]
fn results_read_at_return_are_what_the_program_prints() {
    if !support::privileged("results_read_at_return_are_what_the_program_prints") {
        return;
    }
    for toolchain in toolchains() {
        let Some(bin) = build_plain("results", &toolchain) else { continue };
        let run = support::gtrace(&["-e", SCRIPT, "-c", &format!("{} 40", bin.display())]);
        assert_eq!(run.code, 0, "{toolchain}:\n{}\n{}", run.stdout, run.stderr);
        let mut traced: Vec<&str> = run.stdout.lines().filter_map(|l| l.strip_prefix("gt ")).collect();
        // Each line of the program, its `get` line without the direct call's value (the
        // probe sees the out-of-line call alone: the direct one is inlined).
        let lines = run.stdout.lines().filter(|l| !l.starts_with("gt ") && l.contains(" q="));
        let mut truth: Vec<&str> = lines.map(|l| l.split(" direct=").next().unwrap()).collect();
        assert_eq!(truth.len(), 160, "{toolchain}:\n{}", run.stdout);
        traced.sort_unstable();
        truth.sort_unstable();
        assert_eq!(traced, truth, "{toolchain}");
    }
}
