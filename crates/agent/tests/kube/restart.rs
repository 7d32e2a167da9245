//! Kubernetes mode, agent restarts under steady traffic (issue point 6): the agent
//! is SIGKILLed and started again while a client keeps sending requests through
//! Envoy. Not one request may fail, Envoy never removes a listener or a cluster (no
//! empty or partial snapshot is ever pushed), and the port allocations recorded on
//! the Service survive.

use crate::support::*;
use futures::StreamExt;
use gateway_api::apis::experimental::gateways::Gateway;
use k8s_openapi::api::core::v1::Service;
use kube::runtime::WatchStreamExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const NS: &str = "app";
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn agent_restarts_under_traffic_fail_no_request() {
    in_netns(async {
        let mut w = given_traffic_through_the_edge_service().await;
        three_restarts_under_traffic_fail_no_request_and_flip_no_status(&mut w).await;
        an_api_server_outage_under_traffic_fails_no_request(&mut w).await;
        envoy_lost_no_config_and_the_allocations_survive(&w).await;
    });
}

/// Fields drop in order: the API server last.
struct World {
    client: kube::Client,
    agent: KubeAgent,
    envoy: Envoy,
    /// The edge Service as first created, and its recorded allocations.
    svc: Service,
    recorded: String,
    /// Its targetPort on the backends' address: where the load balancer sends.
    gateway: String,
    _b0: Backend,
    server: aether_testkit::ApiServer,
}

fn allocations(s: &Service) -> String {
    s.metadata.annotations.as_ref().unwrap()["aether.io/port-allocations"].clone()
}

