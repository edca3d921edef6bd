//! A program the kernel's verifier refused, as the user sees it: the probe, the script
//! line of the instruction it stopped at, what the refusal means (a limit of the kernel,
//! with what to do, or a bug in gtrace), and the end of the verifier's log.

use crate::diag::Failure;
use crate::plan::Plan;
use crate::runtime::{self, RuntimeError};

/// Limits the verifier enforces, recognised in its log: (what the log says, what it
/// means, what to do).
const LIMITS: &[(&str, &str, &str)] = &[
    (
        "BPF program is too large",
        "the probe is too complex for the kernel's verifier (it stopped after a million instructions' worth of paths)",
        "split the probe into several probes of the same function, each doing part of the work",
    ),
    (
        "The sequence of",
        "the probe has too many branches for the kernel's verifier",
        "split the probe into several probes of the same function, each doing part of the work",
    ),
    (
        "number of maps per program has reached the limit",
        "the probe uses more maps than the kernel allows in one program",
        "split the probe into several probes of the same function",
    ),
    (
        "combined stack size",
        "the probe needs more stack than the kernel allows",
        "split the probe, or use fewer map keys and locals",
    ),
];

/// The error for a program the verifier rejected; other runtime errors pass through.
pub fn failure(e: RuntimeError, plan: &Plan) -> Failure {
    let RuntimeError::Verifier { program, log } = &e else { return e.into() };
    let probe = plan.probes.iter().find(|p| p.program == *program);
    let describe = probe.map(|p| p.describe.as_str()).unwrap_or_default();
    if let Some(failure) = old_kernel(log, describe, program) {
        return failure;
    }
    let limit = LIMITS.iter().find(|(says, _, _)| log.contains(says));
    let mut cause = match limit {
        Some((_, means, _)) => format!("`{describe}` ({program}): {means}"),
        None => format!("the kernel's verifier rejected the program of `{describe}` ({program})"),
    };
    if let (Some(at), Some(probe)) = (runtime::failing_insn(log), probe) {
        if let Some((_, line)) = probe.source_lines.iter().filter(|(i, _)| *i <= at).last() {
            cause.push_str(&format!("\n  at instruction {at}, compiled from: {line}"));
        }
    }
    let tail: Vec<&str> = log.lines().rev().take(25).collect::<Vec<_>>().into_iter().rev().collect();
    cause.push_str(&format!("\n  verifier log (last lines):\n    {}", tail.join("\n    ")));
    let hint = match limit {
        Some((_, _, what_to_do)) => what_to_do,
        None => "this is a bug in gtrace's code generation; please report it with `--emit asm` output",
    };
    Failure::message(cause, Some(hint))
}

/// A verifier that does not know a helper gtrace calls (`invalid func unknown#174`): a
/// kernel older than the helper, said with the release that has it.
fn old_kernel(log: &str, describe: &str, program: &str) -> Option<Failure> {
    let id: i32 =
        log.lines().find_map(|l| l.trim().strip_prefix("invalid func "))?.rsplit_once('#')?.1.trim().parse().ok()?;
    let since = crate::bpf::helpers::since(id)?;
    let name = crate::bpf::helpers::name(id).unwrap_or("?");
    let cause = format!(
        "`{describe}` ({program}) calls the kernel's helper bpf_{name}, which this kernel does not have (Linux {since} added it)"
    );
    Some(Failure::message(
        cause,
        Some("gtrace needs a kernel with every helper its programs call: Linux 5.15 or later"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{ProbeAttach, ProbeSpec};

    #[test]
    fn a_verifier_rejection_names_the_probe_the_source_line_and_the_log() {
        let plan = Plan {
            probes: vec![ProbeSpec {
                program: "p0".into(),
                section: "uprobe/p0".into(),
                attach: ProbeAttach::Begin,
                describe: "on entry main.F".into(),
                source_lines: vec![(0, "<-e>:1:1: on entry main.F".into()), (5, "<-e>:2:5: @n = count()".into())],
                maps: Vec::new(),
            }],
            ..Plan::default()
        };
        let log = "0: R1=ctx() R10=fp0\n0: (bf) r6 = r1\n6: (79) r1 = *(u64 *)(r10 -8)\ninvalid read from stack R10 off=-8 size=8\nprocessed 7 insns";
        let f = failure(RuntimeError::Verifier { program: "p0".into(), log: log.into() }, &plan);
        let text = f.render(false);
        assert!(text.contains("rejected the program of `on entry main.F` (p0)"), "{text}");
        assert!(text.contains("at instruction 6, compiled from: <-e>:2:5: @n = count()"), "{text}");
        assert!(text.contains("invalid read from stack R10 off=-8 size=8"), "{text}");
        assert!(text.contains("hint:") && text.contains("a bug in gtrace"), "{text}");
    }

    #[test]
    fn a_helper_the_kernel_lacks_is_named_with_the_release_that_has_it() {
        let plan = Plan { probes: vec![], ..Plan::default() };
        let log =
            "0: (bf) r6 = r1\n1: (bf) r1 = r6\n2: (85) call unknown#174\ninvalid func unknown#174\nprocessed 3 insns";
        let text = failure(RuntimeError::Verifier { program: "p0".into(), log: log.into() }, &plan).render(false);
        assert!(
            text.contains("bpf_get_attach_cookie, which this kernel does not have (Linux 5.15 added it)"),
            "{text}"
        );
        assert!(!text.contains("a bug in gtrace"), "{text}");
    }

    #[test]
    fn a_limit_of_the_kernel_is_named_as_such() {
        let plan = Plan { probes: vec![], ..Plan::default() };
        let log = "BPF program is too large. Processed 1000001 insn\nprocessed 1000001 insns";
        let text = failure(RuntimeError::Verifier { program: "p0".into(), log: log.into() }, &plan).render(false);
        assert!(text.contains("too complex for the kernel's verifier"), "{text}");
        assert!(text.contains("split the probe") && !text.contains("a bug in gtrace"), "{text}");
    }
}
