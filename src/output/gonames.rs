//! What Go's standard code prints for a value, done without running the program's code
//! (gofmt.rs prints whole values with it): reflect's type names, `time.Duration`'s
//! `String`, basic types' values, and the error types whose `Error()` is their first
//! field.

/// The error types whose `Error()` is their first field, a string.
pub(super) const ERROR_TYPES: [&str; 3] = ["*errors.errorString", "*fmt.wrapError", "*fmt.wrapErrors"];

/// reflect's name of a type from DWARF's: package paths cut to their last element
/// (`map[string]*net/url.URL` → `map[string]*url.URL`).
pub fn type_string(dwarf: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        let cut = run.rfind('/').map_or(0, |i| i + 1);
        out.push_str(&run[cut..]);
        run.clear();
    };
    for c in dwarf.chars() {
        if c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | '-' | '~' | '%') {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Go's `time.Duration.String`.
pub fn duration_string(d: i64) -> String {
    let mut u = d.unsigned_abs();
    let mut out = String::new();
    if u < 1_000_000_000 {
        let (prec, unit) = match u {
            0 => return "0s".into(),
            _ if u < 1_000 => (0, "ns"),
            _ if u < 1_000_000 => (3, "µs"),
            _ => (6, "ms"),
        };
        let frac = frac(&mut u, prec);
        out = format!("{u}{frac}{unit}");
    } else {
        let frac = frac(&mut u, 9);
        let secs = format!("{}{frac}s", u % 60);
        u /= 60;
        out.push_str(&if u > 0 {
            let mins = format!("{}m{secs}", u % 60);
            u /= 60;
            if u > 0 {
                format!("{u}h{mins}")
            } else {
                mins
            }
        } else {
            secs
        });
    }
    if d < 0 {
        out.insert(0, '-');
    }
    out
}

/// The `prec` low decimal digits of `v` as `.ddd` without trailing zeros (Go's fmtFrac);
/// `v` keeps the rest.
fn frac(v: &mut u64, prec: u32) -> String {
    let mut digits = String::new();
    let mut print = false;
    for _ in 0..prec {
        let digit = *v % 10;
        print = print || digit != 0;
        if print {
            digits.insert(0, char::from(b'0' + digit as u8));
        }
        *v /= 10;
    }
    if print {
        digits.insert(0, '.');
    }
    digits
}

/// A basic type's value from its first 8 bytes, by the type's name.
pub(super) fn basic(name: &str, raw: u64, sharp: bool) -> Option<String> {
    let signed = |bits: u32| (((raw << (64 - bits)) as i64) >> (64 - bits)).to_string();
    let unsigned = |bits: u32| {
        let v = if bits == 64 { raw } else { raw & ((1u64 << bits) - 1) };
        if sharp {
            format!("{v:#x}")
        } else {
            v.to_string()
        }
    };
    Some(match name {
        "int" | "int64" => signed(64),
        "int32" => signed(32),
        "int16" => signed(16),
        "int8" => signed(8),
        "uint" | "uint64" | "uintptr" => unsigned(64),
        "uint32" => unsigned(32),
        "uint16" => unsigned(16),
        "uint8" => unsigned(8),
        "bool" => (raw & 0xff != 0).to_string(),
        "float64" => super::float::format(raw, 8, super::float::Spec::v()),
        "float32" => super::float::format(raw & 0xffff_ffff, 4, super::float::Spec::v()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflect_names_cut_package_paths() {
        assert_eq!(type_string("net/url.URL"), "url.URL");
        assert_eq!(type_string("map[string]*net/url.URL"), "map[string]*url.URL");
        assert_eq!(type_string("[]main.Config"), "[]main.Config");
        assert_eq!(type_string("interface {}"), "interface {}");
    }

    // Expected strings are what Go's time.Duration.String returns.
    #[test]
    fn durations_as_go_prints_them() {
        assert_eq!(duration_string(0), "0s");
        assert_eq!(duration_string(1_500_000), "1.5ms");
        assert_eq!(duration_string(1_500), "1.5µs");
        assert_eq!(duration_string(7), "7ns");
        assert_eq!(duration_string(7_000_000_000), "7s");
        assert_eq!(duration_string(3_723_500_000_000), "1h2m3.5s");
        assert_eq!(duration_string(-90_000_000_000), "-1m30s");
    }
}
