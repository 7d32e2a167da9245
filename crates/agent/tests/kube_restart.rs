//! Kubernetes mode, agent restarts under steady traffic (issue point 6): the agent
//! is SIGKILLed and started again while a client keeps sending requests through
//! Envoy. Not one request may fail, Envoy never removes a listener or a cluster (no
//! empty or partial snapshot is ever pushed), and the port allocations recorded on
//! the Service survive.

mod support;

use kube::runtime::WatchStreamExt;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::Service;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use support::*;

const NS: &str = "app";

fn gateway_and_route() -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r1, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - backendRefs: [{{name: b0, port: 80}}]\n"
    )
}

/// Envoy's counter `name` from its admin `/stats`.
fn envoy_stat(admin: &str, name: &str) -> u64 {
    let r = http_get(admin, "localhost", &format!("/stats?filter=^{name}$"), &[]).unwrap();
    r.body
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: "))?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {}", r.body))
}

#[test]
fn agent_restarts_under_traffic_fail_no_request() {
    if !isolated() {
        return;
    }
    runtime().block_on(restarts());
}

async fn restarts() {
    let logs = temp_dir("kube-restart");
    let server = aether_testkit::ApiServer::start().await;
    let client = server.client();
    let b0 = Backend::on(POD_IP, "b0");
    let yaml = [base_yaml(&[NS]), b0.yaml(NS), gateway_and_route()].join("---\n");
    server.apply(&yaml).await.unwrap();
    let mut agent = kube_agent(
        server.kubeconfig_path(),
        &["--leader-elect=true", "--address-mode", "service"],
        &logs,
    );
    // SotW ADS (Delta elsewhere): a reconnect resumes from Envoy's version_info.
    let envoy = envoy("node-a", &agent.xds, false, &logs);

    // The Service appears; the test as load balancer sends to its targetPort.
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
    let allocations = |s: &Service| {
        s.metadata.annotations.as_ref().unwrap()["aether.io/port-allocations"].clone()
    };
    let recorded = allocations(&svc);
    let target = recorded.strip_prefix("80=").expect("80=<port>").to_string();
    services
        .patch_status(
            svc.metadata.name.as_deref().unwrap(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": POD_IP}]}}})),
        )
        .await
        .unwrap();
    let gateway = format!("{POD_IP}:{target}");
    wait_until(Duration::from_secs(30), "traffic through Envoy", || {
        http_get(&gateway, "example.test", "/", &[])
            .ok()?
            .backend()
            .map(|_| ())
    });
    // Status has taken in the address before the watch records anything: Envoy
    // serves before the load balancer is known, so until then a write of
    // `False/AddressNotAssigned` (a new message, or one still in flight) is true
    // and not a flip.
    until_programmed(
        &client,
        NS,
        "gw",
        Duration::from_secs(30),
        "Programmed=True with the address",
        |gw| {
            let addresses = &gw["status"]["addresses"];
            (addresses[0]["value"] == POD_IP)
                .then_some(())
                .ok_or(format!("addresses {addresses}"))
        },
    )
    .await;

    // Steady traffic: one request per fresh connection, back to back.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let traffic = {
        let (stop, ok, failed, gateway) =
            (stop.clone(), ok.clone(), failed.clone(), gateway.clone());
        std::thread::spawn(move || {
            let mut failures = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                match http_get(&gateway, "example.test", "/steady", &[]) {
                    Ok(r) if r.backend() == Some("b0") => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    other => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        failures.push(format!("{other:?}"));
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            failures
        })
    };

    // What status says meanwhile: every Programmed value a watch sees.
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let watch = {
        let api: kube::Api<Gateway> = kube::Api::namespaced(client.clone(), NS);
        let seen = seen.clone();
        tokio::spawn(async move {
            use futures::StreamExt;
            // Backoff: against a stopped API server an unpaced watcher never yields.
            let mut events = kube::runtime::watcher(api, Default::default())
                .default_backoff()
                .boxed();
            while let Some(ev) = events.next().await {
                let Ok(kube::runtime::watcher::Event::Apply(g)) = ev else {
                    continue;
                };
                let v = serde_json::to_value(g).unwrap();
                if let Some((s, r)) = status_reason(&v["status"]["conditions"], "Programmed") {
                    seen.lock().unwrap().push(format!("{s}/{r}"));
                }
            }
        })
    };
    for round in 1..=3 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = ok.load(Ordering::Relaxed);
        agent.restart();
        // Back: the new process serves Envoy again and Envoy ACKed all of it.
        wait_until(
            Duration::from_secs(30),
            "Envoy ACKs the restarted agent",
            || agent.node_acked_all("node-a").then_some(()),
        );
        let after = ok.load(Ordering::Relaxed);
        println!(
            "restart {round}: {} requests served across it",
            after - before
        );
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let failures = traffic.join().unwrap();
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    println!("3 agent restarts under traffic: {ok} requests ok, {failed} failed");
    watch.abort();
    // Still served all along, so status never said otherwise (no flip, no writes).
    let seen = seen.lock().unwrap().clone();
    println!("Gateway Programmed as seen by a watch across the restarts: {seen:?}");
    assert!(
        seen.iter().all(|s| s == "True/Programmed"),
        "status flipped during agent restarts: {seen:?}"
    );
    assert_eq!(
        failed,
        0,
        "failed requests: {:?}",
        &failures[..failures.len().min(5)]
    );
    assert!(ok > 200, "steady traffic ran: {ok}");
    for stat in [
        "listener_manager.listener_removed",
        "cluster_manager.cluster_removed",
    ] {
        assert_eq!(
            envoy_stat(&envoy.admin, stat),
            0,
            "{stat}: Envoy lost config"
        );
    }
    let svc = services
        .get(svc.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(allocations(&svc), recorded, "allocations survive restarts");
    drop(agent);
}
