//! Kubernetes mode on a cluster with older and missing Gateway API CRDs: TCPRoute
//! served only at v1alpha2 (the v1.5.1 experimental CRD), UDPRoute not installed.
//! The agent publishes at once (UDPRoute counts as listed and empty), says once in
//! its log and in /metrics that UDPRoute is missing, serves the v1alpha2 TCPRoute
//! and writes its status at v1alpha2.

use crate::support::*;
use kube::api::DynamicObject;
use std::time::Duration;

const NS: &str = "app";
const TCP_PORT: u16 = 9000;
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn older_and_missing_crds_are_watched_at_what_is_served() {
    in_netns(async {
        let w = given_an_old_tcproute_crd_no_udproute_crd_and_an_agent().await;
        both_route_kinds_are_served_and_accepted(&w).await;
        the_missing_kind_is_reported_once(&w).await;
    });
}

type World = OneNode;

fn mk_app(b0: &Backend) -> String {
    let tcp = format!("{{name: tcp, protocol: TCP, port: {TCP_PORT}}}");
    let t1 = mk_route_to("TCPRoute", NS, "t1", "{name: gw, sectionName: tcp}", "b0").replace(
        "gateway.networking.k8s.io/v1\n",
        "gateway.networking.k8s.io/v1alpha2\n",
    );
    [
        base_yaml(&[NS]),
        b0.yaml(NS),
        mk_gateway(NS, "gw", &[HTTP_80, &tcp]),
        mk_route_to("HTTPRoute", NS, "r1", "{name: gw}", "b0"),
        t1,
    ]
    .join("---\n")
}

/// The TCPRoute as the API server serves it at v1alpha2.
async fn tcp_route_v1alpha2(client: &kube::Client) -> Result<serde_json::Value, String> {
    let resource = aether_testkit::gateway_api_resource("TCPRoute", "tcproutes", "v1alpha2");
    let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(client.clone(), NS, &resource);
    let obj = api.get("t1").await.map_err(|e| e.to_string())?;
    serde_json::to_value(obj).map_err(|e| e.to_string())
}

/// TCPRoute served only at v1alpha2 (the v1.5.1 experimental CRD), UDPRoute not
/// installed; the agent rediscovers every second.
async fn given_an_old_tcproute_crd_no_udproute_crd_and_an_agent() -> World {
    let logs = temp_dir("kube-discovery");
    let server = aether_testkit::ApiServer::start().await;
    let (tcp, udp) = (
        "tcproutes.gateway.networking.k8s.io",
        "udproutes.gateway.networking.k8s.io",
    );
    server.delete_crds(&[tcp, udp]).await.unwrap();
    let old = aether_testkit::gateway_api_crd_dir_at("v1.5.1", "experimental")
        .await
        .unwrap();
    server.install_crds(&old, &[tcp]).await.unwrap();
    let b0 = Backend::on(POD_IP, "b0");
    server.apply(&mk_app(&b0)).await.unwrap();
    let flags = [&STATIC_AT_POD_IP[..], &["--discovery-interval", "1"]].concat();
    OneNode::start(server, b0, &flags, &logs)
}

/// The v1alpha2 TCPRoute is served (bytes to the TCP listener reach b0) and its
/// status written at v1alpha2.
async fn both_route_kinds_are_served_and_accepted(w: &World) {
    let c = &w.client;
    eventually(WAIT, "r1 accepted", || route_accepted(c, NS, "r1", "gw")).await;
    eventually(WAIT, "t1 accepted, written at v1alpha2", || async move {
        let r = tcp_route_v1alpha2(c).await?;
        let a = parent_accepted(&r, "gw", Some("tcp"));
        if a == cond("True", "Accepted") {
            Ok(())
        } else {
            Err(format!("{a:?} in {}", r["status"]))
        }
    })
    .await;
    let tcp = format!("{POD_IP}:{TCP_PORT}");
    let r = http_get(&tcp, "example.test", "/via-tcp", &[]).unwrap();
    assert_eq!(r.backend(), Some("b0"), "{r:?}");
}

/// Said in /metrics, and once in the log, several discovery passes later.
async fn the_missing_kind_is_reported_once(w: &World) {
    let metrics = w.agent.metrics();
    for line in [
        "aether_edge_kind_missing{kind=\"UDPRoute\"} 1",
        "aether_edge_kind_missing{kind=\"TCPRoute\"} 0",
        "aether_edge_kind_version{kind=\"TCPRoute\",version=\"v1alpha2\"} 1",
        "aether_edge_kind_version{kind=\"HTTPRoute\",version=\"v1\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let log = w.agent.proc.log_text();
    let missing: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CRD not installed"))
        .collect();
    assert_eq!(missing.len(), 1, "{missing:#?}");
    assert!(missing[0].contains("UDPRoute") && missing[0].contains("WARN"));
    assert!(
        !log.contains("status write failed"),
        "a status write failed:\n{log}"
    );
}
