//! Kubernetes mode, addresses and status-write failures (issue points 2 and 4) with
//! the real `aether-edge agent`, a real kube-apiserver and a real Envoy:
//!
//! - service mode: a Gateway gets one LoadBalancer Service with one port per distinct
//!   listener port whose targetPort is its allocation; the test plays the load
//!   balancer (patches `status.loadBalancer.ingress`, then dials the targetPort) and
//!   the Gateway's `status.addresses` follow; the Service goes with the Gateway.
//! - an API server outage while status must change: the failed writes are counted
//!   on `/metrics`, logged with the object named, retried, and land once it is back.

mod support;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::Service;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;
use support::*;

const NS: &str = "app";

fn gateway_yaml() -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  \
         - {{name: a, protocol: HTTP, port: 80, hostname: a.example.com}}\n  \
         - {{name: b, protocol: HTTP, port: 80, hostname: b.example.com}}\n  \
         - {{name: alt, protocol: HTTP, port: 8080}}\n"
    )
}

fn route_yaml(backend: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r1, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - backendRefs: [{{name: {backend}, port: 80}}]\n"
    )
}

/// Service port → targetPort (every port TCP).
fn service_ports(svc: &Service) -> BTreeMap<i32, i32> {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .map(|p| {
            let target = match p.target_port.clone() {
                Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(t)) => t,
                s => panic!("targetPort {s:?}"),
            };
            assert_eq!(p.protocol.as_deref(), Some("TCP"));
            (p.port, target)
        })
        .collect()
}

#[test]
fn service_mode_ports_allocations_and_load_balancer_addresses() {
    if !isolated() {
        return;
    }
    runtime().block_on(service_mode());
}

async fn service_mode() {
    let logs = temp_dir("kube-service");
    let server = aether_testkit::ApiServer::start().await;
    let client = server.client();
    let c = &client;
    let b0 = Backend::on(POD_IP, "b0");
    let yaml = [
        base_yaml(&[NS]),
        b0.yaml(NS),
        gateway_yaml(),
        route_yaml("b0"),
    ]
    .join("---\n");
    server.apply(&yaml).await.unwrap();
    let agent = kube_agent(
        server.kubeconfig_path(),
        &["--leader-elect=false", "--address-mode", "service"],
        &logs,
    );
    let _envoy = envoy("node-a", &agent.xds, true, &logs);

    let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), "aether-ingress");
    let by_label = ListParams::default().labels("aether.io/edge-gateway");
    let svc = eventually(Duration::from_secs(30), "the edge Service", || {
        let services = services.clone();
        let lp = by_label.clone();
        async move {
            let list = services.list(&lp).await.map_err(|e| e.to_string())?;
            match list.items.as_slice() {
                [one] => Ok(one.clone()),
                other => Err(format!("{} Services", other.len())),
            }
        }
    })
    .await;
    let name = svc.metadata.name.clone().unwrap();
    let spec = svc.spec.clone().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
    let ports = service_ports(&svc);
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

    // No load balancer yet: no address, not programmed, and the message says why.
    let gw = eventually(
        Duration::from_secs(30),
        "AddressNotAssigned",
        || async move {
            let gw = get_json::<Gateway>(c, Some(NS), "gw").await.ok_or("none")?;
            match programmed(&gw) {
                Some((s, r)) if s == "False" && r == "AddressNotAssigned" => Ok(gw),
                p => Err(format!("{p:?}")),
            }
        },
    )
    .await;
    assert!(
        gw["status"]["addresses"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{}",
        gw["status"]
    );

    // The test is the load balancer: it assigns an address …
    services
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": POD_IP}]}}})),
        )
        .await
        .unwrap();
    let gw = until_programmed(
        c,
        NS,
        "gw",
        Duration::from_secs(30),
        "addresses + Programmed",
        |gw| {
            let addresses = &gw["status"]["addresses"];
            (*addresses == json!([{"type": "IPAddress", "value": POD_IP}]))
                .then_some(())
                .ok_or(format!("addresses {addresses}"))
        },
    )
    .await;
    let attached: Vec<i64> = gw["status"]["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["attachedRoutes"].as_i64().unwrap())
        .collect();
    assert_eq!(attached, vec![1, 1, 1], "{}", gw["status"]);
    // … and forwards each Service port to its targetPort, where Envoy listens.
    for (port, target) in &ports {
        let addr = format!("{POD_IP}:{target}");
        let host = if *port == 80 {
            "a.example.com"
        } else {
            "any.test"
        };
        let r = http_get(&addr, host, "/x", &[]).unwrap();
        assert_eq!(r.backend(), Some("b0"), "port {port} → {addr}: {r:?}");
    }

    // A listener moves from 8080 to 9090: the Service follows, port 80 keeps its
    // allocation, the new port gets one, and Envoy serves it.
    server
        .apply(&gateway_yaml().replace("port: 8080", "port: 9090"))
        .await
        .unwrap();
    let moved = eventually(Duration::from_secs(30), "Service ports 80 and 9090", || {
        let services = services.clone();
        let name = name.clone();
        async move {
            let svc = services.get(&name).await.map_err(|e| e.to_string())?;
            let p = service_ports(&svc);
            if p.keys().copied().collect::<Vec<_>>() == [80, 9090] {
                Ok(p)
            } else {
                Err(format!("{p:?}"))
            }
        }
    })
    .await;
    assert_eq!(moved[&80], ports[&80], "port 80 keeps its Envoy port");
    until_programmed(
        c,
        NS,
        "gw",
        Duration::from_secs(30),
        "generation 2 programmed",
        |gw| {
            let current = gw["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().all(|c| c["observedGeneration"] == 2));
            current.then_some(()).ok_or(gw["status"].to_string())
        },
    )
    .await;
    let r = http_get(
        &format!("{POD_IP}:{}", moved[&9090]),
        "any.test",
        "/moved",
        &[],
    )
    .unwrap();
    assert_eq!(r.backend(), Some("b0"), "{r:?}");

    // The Service goes with its Gateway.
    let gateways: kube::Api<Gateway> = kube::Api::namespaced(client.clone(), NS);
    gateways.delete("gw", &Default::default()).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "the Service garbage-collected",
        || {
            let services = services.clone();
            let lp = by_label.clone();
            async move {
                let n = services
                    .list(&lp)
                    .await
                    .map_err(|e| e.to_string())?
                    .items
                    .len();
                if n == 0 {
                    Ok(())
                } else {
                    Err(format!("{n} left"))
                }
            }
        },
    )
    .await;
    drop(agent);
}

