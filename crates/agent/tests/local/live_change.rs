//! Live: no request lost to a change. Keep-alive clients run through a real
//! Envoy served by `aether-edge standalone` while the configuration changes
//! ten times, 200 ms apart ([`crate::support::change`]); every change keeps the
//! clients' route served, so every request must get its 200 and no connection
//! may be closed by the server. The short form of `benches/traffic_change.rs`:
//! a backendRef switch (Delta and SotW ADS), a certificate rotation on an HTTPS
//! listener, and a rule added and removed beside the one in use (Delta).

use crate::support::change::{ROTATE, RULE_BESIDE, SWITCH, run};
use aether_testkit::live::traffic::{Plan, table_header};

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
    let mut table = table_header();
    for row in &rows {
        table.push('\n');
        table.push_str(&row.line());
    }
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
        "requests lost or connections closed by a change in {}:\n{table}",
        lossy.join(", ")
    );
}
