//! Symbol patterns that once took minutes: many wildcards (exponential backtracking) and
//! a huge unknown name (the "did you mean" search over every function). Run through the
//! real gtrace `--check` on a real Go binary; each must answer, not hang. No timing is
//! asserted: the old algorithms would not finish within the test harness's patience.

mod support;

#[test]
fn many_wildcards_are_matched_against_every_function() {
    let bin = support::go_build("e2e", &[]);
    // 12 stars over thousands of runtime names: about 10^20 steps by plain backtracking.
    let r = support::check_against(&["-e", r#"on entry "*a*a*a*a*a*a*a*a*a*a*a*a*b" { @n = count() }"#], &bin);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("no function matches"), "{}", r.stderr);
}

/// The names of the target's functions that `pattern` finds.
fn found(target: &gtrace::gobin::Target, pattern: &str) -> Vec<String> {
    target.find(pattern).iter().map(|f| f.name.to_string()).collect()
}

#[test]
fn stars_find_what_a_plain_filter_finds() {
    let bin = support::go_build("e2e", &[]);
    let target = gtrace::gobin::Target::open(&bin).unwrap();
    let all: Vec<String> = target.functions().iter().map(|f| f.name.to_string()).collect();
    let filter = |keep: &dyn Fn(&str) -> bool| all.iter().filter(|n| keep(n)).cloned().collect::<Vec<_>>();
    let main_with_a = filter(&|n| n.starts_with("main.") && n["main.".len()..].contains('a'));
    assert!(main_with_a.len() > 1, "{main_with_a:?}");
    assert_eq!(found(&target, "main.*a*"), main_with_a);
    let runtime_ending_in_e = filter(&|n| n.starts_with("runtime.") && n.ends_with('e'));
    assert!(runtime_ending_in_e.len() > 10);
    assert_eq!(found(&target, "runtime.*e"), runtime_ending_in_e);
    let five_as = filter(&|n| n.matches('a').count() >= 5);
    assert!(!five_as.is_empty());
    assert_eq!(found(&target, "*a*a*a*a*a*"), five_as);
}

#[test]
fn a_huge_unknown_name_gets_its_error() {
    let bin = support::go_build("e2e", &[]);
    let name = format!("main.{}", "q".repeat(20_000));
    let r = support::check_against(&["-e", &format!("on entry \"{name}\" {{ @n = count() }}")], &bin);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("no function matches"), "{}", &r.stderr[..r.stderr.len().min(400)]);
}
