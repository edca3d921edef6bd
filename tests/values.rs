//! Go values end to end: parameters and results of every shape the register ABI passes,
//! fields through pointers, strings, slices, arrays, interfaces, generics, read by name
//! from tests/go/values and compared with the truth that program prints. Needs root
//! (SKIP without it, unless CI=true: then it fails).

mod support;

use support::{gtrace, map_value as map, privileged, truth, Run};

fn values() -> std::path::PathBuf {
    support::go_build("values", &[])
}

/// Runs the values program under gtrace with `script`.
fn trace(script: &str) -> Run {
    let r = gtrace(&["-e", script, "-c", values().to_str().unwrap()]);
    assert_eq!(r.code, 0, "gtrace failed:\n{}\n{}", r.stdout, r.stderr);
    r
}

macro_rules! traced {
    ($name:ident, $script:expr, |$out:ident| $body:block) => {
        #[test]
        fn $name() {
            if !privileged(stringify!($name)) {
                return;
            }
            let $out = trace($script).stdout;
            $body
        }
    };
}

traced!(
    string_field_through_two_pointers_as_map_key,
    "on entry main.handle { @hosts[r.URL.Host] = count(); @bytes = sum(r.Size) }",
    |out| {
        for host in ["a.example", "b.example", "c.example", "d.example"] {
            assert_eq!(map(&out, &format!("@hosts[{host}]")), truth(&out, &format!("host:{host}")), "{out}");
        }
        assert_eq!(map(&out, "@bytes"), truth(&out, "size"));
    }
);

traced!(pointer_chain_three_levels_deep, "on entry main.deep { @p[w.Req.URL.Path] = count() }", |out| {
    assert_eq!(map(&out, "@p[/deep/0]"), truth(&out, "deep:/deep/0"));
    assert_eq!(map(&out, "@p[/deep/1]"), truth(&out, "deep:/deep/1"));
});

traced!(
    promoted_fields_and_bytes_as_strings,
    r#"on entry main.process { @subjects[string(c.subject)] = count(); @tenants[c.Tenant] = count(); @states = sum(c.state); if hasPrefix(string(c.subject), "orders.1") { @one = count() } }"#,
    |out| {
        for k in ["orders.0", "orders.1", "orders.2"] {
            assert_eq!(map(&out, &format!("@subjects[{k}]")), truth(&out, &format!("subject:{k}")), "{out}");
        }
        for k in ["acme", "globex"] {
            assert_eq!(map(&out, &format!("@tenants[{k}]")), truth(&out, &format!("tenant:{k}")), "{out}");
        }
        assert_eq!(map(&out, "@states"), truth(&out, "states"), "{out}");
        assert_eq!(map(&out, "@one"), truth(&out, "subject:orders.1"), "{out}");
    }
);

traced!(
    strings_compare_prefix_len_and_truncate,
    r#"on entry main.greet { @n[name] = count(); if name == "bob" { @bob = count() }; if hasPrefix(name, "al") { @al = count() }; @len = sum(len(name)) }"#,
    |out| {
        assert_eq!(map(&out, "@bob"), truth(&out, "bob"));
        assert_eq!(map(&out, "@al"), truth(&out, "al"));
        assert_eq!(map(&out, "@len"), truth(&out, "namelen"));
        assert_eq!(map(&out, "@n[alice]"), 4);
        assert_eq!(map(&out, "@n[]"), 4, "the empty string is a key of its own");
        // A string longer than the read limit (64 bytes) is cut there.
        assert_eq!(map(&out, &format!("@n[{}]", "x".repeat(64))), 4);
    }
);

// Go's strings.HasPrefix(s, "") is true for every s, the empty string too: nothing is
// read (the kernel refused the read of 0 bytes this compiled to).
traced!(
    an_empty_prefix_is_always_there,
    r#"on entry main.greet { if hasPrefix(name, "") { @empty = count() }; if hasPrefix(name, "al") { @al = count() } }"#,
    |out| {
        assert_eq!(map(&out, "@empty"), truth(&out, "greet"), "{out}");
        assert_eq!(map(&out, "@al"), truth(&out, "al"), "{out}");
    }
);

traced!(
    slices_len_index_and_out_of_range,
    "on entry main.total { @len = sum(len(xs)); @first = sum(xs[0]); @oob = sum(xs[100]) }",
    |out| {
        assert_eq!(map(&out, "@len"), truth(&out, "lens"));
        assert_eq!(map(&out, "@first"), truth(&out, "first"));
        assert_eq!(map(&out, "@oob"), 0, "an index out of range reads as zero");
    }
);

traced!(struct_split_over_registers, "on entry main.split { @x = sum(p.X); @y = sum(p.Y) }", |out| {
    assert_eq!(map(&out, "@x"), truth(&out, "sx"));
    assert_eq!(map(&out, "@y"), truth(&out, "sy"));
});

