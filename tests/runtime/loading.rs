//! Loading: plain maps of one value and arrays cleared to zero, the verifier's rejection
//! with its log, large per-CPU maps made on threads (and the one refused among them), and
//! made ahead from a description (used only when the object has exactly them).

use super::*;

#[test]
fn plain_maps_have_one_value_and_arrays_clear_to_zero() {
    let _serial = serial();
    for kind in [MapKind::Hash, MapKind::Array, MapKind::PercpuArray] {
        let begin = probe("on_begin", ProbeAttach::Begin);
        let counts = map_spec(COUNTS, kind, if kind == MapKind::Hash { 8 } else { 4 }, 8, 4, MapRole::Scratch);
        // Arrays are keyed by u32: the cookie (0) fits in the key's first 4 bytes.
        let (bytes, plan) = object_and_plan(vec![(begin, count_by_cookie())], vec![counts]);
        let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
            return;
        };
        loaded.attach(go_target(), Scope::AllProcesses, None).unwrap();
        loaded.run_begin();
        loaded.run_begin();
        let entries = loaded.map_entries(COUNTS).unwrap();
        let values_per_key = if kind.is_percpu() { runtime::possible_cpus().unwrap() } else { 1 };
        assert!(entries.iter().all(|(_, v)| v.len() == values_per_key), "{kind:?}");
        let total = |entries: &runtime::Entries| -> u64 {
            entries.iter().flat_map(|(_, v)| v).map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap())).sum()
        };
        assert_eq!(total(&entries), 2, "{kind:?}");
        if kind == MapKind::Hash {
            assert_eq!(entries.len(), 1);
        } else {
            assert_eq!(entries.len(), 4, "every array element is listed");
        }
        loaded.clear_map(COUNTS).unwrap();
        assert_eq!(total(&loaded.map_entries(COUNTS).unwrap()), 0, "{kind:?}");
    }
}

#[test]
fn verifier_rejection_carries_the_log() {
    // Serial: `a_program_is_verified_once` counts the programs this process holds.
    let _serial = serial();
    let (bytes, plan) = object_and_plan(vec![(work_probe(0), out_of_bounds_stack())], vec![]);
    match runtime::load(&bytes, &plan) {
        Err(RuntimeError::Verifier { program, log }) => {
            assert_eq!(program, "count");
            assert!(!log.is_empty());
            assert_eq!(failing_insn(&log), Some(2), "{log}");
        }
        Err(e @ RuntimeError::Permission { .. }) if std::env::var("CI").as_deref() != Ok("true") => {
            skip(&e);
        }
        Err(e) => panic!("expected a verifier error, got {e:?}"),
        Ok(_) => panic!("the verifier accepted an out-of-bounds stack read"),
    }
}

/// The BPF maps this process holds whose keys are `key_size` bytes, by their
/// `max_entries` (/proc/self/fdinfo).
fn maps_with_key_size(key_size: u32) -> Vec<u32> {
    let number = |f: &std::collections::HashMap<String, String>, name: &str| f.get(name)?.parse::<u32>().ok();
    let fds = fdinfos().into_iter().filter(|f| number(f, "key_size") == Some(key_size));
    fds.filter_map(|f| number(&f, "max_entries")).collect()
}

