//! Kubernetes mode with two agents (a DaemonSet of two nodes), each with its own
//! Envoy, electing a leader through the Lease: the leader joins the follower's
//! ACK reports (gRPC) with its own, so a Gateway is `Programmed` only when every
//! node that takes its traffic ACKed the content hash the leader computed; when
//! the leader dies, the other agent takes the Lease and keeps status truthful.
//!
//! Who takes a Gateway's traffic is the Ready endpoints of its edge Service. The
//! test API server runs no EndpointSlice controller, so the test plays it: it
//! writes the Service's EndpointSlice, marking a node ready or not as that
//! node's readiness probe would. That makes the fleet known before any report
//! arrives, so nothing here waits on a race between reports.

use crate::support::*;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::time::{Duration, Instant};

const NS: &str = "app";
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn the_leader_joins_every_nodes_acks_and_a_new_leader_takes_over() {
    in_netns(async {
        let mut f = given_agent_a_leading_and_both_nodes_taking_traffic().await;
        a_node_that_never_reported_holds_the_gateway_back(&f).await;
        a_node_serving_another_hash_holds_it_back(&mut f).await;
        both_nodes_on_the_leaders_hash_program_it_and_only_the_leader_writes(&mut f).await;
        the_other_agent_takes_over_when_the_leader_dies(&mut f).await;
        a_returning_node_on_another_hash_holds_it_again(&mut f).await;
    });
}

/// Static mode: every Ready edge pod takes every Gateway's traffic, so a node
/// with a Ready edge pod must serve it, whether its agent reports or not.
#[test]
fn static_mode_waits_for_every_ready_edge_pod() {
    in_netns(async {
        let f = given_a_static_agent_and_a_ready_pod_whose_agent_never_reports().await;
        routes_stay_pending_while_the_silent_pod_is_ready(&f).await;
        its_failing_probe_releases_the_gateway(&f).await;
    });
}

/// The agents, their Envoys, the edge Service; fields drop in order, the API
/// server last.
struct Fleet {
    client: kube::Client,
    a: KubeAgent,
    b: Option<KubeAgent>,
    envoys: Vec<Envoy>,
    svc: String,
    logs: std::path::PathBuf,
    _b0: Backend,
    server: aether_testkit::ApiServer,
}

/// An API server with backend b0, Gateway gw and route r1 applied.
async fn given_a_cluster() -> (aether_testkit::ApiServer, Backend) {
    let b0 = Backend::on(POD_IP, "b0");
    let yaml = [
        base_yaml(&[NS]),
        b0.yaml(NS),
        mk_gateway(NS, "gw", &[HTTP_80]),
        mk_prefix_route(NS, "r1", "b0"),
    ];
    (given_cluster(&yaml).await, b0)
}

const ELECTED: [&str; 3] = ["--leader-elect=true", "--address-mode", "service"];

/// Agent a leads; both nodes are endpoints of the Gateway's Service, though node
/// b's agent has not even started.
async fn given_agent_a_leading_and_both_nodes_taking_traffic() -> Fleet {
    let logs = temp_dir("kube-fleet");
    let (server, b0) = given_a_cluster().await;
    let client = server.client();
    for (node, pod) in [("node-a", "agent-a"), ("node-b", "agent-b")] {
        issue_report_token(&server, node, pod, &logs).await;
    }
    let a = KubeAgent::start(
        agent_bin(),
        "node-a",
        "agent-a",
        server.kubeconfig_path(),
        &ELECTED,
        &logs,
    );
    until_leader(&client, "agent-a", WAIT).await;
    let envoy_a = envoy("node-a", &a.xds, true, &logs);
    let svc = edge_service(&client).await;
    assign_load_balancer(&client, &public_service(&client).await, POD_IP).await;
    let svc = svc.metadata.name.unwrap();
    endpoints(&client, &svc, &[("node-a", true), ("node-b", true)]).await;
    Fleet {
        client,
        a,
        b: None,
        envoys: vec![envoy_a],
        svc,
        logs,
        _b0: b0,
        server,
    }
}

fn then_acked(agent: &KubeAgent, node: &str, what: &str) {
    wait_until(WAIT, what, || agent.node_acked_all(node).then_some(()));
}