traced!(array_parameter_on_the_stack, "on entry main.onStack { @a = sum(a[2]); @n = sum(n) }", |out| {
    assert_eq!(map(&out, "@a"), truth(&out, "sa2"));
    assert_eq!(map(&out, "@n"), truth(&out, "sn"));
});

traced!(
    len_of_a_map_including_nil,
    "on entry main.countKeys { @keys = sum(len(m)); if m == nil { @nil = count() } }",
    |out| {
        assert_eq!(map(&out, "@keys"), truth(&out, "keys"));
        assert_eq!(map(&out, "@nil"), 1);
    }
);

traced!(struct_that_goes_to_the_stack, "on entry main.ten { @j = sum(t.J); @a = sum(t.A); @n = count() }", |out| {
    assert_eq!(map(&out, "@n"), truth(&out, "ten"));
    assert_eq!(map(&out, "@j"), truth(&out, "tenj"));
    assert_eq!(map(&out, "@a"), truth(&out, "tena"));
});

traced!(string_limit_is_settable, "on entry main.greet { @l = max(len(name)) }", |out| {
    // len() is the real length whatever the limit.
    assert_eq!(map(&out, "@l"), 100);
});

traced!(more_than_nine_int_parameters, "on entry main.many { @j = sum(j); @k = sum(k) }", |out| {
    assert_eq!(map(&out, "@j"), truth(&out, "sj"));
    assert_eq!(map(&out, "@k"), truth(&out, "sk"));
});

traced!(
    named_results_and_error_nil_checks,
    "on return main.named { if err != nil { @errs = count() } else { @ok = count(); @q = sum(q) } }",
    |out| {
        assert_eq!(map(&out, "@errs"), truth(&out, "errs"));
        assert_eq!(map(&out, "@ok"), truth(&out, "oks"));
        assert_eq!(map(&out, "@q"), truth(&out, "qs"));
    }
);

traced!(
    unnamed_positions_ret_and_ret1,
    "on return main.named { @q = sum(ret); if ret1 == nil { @nil = count() } }",
    |out| {
        assert_eq!(map(&out, "@q"), truth(&out, "qs"));
        assert_eq!(map(&out, "@nil"), truth(&out, "oks"));
    }
);

traced!(
    error_parameter_nil_and_not,
    "on entry main.check { if err == nil { @nil = count() } else { @err = count() } }",
    |out| {
        assert_eq!(map(&out, "@nil"), truth(&out, "nils"));
        assert_eq!(map(&out, "@err"), truth(&out, "nonnil"));
    }
);

traced!(value_receiver_method, r#"on entry "main.Point.Norm1" { @x = sum(p.X) }"#, |out| {
    assert_eq!(map(&out, "@x"), truth(&out, "normx"));
});

traced!(generic_function_by_bracket_name, r#"on entry "main.Max[...]" { @c = count(); @a = sum(a) }"#, |out| {
    assert_eq!(map(&out, "@c"), truth(&out, "max"));
    assert_eq!(map(&out, "@a"), truth(&out, "maxa"));
});

traced!(
    narrow_widths_sign_and_zero_extend,
    "on entry main.narrow { @s = sum(int64(a) + int64(b) + int64(c) + int64(d)); if ok { @ok = count() } }",
    |out| {
        assert_eq!(map(&out, "@s"), truth(&out, "narrowsum"));
        assert_eq!(map(&out, "@ok"), 20);
    }
);

traced!(durations_print_with_units, r#"on entry main.dur { printf("%v %d\n", d, d) }"#, |out| {
    assert!(out.lines().any(|l| l == "1.5ms 1500000"), "{out}");
});

traced!(args_prints_every_parameter_by_name, "on entry main.greet { print(args) }", |out| {
    assert!(out.lines().any(|l| l == "name=alice n=0"), "{out}");
    assert!(out.lines().any(|l| l == "name=bob n=1"), "{out}");
});

traced!(errors_print_as_fmt_prints_them, r#"on entry main.check { printf("[%v] [%#v]\n", err, err) }"#, |out| {
    let count = |l: &str| out.lines().filter(|x| *x == l).count() as i64;
    assert_eq!(count("[<nil>] [<nil>]"), truth(&out, "nils"), "{out}");
    let err = r#"[divisible by three] [&errors.errorString{s:"divisible by three"}]"#;
    assert_eq!(count(err), truth(&out, "nonnil"), "{out}");
});

traced!(errors_with_percent_s_print_their_message, r#"on entry main.check { printf("[%s]\n", err) }"#, |out| {
    assert_eq!(out.lines().filter(|l| *l == "[<nil>]").count() as i64, truth(&out, "nils"), "{out}");
    assert_eq!(out.lines().filter(|l| *l == "[divisible by three]").count() as i64, truth(&out, "nonnil"), "{out}");
});

traced!(any_values_print_their_dynamic_value, r#"on entry main.describe { print(v); printf("%#v\n", v) }"#, |out| {
    let got: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("ten=")).skip(1).collect();
    let want =
        ["hi", "\"hi\"", "42", "42", "-3", "-3", "true", "true", "<nil>", "<nil>", "&{1 0}", "&main.Point{X:1, Y:0}"];
    assert_eq!(got, want, "{out}");
});

