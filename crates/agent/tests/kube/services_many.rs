//! Kubernetes mode, service mode at the scale the previous implementation failed at
//! (issue points 4 and 6): 20 Gateways created at once, each with two HTTP listeners
//! on :80 and two HTTPS listeners on :443, all get a Service with exactly ports 80
//! and 443 (the API server accepts every one), distinct Envoy ports, addresses from
//! the test acting as load balancer, and traffic through every allocation. Then a
//! Gateway whose Service the API server refuses (a ResourceQuota) appears in status
//! with the reason, without disturbing the others, and recovers when allowed.

use crate::support::*;
use gateway_api::apis::experimental::gateways::Gateway;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

const NS: &str = "app";
const GATEWAYS: usize = 20;
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn twenty_gateways_at_once_and_one_whose_service_is_refused() {
    in_netns(async {
        let w = given_twenty_gateways_in_service_mode().await;
        let by_gateway = every_gateway_gets_a_service_with_distinct_envoy_ports(&w).await;
        every_gateway_is_programmed_and_serves(&w, &by_gateway).await;
        a_refused_service_is_reported_for_its_gateway_alone(&w).await;
        allowed_again_the_retry_creates_it(&w).await;
    });
}

/// Fields drop in order: the API server last.
struct World {
    client: kube::Client,
    names: Vec<String>,
    _agent: KubeAgent,
    _envoy: Envoy,
    _b0: Backend,
    server: aether_testkit::ApiServer,
}

/// A self-signed certificate for `*.example.com`, as a TLS Secret (JSON is YAML).
fn tls_secret(dir: &std::path::Path) -> String {
    let (key, crt) = (dir.join("tls.key"), dir.join("tls.crt"));
    let out = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=*.example.com", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .expect("running openssl");
    assert!(out.status.success(), "openssl: {out:?}");
    let read = |p| std::fs::read_to_string(p).unwrap();
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "cert", "namespace": NS},
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": read(&crt), "tls.key": read(&key)},
    })
    .to_string()
}

/// Two HTTP listeners on :80 and two HTTPS listeners on :443.
fn mk_four_listener_gateway(name: &str) -> String {
    let https = |l: &str, h: &str| {
        format!(
            "{{name: {l}, protocol: HTTPS, port: 443, hostname: {h}, tls: {{certificateRefs: [{{name: cert}}]}}}}"
        )
    };
    mk_gateway(
        NS,
        name,
        &[
            "{name: a, protocol: HTTP, port: 80, hostname: a.example.com}",
            "{name: b, protocol: HTTP, port: 80, hostname: b.example.com}",
            &https("sa", "a.example.com"),
            &https("sb", "b.example.com"),
        ],
    )
}

/// One HTTPRoute attached to every Gateway's listener `a`.
fn mk_route_on_every_gateway(gateways: &[String]) -> String {
    let parents: Vec<String> = gateways
        .iter()
        .map(|g| format!("{{name: {g}, sectionName: a}}"))
        .collect();
    mk_route_to("HTTPRoute", NS, "r", &parents.join(", "), "b0")
}

/// Service port → targetPort.
fn ports(svc: &k8s_openapi::api::core::v1::Service) -> BTreeMap<i32, i32> {
    service_ports(svc)
        .into_iter()
        .map(|(_, port, _, target)| (port, target))
        .collect()
}

/// The agent first, then all 20 Gateways (and the route) in one apply.
async fn given_twenty_gateways_in_service_mode() -> World {
    let logs = temp_dir("kube-many");
    let b0 = Backend::on(POD_IP, "b0");
    let names: Vec<String> = (0..GATEWAYS).map(|i| format!("gw{i}")).collect();
    let server = given_cluster(&[base_yaml(&[NS]), b0.yaml(NS), tls_secret(&logs)]).await;
    let flags = ["--leader-elect=false", "--address-mode", "service"];
    let agent = kube_agent(server.kubeconfig_path(), &flags, &logs);
    let envoy = envoy("node-a", &agent.xds, true, &logs);
    let mut all: Vec<String> = names.iter().map(|n| mk_four_listener_gateway(n)).collect();
    all.push(mk_route_on_every_gateway(&names));
    server.apply(&all.join("---\n")).await.unwrap();
    World {
        client: server.client(),
        names,
        _agent: agent,
        _envoy: envoy,
        _b0: b0,
        server,
    }
}

