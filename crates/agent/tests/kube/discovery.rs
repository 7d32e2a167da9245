//! Kubernetes mode on clusters whose Gateway API CRDs are older than our types
//! (v1.7.0):
//!
//! - TCPRoute served only at v1alpha2 (the v1.5.1 experimental CRD), UDPRoute not
//!   installed. The agent publishes at once (UDPRoute counts as listed and
//!   empty), says once in its log and in /metrics that UDPRoute is missing,
//!   serves the v1alpha2 TCPRoute and writes its status at v1alpha2.
//! - Every CRD of the previous release (v1.6.3, experimental channel), so no
//!   XBackend (new in v1.7.0): the agent syncs, serves both route kinds, says
//!   once in its log and in /metrics that XBackend is missing, and its
//!   GatewayClass says the release is supported.

use crate::support::*;
use gateway_api::apis::experimental::gateways::Gateway;
use kube::api::DynamicObject;
use std::time::Duration;

const NS: &str = "app";
const TCP_PORT: u16 = 9000;
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn older_and_missing_crds_are_watched_at_what_is_served() {
    in_netns(async {
        let w = given_an_old_tcproute_crd_no_udproute_crd_and_an_agent().await;
        both_routes_accepted_and_the_tcp_one_served(&w, "v1alpha2").await;
        the_missing_kind_is_reported_once(&w).await;
    });
}

/// The previous release, installed whole.
const PREVIOUS: &str = "v1.6.3";
/// Not in that release.
const XBACKENDS: &str = "xbackends.gateway.networking.x-k8s.io";
const ALL_KINDS: [&str; 10] = [
    "gatewayclasses.gateway.networking.k8s.io",
    "gateways.gateway.networking.k8s.io",
    "httproutes.gateway.networking.k8s.io",
    "grpcroutes.gateway.networking.k8s.io",
    "tlsroutes.gateway.networking.k8s.io",
    "tcproutes.gateway.networking.k8s.io",
    "udproutes.gateway.networking.k8s.io",
    "referencegrants.gateway.networking.k8s.io",
    "backendtlspolicies.gateway.networking.k8s.io",
    "listenersets.gateway.networking.k8s.io",
];

