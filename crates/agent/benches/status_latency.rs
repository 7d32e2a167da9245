//! Latency of truth in Kubernetes mode: how long status trails what Envoy
//! serves, under churn, with 1,000 routes served.
//!
//! A real kube-apiserver + etcd, the release `aether-edge agent` (leader) and a
//! real Envoy, in a network namespace of their own. One Gateway serves 1,000
//! HTTPRoutes; then 10 changes a second for 30 s go to 20 more routes on the
//! same Gateway (create, then switch backends: every change is a new
//! generation). Prints p50/p99 of:
//!
//! - apply → status: from the API server accepting a change to the route's
//!   status saying `Accepted=True` at that generation (as a watch sees it);
//! - status written − last ACK: per status batch that followed a fleet report,
//!   from the report (the leader's own Envoy ACKing, in process) to the batch
//!   being written (the agent's `follow_us`, `aether_k8s::status` debug log).
//!
//! `cargo bench -p aether-edge --bench status_latency`
//! (`AETHER_BENCH_ROUTES`, `AETHER_BENCH_SECS` resize it.)

#[path = "../tests/support/mod.rs"]
mod support;

use aether_gateway::vocabulary::{Word, route};
use futures::StreamExt;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

const NS: &str = "bench";
const CHURNED: usize = 20;
const PER_SECOND: u64 = 10;

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn route(name: &str, backend: &str) -> HttpRoute {
    serde_norway::from_str(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /{name}}}}}]\n    backendRefs: [{{name: {backend}, port: 80}}]\n"
    ))
    .unwrap()
}

/// A route condition type as the API spells it.
fn accepted() -> &'static str {
    route::Type::Accepted.as_str()
}

fn main() {
    if !isolated_main() {
        return;
    }
    runtime().block_on(bench());
}

