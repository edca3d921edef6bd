//! Third-party programs from the Go module proxy, traced as a user would, with counts
//! compared with the programs' own metrics. tests/go/nats embeds a NATS message broker
//! (github.com/nats-io/nats-server/v2) and a client publishing to it; the broker's own
//! counters (Varz) and the runtime's GC count are the truth. (The web server, echo over
//! HTTP/1.1 and HTTP/2, is in tests/stdlib_net.rs.) Built once and cached under
//! target/gobin; needs root, like every end-to-end test.

mod support;

use support::{map_value, privileged, truth, Run};

const PROCESS_MSG: &str = "\"github.com/nats-io/nats-server/v2/server.(*client).processInboundClientMsg\"";

fn trace(args: &[&str], n: u32) -> Run {
    support::trace_command(args, &support::go_build("nats", &[]), &n.to_string())
}

#[test]
fn a_message_brokers_messages_are_counted_as_the_broker_counts_them() {
    if !privileged("a_message_brokers_messages_are_counted_as_the_broker_counts_them") {
        return;
    }
    // Every message a client publishes goes through processInboundClientMsg, and so do
    // the server's own system messages (c.kind 3): those the broker's InMsgs leaves out.
    let script = format!(
        "on entry {PROCESS_MSG} {{ @msgs[c.kind] = count(); @bytes[c.kind] = sum(len(msg)); @all = count() }}\n\
         on return {PROCESS_MSG} {{ @lat = hist(elapsed) }}"
    );
    let r = trace(&["-e", &script], 3000);
    let (in_msgs, in_bytes) = (truth(&r.stdout, "in_msgs"), truth(&r.stdout, "in_bytes"));
    assert_eq!(in_msgs, 3000);
    assert_eq!(map_value(&r.stdout, "@msgs[0]"), in_msgs, "{}", r.stdout);
    // The broker counts payload bytes; msg is the payload with the protocol's CRLF.
    assert_eq!(map_value(&r.stdout, "@bytes[0]"), in_bytes + 2 * in_msgs, "{}", r.stdout);
    // Every call returned once, whatever its kind.
    let all = map_value(&r.stdout, "@all");
    let hist: i64 = r
        .stdout
        .lines()
        .skip_while(|l| *l != "@lat:")
        .skip(1)
        .take_while(|l| l.starts_with('['))
        .map(|l| l.split('|').next().unwrap().split_whitespace().last().unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(hist, all, "{}", r.stdout);
}

#[test]
fn the_gc_library_counts_the_brokers_collections() {
    if !privileged("the_gc_library_counts_the_brokers_collections") {
        return;
    }
    let r = trace(&["gc"], 3000);
    assert_eq!(map_value(&r.stdout, "@gc_cycles"), truth(&r.stdout, "num_gc"), "{}", r.stdout);
    // Two stop-the-world pauses a cycle.
    assert_eq!(map_value(&r.stdout, "@gc_pauses"), 2 * truth(&r.stdout, "num_gc"), "{}", r.stdout);
}
