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

mod support;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use std::time::{Duration, Instant};
use support::*;

const NS: &str = "app";

fn gateway_yaml() -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n"
    )
}

fn route_yaml(name: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /{name}}}}}]\n    backendRefs: [{{name: b0, port: 80}}]\n"
    )
}

/// An API server with backend b0, Gateway gw and route r1 applied.
async fn cluster() -> (aether_testkit::ApiServer, Backend) {
    let server = aether_testkit::ApiServer::start().await;
    let b0 = Backend::on(POD_IP, "b0");
    let yaml = [
        base_yaml(&[NS]),
        b0.yaml(NS),
        gateway_yaml(),
        route_yaml("r1"),
    ]
    .join("---\n");
    server.apply(&yaml).await.unwrap();
    (server, b0)
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

async fn holder(client: &kube::Client) -> Option<String> {
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), "aether-ingress");
    leases
        .get_opt("aether-edge")
        .await
        .ok()??
        .spec?
        .holder_identity
}

#[test]
fn the_leader_joins_every_nodes_acks_and_a_new_leader_takes_over() {
    if !isolated() {
        return;
    }
    runtime().block_on(fleet());
}

async fn fleet() {
    let logs = temp_dir("kube-fleet");
    let (server, _b0) = cluster().await;
    let client = server.client();
    let c = &client;

    let kubeconfig = server.kubeconfig_path();
    let flags = ["--leader-elect=true", "--address-mode", "service"];
    for (node, pod) in [("node-a", "agent-a"), ("node-b", "agent-b")] {
        issue_report_token(&server, node, pod, &logs).await;
    }
    let mut a = kube_agent_as("node-a", "agent-a", kubeconfig, &flags, &logs);
    eventually(Duration::from_secs(30), "agent-a leads", || async move {
        let h = holder(c).await;
        if h.as_deref() == Some("agent-a") {
            Ok(())
        } else {
            Err(format!("{h:?}"))
        }
    })
    .await;
    let _envoy_a = envoy("node-a", &a.xds, true, &logs);
    let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), "aether-ingress");
    let lp = ListParams::default().labels("aether.io/edge-gateway");
    let svc = eventually(Duration::from_secs(30), "the edge Service", || {
        let (services, lp) = (services.clone(), lp.clone());
        async move {
            let items = services.list(&lp).await.map_err(|e| e.to_string())?.items;
            items.into_iter().next().ok_or_else(|| "none".to_string())
        }
    })
    .await;
    let svc = svc.metadata.name.clone().unwrap();
    services
        .patch_status(
            &svc,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": POD_IP}]}}})),
        )
        .await
        .unwrap();
    // Both nodes take the Gateway's traffic; node b's agent has not even started.
    endpoints(c, &svc, &[("node-a", true), ("node-b", true)]).await;
    let wait = Duration::from_secs(30);
    support::wait_until(wait, "node-a ACKs", || {
        a.node_acked_all("node-a").then_some(())
    });
    pending_on(c, "node-b").await;
    let gw = get_json::<Gateway>(c, Some(NS), "gw").await.unwrap();
    assert_eq!(
        gw["status"]["listeners"][0]["attachedRoutes"], 0,
        "{}",
        gw["status"]
    );

    // Node b binds Envoy elsewhere than the leader computes: a different content hash.
    let mut b_flags = flags.to_vec();
    b_flags.extend(["--bind-address", "127.0.0.1"]);
    let mut b = kube_agent_as("node-b", "agent-b", kubeconfig, &b_flags, &logs);
    let _envoy_b = envoy("node-b", &b.xds, true, &logs);
    support::wait_until(wait, "node-b ACKs", || {
        b.node_acked_all("node-b").then_some(())
    });
    // … but node b's hash is not the leader's: not programmed, not attached, not accepted.
    eventually(wait, "node b's report reaches the leader", || async move {
        let gw = get_json::<Gateway>(c, Some(NS), "gw").await.ok_or("none")?;
        let c = condition(&gw["status"]["conditions"], "Programmed").ok_or("none")?;
        let message = c["message"].as_str().unwrap_or("");
        if c["reason"] == "Pending" && !message.contains("no report from") {
            Ok(())
        } else {
            Err(c.to_string())
        }
    })
    .await;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let gw = get_json::<Gateway>(c, Some(NS), "gw").await.unwrap();
        let p = programmed(&gw);
        assert!(
            matches!(p.as_ref(), Some((s, r)) if s == "False" && (r == "Pending" || r == "AddressNotAssigned")),
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

    // Node b back in line: both nodes serve the leader's hash → Programmed.
    b.restart_without(&["--bind-address"]);
    let programmed_with = |routes: i64, timeout: u64, what: &'static str| {
        until_programmed(c, NS, "gw", Duration::from_secs(timeout), what, move |gw| {
            let attached = &gw["status"]["listeners"][0]["attachedRoutes"];
            (*attached == routes)
                .then_some(())
                .ok_or(format!("attachedRoutes {attached}"))
        })
    };
    programmed_with(1, 30, "Programmed with both nodes").await;

    // Only the leader wrote: the follower never did, and says it does not lead.
    let follower = b.metrics();
    assert!(follower.contains("aether_edge_leader 0\n"), "{follower}");
    let writes = metric_sum(&follower, "aether_edge_status_writes_total", &[]);
    assert_eq!(writes, 0, "a follower wrote status:\n{follower}");

    // The leader dies; agent-b takes the Lease and writes status from its own join.
    a.proc.kill();
    let begin = Instant::now();
    eventually(Duration::from_secs(40), "agent-b leads", || async move {
        let h = holder(c).await;
        if h.as_deref() == Some("agent-b") {
            Ok(())
        } else {
            Err(format!("{h:?}"))
        }
    })
    .await;
    println!(
        "leader failover: agent-b holds the Lease {} ms after agent-a died",
        begin.elapsed().as_millis()
    );
    server.apply(&route_yaml("r2")).await.unwrap();
    // Node a is still an endpoint, and reports to nobody: the Gateway waits for it.
    pending_on(c, "node-a").await;
    let r2 = get_json::<gateway_api::apis::standard::httproutes::HttpRoute>(c, Some(NS), "r2")
        .await
        .unwrap();
    let accepted = status_reason(&r2["status"]["parents"][0]["conditions"], "Accepted");
    assert_ne!(
        accepted.map(|a| a.0).as_deref(),
        Some("True"),
        "{}",
        r2["status"]
    );
    // Its readiness probe fails: it leaves the endpoints, and holds nothing back.
    endpoints(c, &svc, &[("node-a", false), ("node-b", true)]).await;
    eventually(
        Duration::from_secs(30),
        "r2 Accepted by the new leader",
        || route_accepted(c, NS, "r2", "gw"),
    )
    .await;
    // The Gateway's status is another write of the same batch: it may land a
    // moment after the route's.
    programmed_with(2, 10, "Programmed with r1 and r2 attached").await;

    // agent-a returns as a follower serving another hash: its report reaches the new
    // leader (found through the Lease), so the Gateway is held again …
    a.restart_with(&["--bind-address", "127.0.0.1"]);
    support::wait_until(wait, "node-a ACKs again", || {
        a.node_acked_all("node-a").then_some(())
    });
    // Its Envoy caught up with what its agent serves: its probe passes.
    endpoints(c, &svc, &[("node-a", true), ("node-b", true)]).await;
    eventually(wait, "Pending through node-a's report", || async move {
        let gw = get_json::<Gateway>(c, Some(NS), "gw").await.ok_or("none")?;
        let p = programmed(&gw);
        if p == Some(("False".into(), "Pending".into())) {
            Ok(())
        } else {
            Err(format!("{p:?}"))
        }
    })
    .await;
    // … until it serves the leader's hash.
    a.restart_without(&["--bind-address"]);
    programmed_with(2, 30, "Programmed with both nodes again").await;
    drop((a, b));
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