async fn bench() {
    let served = knob("AETHER_BENCH_ROUTES", 1_000);
    let secs = knob("AETHER_BENCH_SECS", 30) as u64;
    let logs = temp_dir("kube-bench-status");
    let server = aether_testkit::ApiServer::start().await;
    let client = server.client();
    let (b0, b1) = (Backend::on(POD_IP, "b0"), Backend::on(POD_IP, "b1"));
    let gateway = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n"
    );
    server
        .apply(&[base_yaml(&[NS]), b0.yaml(NS), b1.yaml(NS), gateway].join("---\n"))
        .await
        .unwrap();
    let routes: Api<HttpRoute> = Api::namespaced(client.clone(), NS);
    for i in 0..served {
        routes
            .create(&PostParams::default(), &route(&format!("s{i}"), "b0"))
            .await
            .unwrap();
    }
    let agent = kube_agent(
        server.kubeconfig_path(),
        &["--leader-elect=false", "--address-mode", "static"],
        &logs,
    );
    let _envoy = support::envoy("node-a", &agent.xds, true, &logs);
    let c = &client;
    let t = Instant::now();
    eventually(
        Duration::from_secs(300),
        "every served route attached",
        || async move {
            let gw =
                get_json::<gateway_api::apis::experimental::gateways::Gateway>(c, Some(NS), "gw")
                    .await
                    .ok_or("no Gateway")?;
            let n = &gw["status"]["listeners"][0]["attachedRoutes"];
            if n == served {
                Ok(())
            } else {
                Err(n.to_string())
            }
        },
    )
    .await;
    // The routes' own status writes follow the Gateway's (1,000 writes): the
    // churn starts once they are all in, or it would measure that backlog.
    let r = &routes;
    eventually(
        Duration::from_secs(300),
        "every served route Accepted",
        || async move {
            let list = r
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let accepted = list
                .items
                .iter()
                .filter(|r| {
                    r.status.as_ref().is_some_and(|s| {
                        s.parents.iter().any(|p| {
                            p.conditions
                                .iter()
                                .any(|c| c.type_ == accepted() && c.status == "True")
                        })
                    })
                })
                .count();
            if accepted == served {
                Ok(())
            } else {
                Err(format!("{accepted} of {served}"))
            }
        },
    )
    .await;
    println!(
        "{served} routes attached and Accepted {} ms after the agent started",
        t.elapsed().as_millis()
    );

    // (route, generation) → when the API server took it.
    let applied: Arc<Mutex<BTreeMap<(String, i64), Instant>>> = Arc::default();
    let seen: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let checker = tokio::spawn({
        let (applied, seen, routes) = (applied.clone(), seen.clone(), routes.clone());
        async move {
            let mut stream = std::pin::pin!(watcher(routes, watcher::Config::default()));
            while let Some(Ok(event)) = stream.next().await {
                let (watcher::Event::Apply(r) | watcher::Event::InitApply(r)) = event else {
                    continue;
                };
                let name = r.metadata.name.clone().unwrap_or_default();
                let accepted_at = r.status.as_ref().and_then(|s| {
                    s.parents.iter().find_map(|p| {
                        p.conditions
                            .iter()
                            .find(|c| c.type_ == accepted() && c.status == "True")?
                            .observed_generation
                    })
                });
                if let Some(g) = accepted_at
                    && let Some(at) = applied.lock().unwrap().remove(&(name, g))
                {
                    seen.lock().unwrap().push(at.elapsed());
                }
            }
        }
    });

    // Only batches from here on count: the first one wrote all 1,000 routes.
    let log_before_churn = agent.proc.log_text().len();
    let changes = secs * PER_SECOND;
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / PER_SECOND));
    for n in 0..changes as usize {
        tick.tick().await;
        let name = format!("c{}", n % CHURNED);
        let backend = if (n / CHURNED).is_multiple_of(2) {
            "b0"
        } else {
            "b1"
        };
        let r = if n < CHURNED {
            routes
                .create(&PostParams::default(), &route(&name, backend))
                .await
        } else {
            let patch = serde_json::json!({"spec": {"rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": format!("/{name}")}}],
                "backendRefs": [{"name": backend, "port": 80}]}]}});
            routes
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
        }
        .unwrap();
        let g = r.metadata.generation.unwrap_or_default();
        applied.lock().unwrap().insert((name, g), Instant::now());
    }
    // The last changes settle.
    let settle = Instant::now() + Duration::from_secs(10);
    while !applied.lock().unwrap().is_empty() && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    checker.abort();
    let superseded = applied.lock().unwrap().len();

    let mut apply_to_status = seen.lock().unwrap().clone();
    let log = agent.proc.log_text();
    let churn_log = log.get(log_before_churn..).unwrap_or_default();
    let mut follow = field_us(churn_log, "status batch written", "follow_us=");
    println!(
        "status latency, {served} routes served, {PER_SECOND} changes/s for {secs} s on one Gateway (release):"
    );
    print_line(
        "apply → status Accepted at that generation",
        &mut apply_to_status,
    );
    println!(
        "    ({superseded} of {changes} changes were superseded by the next change to their route before status showed them)"
    );
    print_line("status written − last ACK (per batch)", &mut follow);
    if !follow.is_empty() {
        let (_, p99) = median_p99(&mut follow);
        aether_benches::summary(
            "status_latency",
            &format!("{served} routes, 10 changes/s: status written − last ACK, p99"),
            format!("{:.0} ms", p99.as_secs_f64() * 1e3),
            "≤ 150 ms",
        );
    }
    // Where that time goes, per batch that followed a report.
    let followed: String = churn_log
        .lines()
        .filter(|l| l.contains("follow_us="))
        .map(|l| format!("{l}\n"))
        .collect();
    for (what, key) in [
        (
            "    report → patches computed (settle, join, debounce)",
            "wait_us=",
        ),
        ("    computing the patches", "compute_us="),
        ("    writing them", "write_us="),
    ] {
        print_line(what, &mut field_us(&followed, "status batch written", key));
    }
    print_line(
        "    joining reports into the gated plan (per join)",
        &mut field_us(churn_log, "status inputs joined", "gate_us="),
    );
    let batches: Vec<usize> = churn_log
        .lines()
        .filter(|l| l.contains("status batch written"))
        .filter_map(|l| {
            l.split("written=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect();
    println!(
        "  during the churn: {} status batches, {} objects written in all (largest batch {})",
        batches.len(),
        batches.iter().sum::<usize>(),
        batches.iter().max().unwrap_or(&0)
    );
    let warnings: Vec<&str> = churn_log.lines().filter(|l| l.contains(" WARN ")).collect();
    println!("  {} warnings in the agent's log", warnings.len());
    for w in warnings.iter().take(5) {
        println!("    {w}");
    }
    for line in agent.metrics().lines().filter(|l| {
        l.starts_with("aether_edge_status_writes_total") && !l.ends_with(" 0")
            || l.starts_with("aether_edge_status_unchanged_total")
    }) {
        println!("    {line}");
    }
}
