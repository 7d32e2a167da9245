//! Kubernetes mode, route propagation with the ACK gate: the time from applying an
//! HTTPRoute (server-side apply, as `kubectl apply --server-side`) to a watch seeing
//! its parent `Accepted=True` — which the agent writes only after Envoy ACKed the
//! route — over 50 routes added one by one. Prints median and p99; at the moment
//! `Accepted=True` is seen, the route must already answer through Envoy.

use crate::support::*;
use futures::StreamExt;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NS: &str = "app";
const ROUTES: usize = 50;

#[test]
fn apply_to_accepted_through_the_ack_gate_over_50_routes() {
    let _alone = crate::alone();
    in_netns(async {
        let w = given_a_programmed_gateway().await;
        let watch = Acceptance::watch(&w.client);
        let p99 = routes_added_one_by_one_are_accepted_once_served(&w, &watch).await;
        let writes = nothing_is_written_while_nothing_changes(&w).await;
        assert!(p99 < Duration::from_secs(5), "p99 {p99:?}");
        a_burst_is_written_in_batches(&w, &watch, writes).await;
        let flips = watch.flips.lock().unwrap().clone();
        assert!(
            flips.is_empty(),
            "accepted routes turned not Accepted while others were added: {flips:?}"
        );
        watch.task.abort();
    });
}

type World = OneNode;

async fn given_a_programmed_gateway() -> World {
    let logs = temp_dir("kube-latency");
    let b0 = Backend::on(POD_IP, "b0");
    let server = given_cluster(&[
        base_yaml(&[NS]),
        b0.yaml(NS),
        mk_gateway(NS, "gw", &[HTTP_80]),
    ])
    .await;
    let w = OneNode::start(server, b0, &STATIC_AT_POD_IP, &logs);
    let wait = Duration::from_secs(30);
    until_programmed(&w.client, NS, "gw", wait, "Gateway Programmed", |_| Ok(())).await;
    w
}

/// A watch recording when each route is first seen Accepted=True, and every route
/// seen not Accepted after that (a flip: per-object gating forbids it, nothing
/// about an accepted route changes).
struct Acceptance {
    accepted: Arc<Mutex<BTreeMap<String, Instant>>>,
    flips: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Acceptance {
    fn watch(client: &kube::Client) -> Acceptance {
        let accepted: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
        let flips: Arc<Mutex<Vec<String>>> = Arc::default();
        let api: kube::Api<HttpRoute> = kube::Api::namespaced(client.clone(), NS);
        let (seen, flipped) = (accepted.clone(), flips.clone());
        let task = tokio::spawn(async move {
            // Backoff: against a stopped API server an unpaced watcher never yields.
            let mut events = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(ev) = events.next().await {
                let Ok(watcher::Event::Apply(r) | watcher::Event::InitApply(r)) = ev else {
                    continue;
                };
                let v = serde_json::to_value(&r).unwrap();
                let ok = parent_accepted(&v, "gw", None) == cond("True", "Accepted");
                let name = v["metadata"]["name"].as_str().unwrap().to_string();
                let mut seen = seen.lock().unwrap();
                if ok {
                    seen.entry(name).or_insert_with(Instant::now);
                } else if seen.contains_key(&name) {
                    flipped.lock().unwrap().push(name);
                }
            }
        });
        Acceptance {
            accepted,
            flips,
            task,
        }
    }
}

/// Accepted=True only once served: at the moment it is seen, the route answers.
/// Returns the p99 of apply → Accepted=True.
async fn routes_added_one_by_one_are_accepted_once_served(
    w: &World,
    watch: &Acceptance,
) -> Duration {
    let mut samples = Vec::new();
    for i in 0..ROUTES {
        let name = format!("r{i}");
        let start = Instant::now();
        w.server
            .apply(&mk_prefix_route(NS, &name, "b0"))
            .await
            .unwrap();
        let what = format!("{name} Accepted=True");
        let at = eventually(Duration::from_secs(20), &what, || {
            let got = watch.accepted.lock().unwrap().get(&name).copied();
            async move { got.ok_or_else(|| "not yet".to_string()) }
        })
        .await;
        let r = http_get(
            &format!("{POD_IP}:80"),
            "example.test",
            &format!("/{name}"),
            &[],
        )
        .unwrap();
        assert_eq!(
            r.backend(),
            Some("b0"),
            "{name} accepted but not served: {r:?}"
        );
        samples.push(at - start);
    }
    let (median, p99) = median_p99(&mut samples);
    println!(
        "apply → Accepted=True (ACK-gated), {ROUTES} routes one by one: median {} ms, p99 {} ms, max {} ms",
        median.as_millis(),
        p99.as_millis(),
        samples.last().unwrap().as_millis()
    );
    p99
}

/// Settled: every route attached, and no write when nothing changed. Returns the
/// writes so far.
async fn nothing_is_written_while_nothing_changes(w: &World) -> u64 {
    let gw =
        get_json::<gateway_api::apis::experimental::gateways::Gateway>(&w.client, Some(NS), "gw")
            .await
            .unwrap();
    assert_eq!(
        gw["status"]["listeners"][0]["attachedRoutes"],
        ROUTES as u64
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let writes = ok_writes(&w.agent.metrics());
    println!("status writes for 1 Gateway + {ROUTES} routes (incl. class and startup): {writes}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        ok_writes(&w.agent.metrics()),
        writes,
        "writes while nothing changed"
    );
    writes
}

/// 50 more routes in one apply: each new route is written about once (its Pending
/// state coalesced away), the Gateway a few times.
async fn a_burst_is_written_in_batches(w: &World, watch: &Acceptance, writes: u64) {
    let burst: Vec<String> = (ROUTES..2 * ROUTES)
        .map(|i| mk_prefix_route(NS, &format!("r{i}"), "b0"))
        .collect();
    let start = Instant::now();
    w.server.apply(&burst.join("---\n")).await.unwrap();
    let applied = start.elapsed();
    eventually(Duration::from_secs(30), "the burst accepted", || {
        let n = watch.accepted.lock().unwrap().len();
        async move {
            if n == 2 * ROUTES {
                Ok(())
            } else {
                Err(format!("{n} accepted"))
            }
        }
    })
    .await;
    let all = start.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let metrics = w.agent.metrics();
    let burst_writes = ok_writes(&metrics) - writes;
    for l in metrics
        .lines()
        .filter(|l| l.starts_with("aether_edge_status_writes_total"))
    {
        println!("  {l}");
    }
    println!(
        "burst of {ROUTES} routes: applied in {} ms, all Accepted=True after {} ms, {burst_writes} status writes",
        applied.as_millis(),
        all.as_millis()
    );
    assert!(
        burst_writes < 2 * ROUTES as u64,
        "{burst_writes} writes for {ROUTES} routes: not batched"
    );
}

/// Successful status writes of every kind, from `/metrics`.
fn ok_writes(metrics: &str) -> u64 {
    metric_sum(
        metrics,
        "aether_edge_status_writes_total",
        &["result=\"ok\""],
    )
}
