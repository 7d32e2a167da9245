//! Kubernetes mode, the truth gate (issue point 3) end to end: `aether-edge agent`
//! against a real kube-apiserver, a real Envoy that connects late, status read back
//! from the API server. Gateway `Programmed`, listener `attachedRoutes` and the
//! route's `Accepted` wait for Envoy's ACK, flip within 1 s of it, and a route
//! Envoy refuses is held back with Envoy's own text in its `Accepted`.
//!
//! One API server, the scenarios in order: held back, the flip, served, the NACK.

use crate::support::*;
use futures::StreamExt;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NS: &str = "app";

#[test]
fn status_waits_for_envoys_ack_flips_within_a_second_and_shows_a_nack() {
    let _alone = crate::alone();
    in_netns(async {
        let w = given_an_agent_whose_envoy_is_held_back().await;
        nothing_claims_the_route_is_served_before_the_ack(&w).await;
        let _envoy = status_flips_within_a_second_of_the_ack(&w).await;
        everything_says_served_and_it_is(&w).await;
        a_nack_holds_back_its_route_and_the_rest_goes_on(&w).await;
    });
}

/// Fields drop in order: the API server last.
struct World {
    client: kube::Client,
    agent: KubeAgent,
    logs: std::path::PathBuf,
    _b0: Backend,
    server: aether_testkit::ApiServer,
}

fn mk_path_route(name: &str, path_type: &str, path: &str) -> String {
    let rule = format!("{{path: {{type: {path_type}, value: \"{path}\"}}}}");
    let spec = format!(
        "  parentRefs: [{{name: gw}}]\n  rules:\n  - matches: [{rule}]\n    backendRefs: [{{name: b0, port: 80}}]\n"
    );
    mk_route("HTTPRoute", NS, name, &spec)
}

/// `(Programmed status, reason, message, listener attachedRoutes)` of the Gateway.
fn programmed_in_full(gw: &Value) -> Option<(String, String, String, i64)> {
    let c = condition(&gw["status"]["conditions"], "Programmed")?;
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
        c["message"].as_str().unwrap_or_default().to_string(),
        gw["status"]["listeners"][0]["attachedRoutes"].as_i64()?,
    ))
}

/// Waits until the Gateway's [`programmed_in_full`] passes `check`, and returns it.
async fn then_gateway(
    w: &World,
    timeout: u64,
    what: &str,
    check: impl Fn(&(String, String, String, i64)) -> bool,
) -> (String, String, String, i64) {
    let timeout = Duration::from_secs(timeout);
    until_object::<Gateway, _>(&w.client, NS, "gw", timeout, what, |gw| {
        let p = programmed_in_full(gw).ok_or("no Programmed")?;
        if check(&p) {
            Ok(p)
        } else {
            Err(format!("{p:?}"))
        }
    })
    .await
}

/// The agent runs and leads; its Envoy is held back.
async fn given_an_agent_whose_envoy_is_held_back() -> World {
    let logs = temp_dir("kube-truth-gate");
    let b0 = Backend::on(POD_IP, "b0");
    let yaml = [
        base_yaml(&[NS]),
        b0.yaml(NS),
        mk_gateway(NS, "gw", &[HTTP_80]),
        mk_path_route("r1", "PathPrefix", "/"),
    ];
    let server = given_cluster(&yaml).await;
    let agent = kube_agent(server.kubeconfig_path(), &STATIC_AT_POD_IP, &logs);
    World {
        client: server.client(),
        agent,
        logs,
        _b0: b0,
        server,
    }
}

/// For two seconds nothing claims the route is served.
async fn nothing_claims_the_route_is_served_before_the_ack(w: &World) {
    let c = &w.client;
    until_object::<Gateway, _>(
        c,
        NS,
        "gw",
        Duration::from_secs(30),
        "status written",
        |gw| {
            programmed_in_full(gw)
                .map(|_| ())
                .ok_or(gw["status"].to_string())
        },
    )
    .await;
    until_object::<HttpRoute, _>(c, NS, "r1", Duration::from_secs(30), "route status", |r| {
        our_parent(r, "gw", None)
            .map(|_| ())
            .ok_or(r["status"].to_string())
    })
    .await;
    let held_until = Instant::now() + Duration::from_secs(2);
    loop {
        let gw = get_json::<Gateway>(c, Some(NS), "gw").await.unwrap();
        let (status, reason, message, attached) = programmed_in_full(&gw).unwrap();
        assert_eq!(
            (status.as_str(), reason.as_str(), attached),
            ("False", "Pending", 0),
            "before any ACK: {}",
            gw["status"]
        );
        assert!(message.contains("ACK"), "says what is awaited: {message}");
        assert_eq!(
            status_reason(&gw["status"]["conditions"], "Accepted"),
            cond("True", "Accepted")
        );
        let route = get_json::<HttpRoute>(c, Some(NS), "r1").await.unwrap();
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
    }
}

/// Envoy connects: `Programmed=True` is seen by a watch within a second of the
/// moment the agent says Envoy ACKed the whole snapshot. Returns that Envoy.
async fn status_flips_within_a_second_of_the_ack(w: &World) -> Envoy {
    let (flipped, watch) = watch_first_programmed(&w.client);
    let poller = poll_first_ack(w.agent.admin.clone());
    let envoy = envoy("node-a", &w.agent.xds, true, &w.logs);
    let ack = poller.join().unwrap().expect("Envoy ACKed the snapshot");
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
    envoy
}

