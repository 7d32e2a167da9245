//! Kubernetes mode, service mode at the scale the previous implementation failed at
//! (issue points 4 and 6): 20 Gateways created at once, each with two HTTP listeners
//! on :80 and two HTTPS listeners on :443, all get a Service with exactly ports 80
//! and 443 (the API server accepts every one), distinct Envoy ports, addresses from
//! the test acting as load balancer, and traffic through every allocation. Then a
//! Gateway whose Service the API server refuses (a ResourceQuota) appears in status
//! with the reason, without disturbing the others, and recovers when allowed.

mod support;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::{ResourceQuota, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;
use support::*;

const NS: &str = "app";
const GATEWAYS: usize = 20;

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

fn gateway_yaml(name: &str) -> String {
    let https = |l: &str, h: &str| {
        format!(
            "  - {{name: {l}, protocol: HTTPS, port: 443, hostname: {h}, tls: {{certificateRefs: [{{name: cert}}]}}}}\n"
        )
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n\
         {}{}{}{}",
        "  - {name: a, protocol: HTTP, port: 80, hostname: a.example.com}\n",
        "  - {name: b, protocol: HTTP, port: 80, hostname: b.example.com}\n",
        https("sa", "a.example.com"),
        https("sb", "b.example.com"),
    )
}

/// One HTTPRoute attached to every Gateway's listener `a`.
fn route_yaml(gateways: &[String]) -> String {
    let parents: Vec<String> = gateways
        .iter()
        .map(|g| format!("{{name: {g}, sectionName: a}}"))
        .collect();
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r, namespace: {NS}}}\nspec:\n  parentRefs: [{}]\n  rules:\n  - backendRefs: [{{name: b0, port: 80}}]\n",
        parents.join(", ")
    )
}

/// Service port → targetPort.
fn ports(svc: &Service) -> BTreeMap<i32, i32> {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .map(|p| match &p.target_port {
            Some(IntOrString::Int(t)) => (p.port, *t),
            other => panic!("targetPort {other:?}"),
        })
        .collect()
}

#[test]
fn twenty_gateways_at_once_and_one_whose_service_is_refused() {
    if !isolated() {
        return;
    }
    runtime().block_on(many());
}

async fn many() {
    let logs = temp_dir("kube-many");
    let server = aether_testkit::ApiServer::start().await;
    let client = server.client();
    let c = &client;
    let b0 = Backend::on(POD_IP, "b0");
    let names: Vec<String> = (0..GATEWAYS).map(|i| format!("gw{i}")).collect();
    server
        .apply(&[base_yaml(&[NS]), b0.yaml(NS), tls_secret(&logs)].join("\n---\n"))
        .await
        .unwrap();
    let agent = kube_agent(
        server.kubeconfig_path(),
        &["--leader-elect=false", "--address-mode", "service"],
        &logs,
    );
    let _envoy = envoy("node-a", &agent.xds, true, &logs);
    let mut all: Vec<String> = names.iter().map(|n| gateway_yaml(n)).collect();
    all.push(route_yaml(&names));
    server.apply(&all.join("---\n")).await.unwrap();

    // Every Gateway gets its Service: ports exactly 80 and 443, Envoy ports all distinct.
    let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), "aether-ingress");
    let lp = ListParams::default().labels("aether.io/edge-gateway");
    let list = edge_services(&client, GATEWAYS, Duration::from_secs(60)).await;
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
        // The test is the load balancer.
        services
            .patch_status(
                svc.metadata.name.as_deref().unwrap(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": POD_IP}]}}})),
            )
            .await
            .unwrap();
    }
    assert_eq!(
        by_gateway.keys().cloned().collect::<BTreeSet<_>>(),
        names.iter().cloned().collect()
    );

    for name in &names {
        eventually(
            Duration::from_secs(60),
            &format!("{name} programmed"),
            || async move {
                let gw = get_json::<Gateway>(c, Some(NS), name).await.ok_or("none")?;
                let ok = status_reason(&gw["status"]["conditions"], "Programmed")
                    == Some(("True".into(), "Programmed".into()))
                    && gw["status"]["addresses"] == json!([{"type": "IPAddress", "value": POD_IP}])
                    && gw["status"]["listeners"].as_array().map(Vec::len) == Some(4);
                if ok {
                    Ok(())
                } else {
                    Err(gw["status"].to_string())
                }
            },
        )
        .await;
        let target = by_gateway[name][&80];
        let r = http_get(&format!("{POD_IP}:{target}"), "a.example.com", "/", &[]).unwrap();
        assert_eq!(r.backend(), Some("b0"), "{name} via {target}: {r:?}");
    }
    println!(
        "{GATEWAYS} Gateways: {} distinct Envoy ports, all programmed and serving",
        envoy_ports.len()
    );

    // The API server refuses the next LoadBalancer Service.
    let quota = "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: no-lb, namespace: aether-ingress}\nspec:\n  hard: {services.loadbalancers: \"0\"}\n";
    server.apply(quota).await.unwrap();
    // No quota controller runs here: the test sets the usage admission checks against.
    let quotas: kube::Api<ResourceQuota> = kube::Api::namespaced(client.clone(), "aether-ingress");
    let usage = json!({"services.loadbalancers": GATEWAYS.to_string()});
    let status = json!({"status": {"hard": {"services.loadbalancers": "0"}, "used": usage}});
    quotas
        .patch_status("no-lb", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    // Admission reads quotas through an informer.
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.apply(&gateway_yaml("refused")).await.unwrap();
    let gw = eventually(
        Duration::from_secs(30),
        "refused Gateway's reason",
        || async move {
            let gw = get_json::<Gateway>(c, Some(NS), "refused")
                .await
                .ok_or("none")?;
            let c = condition(&gw["status"]["conditions"], "Programmed").ok_or("no Programmed")?;
            let msg = c["message"].as_str().unwrap_or_default();
            if c["status"] == "False" && msg.contains("could not be put in place") {
                Ok(gw.clone())
            } else {
                Err(gw["status"].to_string())
            }
        },
    )
    .await;
    let programmed = condition(&gw["status"]["conditions"], "Programmed").unwrap();
    println!(
        "refused: {}: {}",
        programmed["reason"], programmed["message"]
    );
    assert_eq!(programmed["reason"], "AddressNotAssigned");
    assert_eq!(
        status_reason(&gw["status"]["conditions"], "Accepted"),
        Some(("True".into(), "Accepted".into()))
    );
    let first = get_json::<Gateway>(c, Some(NS), "gw0").await.unwrap();
    assert_eq!(
        status_reason(&first["status"]["conditions"], "Programmed"),
        Some(("True".into(), "Programmed".into())),
        "the others are untouched"
    );

    // Allowed again: the retry creates it.
    quotas.delete("no-lb", &Default::default()).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "refused Gateway's Service after all",
        || {
            let (services, lp) = (services.clone(), lp.clone());
            async move {
                let n = services
                    .list(&lp)
                    .await
                    .map_err(|e| e.to_string())?
                    .items
                    .len();
                if n == GATEWAYS + 1 {
                    Ok(())
                } else {
                    Err(format!("{n} Services"))
                }
            }
        },
    )
    .await;
    drop(agent);
}
