//! The leader's status gate at fleet scale: 1,000 Gateways × 100 nodes.
//!
//! Builds a snapshot with 1,000 Gateways (a listener, a route table, a cluster and
//! its endpoints each) and joins 100 node reports into per-Gateway ACK states, in
//! both report forms: caught up (the compact `acked_snapshot`) and mid-change
//! (a hash per Gateway). Every node takes every Gateway's traffic (each
//! Gateway's Service has all 100 as Ready endpoints), as in service mode.
//! Prints the join time (median of 21) and report sizes.
//!
//! `cargo bench -p aether-benches --bench fleet`

use aether_benches::median_p99;
use aether_report::{AckReport, Members, Reports};
use aether_xds::{ResourceType, Snapshot};
use prost::Message;
use std::collections::BTreeSet;
use std::time::Instant;

/// The allocator the `aether-edge` binary runs on.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const GATEWAYS: usize = 1_000;
const NODES: usize = 100;
const RUNS: usize = 21;

fn snapshot() -> Snapshot {
    let types = [
        ResourceType::Listener,
        ResourceType::Route,
        ResourceType::Cluster,
        ResourceType::Endpoint,
    ];
    aether_benches::gateways_snapshot(GATEWAYS, "default", &types, |_, name, _| {
        format!("{name} body").into_bytes()
    })
}

/// Every Gateway's Service has every node as a Ready endpoint.
fn members(snapshot: &Snapshot) -> Members {
    let nodes: BTreeSet<String> = (0..NODES).map(|n| format!("node-{n}")).collect();
    Members {
        per_gateway: snapshot
            .gateways
            .keys()
            .map(|gw| (gw.clone(), nodes.clone()))
            .collect(),
        ..Default::default()
    }
}

/// The gate's join (median ms, Gateways ACKed) and the same join node by node
/// for `aether-edge fleet` (median ms, Gateways every node serves).
fn time_join(reports: &Reports, snapshot: &Snapshot) -> (f64, usize, f64, usize) {
    let members = members(snapshot);
    let (mut gate, mut per_node) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
    let (mut acked, mut served_by_all) = (0, 0);
    for _ in 0..RUNS {
        let t = Instant::now();
        let served = reports.served(snapshot, &members);
        gate.push(t.elapsed().as_secs_f64() * 1e3);
        acked = served
            .values()
            .filter(|s| s.gateway == aether_gateway::AckState::Acked)
            .count();
        let t = Instant::now();
        let view = reports.per_node(snapshot, &members);
        per_node.push(t.elapsed().as_secs_f64() * 1e3);
        served_by_all = view
            .values()
            .filter(|g| g.served == NODES && g.others.is_empty())
            .count();
    }
    let (gate, _) = median_p99(&mut gate);
    let (per_node, _) = median_p99(&mut per_node);
    (gate, acked, per_node, served_by_all)
}

fn main() {
    let snapshot = snapshot();
    println!("status gate join, {GATEWAYS} Gateways × {NODES} nodes, median of {RUNS} (release)");

    let caught_up = Reports::default();
    for n in 0..NODES {
        caught_up.update(AckReport {
            node: format!("node-{n}"),
            envoy_connected: true,
            acked_snapshot: snapshot.version.clone(),
            ..Default::default()
        });
    }
    let compact = caught_up.nodes()["node-0"].encoded_len();
    let (ms, acked, view_ms, all) = time_join(&caught_up, &snapshot);
    assert_eq!((acked, all), (GATEWAYS, GATEWAYS));
    println!(
        "  caught up (compact reports, {compact} B each):   {ms:.2} ms, {acked} Gateways ACKed; node by node (fleet view) {view_ms:.2} ms"
    );
    let at = format!("{GATEWAYS} Gateways × {NODES} nodes");
    aether_benches::summary(
        "fleet",
        &format!("{at}: join, caught up"),
        format!("{ms:.2} ms"),
        "bounded",
    );

    let mid_change = Reports::default();
    for n in 0..NODES {
        let acked = snapshot
            .gateways
            .iter()
            .map(|(gw, g)| (gw.to_string(), g.hash.clone()))
            .collect();
        mid_change.update(AckReport {
            node: format!("node-{n}"),
            envoy_connected: true,
            acked,
            ..Default::default()
        });
    }
    let whole = mid_change.nodes()["node-0"].clone();
    let (ms, acked, view_ms, all) = time_join(&mid_change, &snapshot);
    assert_eq!((acked, all), (GATEWAYS, GATEWAYS));
    println!(
        "  mid-change (a hash per Gateway, {} B whole):  {ms:.2} ms, {acked} Gateways ACKed; node by node (fleet view) {view_ms:.2} ms",
        whole.encoded_len()
    );
    aether_benches::summary(
        "fleet",
        &format!("{at}: join, mid-change"),
        format!("{ms:.2} ms"),
        "bounded",
    );
    // What travels after the first report of a stream: one Gateway's change.
    let mut next = whole.clone();
    next.acked.insert("default/gw-7".into(), "0".repeat(64));
    let one = aether_report::client::delta(&whole, &next).encoded_len();
    println!(
        "  one Gateway changed: a {one} B delta; leader inbound at one report per agent per 100 ms ≤ {:.0} kB/s",
        (one * NODES * 10) as f64 / 1e3
    );
}