/// Waits until the Gateway is Programmed with `routes` attached to its listener.
async fn then_programmed_with(c: &kube::Client, routes: i64, timeout: u64, what: &str) {
    let timeout = Duration::from_secs(timeout);
    until_programmed(c, NS, "gw", timeout, what, |gw| {
        let attached = &gw["status"]["listeners"][0]["attachedRoutes"];
        (*attached == routes)
            .then_some(())
            .ok_or(format!("attachedRoutes {attached}"))
    })
    .await;
}

async fn a_node_that_never_reported_holds_the_gateway_back(f: &Fleet) {
    then_acked(&f.a, "node-a", "node-a ACKs");
    pending_on(&f.client, "node-b").await;
    let gw = get_json::<Gateway>(&f.client, Some(NS), "gw")
        .await
        .unwrap();
    assert_eq!(
        gw["status"]["listeners"][0]["attachedRoutes"], 0,
        "{}",
        gw["status"]
    );
}

/// Node b binds Envoy elsewhere than the leader computes: a different content
/// hash. Its report reaches the leader, but it is not the leader's hash: not
/// programmed, not attached, not accepted.
async fn a_node_serving_another_hash_holds_it_back(f: &mut Fleet) {
    let b_flags = [&ELECTED[..], &["--bind-address", "127.0.0.1"]].concat();
    let b = KubeAgent::start(
        agent_bin(),
        "node-b",
        "agent-b",
        f.server.kubeconfig_path(),
        &b_flags,
        &f.logs,
    );
    f.envoys.push(envoy("node-b", &b.xds, true, &f.logs));
    then_acked(&b, "node-b", "node-b ACKs");
    f.b = Some(b);
    let c = &f.client;
    let what = "node b's report reaches the leader";
    until_object::<Gateway, _>(c, NS, "gw", WAIT, what, |gw| {
        let c = condition(&gw["status"]["conditions"], "Programmed").ok_or("none")?;
        let message = c["message"].as_str().unwrap_or("");
        let reported = c["reason"] == "Pending" && !message.contains("no report from");
        reported.then_some(()).ok_or(c.to_string())
    })
    .await;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let gw = get_json::<Gateway>(c, Some(NS), "gw").await.unwrap();
        assert!(
            matches!(programmed(&gw), Some((s, r)) if s == "False" && (r == "Pending" || r == "AddressNotAssigned")),
            "node b serves another hash, yet: {}",
            gw["status"]
        );
        assert_eq!(gw["status"]["listeners"][0]["attachedRoutes"], 0);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let gw = get_json::<Gateway>(c, Some(NS), "gw").await.unwrap();
    assert_eq!(
        programmed(&gw).map(|p| p.1).as_deref(),
        Some("Pending"),
        "{}",
        gw["status"]
    );

    // `aether-edge fleet` says it node by node: b is behind, on a config of its
    // own, for longer than a second (the loop above took three): exit 1.
    let (code, out, err) = fleet_until(f, &["--max-behind", "1s"], |code, out| {
        code == 1 && out.contains("node node-b: behind")
    });
    assert!(
        out.contains(&format!("{NS}/gw")) && out.contains("1/2 nodes"),
        "{out}"
    );
    // Its report names the Gateway's hash its Envoy serves: not the leader's.
    let leader_hash = out
        .lines()
        .find(|l| l.starts_with(&format!("{NS}/gw")))
        .and_then(|l| l.split_whitespace().nth(1));
    let b_hash = out
        .lines()
        .find(|l| l.contains("node node-b:"))
        .and_then(|l| l.split("ACKed ").nth(1))
        .and_then(|rest| rest.split_whitespace().next());
    assert!(
        leader_hash.is_some() && b_hash.is_some() && leader_hash != b_hash,
        "{out}"
    );
    assert!(
        err.contains(&format!("Gateway {NS}/gw on node node-b")),
        "{code} {err}"
    );
    let (code, out, _) = fleet(f, &["--max-behind", "1h", "--output", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(code, 0, "not behind for an hour: {out}");
    assert_eq!(v["leader"], "agent-a", "{out}");
    let b = &v["gateways"][format!("{NS}/gw")]["behind"]["node-b"];
    assert_eq!(b["state"], "behind", "{out}");
    assert!(
        b["ackedSnapshot"].is_string() && b["ackedSnapshot"] != v["snapshot"],
        "{out}"
    );
    assert!(v["late"].as_array().unwrap().is_empty(), "{out}");

    // The leader's metrics say it too: the Gateway has waited more than a
    // second, with one node behind, and both Envoys are connected.
    let m = f.a.metrics();
    let gw = format!("{{gateway=\"{NS}/gw\"}}");
    let lag = metric_sum(
        &m,
        &format!("aether_edge_gateway_convergence_lag_seconds{gw}"),
        &[],
    );
    assert!(lag >= 1, "lag {lag}:\n{m}");
    assert_eq!(
        metric_sum(&m, &format!("aether_edge_gateway_nodes_behind{gw}"), &[]),
        1,
        "{m}"
    );
    for node in ["node-a", "node-b"] {
        let connected = format!("aether_edge_fleet_envoy_connected{{node=\"{node}\"}} 1\n");
        assert!(m.contains(&connected), "{connected}{m}");
    }
}

/// `aether-edge fleet --kubeconfig <the test API server's> ARGS`: (exit code,
/// stdout, stderr).
fn fleet(f: &Fleet, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(agent_bin())
        .arg("fleet")
        .arg("--kubeconfig")
        .arg(f.server.kubeconfig_path())
        .args(args)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// [`fleet`] until `done(code, stdout)`: the leader writes its view at most
/// once a second.
fn fleet_until(
    f: &Fleet,
    args: &[&str],
    done: impl Fn(i32, &str) -> bool,
) -> (i32, String, String) {
    let until = Instant::now() + WAIT;
    loop {
        let (code, out, err) = fleet(f, args);
        if done(code, &out) {
            return (code, out, err);
        }
        assert!(
            Instant::now() < until,
            "fleet {args:?}: exit {code}\n{out}{err}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

async fn both_nodes_on_the_leaders_hash_program_it_and_only_the_leader_writes(f: &mut Fleet) {
    let b = f.b.as_mut().unwrap();
    b.restart_without(&["--bind-address"]);
    then_programmed_with(&f.client, 1, 30, "Programmed with both nodes").await;
    // The follower never wrote, and says it does not lead.
    let follower = b.metrics();
    assert!(follower.contains("aether_edge_leader 0\n"), "{follower}");
    let writes = metric_sum(&follower, "aether_edge_status_writes_total", &[]);
    assert_eq!(writes, 0, "a follower wrote status:\n{follower}");
    // Every node serves it: nothing is behind, even by a second.
    let (_, out, _) = fleet_until(f, &["--max-behind", "0s"], |code, out| {
        code == 0 && out.contains("2/2 nodes")
    });
    assert!(!out.contains("node node-"), "{out}");

    // Converged: no lag, one convergence observed; and what the README
    // documents is what the leader serves, and all the dashboard uses.
    let m = f.a.metrics();
    let gw = format!("{{gateway=\"{NS}/gw\"}}");
    let lag = format!("aether_edge_gateway_convergence_lag_seconds{gw} 0.0\n");
    assert!(m.contains(&lag), "{lag}{m}");
    assert!(
        metric_sum(&m, "aether_edge_gateway_convergence_seconds_count", &[]) >= 1,
        "{m}"
    );
    the_documented_metrics_are_served_and_the_dashboard_uses_only_those(&m);
}

/// The README's metrics table against the leader's `/metrics` (every series
/// family it serves is documented, every documented one is served: ours and
/// the standard `process_*`) and the Grafana dashboard's queries (only
/// documented metrics).
fn the_documented_metrics_are_served_and_the_dashboard_uses_only_those(metrics: &str) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let documented: std::collections::BTreeSet<String> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|name| name.starts_with("aether_") || name.starts_with("process_"))
        .map(String::from)
        .collect();
    let served: std::collections::BTreeSet<String> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(String::from)
        .collect();
    assert_eq!(
        documented, served,
        "README metrics table vs the leader's /metrics"
    );
    let dashboard =
        std::fs::read_to_string(format!("{root}/deploy/grafana/aether-edge.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&dashboard).unwrap();
    let mut used = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for (at, _) in expr.match_indices("aether_") {
                let name: String = expr[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let family = name.strip_suffix("_bucket").unwrap_or(&name);
                assert!(
                    documented.contains(family),
                    "dashboard panel {}: {name} is not documented",
                    panel["title"]
                );
                used += 1;
            }
        }
    }
    assert!(used >= 10, "the dashboard queries {used} metrics");
}

/// The leader dies; agent-b takes the Lease and writes status from its own join.
/// Keep-alive clients run through the Envoys all along: the failover costs no
/// request and closes no connection (Envoy keeps what it was given).
async fn the_other_agent_takes_over_when_the_leader_dies(f: &mut Fleet) {
    use aether_testkit::live::traffic::{Load, Target, probe};
    let c = &f.client;
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(c.clone(), "aether-ingress");
    let svc = services.get(&f.svc).await.unwrap();
    let recorded = &svc.metadata.annotations.as_ref().unwrap()["aether.io/port-allocations"];
    let port = recorded.strip_prefix("80=").expect("80=<port>");
    let target = Target {
        addr: format!("{POD_IP}:{port}"),
        host: "example.test".into(),
        path: "/r1".into(),
        sni: None,
    };
    wait_until(WAIT, "traffic through the Envoys", || {
        probe(&target).and_then(|(status, _, _)| (status == 200).then_some(()))
    });
    let load = Load::start(&target, 4, Duration::from_millis(2));
    f.a.proc.kill();
    let begin = Instant::now();
    until_leader(c, "agent-b", Duration::from_secs(40)).await;
    println!(
        "leader failover: agent-b holds the Lease {} ms after agent-a died",
        begin.elapsed().as_millis()
    );
    f.server
        .apply(&mk_prefix_route(NS, "r2", "b0"))
        .await
        .unwrap();
    // Node a is still an endpoint, and reports to nobody: the Gateway waits for it.
    pending_on(c, "node-a").await;
    // The new leader publishes the fleet view: node a is not reporting.
    fleet_until(f, &["--output", "json"], |_, out| {
        let v: serde_json::Value = serde_json::from_str(out).unwrap_or_default();
        v["leader"] == "agent-b"
            && v["gateways"][format!("{NS}/gw")]["behind"]["node-a"]["state"] == "unreported"
    });
    let r2 = get_json::<HttpRoute>(c, Some(NS), "r2").await.unwrap();
    let accepted = status_reason(&r2["status"]["parents"][0]["conditions"], "Accepted");
    assert_ne!(
        accepted.map(|a| a.0).as_deref(),
        Some("True"),
        "{}",
        r2["status"]
    );
    // Its readiness probe fails: it leaves the endpoints, and holds nothing back.
    endpoints(c, &f.svc, &[("node-a", false), ("node-b", true)]).await;
    eventually(WAIT, "r2 Accepted by the new leader", || {
        route_accepted(c, NS, "r2", "gw")
    })
    .await;
    // The Gateway's status is another write of the same batch: it may land a
    // moment after the route's.
    then_programmed_with(c, 2, 10, "Programmed with r1 and r2 attached").await;
    let t = load.stop();
    println!(
        "leader failover under keep-alive traffic: {} sent, {} ok, {} lost, {} connections closed by the server, longest gap {} ms",
        t.sent,
        t.ok,
        t.lost(),
        t.server_closed,
        t.longest_gap.as_millis()
    );
    assert!(t.ok > 200, "steady traffic ran: {t:?}");
    assert_eq!((t.lost(), t.server_closed), (0, 0), "{t:?}");
}

/// Agent-a returns as a follower serving another hash: its report reaches the new
/// leader (found through the Lease), so the Gateway is held again, until it
/// serves the leader's hash.
async fn a_returning_node_on_another_hash_holds_it_again(f: &mut Fleet) {
    let c = &f.client;
    f.a.restart_with(&["--bind-address", "127.0.0.1"]);
    then_acked(&f.a, "node-a", "node-a ACKs again");
    // Its Envoy caught up with what its agent serves: its probe passes.
    endpoints(c, &f.svc, &[("node-a", true), ("node-b", true)]).await;
    let what = "Pending through node-a's report";
    until_object::<Gateway, _>(c, NS, "gw", WAIT, what, |gw| {
        let p = programmed(gw);
        (p == cond("False", "Pending"))
            .then_some(())
            .ok_or(format!("{p:?}"))
    })
    .await;
    f.a.restart_without(&["--bind-address"]);
    then_programmed_with(c, 2, 30, "Programmed with both nodes again").await;
}

/// What the EndpointSlice controller would write for the edge Service `svc`:
/// one endpoint per node, Ready as given.
async fn endpoints(client: &kube::Client, svc: &str, nodes: &[(&str, bool)]) {
    let endpoints: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(i, (node, ready))| {
            json!({"addresses": [format!("10.98.0.{}", i + 1)], "nodeName": node,
                   "conditions": {"ready": ready}})
        })
        .collect();
    let slice: EndpointSlice = serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{svc}-slice"), "namespace": "aether-ingress",
                     "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "p-80", "port": 20000, "protocol": "TCP"}],
    }))
    .unwrap();
    let api: kube::Api<EndpointSlice> = kube::Api::namespaced(client.clone(), "aether-ingress");
    api.patch(
        &format!("{svc}-slice"),
        &PatchParams::apply("endpointslice-controller").force(),
        &Patch::Apply(&slice),
    )
    .await
    .unwrap();
}

/// Waits until the Gateway's Programmed condition is `False/Pending` with a
/// message that names `node` as not reporting.
async fn pending_on(client: &kube::Client, node: &str) {
    let needle = format!("(no report from node {node})");
    eventually(
        Duration::from_secs(30),
        &format!("Pending, naming {node}"),
        || {
            let needle = needle.clone();
            async move {
                let gw = get_json::<Gateway>(client, Some(NS), "gw")
                    .await
                    .ok_or("none")?;
                let c = condition(&gw["status"]["conditions"], "Programmed").ok_or("none")?;
                if c["reason"] == "Pending"
                    && c["message"].as_str().unwrap_or("").ends_with(&needle)
                {
                    Ok(())
                } else {
                    Err(c.to_string())
                }
            }
        },
    )
    .await;
}

/// An edge pod as the DaemonSet (and a kubelet) would leave it: on `node`,
/// Ready or not.
async fn edge_pod(client: &kube::Client, name: &str, node: &str, ready: bool) {
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "aether-ingress");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "aether-ingress",
                     "labels": {"app.kubernetes.io/name": "aether-edge"}},
        "spec": {"nodeName": node, "containers": [{"name": "agent", "image": "aether-edge:dev"}]},
    }))
    .unwrap();
    if pods.get_opt(name).await.unwrap().is_none() {
        pods.create(&Default::default(), &pod).await.unwrap();
    }
    let status = if ready { "True" } else { "False" };
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [
            {"type": "Ready", "status": status, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
    )
    .await
    .unwrap();
}

