//! The leader's status gate at fleet scale: 1,000 Gateways × 100 nodes.
//!
//! Builds a snapshot with 1,000 Gateways (a listener, a route table, a cluster and
//! its endpoints each) and joins 100 node reports into per-Gateway ACK states, in
//! both report forms: caught up (the compact `acked_snapshot`) and mid-change
//! (a hash per Gateway). Every node takes every Gateway's traffic (each
//! Gateway's Service has all 100 as Ready endpoints), as in service mode.
//! Prints the join time (median of 21) and report sizes.
//!
//! Then the status writes of two rollouts over the same fleet, 1,000 Gateways
//! with a route each: every Gateway first programmed, then one route changed.
//! The nodes' reports arrive one at a time, and after each one the leader joins,
//! computes the patches and "writes" them (applied to the store as the API server
//! would): no debounce at all, so these counts are an upper bound on what the
//! status writer sends. Bounded means writes per object do not grow with the
//! number of nodes: at most one while the nodes roll and one when the last ACKs.
//!
//! `cargo bench -p aether-benches --bench fleet`

use aether_benches::{median_p99, scale_yaml};
use aether_gateway::{AckState, Addresses, Config, Served, StatusPlan, Store, assemble};
use aether_ir::ObjectRef;
use aether_k8s::ServedVersions;
use aether_k8s::status::{Settled, compute_over};
use aether_k8s::status::{StatusInputs, StatusKind};
use aether_report::{AckReport, Members, Reports};
use aether_xds::{ResourceType, Snapshot};
use gateway_api::apis::experimental::httproutes::HttpRoute;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
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
        caught_up.apply(AckReport {
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
        mid_change.apply(AckReport {
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

    status_writes();
}

/// What one rollout wrote: writes per kind, the most any one object got, and
/// the leader's time per report (join + assemble + compute, ms).
struct Rollout {
    writes: BTreeMap<StatusKind, usize>,
    most_per_object: usize,
    step_ms: Vec<f64>,
}

/// The nodes report `snapshot` ACKed one at a time; after each report (and once
/// before the first) the leader computes the status and writes what changed.
fn rollout(
    store: &mut Arc<Store>,
    reports: &Reports,
    snapshot: &Snapshot,
    plan: &StatusPlan,
    settled: &mut Settled,
) -> Rollout {
    let members = members(snapshot);
    let config = Config::default();
    reports.remember(snapshot);
    let mut out = Rollout {
        writes: BTreeMap::new(),
        most_per_object: 0,
        step_ms: Vec::with_capacity(NODES + 1),
    };
    let mut per_object: BTreeMap<(StatusKind, ObjectRef), usize> = BTreeMap::new();
    for n in 0..=NODES {
        if n > 0 {
            reports.apply(AckReport {
                node: format!("node-{}", n - 1),
                envoy_connected: true,
                acked_snapshot: snapshot.version.clone(),
                ..Default::default()
            });
        }
        let t = Instant::now();
        let served = reports.served(snapshot, &members);
        let gated = assemble(
            plan,
            |gw| {
                served
                    .get(gw)
                    .cloned()
                    .unwrap_or_else(|| Served::whole(AckState::Pending))
            },
            &Addresses::Planned,
        );
        let inputs = StatusInputs {
            plan: gated,
            store: store.clone(),
            supported_features: vec!["Gateway".into(), "HTTPRoute".into()],
            controller_name: config.controller_name.clone(),
            served: ServedVersions::all_v1(),
            served_at: None,
        };
        let patches = compute_over(&inputs, None, settled, &Time(Default::default())).patches;
        out.step_ms.push(t.elapsed().as_secs_f64() * 1e3);
        drop(inputs);
        let written = Arc::make_mut(store);
        for patch in &patches {
            patch.apply_to(written).expect("the status applies");
            *out.writes.entry(patch.kind).or_default() += 1;
            *per_object
                .entry((patch.kind, patch.object.clone()))
                .or_default() += 1;
        }
    }
    out.most_per_object = per_object.values().copied().max().unwrap_or(0);
    out
}

/// How many Gateways say `Programmed=True` and how many of their listeners
/// count one attached route.
fn programmed(store: &Store) -> (usize, usize) {
    use gateway_api::apis::experimental::gateways::Gateway;
    let (mut programmed, mut attached) = (0, 0);
    for g in 0..GATEWAYS {
        let Some(status) = store
            .get::<Gateway>("default", &format!("gw-{g}"))
            .and_then(|gw| gw.status.as_ref())
        else {
            continue;
        };
        let is_true = |t: &str| {
            status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == t && c.status == "True")
        };
        programmed += usize::from(is_true("Programmed"));
        attached += status
            .listeners
            .iter()
            .flatten()
            .filter(|l| l.attached_routes == 1)
            .count();
    }
    (programmed, attached)
}

/// Prints what a rollout wrote, once every Gateway of `store` says it is
/// programmed with its route attached (the rollout's end, as status tells it).
fn print_rollout(what: &str, store: &Store, r: &mut Rollout) {
    assert_eq!(
        programmed(store),
        (GATEWAYS, GATEWAYS),
        "{what}: every Gateway programmed"
    );
    let total: usize = r.writes.values().sum();
    let kinds: Vec<String> = r.writes.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let (median, p99) = median_p99(&mut r.step_ms);
    println!(
        "  {what}: {total} writes ({}), at most {} per object; leader per report {median:.1} ms median, {p99:.1} ms p99",
        kinds.join(", "),
        r.most_per_object
    );
}

fn status_writes() {
    println!(
        "status writes over a rollout, {GATEWAYS} Gateways with a route each × {NODES} nodes reporting one at a time, no debounce"
    );
    let yaml = scale_yaml(GATEWAYS, GATEWAYS);
    let mut base = Store::default();
    base.add_yaml("fleet.yaml", &yaml).expect("the fleet loads");
    let config = Config::default();
    let translation = aether_gateway::translate(&base, &config);
    let snapshot = aether_xds::build(&translation.ir);
    assert_eq!(snapshot.gateways.len(), GATEWAYS);

    let mut store = Arc::new(base);
    let reports = Reports::default();
    let mut settled = Settled::default();
    let mut first = rollout(
        &mut store,
        &reports,
        &snapshot,
        &translation.status,
        &mut settled,
    );
    print_rollout("every Gateway programmed", &store, &mut first);

    // One route changes: its path, so its Gateway's route table. The store
    // keeps the status written so far, as the API server does.
    let moved = {
        let mut one = Store::default();
        one.add_yaml("route-7.yaml", &yaml_of_route_7())
            .expect("route-7 loads");
        one.get::<HttpRoute>("default", "route-7")
            .expect("route-7")
            .spec
            .clone()
    };
    let mut route = store
        .get::<HttpRoute>("default", "route-7")
        .expect("route-7")
        .clone();
    route.spec = moved;
    Arc::make_mut(&mut store).insert(route);
    let translation = aether_gateway::translate(&store, &config);
    let next = aether_xds::build(&translation.ir);
    let differ = next
        .gateways
        .iter()
        .filter(|(gw, g)| snapshot.gateways.get(*gw).map(|o| &o.hash) != Some(&g.hash))
        .count();
    assert_eq!(differ, 1, "one Gateway changed");
    let mut one = rollout(
        &mut store,
        &reports,
        &next,
        &translation.status,
        &mut settled,
    );
    print_rollout("one route changed", &store, &mut one);

    let per_object = first.most_per_object.max(one.most_per_object);
    aether_benches::summary(
        "fleet",
        &format!("{GATEWAYS} Gateways × {NODES} nodes: status writes per object over a rollout"),
        format!("≤ {per_object}"),
        "bounded",
    );
    let (median, _) = median_p99(&mut one.step_ms);
    aether_benches::summary(
        "fleet",
        &format!("{GATEWAYS} Gateways × {NODES} nodes: leader status pass per report"),
        format!("{median:.1} ms"),
        "bounded",
    );
}

/// `route-7` of [`scale_yaml`] with another path prefix.
fn yaml_of_route_7() -> String {
    let g = 7 % GATEWAYS;
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: route-7, namespace: default}}\nspec:\n  parentRefs: [{{name: gw-{g}}}]\n  hostnames: [\"host-7.example.com\"]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /moved}}}}]\n    backendRefs: [{{name: svc-7, port: 80}}]\n"
    )
}
