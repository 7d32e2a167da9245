//! Kubernetes mode, addresses and status-write failures (issue points 2 and 4) with
//! the real `aether-edge agent`, a real kube-apiserver and a real Envoy:
//!
//! - service mode: a Gateway gets a record Service (edge namespace) with one port
//!   per distinct listener port whose targetPort is its allocation, and a public
//!   LoadBalancer Service with those ports beside it; the test plays the load
//!   balancer (patches the public Service's `status.loadBalancer.ingress`, then
//!   dials the targetPort) and the Gateway's `status.addresses` follow; both
//!   Services go with the Gateway.
//! - an API server outage while status must change: the failed writes are counted
//!   on `/metrics`, logged with the object named, retried, and land once it is back.

use crate::support::*;
use gateway_api::apis::experimental::gateways::Gateway;
use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

const NS: &str = "app";
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn service_mode_ports_allocations_and_load_balancer_addresses() {
    in_netns(async {
        let flags = [
            "--address-mode",
            "service",
            "--external-traffic-policy",
            "Local",
        ];
        let w = given_a_gateway_and_an_agent(&flags, "kube-service").await;
        let (svc, ports) = the_service_has_one_port_per_listener_port(&w).await;
        no_load_balancer_means_no_address(&w).await;
        the_load_balancers_address_programs_it_and_every_port_serves(&w, &svc, &ports).await;
        a_moved_listener_moves_its_service_port_only(&w, &ports).await;
        the_service_goes_with_its_gateway(&w).await;
    });
}

#[test]
fn status_writes_failing_in_an_outage_are_retried_reported_and_land() {
    in_netns(async {
        let at_pod_ip = ["--address-mode", "static", "--default-address", POD_IP];
        let mut w = given_a_gateway_and_an_agent(&at_pod_ip, "kube-outage").await;
        let ok_before = the_writes_before_the_outage_are_counted(&w).await;
        writes_failing_in_the_outage_are_counted_named_and_retried(&mut w).await;
        the_pending_write_lands_once_the_server_is_back(&mut w, ok_before).await;
        the_agent_is_fully_back(&mut w).await;
    });
}

/// Fields drop in order: the API server last.
struct World {
    client: kube::Client,
    agent: KubeAgent,
    envoy: Envoy,
    logs: std::path::PathBuf,
    _b0: Backend,
    server: aether_testkit::ApiServer,
}

fn mk_listeners_gateway() -> String {
    mk_gateway(
        NS,
        "gw",
        &[
            "{name: a, protocol: HTTP, port: 80, hostname: a.example.com}",
            "{name: b, protocol: HTTP, port: 80, hostname: b.example.com}",
            "{name: alt, protocol: HTTP, port: 8080}",
        ],
    )
}

fn mk_route_to_b0(name: &str, spec_before_rules: &str) -> String {
    let spec = format!(
        "  parentRefs: [{{name: gw}}]\n{spec_before_rules}  rules:\n  - backendRefs: [{{name: b0, port: 80}}]\n"
    );
    mk_route("HTTPRoute", NS, name, &spec)
}

/// Service port → targetPort (every port TCP).
fn tcp_ports(svc: &Service) -> BTreeMap<i32, i32> {
    service_ports(svc)
        .into_iter()
        .map(|(_, port, protocol, target)| {
            assert_eq!(protocol, "TCP");
            (port, target)
        })
        .collect()
}

/// Gateway gw (listeners a and b on 80, alt on 8080) with route r1, one agent
/// with `flags` (and no election), its Envoy.
async fn given_a_gateway_and_an_agent(flags: &[&str], tag: &str) -> World {
    let logs = temp_dir(tag);
    let b0 = Backend::on(POD_IP, "b0");
    let yaml = [
        base_yaml(&[NS]),
        b0.yaml(NS),
        mk_listeners_gateway(),
        mk_route_to_b0("r1", ""),
    ];
    let server = given_cluster(&yaml).await;
    let flags = [&["--leader-elect=false"], flags].concat();
    let agent = kube_agent(server.kubeconfig_path(), &flags, &logs);
    let envoy = envoy("node-a", &agent.xds, true, &logs);
    World {
        client: server.client(),
        agent,
        envoy,
        logs,
        _b0: b0,
        server,
    }
}

