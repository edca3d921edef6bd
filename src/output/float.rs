//! Floats printed exactly as Go's fmt prints them: `%v` and `%g` with the shortest
//! digits that read back as the same float32 or float64 (strconv's 'g' with precision
//! -1: an exponent when it is below -4 or at least 6, two exponent digits at least),
//! `%e`, `%f` and `%g` with a precision, and `NaN`, `+Inf`, `-Inf`, `-0`. Rust's
//! formatting gives the digits (shortest, or correctly rounded to a precision, ties to
//! even as Go's); the layout around them is Go's (internal/strconv/ftoa.go).

/// How a verb wants the float: the verb (`v g G e E f F`), its precision, and the `+`
/// and ` ` flags.
#[derive(Clone, Copy, Debug, Default)]
pub struct Spec {
    pub verb: char,
    pub precision: Option<usize>,
    pub plus: bool,
    pub space: bool,
}

impl Spec {
    pub fn v() -> Spec {
        Spec { verb: 'v', ..Spec::default() }
    }
}

/// The float of `size` bytes (4 or 8) whose bits are `bits`, as fmt prints it.
pub fn format(bits: u64, size: u8, spec: Spec) -> String {
    let (v, shortest) = if size == 4 {
        let f = f32::from_bits(bits as u32);
        (f64::from(f), format!("{:e}", f.abs()))
    } else {
        let f = f64::from_bits(bits);
        (f, format!("{:e}", f.abs()))
    };
    let sign = if v.is_sign_negative() && !v.is_nan() {
        "-"
    } else if spec.plus || v.is_infinite() {
        // Go writes +Inf with its sign, and a space instead of `+` under the space flag.
        if spec.space && !spec.plus {
            " "
        } else {
            "+"
        }
    } else if spec.space {
        " "
    } else {
        ""
    };
    if v.is_nan() {
        return format!("{sign}NaN");
    }
    if v.is_infinite() {
        return format!("{sign}Inf");
    }
    let a = v.abs();
    let upper = spec.verb.is_ascii_uppercase();
    let body = match (spec.verb, spec.precision) {
        ('e' | 'E', p) => exponent_form(&format!("{:.*e}", p.unwrap_or(6), a), upper),
        ('f' | 'F', p) => format!("{:.*}", p.unwrap_or(6), a),
        (_, None) => {
            let (digits, dp) = digits_of(&shortest);
            general(&digits, dp, None, upper)
        }
        (_, Some(p)) => {
            let p = p.max(1);
            let (digits, dp) = digits_of(&format!("{:.*e}", p - 1, a));
            general(&digits, dp, Some(p), upper)
        }
    };
    format!("{sign}{body}")
}

/// Rust's `d.ddde±X` as Go's `d.ddde±XX`.
fn exponent_form(rust: &str, upper: bool) -> String {
    let (mantissa, exp) = rust.split_once('e').unwrap_or((rust, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let e = if upper { 'E' } else { 'e' };
    format!("{mantissa}{e}{}{:02}", if exp < 0 { '-' } else { '+' }, exp.unsigned_abs())
}

/// The significant digits (no trailing zeros; "0" for zero) and the decimal point's
/// position (value = 0.DIGITS × 10^dp) of Rust's `d.ddde±X`.
fn digits_of(rust: &str) -> (String, i32) {
    let (mantissa, exp) = rust.split_once('e').unwrap_or((rust, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let trimmed = digits.trim_end_matches('0');
    if trimmed.is_empty() {
        // Zero: Go has no digits and the point at 0, which prints as "0".
        return (String::new(), 0);
    }
    (trimmed.to_string(), exp + 1)
}

/// strconv's %g: `prec` significant digits (None: the shortest that round-trip), in
/// %e form when the exponent is below -4 or at least the precision (6 when shortest).
fn general(digits: &str, dp: i32, prec: Option<usize>, upper: bool) -> String {
    let nd = digits.len() as i32;
    let mut eprec = prec.map_or(6, |p| p as i32);
    let mut p = prec.map_or(nd, |p| p as i32);
    if prec.is_some() && eprec > nd && nd >= dp {
        eprec = nd;
    }
    let exp = dp - 1;
    if exp < -4 || exp >= eprec {
        if p > nd {
            p = nd;
        }
        return fmt_e(digits, dp, (p - 1).max(0) as usize, upper);
    }
    if p > dp {
        p = nd;
    }
    fmt_f(digits, dp, (p - dp).max(0) as usize)
}

/// `d.dddde±dd` with `prec` digits after the point.
fn fmt_e(digits: &str, dp: i32, prec: usize, upper: bool) -> String {
    let d = digits.as_bytes();
    let mut out = String::new();
    out.push(d.first().map_or('0', |c| *c as char));
    if prec > 0 {
        out.push('.');
        for i in 1..=prec {
            out.push(d.get(i).map_or('0', |c| *c as char));
        }
    }
    let exp = if d.is_empty() { 0 } else { dp - 1 };
    out.push(if upper { 'E' } else { 'e' });
    out.push(if exp < 0 { '-' } else { '+' });
    out.push_str(&format!("{:02}", exp.unsigned_abs()));
    out
}

/// `ddd.ddd` with `prec` digits after the point.
fn fmt_f(digits: &str, dp: i32, prec: usize) -> String {
    let d = digits.as_bytes();
    let digit = |i: i32| if i >= 0 && (i as usize) < d.len() { d[i as usize] as char } else { '0' };
    let mut out = String::new();
    if dp > 0 {
        for i in 0..dp {
            out.push(digit(i));
        }
    } else {
        out.push('0');
    }
    if prec > 0 {
        out.push('.');
        for i in 0..prec as i32 {
            out.push(digit(dp + i));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v64(x: f64) -> String {
        format(x.to_bits(), 8, Spec::v())
    }

    // Expected strings are what Go 1.26's fmt.Sprint prints for the same values; the
    // end-to-end tests (tests/floats.rs) compare against the traced program itself.
    #[test]
    fn shortest_like_go() {
        assert_eq!(v64(0.1), "0.1");
        assert_eq!(v64(1e6), "1e+06");
        assert_eq!(v64(123456789.0), "1.23456789e+08");
        assert_eq!(v64(100000.0), "100000");
        assert_eq!(v64(1e-5), "1e-05");
        assert_eq!(v64(0.0001), "0.0001");
        assert_eq!(v64(5e-324), "5e-324");
        assert_eq!(v64(-0.0), "-0");
        assert_eq!(v64(0.0), "0");
        assert_eq!(v64(f64::NAN), "NaN");
        assert_eq!(v64(f64::INFINITY), "+Inf");
        assert_eq!(v64(f64::NEG_INFINITY), "-Inf");
        assert_eq!(v64(1e21), "1e+21");
        assert_eq!(format(u64::from(0.1f32.to_bits()), 4, Spec::v()), "0.1");
    }

    #[test]
    fn precisions_like_go() {
        let f =
            |x: f64, verb: char, p: usize| format(x.to_bits(), 8, Spec { verb, precision: Some(p), ..Spec::default() });
        assert_eq!(f(0.125, 'f', 2), "0.12");
        assert_eq!(f(2.5, 'f', 0), "2");
        assert_eq!(f(123456789.0, 'e', 2), "1.23e+08");
        assert_eq!(f(1.0, 'g', 3), "1");
        assert_eq!(f(1234.5678, 'g', 3), "1.23e+03");
        assert_eq!(f(0.00001234, 'g', 2), "1.2e-05");
        assert_eq!(format(1.5f64.to_bits(), 8, Spec { verb: 'f', plus: true, ..Spec::default() }), "+1.500000");
    }
}