#[test]
fn a_longer_string_limit_reads_more() {
    if !privileged("a_longer_string_limit_reads_more") {
        return;
    }
    let r = gtrace(&[
        "--string-limit",
        "100",
        "-e",
        "on entry main.greet { @n[name] = count() }",
        "-c",
        values().to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(map(&r.stdout, &format!("@n[{}]", "x".repeat(100))), 4, "{}", r.stdout);
}

// Refusals: no privileges needed.

fn check_err(script: &str) -> String {
    let r = gtrace(&["--check", "-e", script, "-b", values().to_str().unwrap()]);
    assert_ne!(r.code, 0, "expected an error for {script}");
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    r.stderr
}

#[test]
fn a_float_parameter_is_refused_with_the_reason() {
    let e = check_err("on entry main.fl { @s = sum(x) }");
    assert!(e.contains("it is passed in X0, a float register"), "{e}");
    assert_eq!(e.matches("error").count(), 1, "one error, not a cascade:\n{e}");
}

#[test]
fn an_unknown_field_gets_the_closest_name() {
    let e = check_err("on entry main.handle { @x[r.URL.Pth] = count() }");
    assert!(e.contains("no field `Pth` in main.URL") && e.contains("did you mean `Path`?"), "{e}");
}

#[test]
fn a_string_used_as_a_number_is_refused() {
    let e = check_err("on entry main.handle { @x = sum(r.Method) }");
    assert!(e.contains("sum() needs an integer or a duration, not a string"), "{e}");
}

#[test]
fn a_struct_is_not_a_map_key() {
    let e = check_err("on entry main.split { @x[p] = count() }");
    assert!(e.contains("main.Point cannot be a map key"), "{e}");
}

#[test]
fn pie_binaries_name_types_and_symbolize_stacks() {
    if !privileged("pie_binaries_name_types_and_symbolize_stacks") {
        return;
    }
    let pie = support::go_build("values", &["-buildmode=pie"]);
    let r = gtrace(&[
        "-e",
        r#"on entry main.check { printf("%#v\n", err) } on entry main.deep { @[ustack] = count() }"#,
        "-c",
        pie.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let errors = r.stdout.lines().filter(|l| *l == r#"&errors.errorString{s:"divisible by three"}"#).count() as i64;
    assert_eq!(errors, truth(&r.stdout, "nonnil"), "{}", r.stdout);
    assert!(r.stdout.contains("    main.deep+0x0\n    main.main+"), "{}", r.stdout);
}

#[test]
fn named_keys_print_as_before_and_name_the_json_fields() {
    if !privileged("named_keys_print_as_before_and_name_the_json_fields") {
        return;
    }
    let script = "on entry main.handle { @req[verb: r.Method, r.URL.Host, r.Size % 2] = count() }";
    let text = trace(script).stdout;
    let r = gtrace(&["-e", script, "-f", "json", "-c", values().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let map: serde_json::Value = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|o| o["name"] == "@req")
        .unwrap_or_else(|| panic!("no @req in {}", r.stdout));
    // Named, after the expression's last name (snake case), and by position.
    assert_eq!(map["key_names"], serde_json::json!(["verb", "host", "key2"]));
    for host in ["a.example", "b.example", "c.example", "d.example"] {
        let (mut text_total, mut json_total) = (0, 0);
        for parity in [0, 1] {
            // Text output is as it was: the keys' values, without names.
            let line = format!("@req[GET, {host}, {parity}]: ");
            text_total += text.lines().find_map(|l| l.strip_prefix(&line)).map_or(0, |v| v.trim().parse().unwrap());
            let entry = map["entries"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["keys"] == serde_json::json!({"verb": "GET", "host": host, "key2": parity}));
            json_total += entry.map_or(0, |e| e["value"].as_i64().unwrap());
        }
        let want = truth(&text, &format!("host:{host}"));
        assert_eq!(text_total, want, "{text}");
        assert_eq!(json_total, want, "{}", r.stdout);
    }
}

/// The key names of each user map in the plan compiled for `script`.
fn planned_key_names(script: &str) -> Vec<(String, Vec<String>)> {
    let r = gtrace(&["--emit", "plan", "-e", script, "-b", values().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bundle: gtrace::plan::Bundle = serde_json::from_str(&r.stdout).expect("a plan");
    let users = bundle.plan.maps.into_iter().filter_map(|m| match m.role {
        gtrace::plan::MapRole::User { name, key_names, .. } => Some((name, key_names)),
        _ => None,
    });
    users.collect()
}

#[test]
fn a_written_key_name_wins_over_a_derived_one_wherever_it_is_written() {
    let names = planned_key_names(
        "on entry main.handle { @x[r.Method, 1] = count(); hist(r.Size) } on entry main.greet { @x[verb: name, n] = count() }",
    );
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(names, vec![("".to_string(), owned(&["func"])), ("x".to_string(), owned(&["verb", "key1"]))]);
}