/// A record Service in the edge namespace, one port per distinct listener port,
/// whose targetPort is its allocation, recorded on it; and the public
/// LoadBalancer Service beside the Gateway, with the same ports, labelled with
/// the Gateway's name, `externalTrafficPolicy: Local` as the agent's flag says.
/// Returns the public one.
async fn the_service_has_one_port_per_listener_port(w: &World) -> (Service, BTreeMap<i32, i32>) {
    let svc = edge_service(&w.client).await;
    let name = svc.metadata.name.clone().unwrap();
    let spec = svc.spec.clone().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    let ports = tcp_ports(&svc);
    assert_eq!(
        ports.keys().copied().collect::<Vec<_>>(),
        vec![80, 8080],
        "one port per distinct listener port"
    );
    let recorded = svc.metadata.annotations.clone().unwrap()["aether.io/port-allocations"].clone();
    let expected = ports
        .iter()
        .map(|(p, t)| format!("{p}={t}"))
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(recorded, expected, "allocations recorded on the Service");
    assert!(
        ports.values().all(|t| (20000..=29999).contains(t)),
        "{ports:?}"
    );
    println!("Service aether-ingress/{name}: ports {ports:?}");
    let public = public_service(&w.client).await;
    assert_eq!(public.metadata.namespace.as_deref(), Some(NS));
    let spec = public.spec.clone().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
    assert_eq!(
        spec.external_traffic_policy.as_deref(),
        Some("Local"),
        "as the flag says"
    );
    assert_eq!(spec.selector, None);
    assert_eq!(tcp_ports(&public), ports, "the record's ports");
    let labels = public.metadata.labels.clone().unwrap();
    assert_eq!(labels["gateway.networking.k8s.io/gateway-name"], "gw");
    (public, ports)
}