/// Ports exactly 80 and 443, Envoy ports all distinct; the test as load balancer
/// gives each an address. Returns each Gateway's ports.
async fn every_gateway_gets_a_service_with_distinct_envoy_ports(
    w: &World,
) -> BTreeMap<String, BTreeMap<i32, i32>> {
    let list = edge_services(&w.client, GATEWAYS, Duration::from_secs(60)).await;
    let mut envoy_ports = BTreeSet::new();
    let mut by_gateway = BTreeMap::new();
    for svc in &list {
        let p = ports(svc);
        assert_eq!(
            p.keys().copied().collect::<Vec<_>>(),
            vec![80, 443],
            "{svc:?}"
        );
        for t in p.values() {
            assert!(envoy_ports.insert(*t), "Envoy port {t} allocated twice");
        }
        let gw = svc.metadata.annotations.as_ref().unwrap()["aether.io/gateway-name"].clone();
        by_gateway.insert(gw, p);
    }
    for svc in &public_services(&w.client, GATEWAYS, Duration::from_secs(60)).await {
        assign_load_balancer(&w.client, svc, POD_IP).await;
    }
    assert_eq!(
        by_gateway.keys().cloned().collect::<BTreeSet<_>>(),
        w.names.iter().cloned().collect()
    );
    println!(
        "{GATEWAYS} Gateways: {} distinct Envoy ports",
        envoy_ports.len()
    );
    by_gateway
}

async fn every_gateway_is_programmed_and_serves(
    w: &World,
    by_gateway: &BTreeMap<String, BTreeMap<i32, i32>>,
) {
    for name in &w.names {
        let what = format!("{name} programmed");
        until_programmed(&w.client, NS, name, Duration::from_secs(60), &what, |gw| {
            let ok = gw["status"]["addresses"] == json!([{"type": "IPAddress", "value": POD_IP}])
                && gw["status"]["listeners"].as_array().map(Vec::len) == Some(4);
            ok.then_some(()).ok_or(gw["status"].to_string())
        })
        .await;
        let target = by_gateway[name][&80];
        let r = http_get(&format!("{POD_IP}:{target}"), "a.example.com", "/", &[]).unwrap();
        assert_eq!(r.backend(), Some("b0"), "{name} via {target}: {r:?}");
    }
    println!("{GATEWAYS} Gateways: all programmed and serving");
}

/// The API server refuses the next LoadBalancer Service (a ResourceQuota in the
/// Gateways' namespace, where the public Services are): the Gateway says so,
/// without disturbing the others.
async fn a_refused_service_is_reported_for_its_gateway_alone(w: &World) {
    let quota = "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: no-lb, namespace: app}\nspec:\n  hard: {services.loadbalancers: \"0\"}\n";
    w.server.apply(quota).await.unwrap();
    // No quota controller runs here: the test sets the usage admission checks against.
    let quotas: kube::Api<ResourceQuota> = kube::Api::namespaced(w.client.clone(), NS);
    let usage = json!({"services.loadbalancers": GATEWAYS.to_string()});
    let status = json!({"status": {"hard": {"services.loadbalancers": "0"}, "used": usage}});
    quotas
        .patch_status("no-lb", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    // Admission reads quotas through an informer.
    tokio::time::sleep(Duration::from_secs(1)).await;
    w.server
        .apply(&mk_four_listener_gateway("refused"))
        .await
        .unwrap();
    let what = "refused Gateway's reason";
    let gw = until_object::<Gateway, _>(&w.client, NS, "refused", WAIT, what, |gw| {
        let c = condition(&gw["status"]["conditions"], "Programmed").ok_or("no Programmed")?;
        let msg = c["message"].as_str().unwrap_or_default();
        if c["status"] == "False" && msg.contains("could not be put in place") {
            Ok(gw.clone())
        } else {
            Err(gw["status"].to_string())
        }
    })
    .await;
    let programmed = condition(&gw["status"]["conditions"], "Programmed").unwrap();
    println!(
        "refused: {}: {}",
        programmed["reason"], programmed["message"]
    );
    assert_eq!(programmed["reason"], "AddressNotAssigned");
    assert_eq!(
        status_reason(&gw["status"]["conditions"], "Accepted"),
        cond("True", "Accepted")
    );
    let first = get_json::<Gateway>(&w.client, Some(NS), "gw0")
        .await
        .unwrap();
    assert_eq!(
        status_reason(&first["status"]["conditions"], "Programmed"),
        cond("True", "Programmed"),
        "the others are untouched"
    );
}

async fn allowed_again_the_retry_creates_it(w: &World) {
    let quotas: kube::Api<ResourceQuota> = kube::Api::namespaced(w.client.clone(), NS);
    quotas.delete("no-lb", &Default::default()).await.unwrap();
    public_services(&w.client, GATEWAYS + 1, WAIT).await;
}