#[test]
fn large_per_cpu_maps_made_on_threads_are_the_ones_the_programs_use() {
    let _serial = serial();
    // 4,096 keys: made on a thread, in place of aya's one-key placeholder (bigmaps.rs).
    let counts = map_spec(COUNTS, MapKind::PercpuHash, 8, 8, 4096, MapRole::Scratch);
    let other = map_spec("other", MapKind::PercpuHash, 8, 64, 2048, MapRole::Scratch);
    let (bytes, plan) =
        object_and_plan(vec![(probe("on_begin", ProbeAttach::Begin), count_by_cookie())], vec![counts, other]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    let mut sizes = maps_with_key_size(8);
    sizes.sort();
    assert!(sizes.contains(&4096) && sizes.contains(&2048), "{sizes:?}");
    assert_eq!(loaded.attach(go_target(), Scope::AllProcesses, None).unwrap(), 1);
    loaded.run_begin();
    loaded.run_begin();
    assert_eq!(count_of(&loaded, 0), 2);
}

#[test]
fn a_map_refused_while_others_are_made_is_said_once_and_every_map_is_closed() {
    let _serial = serial();
    // No other test's maps have 13-byte keys.
    const KEY: u32 = 13;
    let big = |name: &str, entries| map_spec(name, MapKind::PercpuHash, KEY, 64, entries, MapRole::Scratch);
    let small = |name: &str, key_size| map_spec(name, MapKind::Hash, key_size, 8, 16, MapRole::Scratch);
    let cases = [
        // 2^31 keys are refused (E2BIG) by the kernel before it allocates anything, on a
        // thread while another thread makes the other large map, and aya the small ones
        // (the refused map's one-key placeholder among them).
        (
            vec![big("big_a", 4096), big("big_refused", 1 << 31), big("big_b", 2048), small("small", KEY)],
            "big_refused",
            libc::E2BIG,
        ),
        // aya's own map refused (a hash without a key: EINVAL) while the large ones are made.
        (vec![big("big_a", 4096), big("big_b", 2048), small("small_refused", 0)], "small_refused", libc::EINVAL),
    ];
    for (mut maps, refused, errno) in cases {
        maps.push(counts_map());
        assert_eq!(maps_with_key_size(KEY), Vec::<u32>::new());
        let (bytes, plan) = object_and_plan(vec![(work_probe(0), count_by_cookie())], maps);
        match runtime::load(&bytes, &plan) {
            Err(RuntimeError::Load { source }) => match *source {
                aya::EbpfError::MapError(aya::maps::MapError::CreateError { name, io_error }) => {
                    assert_eq!((name.as_str(), io_error.raw_os_error()), (refused, Some(errno)));
                }
                other => panic!("expected {refused} refused, got {other:?}"),
            },
            Err(e @ RuntimeError::Permission { .. }) if std::env::var("CI").as_deref() != Ok("true") => {
                return skip(&e);
            }
            Err(e) => panic!("expected {refused} refused, got {e:?}"),
            Ok(_) => panic!("{refused} was not refused"),
        }
        // Every map made, on a thread or by aya, is closed.
        assert_eq!(maps_with_key_size(KEY), Vec::<u32>::new(), "{refused}");
    }
}

/// The ids of the BPF maps this process holds whose keys are `key_size` bytes and that
/// hold `max_entries` (/proc/self/fdinfo), sorted.
fn map_ids(key_size: u32, max_entries: u32) -> Vec<u32> {
    let number = |f: &std::collections::HashMap<String, String>, name: &str| f.get(name)?.parse::<u32>().ok();
    let fds = fdinfos().into_iter().filter(|f| number(f, "key_size") == Some(key_size));
    let fds = fds.filter(|f| number(f, "max_entries") == Some(max_entries));
    let mut ids: Vec<u32> = fds.filter_map(|f| number(&f, "map_id")).collect();
    ids.sort();
    ids
}

/// Polls `f` every 10 ms for up to 10 s until it is true; whether it became so.
fn within_seconds(f: &dyn Fn() -> bool) -> bool {
    (0..1000).any(|_| {
        f() || {
            std::thread::sleep(std::time::Duration::from_millis(10));
            false
        }
    })
}

#[test]
fn large_maps_made_ahead_are_used_only_when_the_object_has_exactly_them() {
    let _serial = serial();
    // No other test's maps have this many keys.
    const KEYS: u32 = 3001;
    let counts = map_spec(COUNTS, MapKind::PercpuHash, 8, 8, KEYS, MapRole::Scratch);
    let (bytes, plan) = object_and_plan(vec![(probe("on_begin", ProbeAttach::Begin), count_by_cookie())], vec![counts]);
    // What the cache keeps for the next run: the object's large maps.
    let defs = runtime::large_maps(&bytes);
    assert_eq!(defs.iter().map(|d| (d.name.as_str(), d.max_entries)).collect::<Vec<_>>(), [(COUNTS, KEYS)]);
    // Made ahead, as a cached run does before it compiles: the object then uses that map.
    runtime::premake(defs.clone());
    let made = within_seconds(&|| map_ids(8, KEYS).len() == 1);
    let ahead = map_ids(8, KEYS);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    assert!(made, "the map was not made ahead");
    assert_eq!(map_ids(8, KEYS), ahead, "the map made ahead is not the one in use");
    assert_eq!(loaded.attach(go_target(), Scope::AllProcesses, None).unwrap(), 1);
    loaded.run_begin();
    loaded.run_begin();
    assert_eq!(count_of(&loaded, 0), 2);
    drop(loaded);
    assert!(within_seconds(&|| map_ids(8, KEYS).is_empty()));
    // A description that is not the object's (a key fewer): not used, and closed; the
    // object's map is made at its own size.
    let mut wrong = defs.clone();
    wrong[0].max_entries = KEYS - 1;
    runtime::premake(wrong);
    assert!(within_seconds(&|| map_ids(8, KEYS - 1).len() == 1));
    let mut loaded = load_or_skip(&bytes, &plan).expect("loaded once already");
    assert_eq!(map_ids(8, KEYS).len(), 1);
    assert_eq!(loaded.attach(go_target(), Scope::AllProcesses, None).unwrap(), 1);
    loaded.run_begin();
    assert_eq!(count_of(&loaded, 0), 1);
    assert!(within_seconds(&|| map_ids(8, KEYS - 1).is_empty()), "the map made ahead was not closed");
}