/// Not programmed, and the message says why.
async fn no_load_balancer_means_no_address(w: &World) {
    let gw = until_object::<Gateway, _>(&w.client, NS, "gw", WAIT, "AddressNotAssigned", |gw| {
        match programmed(gw) {
            Some((s, r)) if s == "False" && r == "AddressNotAssigned" => Ok(gw.clone()),
            p => Err(format!("{p:?}")),
        }
    })
    .await;
    assert!(
        gw["status"]["addresses"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{}",
        gw["status"]
    );
}

/// The test is the load balancer: it assigns an address, and forwards each
/// Service port to its targetPort, where Envoy listens.
async fn the_load_balancers_address_programs_it_and_every_port_serves(
    w: &World,
    svc: &Service,
    ports: &BTreeMap<i32, i32>,
) {
    assign_load_balancer(&w.client, svc, POD_IP).await;
    let what = "addresses + Programmed";
    let gw = until_programmed(&w.client, NS, "gw", WAIT, what, |gw| {
        let addresses = &gw["status"]["addresses"];
        (*addresses == json!([{"type": "IPAddress", "value": POD_IP}]))
            .then_some(())
            .ok_or(format!("addresses {addresses}"))
    })
    .await;
    let attached: Vec<i64> = gw["status"]["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["attachedRoutes"].as_i64().unwrap())
        .collect();
    assert_eq!(attached, vec![1, 1, 1], "{}", gw["status"]);
    for (port, target) in ports {
        let addr = format!("{POD_IP}:{target}");
        let host = if *port == 80 {
            "a.example.com"
        } else {
            "any.test"
        };
        let r = http_get(&addr, host, "/x", &[]).unwrap();
        assert_eq!(r.backend(), Some("b0"), "port {port} → {addr}: {r:?}");
    }
}

/// A listener moves from 8080 to 9090: the Service follows, port 80 keeps its
/// allocation, the new port gets one, and Envoy serves it.
async fn a_moved_listener_moves_its_service_port_only(w: &World, ports: &BTreeMap<i32, i32>) {
    let moved_yaml = mk_listeners_gateway().replace("port: 8080", "port: 9090");
    w.server.apply(&moved_yaml).await.unwrap();
    let moved = eventually(WAIT, "Service ports 80 and 9090", || async {
        let p = tcp_ports(&edge_service(&w.client).await);
        if p.keys().copied().collect::<Vec<_>>() == [80, 9090] {
            Ok(p)
        } else {
            Err(format!("{p:?}"))
        }
    })
    .await;
    assert_eq!(moved[&80], ports[&80], "port 80 keeps its Envoy port");
    until_programmed(&w.client, NS, "gw", WAIT, "generation 2 programmed", |gw| {
        let current = gw["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().all(|c| c["observedGeneration"] == 2));
        current.then_some(()).ok_or(gw["status"].to_string())
    })
    .await;
    let addr = format!("{POD_IP}:{}", moved[&9090]);
    let r = http_get(&addr, "any.test", "/moved", &[]).unwrap();
    assert_eq!(r.backend(), Some("b0"), "{r:?}");
}

async fn the_service_goes_with_its_gateway(w: &World) {
    let gateways: kube::Api<Gateway> = kube::Api::namespaced(w.client.clone(), NS);
    gateways.delete("gw", &Default::default()).await.unwrap();
    edge_services(&w.client, 0, WAIT).await;
    public_services(&w.client, 0, WAIT).await;
}

/// Programmed, its write counted, no write failed; returns the Gateway writes so far.
async fn the_writes_before_the_outage_are_counted(w: &World) -> u64 {
    let any = |_: &Value| Ok(());
    until_programmed(&w.client, NS, "gw", WAIT, "Programmed=True", any).await;
    // The write that showed Programmed=True is counted once its batch is back,
    // which may be after the GET above saw it: wait for that, or the outage
    // could catch it in flight (landed, answer lost) and count it as failed.
    let ok_before = eventually(Duration::from_secs(10), "the write counted", || {
        let m = w.agent.metrics();
        async move {
            match status_writes(&m, "Gateway", "ok") {
                0 => Err(m),
                n => Ok(n),
            }
        }
    })
    .await;
    let m = w.agent.metrics();
    assert_eq!(
        metric_sum(&m, "aether_edge_status_writes_total", &["result=\"error\""]),
        0,
        "{m}"
    );
    ok_before
}

/// Outage; meanwhile Envoy goes away, so the Gateway's status must change.
async fn writes_failing_in_the_outage_are_counted_named_and_retried(w: &mut World) {
    w.server.stop_apiserver().await;
    w.envoy.proc.kill();
    let failed = eventually(WAIT, "failed writes on /metrics", || {
        let m = w.agent.metrics();
        async move {
            let n = status_writes(&m, "Gateway", "error");
            let batches = metric_sum(&m, "aether_edge_status_batches_failed_total", &[]);
            if n > 0 && batches > 0 {
                Ok((n, batches))
            } else {
                Err(m)
            }
        }
    })
    .await;
    println!(
        "during the outage: {} failed Gateway writes, {} failed batches",
        failed.0, failed.1
    );
    let log = w.agent.proc.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("status write failed") && l.contains(&format!("{NS}/gw"))),
        "a log line names the object:\n{log}"
    );
    // Retried with backoff while the outage lasts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let m = w.agent.metrics();
    let retried = metric_sum(&m, "aether_edge_status_batches_failed_total", &[]);
    assert!(retried > failed.1, "retries: {} then {retried}", failed.1);
}

/// Back: the pending write lands without anything else changing.
async fn the_pending_write_lands_once_the_server_is_back(w: &mut World, ok_before: u64) {
    w.server.start_apiserver().await;
    w.client = w.server.client();
    let what = "Programmed=False/Pending written";
    let sixty = Duration::from_secs(60);
    let pending = until_object::<Gateway, _>(&w.client, NS, "gw", sixty, what, |gw| {
        let p = programmed(gw);
        (p == cond("False", "Pending"))
            .then(|| gw.clone())
            .ok_or(format!("{p:?}"))
    })
    .await;
    assert_eq!(pending["status"]["listeners"][0]["attachedRoutes"], 0);
    // Counted once its whole batch is back, which may be after the GET above
    // already shows the write.
    let what = "a successful Gateway write after the outage counted";
    eventually(Duration::from_secs(10), what, || {
        let ok = status_writes(&w.agent.metrics(), "Gateway", "ok");
        async move {
            if ok > ok_before {
                Ok(())
            } else {
                Err(format!("{ok} written, {ok_before} before the outage"))
            }
        }
    })
    .await;
}

/// A new Envoy ACKs, status follows, and the watches survived the restart: a
/// route created afterwards is served and accepted.
async fn the_agent_is_fully_back(w: &mut World) {
    w.envoy = envoy("node-a", &w.agent.xds, true, &w.logs);
    let any = |_: &Value| Ok(());
    until_programmed(&w.client, NS, "gw", WAIT, "Programmed=True again", any).await;
    let r2 = mk_route_to_b0("r2", "  hostnames: [late.example.com]\n");
    w.server.apply(&r2).await.unwrap();
    let c = &w.client;
    eventually(WAIT, "r2 Accepted after the restart", || {
        route_accepted(c, NS, "r2", "gw")
    })
    .await;
    let r = http_get(&format!("{POD_IP}:8080"), "late.example.com", "/", &[]).unwrap();
    assert_eq!(r.backend(), Some("b0"), "{r:?}");
}
