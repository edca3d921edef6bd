//! gtrace's own triggers: `on begin` through the ring buffer, begin once and end only at
//! the end, interval probes fired from `poll_events`.

use super::*;

#[test]
fn ring_buffer_round_trip_from_begin() {
    let _serial = serial();
    let (bytes, plan) = object_and_plan(vec![(probe("begin", ProbeAttach::Begin), send_event())], vec![events_map()]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    assert_eq!(loaded.attach(go_target(), Scope::AllProcesses, None).unwrap(), 1);
    let mut records = Vec::new();
    loaded.poll_events(Duration::ZERO, usize::MAX, &mut |r| records.push(r.to_vec())).unwrap();
    assert!(records.is_empty(), "begin ran before run_begin");
    loaded.run_begin();
    loaded.poll_events(Duration::from_secs(2), usize::MAX, &mut |r| records.push(r.to_vec())).unwrap();
    let mut expected = 7u64.to_ne_bytes().to_vec();
    expected.extend(0x1122_3344_5566_7788u64.to_ne_bytes());
    assert_eq!(records, vec![expected]);
}

/// At most `most` records a call: the rest stay in the buffer, in order, for the next
/// (a buffer filled as fast as it is read is never empty: the trace loop holds one batch
/// at a time).
#[test]
fn records_are_delivered_at_most_a_batch_at_a_time() {
    let _serial = serial();
    let probes =
        vec![(probe("begin", ProbeAttach::Begin), send_event()), (probe("end", ProbeAttach::End), send_event())];
    let (bytes, plan) = object_and_plan(probes, vec![events_map()]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    assert_eq!(loaded.attach(go_target(), Scope::AllProcesses, None).unwrap(), 2);
    loaded.run_begin();
    loaded.run_end();
    let mut records = Vec::new();
    let mut poll = |wait: Duration, records: &mut Vec<Vec<u8>>| {
        loaded.poll_events(wait, 1, &mut |r| records.push(r.to_vec())).unwrap()
    };
    assert_eq!(poll(Duration::from_secs(2), &mut records), 1);
    assert_eq!(records.len(), 1, "one record of the two");
    assert_eq!(poll(Duration::ZERO, &mut records), 1);
    assert_eq!(poll(Duration::ZERO, &mut records), 0);
    assert_eq!(records.len(), 2, "the second came with the next call");
}

#[test]
fn begin_runs_once_and_end_only_at_end() {
    let _serial = serial();
    let mut begin = work_probe(0);
    begin.program = "on_begin".into();
    begin.attach = ProbeAttach::Begin;
    let end = probe("on_end", ProbeAttach::End);
    // Both count under their cookie, 0: begin and end share the map.
    let (bytes, plan) = object_and_plan(vec![(begin, count_by_cookie()), (end, count_by_cookie())], vec![counts_map()]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    assert_eq!(loaded.attach(go_target(), Scope::AllProcesses, None).unwrap(), 2);
    assert_eq!(count_of(&loaded, 0), 0);
    loaded.run_begin();
    assert_eq!(count_of(&loaded, 0), 1);
    loaded.run_end();
    assert_eq!(count_of(&loaded, 0), 2);
    loaded.detach_all();
    loaded.run_begin();
    assert_eq!(count_of(&loaded, 0), 2);
}

#[test]
fn interval_probes_fire_from_poll_events() {
    let _serial = serial();
    let tick = probe("tick", ProbeAttach::Interval { nanos: 20_000_000 });
    let (bytes, plan) = object_and_plan(vec![(tick, count_by_cookie())], vec![counts_map()]);
    let Some(mut loaded) = load_or_skip(&bytes, &plan) else {
        return;
    };
    let before_attach = Instant::now();
    assert_eq!(loaded.attach(go_target(), Scope::AllProcesses, None).unwrap(), 1);
    let start = Instant::now();
    // The calls that waited their whole 50ms (a signal may end one early).
    let mut calls = 0;
    while start.elapsed() < Duration::from_millis(250) {
        let call = Instant::now();
        loaded.poll_events(Duration::from_millis(50), usize::MAX, &mut |_| {}).unwrap();
        calls += u64::from(call.elapsed() >= Duration::from_millis(50));
    }
    assert!(calls > 0, "no poll waited its 50ms");
    let span = before_attach.elapsed();
    let ticks = count_of(&loaded, 0);
    // What the timer promises whatever the host's speed: a call that waits 50ms passes
    // at least one 20ms tick, which it fires (at least one tick a call); missed ticks are
    // skipped, never fired in a burst (at most one a 20ms period since the attach). The
    // old bounds, 3 to 13 ticks in 250ms, counted on waking on time: a late last
    // wake-up after a slow attach fires a 14th tick.
    let most = (span.as_nanos() / 20_000_000) as u64;
    assert!(
        ticks >= calls && ticks <= most,
        "{ticks} ticks of 20ms in {calls} polls of 50ms, {span:?} since the attach"
    );
}
