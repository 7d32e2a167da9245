//! Live: no request lost to a change. Keep-alive clients (HTTP/1.1, HTTP/2,
//! gRPC unary, a gRPC server stream held open) run through a real
//! Envoy served by `aether-edge standalone` while the configuration changes
//! ten times, 200 ms apart ([`crate::support::change`]); every change keeps the
//! clients' route served, so every request must get its 200 and no connection
//! may be closed by the server. The short form of `benches/traffic_change.rs`:
//! a backendRef switch (Delta and SotW ADS), a certificate rotation on an HTTPS
//! listener with a WebSocket held open through it, and a rule added and
//! removed beside the one in use (Delta).
//!
//! And a backend that dies: one of b0's two endpoint processes killed with
//! SIGKILL under 50 requests/s, nothing else changing. Only the requests that
//! endpoint held when it died may be lost (the default retries move the tries
//! that never reached a backend to the other one): at most 3.

use crate::support::change::{KILL, ROTATE, RULE_BESIDE, SWITCH, run};
use aether_testkit::live::traffic::{Plan, Row, table_header};

#[test]
fn no_request_is_lost_and_no_connection_closed_by_a_change() {
    let plan = Plan::default();
    let rows: Vec<_> = [
        (SWITCH, true),
        (SWITCH, false),
        (ROTATE, true),
        (RULE_BESIDE, true),
    ]
    .iter()
    .map(|(case, delta)| run(case, *delta, &plan))
    .collect();
    let table = table(&rows);
    eprintln!("{table}");
    for row in &rows {
        assert!(
            row.tally.ok > 100,
            "too little traffic to mean anything:\n{table}"
        );
    }
    let lossy: Vec<String> = rows
        .iter()
        .filter(|r| !r.clean())
        .map(|r| format!("{} ({})", r.scenario, r.mode))
        .collect();
    assert!(
        lossy.is_empty(),
        "requests lost, connections or sessions closed by a change in {}:\n{table}",
        lossy.join(", ")
    );
    let ws = &rows[2].sessions;
    assert!(
        ws.len() == 1 && ws[0].answered == 11,
        "a WebSocket answers after each of 10 rotations and at the end:\n{table}"
    );
    let stream = rows[2].h2.as_ref().map(|h2| &h2.stream);
    assert!(
        stream.is_some_and(|s| s.breaks == 0 && s.messages >= 100),
        "a gRPC stream (a message every 20 ms) holds through 10 rotations:\n{table}"
    );
    let switched = rows[0].h2.as_ref().map(|h2| &h2.grpc.backends);
    assert!(
        switched.is_some_and(|b| b.len() == 2),
        "the gRPC calls follow the switch to g1 and back:\n{table}"
    );
}

#[test]
fn a_backend_killed_without_notice_costs_at_most_3_requests() {
    let row = run(&KILL, true, &Plan::default());
    let table = table(std::slice::from_ref(&row));
    eprintln!("{table}");
    assert!(row.tally.ok > 250, "50 requests/s for 7 s:\n{table}");
    assert!(
        row.tally.lost() <= 3,
        "at most 3 requests lost to a kill -9:\n{table}"
    );
    let names: Vec<&String> = row.tally.backends.keys().collect();
    assert_eq!(names, ["b0-0", "b0-1"], "both endpoints served:\n{table}");
}

fn table(rows: &[Row]) -> String {
    let mut table = table_header();
    for row in rows {
        table.push('\n');
        table.push_str(&row.line());
    }
    table
}
