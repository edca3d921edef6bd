//! The BPF helper functions the compiler calls, numbered as `enum bpf_func_id` in
//! `linux/bpf.h` numbers them (`BPF_FUNC_map_lookup_elem = 1`, ...), with their names
//! for the disassembler.

#![allow(non_upper_case_globals)]

pub const BPF_FUNC_map_lookup_elem: i32 = 1;
pub const BPF_FUNC_map_update_elem: i32 = 2;
pub const BPF_FUNC_map_delete_elem: i32 = 3;
pub const BPF_FUNC_ktime_get_ns: i32 = 5;
pub const BPF_FUNC_trace_printk: i32 = 6;
pub const BPF_FUNC_get_prandom_u32: i32 = 7;
pub const BPF_FUNC_get_smp_processor_id: i32 = 8;
pub const BPF_FUNC_get_current_pid_tgid: i32 = 14;
pub const BPF_FUNC_get_current_comm: i32 = 16;
pub const BPF_FUNC_get_stackid: i32 = 27;
pub const BPF_FUNC_current_task_under_cgroup: i32 = 37;
pub const BPF_FUNC_probe_read_user: i32 = 112;
pub const BPF_FUNC_probe_read_kernel: i32 = 113;
pub const BPF_FUNC_probe_read_user_str: i32 = 114;
pub const BPF_FUNC_ringbuf_output: i32 = 130;
pub const BPF_FUNC_ringbuf_reserve: i32 = 131;
pub const BPF_FUNC_ringbuf_submit: i32 = 132;
pub const BPF_FUNC_ringbuf_discard: i32 = 133;
pub const BPF_FUNC_ringbuf_query: i32 = 134;
/// `bpf_ringbuf_query`'s question: bytes waiting to be read.
pub const BPF_RB_AVAIL_DATA: i32 = 0;
/// `bpf_ringbuf_output`'s flags: no wake-up of the reader, or a forced one.
pub const BPF_RB_NO_WAKEUP: i32 = 1;
pub const BPF_RB_FORCE_WAKEUP: i32 = 2;
pub const BPF_FUNC_get_func_ip: i32 = 173;
pub const BPF_FUNC_get_attach_cookie: i32 = 174;

/// `BPF_ANY` flag of `bpf_map_update_elem`: create or update.
pub const BPF_ANY: i32 = 0;
/// `BPF_NOEXIST` flag of `bpf_map_update_elem`: create only.
pub const BPF_NOEXIST: i32 = 1;
/// `BPF_EXIST` flag of `bpf_map_update_elem`: update only.
pub const BPF_EXIST: i32 = 2;
/// `BPF_F_USER_STACK` flag of `bpf_get_stackid`.
pub const BPF_F_USER_STACK: i64 = 1 << 8;

/// Every helper known here, with its name without the `bpf_` prefix.
pub const HELPERS: &[(i32, &str)] = &[
    (BPF_FUNC_map_lookup_elem, "map_lookup_elem"),
    (BPF_FUNC_map_update_elem, "map_update_elem"),
    (BPF_FUNC_map_delete_elem, "map_delete_elem"),
    (BPF_FUNC_ktime_get_ns, "ktime_get_ns"),
    (BPF_FUNC_trace_printk, "trace_printk"),
    (BPF_FUNC_get_prandom_u32, "get_prandom_u32"),
    (BPF_FUNC_get_smp_processor_id, "get_smp_processor_id"),
    (BPF_FUNC_get_current_pid_tgid, "get_current_pid_tgid"),
    (BPF_FUNC_get_current_comm, "get_current_comm"),
    (BPF_FUNC_get_stackid, "get_stackid"),
    (BPF_FUNC_current_task_under_cgroup, "current_task_under_cgroup"),
    (BPF_FUNC_probe_read_user, "probe_read_user"),
    (BPF_FUNC_probe_read_kernel, "probe_read_kernel"),
    (BPF_FUNC_probe_read_user_str, "probe_read_user_str"),
    (BPF_FUNC_ringbuf_output, "ringbuf_output"),
    (BPF_FUNC_ringbuf_reserve, "ringbuf_reserve"),
    (BPF_FUNC_ringbuf_submit, "ringbuf_submit"),
    (BPF_FUNC_ringbuf_discard, "ringbuf_discard"),
    (BPF_FUNC_ringbuf_query, "ringbuf_query"),
    (BPF_FUNC_get_func_ip, "get_func_ip"),
    (BPF_FUNC_get_attach_cookie, "get_attach_cookie"),
];

/// The name of helper `id` (without `bpf_`), if it is one the compiler knows.
pub fn name(id: i32) -> Option<&'static str> {
    HELPERS.iter().find(|(i, _)| *i == id).map(|(_, n)| *n)
}

/// The id of the helper named `name` (without `bpf_`).
pub fn by_name(name: &str) -> Option<i32> {
    HELPERS.iter().find(|(_, n)| *n == name).map(|(i, _)| *i)
}

/// The Linux release that added helper `id`, for the helpers gtrace's programs call: what
/// a kernel whose verifier does not know one is older than.
pub fn since(id: i32) -> Option<&'static str> {
    Some(match id {
        BPF_FUNC_map_lookup_elem | BPF_FUNC_map_update_elem | BPF_FUNC_map_delete_elem => "3.18",
        BPF_FUNC_ktime_get_ns | BPF_FUNC_get_smp_processor_id | BPF_FUNC_get_prandom_u32 => "4.1",
        BPF_FUNC_get_current_pid_tgid | BPF_FUNC_get_current_comm => "4.2",
        BPF_FUNC_current_task_under_cgroup => "4.9",
        BPF_FUNC_probe_read_user => "5.5",
        BPF_FUNC_ringbuf_output | BPF_FUNC_ringbuf_query => "5.8",
        BPF_FUNC_get_attach_cookie => "5.15",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_helper_gtrace_emits_has_its_release() {
        for id in crate::plan::validate::EMITTED_HELPERS {
            assert!(since(*id).is_some(), "helper {id}");
        }
    }

    #[test]
    fn names_and_ids_are_unique_and_invert() {
        for (id, n) in HELPERS {
            assert_eq!(name(*id), Some(*n));
            assert_eq!(by_name(n), Some(*id));
        }
        assert_eq!(name(4), None);
    }
}

/// How many arguments (R1 onwards) a helper reads: 5 for one not listed, the most any
/// helper takes. Register allocation (lower/ir) keeps only those live up to the call.
pub fn helper_args(id: i32) -> u8 {
    match id {
        BPF_FUNC_ktime_get_ns
        | BPF_FUNC_get_prandom_u32
        | BPF_FUNC_get_smp_processor_id
        | BPF_FUNC_get_current_pid_tgid => 0,
        BPF_FUNC_get_attach_cookie => 1,
        BPF_FUNC_map_lookup_elem
        | BPF_FUNC_map_delete_elem
        | BPF_FUNC_get_current_comm
        | BPF_FUNC_ringbuf_query
        | BPF_FUNC_ringbuf_submit
        | BPF_FUNC_ringbuf_discard
        | BPF_FUNC_current_task_under_cgroup => 2,
        BPF_FUNC_probe_read_user
        | BPF_FUNC_probe_read_kernel
        | BPF_FUNC_probe_read_user_str
        | BPF_FUNC_ringbuf_reserve
        | BPF_FUNC_get_stackid => 3,
        BPF_FUNC_map_update_elem | BPF_FUNC_ringbuf_output => 4,
        _ => 5,
    }
}