#[test]
fn status_writes_failing_in_an_outage_are_retried_reported_and_land() {
    if !isolated() {
        return;
    }
    runtime().block_on(outage());
}

async fn outage() {
    let logs = temp_dir("kube-outage");
    let mut server = aether_testkit::ApiServer::start().await;
    let b0 = Backend::on(POD_IP, "b0");
    let yaml = [
        base_yaml(&[NS]),
        b0.yaml(NS),
        gateway_yaml(),
        route_yaml("b0"),
    ]
    .join("---\n");
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
    let mut first_envoy = envoy("node-a", &agent.xds, true, &logs);
    let client = server.client();
    let c = &client;
    let want = |s: &'static str, r: &'static str| Some((s.to_string(), r.to_string()));
    let any = |_: &Value| Ok(());
    until_programmed(c, NS, "gw", Duration::from_secs(30), "Programmed=True", any).await;
    // The write that showed Programmed=True is counted once its batch is back,
    // which may be after the GET above saw it: wait for that, or the outage
    // could catch it in flight (landed, answer lost) and count it as failed.
    let gateway_ok = |m: &str| {
        metric_sum(
            m,
            "aether_edge_status_writes_total",
            &["kind=\"Gateway\"", "result=\"ok\""],
        )
    };
    let ok_before = eventually(Duration::from_secs(10), "the write counted", || {
        let m = agent.metrics();
        async move {
            match gateway_ok(&m) {
                0 => Err(m),
                n => Ok(n),
            }
        }
    })
    .await;
    assert_eq!(
        metric_sum(
            &agent.metrics(),
            "aether_edge_status_writes_total",
            &["result=\"error\""]
        ),
        0
    );

    // Outage; meanwhile Envoy goes away, so the Gateway's status must change.
    server.stop_apiserver().await;
    first_envoy.proc.kill();
    let failed = eventually(Duration::from_secs(30), "failed writes on /metrics", || {
        let m = agent.metrics();
        async move {
            let n = metric_sum(
                &m,
                "aether_edge_status_writes_total",
                &["kind=\"Gateway\"", "result=\"error\""],
            );
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
    let log = agent.proc.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("status write failed") && l.contains(&format!("{NS}/gw"))),
        "a log line names the object:\n{log}"
    );
    // Retried with backoff while the outage lasts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let retried = metric_sum(
        &agent.metrics(),
        "aether_edge_status_batches_failed_total",
        &[],
    );
    assert!(retried > failed.1, "retries: {} then {retried}", failed.1);

    // Back: the pending write lands without anything else changing.
    server.start_apiserver().await;
    let client = server.client();
    let c = &client;
    let pending = eventually(
        Duration::from_secs(60),
        "Programmed=False/Pending written",
        || async move {
            let gw = get_json::<Gateway>(c, Some(NS), "gw").await.ok_or("none")?;
            let p = programmed(&gw);
            if p == want("False", "Pending") {
                Ok(gw)
            } else {
                Err(format!("{p:?}"))
            }
        },
    )
    .await;
    assert_eq!(pending["status"]["listeners"][0]["attachedRoutes"], 0);
    // Counted once its whole batch is back, which may be after the GET above
    // already shows the write.
    eventually(
        Duration::from_secs(10),
        "a successful Gateway write after the outage counted",
        || {
            let ok = gateway_ok(&agent.metrics());
            async move {
                if ok > ok_before {
                    Ok(())
                } else {
                    Err(format!("{ok} written, {ok_before} before the outage"))
                }
            }
        },
    )
    .await;

    // And the agent is fully back: a new Envoy ACKs, status follows.
    let _envoy = envoy("node-a", &agent.xds, true, &logs);
    until_programmed(
        c,
        NS,
        "gw",
        Duration::from_secs(30),
        "Programmed=True again",
        any,
    )
    .await;
    // The watches survived the restart: a route created afterwards is served and accepted.
    let r2 = route_yaml("b0")
        .replace("name: r1", "name: r2")
        .replace("rules:\n", "hostnames: [late.example.com]\n  rules:\n");
    server.apply(&r2).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "r2 Accepted after the restart",
        || route_accepted(c, NS, "r2", "gw"),
    )
    .await;
    let r = http_get(&format!("{POD_IP}:8080"), "late.example.com", "/", &[]).unwrap();
    assert_eq!(r.backend(), Some("b0"), "{r:?}");
    drop(agent);
}
