//! Kubernetes mode, route propagation with the ACK gate: the time from applying an
//! HTTPRoute (server-side apply, as `kubectl apply --server-side`) to a watch seeing
//! its parent `Accepted=True` — which the agent writes only after Envoy ACKed the
//! route — over 50 routes added one by one. Prints median and p99; at the moment
//! `Accepted=True` is seen, the route must already answer through Envoy.

mod support;

use futures::StreamExt;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

const NS: &str = "app";
const ROUTES: usize = 50;

fn gateway_yaml() -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n"
    )
}

fn route_yaml(i: usize) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r{i}, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /r{i}}}}}]\n    backendRefs: [{{name: b0, port: 80}}]\n"
    )
}

#[test]
fn apply_to_accepted_through_the_ack_gate_over_50_routes() {
    if !isolated() {
        return;
    }
    runtime().block_on(latency());
}

async fn latency() {
    let logs = temp_dir("kube-latency");
    let server = aether_testkit::ApiServer::start().await;
    let client = server.client();
    let c = &client;
    let b0 = Backend::on(POD_IP, "b0");
    let yaml = [base_yaml(&[NS]), b0.yaml(NS), gateway_yaml()].join("---\n");
    server.apply(&yaml).await.unwrap();
    let agent = kube_agent(
        server.kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--address-mode",
            "static",
            "--default-address",
            POD_IP,
        ],
        &logs,
    );
    let _envoy = envoy("node-a", &agent.xds, true, &logs);
    eventually(
        Duration::from_secs(30),
        "Gateway Programmed",
        || async move {
            let gw = get_json::<Gateway>(c, Some(NS), "gw").await.ok_or("none")?;
            let p = status_reason(&gw["status"]["conditions"], "Programmed");
            if p == Some(("True".into(), "Programmed".into())) {
                Ok(())
            } else {
                Err(format!("{p:?}"))
            }
        },
    )
    .await;

    // A watch records when each route is first seen Accepted=True, and every
    // route seen not Accepted after that (a flip: per-object gating forbids it,
    // nothing about an accepted route changes).
    let accepted: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let flips: Arc<Mutex<Vec<String>>> = Arc::default();
    let api: kube::Api<HttpRoute> = kube::Api::namespaced(client.clone(), NS);
    let seen = accepted.clone();
    let flipped = flips.clone();
    let watch = tokio::spawn(async move {
        // Backoff: against a stopped API server an unpaced watcher never yields.
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = events.next().await {
            let Ok(watcher::Event::Apply(r) | watcher::Event::InitApply(r)) = ev else {
                continue;
            };
            let v = serde_json::to_value(&r).unwrap();
            let ok = our_parent(&v, "gw", None)
                .and_then(|p| status_reason(&p["conditions"], "Accepted"))
                == Some(("True".into(), "Accepted".into()));
            let name = v["metadata"]["name"].as_str().unwrap().to_string();
            if ok {
                seen.lock()
                    .unwrap()
                    .entry(name)
                    .or_insert_with(Instant::now);
            } else if seen.lock().unwrap().contains_key(&name) {
                flipped.lock().unwrap().push(name);
            }
        }
    });

    let gateway = format!("{POD_IP}:80");
    let mut samples = Vec::new();
    for i in 0..ROUTES {
        let name = format!("r{i}");
        let start = Instant::now();
        server.apply(&route_yaml(i)).await.unwrap();
        let at = eventually(
            Duration::from_secs(20),
            &format!("{name} Accepted=True"),
            || {
                let got = accepted.lock().unwrap().get(&name).copied();
                async move { got.ok_or_else(|| "not yet".to_string()) }
            },
        )
        .await;
        // Accepted=True only once served: the route answers right now.
        let r = http_get(&gateway, "example.test", &format!("/r{i}"), &[]).unwrap();
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
    let gw = get_json::<Gateway>(c, Some(NS), "gw").await.unwrap();
    assert_eq!(
        gw["status"]["listeners"][0]["attachedRoutes"],
        ROUTES as u64
    );
    // Settled: no write when nothing changed.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let writes = status_writes(&agent.metrics());
    println!("status writes for 1 Gateway + {ROUTES} routes (incl. class and startup): {writes}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        status_writes(&agent.metrics()),
        writes,
        "writes while nothing changed"
    );
    assert!(p99 < Duration::from_secs(5), "p99 {p99:?}");

    // A burst: 50 more routes in one apply. Writes are batched: each new route is
    // written about once (its Pending state coalesced away), the Gateway a few times.
    let burst: Vec<String> = (ROUTES..2 * ROUTES).map(route_yaml).collect();
    let start = Instant::now();
    server.apply(&burst.join("---\n")).await.unwrap();
    let applied = start.elapsed();
    eventually(Duration::from_secs(30), "the burst accepted", || {
        let n = accepted.lock().unwrap().len();
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
    let metrics = agent.metrics();
    let burst_writes = status_writes(&metrics) - writes;
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
    let flips = flips.lock().unwrap().clone();
    assert!(
        flips.is_empty(),
        "accepted routes turned not Accepted while others were added: {flips:?}"
    );
    watch.abort();
    drop(agent);
}

/// Successful status writes of every kind, from `/metrics`.
fn status_writes(metrics: &str) -> u64 {
    metric_sum(
        metrics,
        "aether_edge_status_writes_total",
        &["result=\"ok\""],
    )
}
