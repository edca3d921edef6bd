//! What the command line says to trace, and where: the process (-p, -c, -b), the file
//! read and attached to for it, the name it goes by in exported labels, a note for a
//! process in a container, and `--cgroup`, opened and checked before anything compiles.

use crate::cli::TargetArgs;
use crate::diag::Failure;
use crate::gobin::DebugSearch;
use crate::plan::Plan;
use crate::runtime::{self, Cgroup};
use crate::trace::Process;
use std::path::{Component, Path, PathBuf};

/// The process to trace, scoped to `cgroup` when one is given.
pub(super) fn process(t: &TargetArgs, cgroup: Option<&Path>) -> Result<Process, Failure> {
    let cgroup = cgroup.map(Cgroup::open).transpose()?;
    if let Some(pid) = t.pid {
        // Taken first: what gtrace reads of the pid from here on is this process's.
        let alive = Some(runtime::Liveness::new(pid));
        let binary = runtime::process_exe(pid)?;
        let names = runtime::exe_names(pid);
        if let Some(note) = names.as_ref().and_then(|n| container_note(pid, n)) {
            eprintln!("{note}");
        }
        let shown = names.map_or_else(|| binary.clone(), |n| n.own);
        let cpu_before = crate::trace::measured::Reading::now(pid);
        let read_as = runtime::file_guard::FileStamp::of_path(&binary);
        return Ok(Process { binary, shown, pid: Some(pid), alive, command: None, cgroup, cpu_before, read_as });
    }
    if let Some(cmd) = &t.command {
        let argv = shlex::split(cmd)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| Failure::message(format!("cannot split the command `{cmd}`"), Some("check its quotes")))?;
        let binary = runtime::resolve_command(&argv[0])?;
        let shown = std::fs::canonicalize(&binary).unwrap_or_else(|_| binary.clone());
        let read_as = runtime::file_guard::FileStamp::of_path(&binary);
        return Ok(Process {
            binary,
            shown,
            pid: None,
            alive: None,
            command: Some(argv),
            cgroup,
            cpu_before: None,
            read_as,
        });
    }
    let binary = t.binary.clone().unwrap_or_default();
    let shown = binary_name(&binary);
    let read_as = runtime::file_guard::FileStamp::of_path(&binary);
    Ok(Process { binary, shown, pid: None, alive: None, command: None, cgroup, cpu_before: None, read_as })
}

/// With -p, the size the tables of calls in flight need for a target that has had many
/// goroutines: twice its most goroutines so far (`runtime.allglen`, read from its
/// memory: the runtime never frees a g), as a power of two, when that is more than the
/// default (`maps::INFLIGHT_ENTRIES`); `None` otherwise, or when it cannot be read.
pub(super) fn inflight_size(process: &Process, target: &crate::gobin::Target) -> Option<(u64, u32)> {
    use crate::lower::maps::{INFLIGHT_ENTRIES, MAX_MAP_SIZE};
    let pid = process.pid?;
    let link = target.data_symbol("runtime.allglen")?;
    let bias = match target.is_pie() {
        true => runtime::mapping_start(pid, target.path())?.wrapping_sub(target.vaddr_of_file_offset(0)?),
        false => 0,
    };
    let goroutines = runtime::read_u64(pid, link.wrapping_add(bias))?;
    let want = goroutines.saturating_mul(2).checked_next_power_of_two()?.min(u64::from(MAX_MAP_SIZE));
    (want > u64::from(INFLIGHT_ENTRIES)).then_some((goroutines, want as u32))
}