/// A watch on the Gateways: when it first sees `Programmed=True`.
fn watch_first_programmed(
    client: &kube::Client,
) -> (Arc<Mutex<Option<Instant>>>, tokio::task::JoinHandle<()>) {
    let flipped: Arc<Mutex<Option<Instant>>> = Arc::default();
    let api: kube::Api<Gateway> = kube::Api::namespaced(client.clone(), NS);
    let seen = flipped.clone();
    let watch = tokio::spawn(async move {
        // Backoff: against a stopped API server an unpaced watcher never yields.
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(Ok(ev)) = events.next().await {
            let (watcher::Event::Apply(g) | watcher::Event::InitApply(g)) = ev else {
                continue;
            };
            let v = serde_json::to_value(g).unwrap();
            if programmed_in_full(&v).is_some_and(|p| p.0 == "True") {
                seen.lock().unwrap().get_or_insert(Instant::now());
            }
        }
    });
    (flipped, watch)
}

/// Polls the agent's admin address (every 5 ms, 60 s at most) for the moment its
/// Envoy has ACKed the whole snapshot.
fn poll_first_ack(admin: String) -> std::thread::JoinHandle<Option<Instant>> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let snapshot = http_get(&admin, "localhost", "/debug/snapshot", &[])
                .ok()
                .filter(|r| r.status == 200)
                .and_then(|r| serde_json::from_str::<Value>(&r.body).ok());
            if snapshot.is_some_and(|s| snapshot_acked(&s, "node-a")) {
                return Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    })
}

async fn everything_says_served_and_it_is(w: &World) {
    let gw = get_json::<Gateway>(&w.client, Some(NS), "gw")
        .await
        .unwrap();
    let (_, reason, _, attached) = programmed_in_full(&gw).unwrap();
    assert_eq!(
        (reason.as_str(), attached),
        ("Programmed", 1),
        "{}",
        gw["status"]
    );
    // Static mode: the address listeners bind on, with its type (the suite
    // dials it); the default scope leaves routability unset.
    assert_eq!(
        gw["status"]["addresses"],
        serde_json::json!([{"type": "IPAddress", "value": POD_IP}]),
        "{}",
        gw["status"]
    );
    let what = "route Accepted=True";
    let route =
        until_object::<HttpRoute, _>(&w.client, NS, "r1", Duration::from_secs(5), what, |r| {
            let ok = parent_accepted(r, "gw", None) == cond("True", "Accepted");
            ok.then(|| r.clone()).ok_or(r["status"].to_string())
        })
        .await;
    assert!(our_parent(&route, "gw", None).is_some());
    let answer = eventually(Duration::from_secs(10), "traffic through Envoy", || {
        let r = http_get(&format!("{POD_IP}:80"), "example.test", "/hello", &[]);
        async move {
            let r = r.map_err(|e| e.to_string())?;
            r.backend().map(str::to_string).ok_or(format!("{r:?}"))
        }
    })
    .await;
    assert_eq!(answer, "b0");
}

/// A NACK: passes translate's RE2 checks (a lower bound of the program size), but
/// Envoy's RE2 program is just over the 1000 our bootstraps allow. The route is
/// held back (not served, `Accepted=False` with Envoy's own text), the rest of
/// the Gateway's route table goes on, and the Gateway stays `Programmed`.
async fn a_nack_holds_back_its_route_and_the_rest_goes_on(w: &World) {
    let bad = mk_path_route("bad", "RegularExpression", "/[a-z]{997}");
    w.server.apply(&bad).await.unwrap();
    let what = "the refused route Accepted=False with Envoy's text";
    let message =
        until_object::<HttpRoute, _>(&w.client, NS, "bad", Duration::from_secs(20), what, |r| {
            let p = our_parent(r, "gw", None).ok_or("no parent")?;
            let c = condition(&p["conditions"], "Accepted").ok_or("no Accepted")?;
            let held = c["status"] == "False" && c["reason"] == "UnsupportedValue";
            let m = c["message"].as_str().unwrap_or_default().to_string();
            held.then_some(m).ok_or(r["status"].to_string())
        })
        .await;
    println!("NACK in the route's status: {message}");
    // And as a Warning Event on the route, for `kubectl describe`.
    until_event(&w.client, NS, "a Warning Event on the route", |e| {
        regarding(e) == Some("bad")
            && e.type_.as_deref() == Some("Warning")
            && e.note
                .as_deref()
                .is_some_and(|n| n.contains("program size"))
    })
    .await;
    // Another route of the same table goes on while the refused one is held.
    w.server
        .apply(&mk_path_route("other", "PathPrefix", "/other"))
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "the other route served", || {
        let r = http_get(&format!("{POD_IP}:80"), "example.test", "/other", &[]);
        async move {
            let r = r.map_err(|e| e.to_string())?;
            (r.status == 200).then_some(()).ok_or(format!("{r:?}"))
        }
    })
    .await;
    then_gateway(w, 20, "Programmed, r1 and other attached", |p| {
        p.0 == "True" && p.3 == 2
    })
    .await;
    let r = http_get(&format!("{POD_IP}:80"), "example.test", "/hello", &[]).unwrap();
    assert_eq!(r.backend(), Some("b0"));
}