/// The Service appears; the test as load balancer sends to its targetPort.
async fn given_traffic_through_the_edge_service() -> World {
    let logs = temp_dir("kube-restart");
    let b0 = Backend::on(POD_IP, "b0");
    let yaml = [
        base_yaml(&[NS]),
        b0.yaml(NS),
        mk_gateway(NS, "gw", &[HTTP_80]),
        mk_route_to("HTTPRoute", NS, "r1", "{name: gw}", "b0"),
    ];
    let server = given_cluster(&yaml).await;
    let client = server.client();
    let elected = ["--leader-elect=true", "--address-mode", "service"];
    let agent = kube_agent(server.kubeconfig_path(), &elected, &logs);
    // SotW ADS (Delta elsewhere): a reconnect resumes from Envoy's version_info.
    let envoy = envoy("node-a", &agent.xds, false, &logs);
    let svc = edge_service(&client).await;
    let recorded = allocations(&svc);
    let target = recorded.strip_prefix("80=").expect("80=<port>");
    let gateway = format!("{POD_IP}:{target}");
    assign_load_balancer(&client, &public_service(&client).await, POD_IP).await;
    wait_until(WAIT, "traffic through Envoy", || {
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
        WAIT,
        "Programmed=True with the address",
        |gw| {
            let addresses = &gw["status"]["addresses"];
            (addresses[0]["value"] == POD_IP)
                .then_some(())
                .ok_or(format!("addresses {addresses}"))
        },
    )
    .await;
    World {
        client,
        agent,
        envoy,
        svc,
        recorded,
        gateway,
        _b0: b0,
        server,
    }
}

async fn three_restarts_under_traffic_fail_no_request_and_flip_no_status(w: &mut World) {
    let traffic = Traffic::start(&w.gateway);
    let (seen, watch) = watch_programmed(&w.client);
    for round in 1..=3 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = traffic.ok.load(Ordering::Relaxed);
        w.agent.restart();
        // Back: the new process serves Envoy again and Envoy ACKed all of it.
        wait_until(WAIT, "Envoy ACKs the restarted agent", || {
            w.agent.node_acked_all("node-a").then_some(())
        });
        let after = traffic.ok.load(Ordering::Relaxed);
        println!(
            "restart {round}: {} requests served across it",
            after - before
        );
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (ok, failed, failures) = traffic.stop();
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
}

/// kube-apiserver killed for 5 s and started again (etcd keeps its data)
/// under keep-alive traffic: the agent keeps serving what it has, re-lists
/// when the server is back, and publishes nothing new (nothing changed), so
/// no request fails and no connection is closed.
async fn an_api_server_outage_under_traffic_fails_no_request(w: &mut World) {
    use aether_testkit::live::traffic::{Load, Target};
    let target = Target {
        addr: w.gateway.clone(),
        host: "example.test".into(),
        path: "/outage".into(),
        sni: None,
    };
    let load = Load::start(&target, 4, Duration::from_millis(2));
    tokio::time::sleep(Duration::from_millis(500)).await;
    w.server.stop_apiserver().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    w.server.start_apiserver().await;
    w.client = w.server.client();
    // Back: the agent's watches resume (a re-list) and it still serves Envoy.
    tokio::time::sleep(Duration::from_secs(3)).await;
    wait_until(WAIT, "Envoy ACKed everything after the outage", || {
        w.agent.node_acked_all("node-a").then_some(())
    });
    let t = load.stop();
    println!(
        "API server outage (5 s) under keep-alive traffic: {} sent, {} ok, {} lost, {} connections closed by the server, longest gap {} ms",
        t.sent,
        t.ok,
        t.lost(),
        t.server_closed,
        t.longest_gap.as_millis()
    );
    assert!(t.ok > 500, "steady traffic ran: {t:?}");
    assert_eq!((t.lost(), t.server_closed), (0, 0), "{t:?}");
}

async fn envoy_lost_no_config_and_the_allocations_survive(w: &World) {
    for stat in [
        "listener_manager.listener_removed",
        "cluster_manager.cluster_removed",
    ] {
        assert_eq!(
            envoy_stat(&w.envoy.admin, stat),
            0,
            "{stat}: Envoy lost config"
        );
    }
    let services: kube::Api<Service> = kube::Api::namespaced(w.client.clone(), "aether-ingress");
    let svc = services
        .get(w.svc.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        allocations(&svc),
        w.recorded,
        "allocations survive restarts"
    );
}

/// Steady traffic: one request per fresh connection, back to back, each counted.
struct Traffic {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<Vec<String>>,
}

impl Traffic {
    fn start(gateway: &str) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (s, o, f, gateway) = (
            stop.clone(),
            ok.clone(),
            failed.clone(),
            gateway.to_string(),
        );
        let thread = std::thread::spawn(move || {
            let mut failures = Vec::new();
            while !s.load(Ordering::Relaxed) {
                match http_get(&gateway, "example.test", "/steady", &[]) {
                    Ok(r) if r.backend() == Some("b0") => {
                        o.fetch_add(1, Ordering::Relaxed);
                    }
                    other => {
                        f.fetch_add(1, Ordering::Relaxed);
                        failures.push(format!("{other:?}"));
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            failures
        });
        Traffic {
            stop,
            ok,
            failed,
            thread,
        }
    }

    /// Stops it: `(ok, failed, what the failures were)`.
    fn stop(self) -> (u64, u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let failures = self.thread.join().unwrap();
        let ok = self.ok.load(Ordering::Relaxed);
        (ok, self.failed.load(Ordering::Relaxed), failures)
    }
}

/// What status says meanwhile: every Programmed value a watch sees.
fn watch_programmed(
    client: &kube::Client,
) -> (Arc<Mutex<Vec<String>>>, tokio::task::JoinHandle<()>) {
    let api: kube::Api<Gateway> = kube::Api::namespaced(client.clone(), NS);
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    let task = tokio::spawn(async move {
        // Backoff: against a stopped API server an unpaced watcher never yields.
        let mut events = kube::runtime::watcher(api, Default::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = events.next().await {
            let Ok(kube::runtime::watcher::Event::Apply(g)) = ev else {
                continue;
            };
            let v = serde_json::to_value(g).unwrap();
            if let Some((s, r)) = programmed(&v) {
                record.lock().unwrap().push(format!("{s}/{r}"));
            }
        }
    });
    (seen, task)
}

/// Envoy's counter `name` from its admin `/stats`.
fn envoy_stat(admin: &str, name: &str) -> u64 {
    let r = http_get(admin, "localhost", &format!("/stats?filter=^{name}$"), &[]).unwrap();
    r.body
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: "))?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {}", r.body))
}