/// Node b's edge pod is Ready; its agent never reports.
async fn given_a_static_agent_and_a_ready_pod_whose_agent_never_reports() -> Fleet {
    let logs = temp_dir("kube-fleet-static");
    let (server, b0) = given_a_cluster().await;
    let client = server.client();
    edge_pod(&client, "edge-a", "node-a", true).await;
    edge_pod(&client, "edge-b", "node-b", true).await;
    let flags = ["--leader-elect=false", "--address-mode", "static"];
    let a = KubeAgent::start(
        agent_bin(),
        "node-a",
        "edge-a",
        server.kubeconfig_path(),
        &flags,
        &logs,
    );
    let envoy_a = envoy("node-a", &a.xds, true, &logs);
    Fleet {
        client,
        a,
        b: None,
        envoys: vec![envoy_a],
        svc: String::new(),
        logs,
        _b0: b0,
        server,
    }
}

fn r1_accepted(r1: &serde_json::Value) -> Option<(String, String)> {
    status_reason(&r1["status"]["parents"][0]["conditions"], "Accepted")
}

async fn routes_stay_pending_while_the_silent_pod_is_ready(f: &Fleet) {
    let c = &f.client;
    then_acked(&f.a, "node-a", "node-a ACKs");
    pending_on(c, "node-b").await;
    // The route's status is another write of the batch that wrote the Gateway's.
    let ten = Duration::from_secs(10);
    until_object::<HttpRoute, _>(c, NS, "r1", ten, "r1 Pending", |r1| match r1_accepted(r1) {
        Some((s, r)) if s == "False" && r == "Pending" => Ok(()),
        other => Err(format!("{other:?}")),
    })
    .await;
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        let r1 = get_json::<HttpRoute>(c, Some(NS), "r1").await.unwrap();
        assert_eq!(
            r1_accepted(&r1),
            cond("False", "Pending"),
            "node b takes traffic and serves nothing: {}",
            r1["status"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Node b's probe fails: it takes no traffic and holds nothing back.
async fn its_failing_probe_releases_the_gateway(f: &Fleet) {
    let c = &f.client;
    edge_pod(c, "edge-b", "node-b", false).await;
    until_programmed(
        c,
        NS,
        "gw",
        WAIT,
        "Programmed with node a alone",
        |_| Ok(()),
    )
    .await;
    // Another write of the same batch.
    eventually(Duration::from_secs(10), "r1 Accepted", || {
        route_accepted(c, NS, "r1", "gw")
    })
    .await;
}
