//! Traffic under change: requests lost and connections closed while the
//! configuration (or the world around it) changes, per scenario and ADS mode.
//! Keep-alive clients (4 threads, one persistent HTTP/1.1 connection each,
//! plain or TLS) run through a real Envoy served by `aether-edge standalone`
//! while a scenario makes 10 changes 200 ms apart, then 1 s to settle, unless
//! said otherwise ([`support::change`] has the scenarios and the files they
//! rewrite):
//!
//! - a: an HTTPRoute rule's backendRef switched b0 → b1 → b0 …
//! - b: the same on an HTTPS listener
//! - c: the HTTPS listener's certificate rotated (its Secret rewritten), a
//!   WebSocket held open through it (a message after each rotation)
//! - d: a rule added and removed beside the rule in use
//! - e: a second HTTPRoute on the same hostname added and removed
//! - f: a second listener added to and removed from the Gateway
//! - g: the rule's weights between b0 and b1 changed (through 100/0 and 0/100)
//! - h: one of b0's two endpoint processes killed with SIGKILL 1 s in, then 6 s
//!   more, no config change; 5 clients paced at 50 requests/s in all
//! - i: a second Gateway's own route switched b1 → b0 → b1 …
//! - j: b0's two endpoint processes replaced one at a time: a new one added,
//!   an old one out of the EndpointSlices, stopped 1 s later (6 steps 1 s apart)
//! - k: b0's Service port 80 → 8080 → 80 … with the backendRef port (one file)
//! - l: a second Gateway's route rejected by Envoy (a new NACK every other
//!   change), the first Gateway's rule switched b0 ↔ b1 in between
//! - m: the agent killed with SIGKILL and started again (2 times, 2 s apart)
//!
//! One row per run: requests sent, non-200 answers, requests without an answer,
//! connections the server closed, connections opened, connect/handshake errors,
//! the longest time a client went without a 200, which backends answered (and,
//! TLS, how many certificates the clients saw; a held WebSocket, its messages
//! answered and whether it stayed open); under it the failures by answer and
//! the Envoy counters that moved (`no_cluster`, `cluster_removed`,
//! `listener_modified`, retries, ADS reconnects, …). Numbers only, nothing
//! asserted.
//!
//! `[AETHER_TRAFFIC_ROUTES=N] cargo bench -p aether-edge --bench traffic_change [-- [delta|sotw] [a b …] [runs=N] [clients=N] [changes=N]]`
//! (`AETHER_TRAFFIC_ROUTES`: N more HTTPRoutes on the same Gateway, each its own
//! host, so every change rebuilds one route table of N + 1 routes). Under each
//! row, Envoy's own apply time per xDS type (its `update_duration` histograms).
//! (both modes, every scenario, one run each by default).

#[path = "../tests/support/mod.rs"]
mod support;

use aether_testkit::live::traffic::{Plan, table_header};
use support::change::{ALL, run};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |key: &str| {
        args.iter().find_map(|a| {
            a.strip_prefix(key)?
                .strip_prefix('=')?
                .parse::<usize>()
                .ok()
        })
    };
    let modes: Vec<bool> = match (
        args.iter().any(|a| a == "delta"),
        args.iter().any(|a| a == "sotw"),
    ) {
        (true, false) => vec![true],
        (false, true) => vec![false],
        _ => vec![true, false],
    };
    let letters: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| a.len() == 1)
        .collect();
    let cases: Vec<_> = ALL
        .iter()
        .filter(|c| letters.is_empty() || letters.iter().any(|l| c.name.starts_with(l)))
        .collect();
    let runs = arg("runs").unwrap_or(1);
    let mut plan = Plan::default();
    plan.clients = arg("clients").unwrap_or(plan.clients);
    plan.changes = arg("changes").unwrap_or(plan.changes);
    println!(
        "traffic under change: {} keep-alive clients, {} changes {} ms apart, {} ms settle",
        plan.clients,
        plan.changes,
        plan.interval.as_millis(),
        plan.settle.as_millis()
    );
    println!("{}", table_header());
    let (mut rows, mut clean) = (0, 0);
    for case in cases {
        for &delta in &modes {
            for _ in 0..runs {
                let row = run(case, delta, &plan);
                println!("{}", row.line());
                rows += 1;
                clean += usize::from(row.clean());
            }
        }
    }
    println!("{clean} of {rows} runs lost no request and closed no connection");
}
