//! The ADS server with 50 Envoys on it at once (issue 13, point 5): is the
//! per-stream registry (the fleet view) a point every stream waits on?
//!
//! The real ADS server on loopback; 50 SotW streams from in-process gRPC
//! clients (one node each) that subscribe to every resource of a snapshot of
//! 100 Gateways (a cluster, its endpoints, a listener and a route table each)
//! and ACK every response at once; and, as the leader's status gate does, a
//! task that on every fleet change runs the status gate over every connected
//! node (`aether_report::fleet_served`: each node's report, joined). Then 40 times:
//! one Gateway's route table changes, and the clock runs from publishing the
//! snapshot to the fleet saying every Gateway is Acked on all 50 nodes.
//! Prints median / p99 of that, the ACKs recorded per second, and how long the
//! gate's reads took.
//!
//! `cargo bench -p aether-benches --bench ads_streams [-- STREAMS]`

use aether_ads::{AckState, AdsServer, Fleet, bind, serve_on};
use aether_benches::median_p99;
use aether_report::fleet_served;
use aether_xds::{ResourceType, Snapshot};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use prost::Message;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

/// The allocator the `aether-edge` binary runs on.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const GATEWAYS: usize = 100;
const PUBLISHES: usize = 40;
const TYPES: [ResourceType; 4] = [
    ResourceType::Cluster,
    ResourceType::Endpoint,
    ResourceType::Listener,
    ResourceType::Route,
];

/// 100 Gateways; the route table of Gateway `rev % 100` carries `rev`.
fn snapshot(rev: usize) -> Arc<Snapshot> {
    Arc::new(aether_benches::gateways_snapshot(
        GATEWAYS,
        "edge",
        &TYPES,
        |ty, name, g| {
            if ty != ResourceType::Route {
                return format!("{name} body").into_bytes();
            }
            let rev = if rev % GATEWAYS == g { rev } else { 0 };
            RouteConfiguration {
                name: name.to_string(),
                request_headers_to_remove: vec![format!("x-rev-{rev}")],
                ..Default::default()
            }
            .encode_to_vec()
        },
    ))
}

fn main() {
    let streams: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(50);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench(streams));
}

async fn bench(streams: usize) {
    let first = snapshot(0);
    let (publish, rx) = watch::channel(first.clone());
    let fleet = Fleet::new();
    fleet.remember(&first);
    let listener = bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr());
    tokio::spawn(serve_on(
        listener,
        AdsServer::new(rx, fleet.clone()),
        std::future::pending(),
    ));
    let acks = Arc::new(AtomicU64::new(0));
    let names: BTreeMap<ResourceType, Vec<String>> = TYPES
        .iter()
        .map(|ty| (*ty, first.resources[ty].keys().cloned().collect()))
        .collect();
    for i in 0..streams {
        tokio::spawn(envoy(
            address.clone(),
            format!("node-{i:02}"),
            names.clone(),
            acks.clone(),
        ));
    }
    // The status gate: every fleet change, every node's report joined.
    let reads: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let gate = tokio::spawn({
        let (fleet, reads, mut current) = (fleet.clone(), reads.clone(), publish.subscribe());
        async move {
            let mut changes = fleet.subscribe();
            while changes.changed().await.is_ok() {
                let snapshot = current.borrow_and_update().clone();
                let t = Instant::now();
                std::hint::black_box(fleet_served(&fleet, &snapshot));
                reads.lock().unwrap().push(t.elapsed());
            }
        }
    });
    let all_acked = |s: &Snapshot| {
        fleet.debug_view().nodes.len() == streams
            && s.gateways
                .keys()
                .all(|gw| fleet.gateway_state(s, gw) == AckState::Acked)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !all_acked(&first) {
        assert!(
            Instant::now() < deadline,
            "the {streams} streams never ACKed"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    reads.lock().unwrap().clear();
    let acks_before = acks.load(Ordering::Relaxed);
    let started = Instant::now();
    let mut samples = Vec::new();
    for rev in 1..=PUBLISHES {
        let next = snapshot(rev);
        let mut changes = fleet.subscribe();
        let t = Instant::now();
        fleet.remember(&next);
        publish.send_replace(next.clone());
        while !all_acked(&next) {
            tokio::time::timeout(Duration::from_secs(10), changes.changed())
                .await
                .expect("every stream ACKs in time")
                .unwrap();
        }
        samples.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let elapsed = started.elapsed().as_secs_f64();
    gate.abort();
    let acked = acks.load(Ordering::Relaxed) - acks_before;
    let (median, p99) = median_p99(&mut samples);
    let mut reads: Vec<f64> = reads
        .lock()
        .unwrap()
        .iter()
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
    let (read_median, read_p99) = median_p99(&mut reads);
    println!(
        "ADS, {streams} SotW streams, {GATEWAYS} Gateways (4 resources each), one route table changed per publish, {PUBLISHES} publishes:"
    );
    println!(
        "  publish → every Gateway Acked on all {streams} nodes: median {median:.2} ms, p99 {p99:.2} ms"
    );
    println!(
        "  ACKs recorded: {acked} in {elapsed:.2} s ({:.0}/s)",
        acked as f64 / elapsed
    );
    aether_benches::summary(
        "ads_streams",
        &format!("{streams} streams: publish → all Acked, median / p99"),
        format!("{median:.1} / {p99:.1} ms"),
        "no lock shared by all streams",
    );
    aether_benches::summary(
        "ads_streams",
        &format!("{streams} streams: ACKs recorded per second"),
        format!("{:.0}", acked as f64 / elapsed),
        "-",
    );
    println!(
        "  status gate reads (fleet_served, on every fleet change): {} reads, median {read_median:.2} ms, p99 {read_p99:.2} ms",
        reads.len()
    );
}

/// One Envoy: subscribes to every resource of each type and ACKs every response.
async fn envoy(
    address: String,
    node: String,
    names: BTreeMap<ResourceType, Vec<String>>,
    acks: Arc<AtomicU64>,
) {
    let mut client = AggregatedDiscoveryServiceClient::connect(address)
        .await
        .expect("connect");
    let (tx, rx) = mpsc::channel::<DiscoveryRequest>(16);
    let request = |ty: ResourceType, version: String, nonce: String| DiscoveryRequest {
        node: Some(Node {
            id: node.clone(),
            ..Default::default()
        }),
        type_url: ty.type_url().into(),
        resource_names: names[&ty].clone(),
        version_info: version,
        response_nonce: nonce,
        ..Default::default()
    };
    for ty in TYPES {
        tx.send(request(ty, String::new(), String::new()))
            .await
            .unwrap();
    }
    let mut responses = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .expect("stream")
        .into_inner();
    while let Ok(Some(r)) = responses.message().await {
        let ty = *TYPES
            .iter()
            .find(|t| t.type_url() == r.type_url)
            .expect("a type asked for");
        if tx.send(request(ty, r.version_info, r.nonce)).await.is_err() {
            return;
        }
        acks.fetch_add(1, Ordering::Relaxed);
    }
}