#[test]
fn the_previous_release_s_crds_are_served_and_supported() {
    in_netns(async {
        let w = given_the_previous_release_s_crds_and_an_agent().await;
        http_and_tcp_routes_are_served(&w).await;
        the_gateway_status_fits_that_release_s_schema(&w).await;
        xbackend_is_reported_missing_once(&w).await;
        the_class_names_that_release_supported(&w).await;
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

/// The TCPRoute as the API server serves it at `version`.
async fn tcp_route_at(client: &kube::Client, version: &str) -> Result<serde_json::Value, String> {
    let resource = aether_testkit::gateway_api_resource("TCPRoute", "tcproutes", version);
    let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(client.clone(), NS, &resource);
    let obj = api.get("t1").await.map_err(|e| e.to_string())?;
    serde_json::to_value(obj).map_err(|e| e.to_string())
}

/// TCPRoute served only at v1alpha2 (the v1.5.1 experimental CRD), UDPRoute not
/// installed; the agent rediscovers every second.
async fn given_an_old_tcproute_crd_no_udproute_crd_and_an_agent() -> World {
    let logs = temp_dir("kube-discovery");
    let (tcp, udp) = (
        "tcproutes.gateway.networking.k8s.io",
        "udproutes.gateway.networking.k8s.io",
    );
    let server = aether_testkit::ApiServer::start_without(&[tcp, udp]).await;
    let old = aether_testkit::gateway_api_crd_dir_at("v1.5.1", "experimental")
        .await
        .unwrap();
    server.install_crds(&old, &[tcp]).await.unwrap();
    let b0 = Backend::on(POD_IP, "b0");
    server.apply(&mk_app(&b0)).await.unwrap();
    let flags = [&STATIC_AT_POD_IP[..], &["--discovery-interval", "1"]].concat();
    OneNode::start(server, b0, &flags, &logs)
}

/// r1 and t1 (its status read at `version`) Accepted; bytes to the TCP
/// listener reach b0.
async fn both_routes_accepted_and_the_tcp_one_served(w: &World, version: &str) {
    let c = &w.client;
    eventually(WAIT, "r1 accepted", || route_accepted(c, NS, "r1", "gw")).await;
    let what = format!("t1 accepted, written at {version}");
    eventually(WAIT, &what, || async move {
        let r = tcp_route_at(c, version).await?;
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

async fn given_the_previous_release_s_crds_and_an_agent() -> World {
    let logs = temp_dir("kube-discovery-previous");
    let server =
        aether_testkit::ApiServer::start_without(&[&ALL_KINDS[..], &[XBACKENDS]].concat()).await;
    let old = aether_testkit::gateway_api_crd_dir_at(PREVIOUS, "experimental")
        .await
        .unwrap();
    server.install_crds(&old, &ALL_KINDS).await.unwrap();
    let b0 = Backend::on(POD_IP, "b0");
    let app = mk_app(&b0).replace(
        "gateway.networking.k8s.io/v1alpha2\n",
        "gateway.networking.k8s.io/v1\n",
    );
    server.apply(&app).await.unwrap();
    let flags = [&STATIC_AT_POD_IP[..], &["--discovery-interval", "1"]].concat();
    OneNode::start(server, b0, &flags, &logs)
}

/// Both kinds served at v1 by those CRDs: routed, accepted, and no kind missing.
async fn http_and_tcp_routes_are_served(w: &World) {
    both_routes_accepted_and_the_tcp_one_served(w, "v1").await;
    let r = http_get(&format!("{POD_IP}:80"), "example.test", "/", &[]).unwrap();
    assert_eq!(r.backend(), Some("b0"), "{r:?}");
    let metrics = w.agent.metrics();
    // Each cluster change translated counts as a configuration load.
    let loads = metrics
        .lines()
        .find_map(|l| l.strip_prefix("aether_edge_config_loads_total{result=\"ok\"} "))
        .and_then(|v| v.parse::<f64>().ok());
    assert!(
        loads.is_some_and(|n| n >= 1.0),
        "config loads {loads:?} in:\n{metrics}"
    );
    for kind in ["TCPRoute", "UDPRoute", "ListenerSet", "BackendTLSPolicy"] {
        let line = format!("aether_edge_kind_missing{{kind=\"{kind}\"}} 0");
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
}

/// The Gateway's status is written (Programmed, with its address) although
/// that release's schema has no `routability` on status addresses: the
/// default scope is left unset, which the spec reads the same.
async fn the_gateway_status_fits_that_release_s_schema(w: &World) {
    until_object::<Gateway, _>(
        &w.client,
        NS,
        "gw",
        WAIT,
        "Programmed",
        |gw| match programmed(gw) {
            Some((s, _)) if s == "True" => Ok(()),
            p => Err(format!("{p:?} in {}", gw["status"])),
        },
    )
    .await;
    let log = w.agent.proc.log_text();
    assert!(
        !log.contains("status write failed"),
        "a status write failed:\n{log}"
    );
}

/// In /metrics, and once in the log (as a warning naming its group) however
/// many discovery passes ran.
async fn xbackend_is_reported_missing_once(w: &World) {
    let metrics = w.agent.metrics();
    let line = "aether_edge_kind_missing{kind=\"XBackend\"} 1";
    assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let log = w.agent.proc.log_text();
    let missing: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CRD not installed"))
        .collect();
    assert_eq!(missing.len(), 1, "{missing:#?}");
    assert!(
        missing[0].contains("XBackend") && missing[0].contains("gateway.networking.x-k8s.io"),
        "{}",
        missing[0]
    );
}

async fn the_class_names_that_release_supported(w: &World) {
    let classes: kube::Api<gateway_api::apis::standard::gatewayclasses::GatewayClass> =
        kube::Api::all(w.client.clone());
    eventually(WAIT, "SupportedVersion on the class", || async {
        let class = serde_json::to_value(classes.get("aether").await.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        let got = status_reason(&class["status"]["conditions"], "SupportedVersion");
        if got == cond("True", "SupportedVersion") {
            Ok(())
        } else {
            Err(format!("{got:?} in {}", class["status"]))
        }
    })
    .await;
}