/// Static mode: every Ready edge pod takes every Gateway's traffic, so a node
/// with a Ready edge pod must serve it, whether its agent reports or not.
#[test]
fn static_mode_waits_for_every_ready_edge_pod() {
    if !isolated() {
        return;
    }
    runtime().block_on(static_mode());
}

async fn static_mode() {
    let logs = temp_dir("kube-fleet-static");
    let (server, _b0) = cluster().await;
    let client = server.client();
    let c = &client;
    // Node b's edge pod is Ready; its agent never reports.
    edge_pod(c, "edge-a", "node-a", true).await;
    edge_pod(c, "edge-b", "node-b", true).await;
    let flags = ["--leader-elect=false", "--address-mode", "static"];
    let a = kube_agent_as("node-a", "edge-a", server.kubeconfig_path(), &flags, &logs);
    let _envoy_a = envoy("node-a", &a.xds, true, &logs);
    support::wait_until(Duration::from_secs(30), "node-a ACKs", || {
        a.node_acked_all("node-a").then_some(())
    });
    pending_on(c, "node-b").await;
    // The route's status is another write of the batch that wrote the Gateway's.
    eventually(Duration::from_secs(10), "r1 Pending", || async move {
        let r1 = get_json::<gateway_api::apis::standard::httproutes::HttpRoute>(c, Some(NS), "r1")
            .await
            .ok_or("no r1")?;
        let accepted = status_reason(&r1["status"]["parents"][0]["conditions"], "Accepted");
        match accepted {
            Some((s, r)) if s == "False" && r == "Pending" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        let r1 = get_json::<gateway_api::apis::standard::httproutes::HttpRoute>(c, Some(NS), "r1")
            .await
            .unwrap();
        let accepted = status_reason(&r1["status"]["parents"][0]["conditions"], "Accepted");
        assert_eq!(
            accepted,
            Some(("False".into(), "Pending".into())),
            "node b takes traffic and serves nothing: {}",
            r1["status"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Node b's probe fails: it takes no traffic and holds nothing back.
    edge_pod(c, "edge-b", "node-b", false).await;
    let alone = Duration::from_secs(30);
    until_programmed(c, NS, "gw", alone, "Programmed with node a alone", |_| {
        Ok(())
    })
    .await;
    // Another write of the same batch.
    eventually(Duration::from_secs(10), "r1 Accepted", || {
        route_accepted(c, NS, "r1", "gw")
    })
    .await;
}
