//! Kubernetes mode, the truth gate (issue point 3) end to end: `aether-edge agent`
//! against a real kube-apiserver, a real Envoy that connects late, status read back
//! from the API server. Gateway `Programmed`, listener `attachedRoutes` and the
//! route's `Accepted` wait for Envoy's ACK, flip within 1 s of it, and a NACK shows
//! up in `Programmed` with Envoy's own text.

mod support;

use futures::StreamExt;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

const NS: &str = "app";

fn gateway_yaml() -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n"
    )
}

fn route_yaml(name: &str, path_type: &str, path: &str, backend: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - matches: [{{path: {{type: {path_type}, value: \"{path}\"}}}}]\n    backendRefs: [{{name: {backend}, port: 80}}]\n"
    )
}

/// `(Programmed status, reason, message, listener attachedRoutes)` of the Gateway.
fn programmed(gw: &Value) -> Option<(String, String, String, i64)> {
    let c = condition(&gw["status"]["conditions"], "Programmed")?;
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
        c["message"].as_str().unwrap_or_default().to_string(),
        gw["status"]["listeners"][0]["attachedRoutes"].as_i64()?,
    ))
}

#[test]
fn status_waits_for_envoys_ack_flips_within_a_second_and_shows_a_nack() {
    if !isolated() {
        return;
    }
    runtime().block_on(truth_gate());
}

async fn truth_gate() {
    let logs = temp_dir("kube-truth-gate");
    let server = aether_testkit::ApiServer::start().await;
    let client = server.client();
    let c = &client;
    let b0 = Backend::on(POD_IP, "b0");
    let yaml = [
        base_yaml(&[NS]),
        b0.yaml(NS),
        gateway_yaml(),
        route_yaml("r1", "PathPrefix", "/", "b0"),
    ]
    .join("---\n");
    server.apply(&yaml).await.unwrap();

    // The agent runs and leads; its Envoy is held back.
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
    let gw = eventually(
        Duration::from_secs(30),
        "Gateway and route status written",
        || async move {
            let gw = get_json::<Gateway>(c, Some(NS), "gw")
                .await
                .ok_or("no gw")?;
            let route = get_json::<HttpRoute>(c, Some(NS), "r1")
                .await
                .ok_or("no route")?;
            match (programmed(&gw), our_parent(&route, "gw", None)) {
                (Some(_), Some(_)) => Ok(gw),
                _ => Err(format!("{} {}", gw["status"], route["status"])),
            }
        },
    )
    .await;
    // Held back: for two seconds nothing claims the route is served.
    let held_until = Instant::now() + Duration::from_secs(2);
    let mut gw = gw;
    loop {
        let (status, reason, message, attached) = programmed(&gw).unwrap();
        assert_eq!(
            (status.as_str(), reason.as_str(), attached),
            ("False", "Pending", 0),
            "before any ACK: {}",
            gw["status"]
        );
        assert!(message.contains("ACK"), "says what is awaited: {message}");
        assert_eq!(
            status_reason(&gw["status"]["conditions"], "Accepted"),
            Some(("True".into(), "Accepted".into()))
        );
        let route = get_json::<HttpRoute>(&client, Some(NS), "r1")
            .await
            .unwrap();
        let parent = our_parent(&route, "gw", None).expect("our parent entry");
        let accepted = condition(&parent["conditions"], "Accepted").unwrap();
        assert_ne!(
            accepted["status"], "True",
            "route accepted before any ACK: {route}"
        );
        if Instant::now() > held_until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        gw = get_json::<Gateway>(&client, Some(NS), "gw").await.unwrap();
    }

    // Watch the Gateway: when does Programmed=True become visible?
    let flipped: Arc<Mutex<Option<Instant>>> = Arc::default();
    let api: kube::Api<Gateway> = kube::Api::namespaced(client.clone(), NS);
    let seen = flipped.clone();
    let watch = tokio::spawn(async move {
        // Backoff: against a stopped API server an unpaced watcher never yields.
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(Ok(ev)) = events.next().await {
            let objs: Vec<Gateway> = match ev {
                watcher::Event::Apply(g) | watcher::Event::InitApply(g) => vec![g],
                _ => vec![],
            };
            for g in objs {
                let v = serde_json::to_value(g).unwrap();
                if programmed(&v).is_some_and(|p| p.0 == "True") {
                    seen.lock().unwrap().get_or_insert(Instant::now());
                }
            }
        }
    });
    // Poll the agent for the moment its Envoy has ACKed the whole snapshot.
    let acked: Arc<Mutex<Option<Instant>>> = Arc::default();
    let (admin, mark) = (agent.admin.clone(), acked.clone());
    let poller = std::thread::spawn(move || {
        let probe = KubeAgentProbe(admin);
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if probe.acked_all("node-a") {
                mark.lock().unwrap().get_or_insert(Instant::now());
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let _envoy = envoy("node-a", &agent.xds, true, &logs);
    poller.join().unwrap();
    let ack = acked.lock().unwrap().expect("Envoy ACKed the snapshot");
    let status_at = eventually(Duration::from_secs(10), "Programmed=True observed", || {
        let f = *flipped.lock().unwrap();
        async move { f.ok_or_else(|| "not yet".to_string()) }
    })
    .await;
    let flip = status_at.saturating_duration_since(ack);
    println!(
        "ACK → Programmed=True observed by a watch: {} ms",
        flip.as_millis()
    );
    assert!(
        flip < Duration::from_secs(1),
        "status flipped {flip:?} after the ACK"
    );
    watch.abort();

    // Everything now says served, and it is.
    let gw = get_json::<Gateway>(&client, Some(NS), "gw").await.unwrap();
    let (_, reason, _, attached) = programmed(&gw).unwrap();
    assert_eq!(
        (reason.as_str(), attached),
        ("Programmed", 1),
        "{}",
        gw["status"]
    );
    // Static mode: the address listeners bind on, with its type (the suite dials it).
    assert_eq!(
        gw["status"]["addresses"],
        serde_json::json!([{"type": "IPAddress", "value": POD_IP}]),
        "{}",
        gw["status"]
    );
    let route = eventually(
        Duration::from_secs(5),
        "route Accepted=True",
        || async move {
            let r = get_json::<HttpRoute>(c, Some(NS), "r1")
                .await
                .ok_or("none")?;
            let ok = our_parent(&r, "gw", None)
                .and_then(|p| status_reason(&p["conditions"], "Accepted"))
                == Some(("True".into(), "Accepted".into()));
            if ok {
                Ok(r)
            } else {
                Err(r["status"].to_string())
            }
        },
    )
    .await;
    assert!(our_parent(&route, "gw", None).is_some());
    let gateway = format!("{POD_IP}:80");
    let answer = eventually(Duration::from_secs(10), "traffic through Envoy", || {
        let r = http_get(&gateway, "example.test", "/hello", &[]);
        async move {
            let r = r.map_err(|e| e.to_string())?;
            r.backend().map(str::to_string).ok_or(format!("{r:?}"))
        }
    })
    .await;
    assert_eq!(answer, "b0");

    // A NACK: passes translate's RE2 checks (a lower bound of the program size),
    // but Envoy's RE2 program is just over the 1000 our bootstraps allow.
    server
        .apply(&route_yaml("bad", "RegularExpression", "/[a-z]{997}", "b0"))
        .await
        .unwrap();
    let (status, reason, message, _) = eventually(
        Duration::from_secs(20),
        "NACK in Programmed",
        || async move {
            let gw = get_json::<Gateway>(c, Some(NS), "gw").await.ok_or("none")?;
            let p = programmed(&gw).ok_or("no Programmed")?;
            if p.0 == "False" && p.2.contains("Envoy") {
                Ok(p)
            } else {
                Err(format!("{p:?}"))
            }
        },
    )
    .await;
    println!("NACK in status: {status}/{reason}: {message}");
    assert!(
        message.contains("program size"),
        "Envoy's text names the regex: {message}"
    );
    // The previous route table keeps serving.
    let r = http_get(&gateway, "example.test", "/hello", &[]).unwrap();
    assert_eq!(r.backend(), Some("b0"));
    // The bad route goes: Envoy ACKs again and status recovers.
    let routes: kube::Api<HttpRoute> = kube::Api::namespaced(client.clone(), NS);
    routes.delete("bad", &Default::default()).await.unwrap();
    eventually(
        Duration::from_secs(20),
        "Programmed=True after the fix",
        || async move {
            let gw = get_json::<Gateway>(c, Some(NS), "gw").await.ok_or("none")?;
            let p = programmed(&gw).ok_or("no Programmed")?;
            if p.0 == "True" && p.3 == 1 {
                Ok(())
            } else {
                Err(format!("{p:?}"))
            }
        },
    )
    .await;
    drop(agent);
}

/// The agent's admin address, for a plain thread.
struct KubeAgentProbe(String);

impl KubeAgentProbe {
    fn acked_all(&self, node: &str) -> bool {
        http_get(&self.0, "localhost", "/debug/snapshot", &[])
            .ok()
            .filter(|r| r.status == 200)
            .and_then(|r| serde_json::from_str::<Value>(&r.body).ok())
            .is_some_and(|s| snapshot_acked(&s, node))
    }
}