/// How `-b PATH` is named in labels: a file reached through a process's root
/// (`/proc/PID/root/app/server`, the way to a container's file) by its path inside the
/// container (`/app/server`), the same on every node and after that process is gone;
/// any other path canonical.
fn binary_name(path: &Path) -> PathBuf {
    let mut parts = path.components();
    let through_root = matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(Component::RootDir), Some(Component::Normal(proc)), Some(Component::Normal(pid)), Some(Component::Normal(root)))
            if proc == "proc" && root == "root" && pid.to_str().is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
    );
    if through_root {
        return Path::new("/").join(parts.as_path());
    }
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// For a process in another mount namespace or root (a container): the file it runs,
/// by its own name and by the path that reaches it from here (the one `-b` takes to
/// trace every process of that file).
fn container_note(pid: u32, names: &runtime::ExeNames) -> Option<String> {
    if !names.elsewhere {
        return None;
    }
    let own = names.own.display();
    Some(match &names.from_here {
        Some(here) => format!(
            "gtrace: pid {pid} runs {own} in another mount namespace (a container); from here that file is {}",
            here.display()
        ),
        None => format!(
            "gtrace: pid {pid} runs {own} in another mount namespace (a container); no path from here reaches that file, so gtrace reads it through /proc/{pid}/exe"
        ),
    })
}

/// Where a stripped binary's DWARF is looked for: `--debug-file`, the `--debug-dir`s,
/// or by default /usr/lib/debug, after the traced container's own (its root's
/// /usr/lib/debug) for a process in a container. A debug file is taken only when its
/// build id is the binary's.
pub(super) fn debug_search(file: Option<&PathBuf>, dirs: &[PathBuf], process: &Process) -> DebugSearch {
    let mut search = DebugSearch { file: file.cloned(), ..DebugSearch::default() };
    if !dirs.is_empty() {
        search.dirs = dirs.to_vec();
    } else if let Some(pid) = process.pid.filter(|p| !runtime::same_namespace(*p, "mnt")) {
        search.dirs.insert(0, PathBuf::from(format!("/proc/{pid}/root/usr/lib/debug")));
    }
    search
}

/// `gtrace run`: a plan compiled with `--cgroup` needs one to run, and one compiled
/// without cannot be scoped to one.
pub(super) fn check_plan_cgroup(plan: &Plan, process: &Process) -> Result<(), Failure> {
    match (plan.cgroup.is_empty(), &process.cgroup) {
        (false, None) => Err(Failure::message(
            "the plan was compiled with --cgroup: its probes run only in a cgroup",
            Some("give the cgroup to trace with --cgroup PATH"),
        )),
        (true, Some(c)) => Err(Failure::message(
            format!("the plan was compiled without --cgroup: its probes cannot be scoped to {}", c.path.display()),
            Some("compile the plan with --cgroup PATH (any cgroup: the one given to gtrace run is the one used)"),
        )),
        _ => Ok(()),
    }
}

/// Said once when gtrace is not in the host's pid namespace: the pids that scripts
/// read (`pid`, `tid`) are the host's, not the ones gtrace's own namespace shows.
pub(super) fn pid_namespace_warning() {
    if !runtime::in_host_pid_namespace() {
        eprintln!(
            "gtrace: warning: gtrace runs in a pid namespace of its own: `pid` and `tid` in probes are the host's pids, not the ones seen here (in a pod: hostPID: true)"
        );
    }
}

/// Said with -b when the binary's heap starts at the same address in every process
/// (`fixed_heap`) and a map of the script (or of a library it uses) is keyed by a
/// pointer without `pid`: two processes' objects can then share an address, and their
/// entries one key (docs/fleet.md). gtrace's own records of goroutines are keyed by the
/// process as well, and need no warning.
pub(super) fn shared_addresses_warning(process: &Process, target: &crate::gobin::Target, plan: &Plan) {
    let every_process = process.pid.is_none() && process.command.is_none();
    let Some(version) = target.go_version() else { return };
    if !every_process || !fixed_heap(version) {
        return;
    }
    // A private map (`@_name`) is a library's own, which the user cannot rekey.
    let (private, shown): (Vec<String>, Vec<String>) =
        pointer_keyed(plan).into_iter().partition(|n| n.starts_with("@_"));
    if !shown.is_empty() {
        eprintln!(
            "gtrace: warning: -b: this binary ({version}) puts every process's heap at the same address, and {} keyed by a pointer without `pid`: two processes' entries can share a key (add `pid` to the key, or trace each process with -p; docs/fleet.md)",
            shown.join(", ")
        );
    }
    if !private.is_empty() {
        eprintln!(
            "gtrace: warning: -b: this binary ({version}) puts every process's heap at the same address, and the library keeps {} by address alone: two processes' requests at one address can share an entry, and one of them is then not counted or timed wrongly (trace each process with -p for exact numbers; docs/fleet.md)",
            private.join(", ")
        );
    }
}

