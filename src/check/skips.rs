//! What a probe passed over, and why: functions that cannot hold a probe (zero-size
//! marker symbols, functions without code or without a RET) and sites whose instruction
//! the architecture's uprobes refuse (`arch::Refusal`), found before anything is attached; plus the sites the kernel
//! still refused when attaching. A wildcard or a list goes on with the rest and says so
//! in one summary line; `--check` lists every one.

use crate::arch::Refusal;
use std::collections::BTreeMap;

/// Why a function or one of its probe sites was passed over.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum SkipReason {
    /// A zero-size symbol: a linker marker such as `runtime.text` or `runtime.etext`.
    ZeroSize,
    /// The function's code is not in the file.
    NoCode,
    /// The function's code does not disassemble.
    BadCode { at: u64 },
    /// A return probe on a function without a RET instruction.
    NoReturn,
    /// The kernel would refuse a uprobe on the instruction at the site.
    Refused(Refusal),
    /// A return probe that times calls (`elapsed`) on a function whose entry the kernel
    /// would refuse: its calls cannot be timed.
    EntryRefused(Refusal),
    /// The kernel refused the uprobe when gtrace attached it (an errno).
    Kernel { errno: i32 },
}

impl SkipReason {
    /// The reason in full, for `--check` listings and errors.
    pub fn describe(&self) -> String {
        match self {
            SkipReason::ZeroSize => "a zero-size symbol (a marker the linker places, with no code)".into(),
            SkipReason::NoCode => "its code is not in the file".into(),
            SkipReason::BadCode { at } => format!("its code does not disassemble (an invalid instruction at {at:#x})"),
            SkipReason::NoReturn => {
                "it has no RET instruction (it ends in a tail call, a panic or an endless loop): a return probe never fires".into()
            }
            SkipReason::Refused(r) => format!("{} the instruction there: {r}", r.who()),
            SkipReason::EntryRefused(r) => {
                format!("{} its entry instruction ({r}), so its calls cannot be timed for `elapsed`", r.who())
            }
            SkipReason::Kernel { errno } => format!("the kernel refused the uprobe ({})", errno_text(*errno)),
        }
    }

    /// The group it is counted in on the summary line, singular and plural.
    fn noun(&self) -> (String, String) {
        let pair = |one: &str, many: &str| (one.to_string(), many.to_string());
        match self {
            SkipReason::ZeroSize => pair("zero-size symbol", "zero-size symbols"),
            SkipReason::NoCode => pair("function without code in the file", "functions without code in the file"),
            SkipReason::BadCode { .. } => {
                pair("function whose code does not disassemble", "functions whose code does not disassemble")
            }
            SkipReason::NoReturn => pair("function without a RET", "functions without a RET"),
            SkipReason::Refused(r) => (format!("site at {r}"), format!("sites at {}", r.describe(true))),
            SkipReason::EntryRefused(r) => (
                format!("function whose entry is {r} (cannot be timed)"),
                format!("functions whose entry is {} (cannot be timed)", r.describe(true)),
            ),
            SkipReason::Kernel { errno } => (
                format!("site the kernel refused at attach ({})", errno_text(*errno)),
                format!("sites the kernel refused at attach ({})", errno_text(*errno)),
            ),
        }
    }
}

/// `524 (ENOTSUPP)`: the errnos a uprobe attach is refused with.
pub fn errno_text(errno: i32) -> String {
    let name = match errno {
        524 => "ENOTSUPP",
        22 => "EINVAL",
        8 => "ENOEXEC",
        _ => return format!("errno {errno}"),
    };
    format!("errno {errno}, {name}")
}

/// One function or site a probe passed over (carried in the plan, so that a plan run
/// elsewhere says the same).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Skipped {
    /// The probe, as `on entry "runtime.*"`.
    pub probe: String,
    pub function: String,
    /// The site's address; None when the whole function was passed over.
    pub addr: Option<u64>,
    pub reason: SkipReason,
}

/// The one line that says what was passed over, by reason; None when nothing was.
pub fn summary(skipped: &[Skipped]) -> Option<String> {
    if skipped.is_empty() {
        return None;
    }
    let mut by_reason: BTreeMap<(String, String), usize> = BTreeMap::new();
    for s in skipped {
        *by_reason.entry(s.reason.noun()).or_default() += 1;
    }
    let parts: Vec<String> =
        by_reason.into_iter().map(|((one, many), n)| format!("{n} {}", if n == 1 { one } else { many })).collect();
    let n = skipped.len();
    Some(format!(
        "gtrace: passed over {n} place{} that cannot hold a probe: {} (`--check` lists them)",
        if n == 1 { "" } else { "s" },
        parts.join(", ")
    ))
}

/// Every skipped function and site, a line each, for `--check`.
pub fn listing(skipped: &[Skipped]) -> String {
    let mut out = String::new();
    for s in skipped {
        let at = s.addr.map(|a| format!(" at {a:#x}")).unwrap_or_default();
        out.push_str(&format!("  skipped {}{at} ({}): {}\n", s.function, s.probe, s.reason.describe()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::x86_64::uprobe::Refusal as X86;

    const LOCK: Refusal = Refusal::X86(X86::Lock);

    fn skip(function: &str, reason: SkipReason) -> Skipped {
        Skipped { probe: "on entry \"*\"".into(), function: function.into(), addr: None, reason }
    }

    #[test]
    fn one_line_counts_each_reason() {
        let s = vec![
            skip("runtime.text", SkipReason::ZeroSize),
            skip("runtime.etext", SkipReason::ZeroSize),
            skip("runtime.greyobject", SkipReason::Refused(LOCK)),
            skip("main.f", SkipReason::Kernel { errno: 524 }),
        ];
        let line = summary(&s).unwrap();
        assert_eq!(
            line,
            "gtrace: passed over 4 places that cannot hold a probe: 1 site at a LOCK-prefixed (atomic) instruction, \
             1 site the kernel refused at attach (errno 524, ENOTSUPP), 2 zero-size symbols (`--check` lists them)"
        );
        assert!(!line.contains('\n'));
        assert_eq!(summary(&[]), None);
    }

    #[test]
    fn plurals_read_as_english() {
        let two =
            |r: Refusal| summary(&[skip("a", SkipReason::Refused(r)), skip("b", SkipReason::Refused(r))]).unwrap();
        assert!(two(LOCK).contains("2 sites at LOCK-prefixed (atomic) instructions"), "{}", two(LOCK));
        let seg = two(Refusal::X86(X86::SegmentPrefix { byte: 0x2e }));
        assert!(seg.contains("2 sites at instructions with a segment prefix (CS)"), "{seg}");
        let op = two(Refusal::X86(X86::Opcode { opcode: 0xcc, vex: false }));
        assert!(op.contains("2 sites at instructions uprobes cannot step (opcode 0xcc)"), "{op}");
    }

    #[test]
    fn the_listing_names_every_site() {
        let mut s = skip("runtime.greyobject", SkipReason::Refused(LOCK));
        s.addr = Some(0x41a2b3);
        let text = listing(&[s, skip("runtime.text", SkipReason::ZeroSize)]);
        assert_eq!(text.lines().count(), 2);
        assert!(text.contains("skipped runtime.greyobject at 0x41a2b3 (on entry \"*\"): x86 uprobes refuse the instruction there: a LOCK-prefixed (atomic) instruction"), "{text}");
        assert!(text.contains("skipped runtime.text (on entry \"*\"): a zero-size symbol"), "{text}");
    }
}
