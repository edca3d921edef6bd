//! Named results with a deferred closure that recovers into `err` (tests/go/results), on
//! the local toolchain, the oldest supported release and the newest: `-l` lists each
//! result once, in the registers Go returns it in (that the results a return probe reads
//! are the ones the program prints is tests/cases/results.cases). Go 1.26's DWARF lists
//! such results twice.

mod support;

use support::toolchain::{build_plain, toolchains};

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