/// The maps of `plan` (`@name`) with a pointer in their key and no key named `pid`.
fn pointer_keyed(plan: &Plan) -> Vec<String> {
    use crate::plan::{MapRole, ValueType};
    (plan.maps.iter())
        .filter_map(|m| match &m.role {
            MapRole::User { name, keys, key_names, .. }
                if keys.iter().any(|k| matches!(k.ty, ValueType::Pointer)) && !key_names.iter().any(|k| k == "pid") =>
            {
                Some(format!("@{name}"))
            }
            _ => None,
        })
        .collect()
}

/// Whether a binary of this Go version puts its heap at the same address in every
/// process: before Go 1.26, or with the experiment `norandomizedheapbase64`.
fn fixed_heap(version: &str) -> bool {
    crate::gobin::go_minor(version).is_some_and(|minor| minor < 26) || version.contains("norandomizedheapbase")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heaps_at_a_fixed_address_are_told_by_the_go_version() {
        assert!(fixed_heap("go1.25.3"));
        assert!(fixed_heap("go1.17.13"));
        assert!(fixed_heap("go1.26.8-X:norandomizedheapbase64"));
        assert!(!fixed_heap("go1.26.8"));
        assert!(!fixed_heap("go1.27rc1"));
        assert!(!fixed_heap("devel go1.27-abcdef"));
    }

    #[test]
    fn maps_keyed_by_a_pointer_without_pid_are_named() {
        use crate::plan::{Field, MapKind, MapRole, MapSpec, MapValue, ValueType};
        let map = |name: &str, keys: &[(&str, ValueType)]| MapSpec {
            object_name: format!("m_{name}"),
            kind: MapKind::Hash,
            key_size: 8 * keys.len() as u32,
            value_size: 8,
            max_entries: 16,
            role: MapRole::User {
                name: name.into(),
                keys: keys
                    .iter()
                    .enumerate()
                    .map(|(i, (_, ty))| Field { offset: 8 * i as u32, ty: ty.clone() })
                    .collect(),
                key_names: keys.iter().map(|(n, _)| n.to_string()).collect(),
                value: MapValue::Plain(ValueType::Int { size: 8, signed: false }),
                preallocated: false,
            },
        };
        let int = ValueType::Int { size: 4, signed: false };
        let plan = Plan {
            maps: vec![
                map("t0", &[("req", ValueType::Pointer)]),
                map("mine", &[("pid", int.clone()), ("req", ValueType::Pointer)]),
                map("n", &[("code", int)]),
            ],
            ..Plan::default()
        };
        assert_eq!(pointer_keyed(&plan), vec!["@t0".to_string()]);
    }

    #[test]
    fn a_file_through_a_process_root_is_named_as_inside() {
        assert_eq!(binary_name(Path::new("/proc/4242/root/app/server")), PathBuf::from("/app/server"));
        assert_eq!(binary_name(Path::new("/proc/4242/root/usr/bin/x")), PathBuf::from("/usr/bin/x"));
        assert_eq!(binary_name(Path::new("/proc/self/root/bin/x")), PathBuf::from("/proc/self/root/bin/x"));
        assert_eq!(binary_name(Path::new("/no/such/file")), PathBuf::from("/no/such/file"));
    }
}
