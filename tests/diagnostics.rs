//! Rendered diagnostics of the checker, as a user sees them (`gtrace --check`), snapshot
//! with insta: each points at the place, says why, and hints at the fix. No privileges
//! needed. The test program's path is replaced by BIN so snapshots do not depend on it.

mod support;

fn rendered(script: &str) -> String {
    rendered_in("values", script)
}

/// The diagnostics of `script` checked against the program tests/go/`program`.
fn rendered_in(program: &str, script: &str) -> String {
    let bin = support::go_build(program, &[]);
    let r = support::check_against(&["-e", script], &bin);
    assert_ne!(r.code, 0, "expected an error for {script}");
    r.stderr.replace(bin.to_str().unwrap(), "BIN")
}

macro_rules! diagnostic {
    ($name:ident, $script:expr) => {
        #[test]
        fn $name() {
            insta::assert_snapshot!(rendered($script));
        }
    };
    ($name:ident in $program:literal, $script:expr) => {
        #[test]
        fn $name() {
            insta::assert_snapshot!(rendered_in($program, $script));
        }
    };
}

diagnostic!(unknown_function, "on entry main.handel { @n = count() }");
diagnostic!(unknown_parameter, "on entry main.greet { @n = sum(nn) }");
diagnostic!(unknown_field, "on entry main.handle { @x[r.URL.Pth] = count() }");
diagnostic!(float_parameter, "on entry main.fl { @s = sum(x) }");
diagnostic!(string_as_a_number, "on entry main.handle { @x = sum(r.Method) }");
diagnostic!(ambiguous_promoted_field, "on entry main.both { @n[b.Name] = count() }");
diagnostic!(string_of_a_slice_of_ints, "on entry main.total { @n[string(xs)] = count() }");
diagnostic!(struct_as_a_key, "on entry main.split { @x[p] = count() }");
diagnostic!(elapsed_at_an_entry, "on entry main.greet { @t = hist(elapsed) }");
diagnostic!(condition_not_a_bool, "on entry main.greet { if n { @n = count() } }");
diagnostic!(map_used_two_ways, "on entry main.greet { @m = count() } on entry main.handle { @m = sum(r.Size) }");
diagnostic!(printf_arity, r#"on entry main.greet { printf("%s %d\n", name) }"#);
diagnostic!(printf_verb, r#"on entry main.greet { printf("%d\n", name) }"#);
diagnostic!(a_long_unknown_function_is_echoed_once, &format!("on entry main.{} {{ }}", "A".repeat(300)));
diagnostic!(a_long_name_without_a_package_is_echoed_once, &format!("on entry {} {{ }}", "A".repeat(300)));
diagnostic!(a_long_unknown_library_is_echoed_once, &format!("use \"{}\"", "A".repeat(300)));
diagnostic!(a_long_unknown_call_is_echoed_once, &format!("on entry main.greet {{ print({}(name)) }}", "A".repeat(300)));
diagnostic!(printf_width_past_the_bound, r#"on entry main.greet { printf("name=%999999999s\n", name) }"#);
diagnostic!(printf_width_past_u64, r#"on entry main.greet { printf("%18446744073709551615d\n", len(name)) }"#);
diagnostic!(
    printf_precision_past_the_bound_after_an_escape,
    r#"on entry main.greet { printf("\t%.9999999999999d\n", len(name)) }"#
);
diagnostic!(string_compared_with_a_variable, "on entry main.greet { x := name; if x == name { @n = count() } }");
diagnostic!(self_read_before_set, "on return main.greet { @n = sum(self.count) }");
diagnostic!(result_out_of_range, "on return main.greet { @n = sum(ret3) }");
diagnostic!(return_of_an_only_inlined_function, "on return main.abs { @n = count() }");
diagnostic!(interval_too_short, "on interval 0s { print(1) }");
diagnostic!(parameter_optimized_away_where_inlined, "on entry main.abs { @s = sum(x) }");
diagnostic!(zero_size_symbol, "on entry runtime.text { @n = count() }");
diagnostic!(every_site_refused_by_uprobes, "on entry runtime.markBits.setMarked { @n = count() }");
diagnostic!(no_ret_in_an_explicit_return_probe, "on return runtime.exitThread.abi0 { @n = count() }");
diagnostic!(key_name_not_a_label, "on entry main.handle { @x[größe: r.Size] = count() }");
diagnostic!(key_name_reserved, "on entry main.handle { @x[le: r.Size] = count() }");
diagnostic!(key_names_alike, "on entry main.handle { self.path = r.Method; @x[self.path, r.URL.Path] = count() }");
diagnostic!(
    key_named_two_ways,
    "on entry main.handle { @x[method: r.Method] = count() } on entry main.greet { @x[verb: name] = count() }"
);
diagnostic!(
    key_read_under_another_name,
    "on entry main.handle { @x[method: r.Method] = r.Size } on entry main.greet { print(@x[m: name]) }"
);
diagnostic!(pid_in_begin_is_gtraces_own, "on begin { print(pid) }");
diagnostic!(comm_in_end_is_gtraces_own, "on end { print(comm) }");
diagnostic!(goid_in_an_interval_is_gtraces_own, "on interval 1s { print(goid) }");
diagnostic!(one_error_for_a_bad_field_chain, "on entry main.handle { @x[r.URL.Pth.Foo.Bar.Baz.Qux] = count() }");
diagnostic!(mismatched_integer_types, "on entry main.narrow { @s = sum(a + d) }");
diagnostic!(constant_overflows_the_other_side, "on entry main.narrow { if a == 300 { print(1) } }");
diagnostic!(
    lhist_with_too_many_buckets,
    "on entry main.narrow { @h = lhist(c, -9223372036854775807, 9223372036854775807, 1) }"
);
diagnostic!(float_in_a_register in "floats", "on entry main.inRegister { print(x) }");
diagnostic!(float_arithmetic in "floats", "on entry main.observe { @t = r.Temp * 2 }");
diagnostic!(float_sum in "floats", "on entry main.observe { @t = sum(r.Temp) }");
diagnostic!(float_constant_truncated in "floats", "on entry main.observe { if r.N > 1.5 { print(1) } }");
diagnostic!(float32_against_float64 in "floats", "on entry main.observe { if r.Ratio < r.Temp { print(1) } }");
diagnostic!(float_conversion_of_a_value in "floats", "on entry main.observe { print(float64(r.Ratio)) }");
diagnostic!(float_constant_overflows_float32 in "floats", "on entry main.observe { if r.Ratio < 1e39 { print(1) } }");
diagnostic!(cap_of_a_map, "on entry main.countKeys { print(cap(m)) }");
diagnostic!(unknown_package_variable in "globals", "on entry main.tick { print(main.confg.Port) }");
diagnostic!(package_variable_in_an_interval in "globals", "on interval 1s { print(main.counter) }");
diagnostic!(quoted_name_that_is_no_variable in "globals", r#"on entry main.tick { print("net/http.NoSuchVar".Timeout) }"#);
diagnostic!(unknown_field_of_a_package_variable in "globals", "on entry main.tick { print(main.config.Prot) }");
// A local whose value was refused is said once: its uses are not unknown names, and a
// function's local is named as written, not as renamed where it is inlined.
diagnostic!(
    a_refused_local_is_said_once,
    r#"fn f(n) { c := n * (n == 0); printf("%d\n", c) } on entry main.greet { f(n) }"#
);
