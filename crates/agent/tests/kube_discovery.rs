//! Kubernetes mode on a cluster with older and missing Gateway API CRDs: TCPRoute
//! served only at v1alpha2 (the v1.5.1 experimental CRD), UDPRoute not installed.
//! The agent publishes at once (UDPRoute counts as listed and empty), says once in
//! its log and in /metrics that UDPRoute is missing, serves the v1alpha2 TCPRoute
//! and writes its status at v1alpha2.

mod support;

use kube::api::{ApiResource, DynamicObject};
use std::time::Duration;
use support::*;

const NS: &str = "app";
const TCP_PORT: u16 = 9000;

fn app_yaml(b0: &Backend) -> String {
    [
        base_yaml(&[NS]),
        b0.yaml(NS),
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n  - {{name: tcp, protocol: TCP, port: {TCP_PORT}}}\n"
        ),
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r1, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - backendRefs: [{{name: b0, port: 80}}]\n"
        ),
        format!(
            "apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: TCPRoute\nmetadata: {{name: t1, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw, sectionName: tcp}}]\n  rules:\n  - backendRefs: [{{name: b0, port: 80}}]\n"
        ),
    ]
    .join("---\n")
}

/// The TCPRoute as the API server serves it at v1alpha2.
async fn tcp_route_v1alpha2(client: &kube::Client) -> Result<serde_json::Value, String> {
    let resource = ApiResource {
        group: "gateway.networking.k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "gateway.networking.k8s.io/v1alpha2".into(),
        kind: "TCPRoute".into(),
        plural: "tcproutes".into(),
    };
    let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(client.clone(), NS, &resource);
    let obj = api.get("t1").await.map_err(|e| e.to_string())?;
    serde_json::to_value(obj).map_err(|e| e.to_string())
}

#[test]
fn older_and_missing_crds_are_watched_at_what_is_served() {
    if !isolated() {
        return;
    }
    runtime().block_on(older_and_missing());
}

async fn older_and_missing() {
    let logs = temp_dir("kube-discovery");
    let server = aether_testkit::ApiServer::start().await;
    let client = server.client();
    let c = &client;
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
    server.apply(&app_yaml(&b0)).await.unwrap();

    let agent = kube_agent(
        server.kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--address-mode",
            "static",
            "--default-address",
            POD_IP,
            "--discovery-interval",
            "1",
        ],
        &logs,
    );
    let _envoy = envoy("node-a", &agent.xds, true, &logs);
    eventually(Duration::from_secs(30), "r1 accepted", || {
        route_accepted(c, NS, "r1", "gw")
    })
    .await;
    eventually(
        Duration::from_secs(30),
        "t1 accepted, written at v1alpha2",
        || async move {
            let r = tcp_route_v1alpha2(c).await?;
            let a = our_parent(&r, "gw", Some("tcp"))
                .and_then(|p| status_reason(&p["conditions"], "Accepted"));
            if a == Some(("True".into(), "Accepted".into())) {
                Ok(())
            } else {
                Err(format!("{a:?} in {}", r["status"]))
            }
        },
    )
    .await;
    // The v1alpha2 TCPRoute is served: bytes to the TCP listener reach b0.
    let r = http_get(
        &format!("{POD_IP}:{TCP_PORT}"),
        "example.test",
        "/via-tcp",
        &[],
    )
    .unwrap();
    assert_eq!(r.backend(), Some("b0"), "{r:?}");

    let metrics = agent.metrics();
    for line in [
        "aether_edge_kind_missing{kind=\"UDPRoute\"} 1",
        "aether_edge_kind_missing{kind=\"TCPRoute\"} 0",
        "aether_edge_kind_version{kind=\"TCPRoute\",version=\"v1alpha2\"} 1",
        "aether_edge_kind_version{kind=\"HTTPRoute\",version=\"v1\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
    // Several discovery passes later, UDPRoute has been reported once.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let log = agent.proc.log_text();
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
