//! Kubernetes mode, the churn truth test: routes on one Gateway are created, updated
//! (another backendRef: a new generation), deleted and re-created (a new uid, another
//! backend) at about 10 changes/s while a checker watches status. Whenever a status
//! write says a route is Accepted at generation G and the Gateway is Programmed, ONE
//! request (no retry) goes through Envoy at once and must be answered by the backend
//! that (uid, G) names. A second test pauses Envoy (SIGSTOP): nothing new may be
//! claimed for the Gateway until it resumes and ACKs.
//!
//! ```text
//!  driver (seeded) ── apply / delete r<i> ──► API server ──► agent ──ADS──► Envoy
//!    │ history: r<i> → [issued, returned,                      ▲              │ ACK
//!    │          (uid, generation, backend) | deleted]          └── status ◄───┘
//!    ▼                                                              │ watch
//!  verdicts ◄── checker: first Accepted at (uid, G), Gateway Programmed ◄┘
//!                  └─► GET /r<i> through Envoy: who answered, and when
//! ```
//!
//! An observation is *superseded* (not judged) when the driver issued another change
//! to that route before the answer came back; otherwise another backend, a 404 or an
//! error is a divergence. Every status write must also describe its own object: each
//! observedGeneration at most the object's generation, and one the driver made for
//! that uid (a namesake's status never lands on a re-created route).
//!
//! Knobs: `AETHER_CHURN_ROUTES` (20), `AETHER_CHURN_SECS` (20), `AETHER_CHURN_SEED`
//! (from the clock; printed, it replays the driver's choices). As a benchmark:
//!
//! ```text
//! AETHER_CHURN_ROUTES=200 AETHER_CHURN_SECS=150 \
//!   cargo test --release -p aether-edge --test kube -- --nocapture churn::
//! ```
//!
//! It prints `churn: observations=.. divergences=.. superseded=.. writes=..
//! apply->Accepted p50=..ms p99=..ms seed=..` (observations: first requests judged;
//! writes: route status writes the watch saw), a line of counts, and for each
//! divergence the route's timeline (changes, status writes, the answer) in ms.

mod checker;
mod driver;
mod pause;

use crate::support::*;
use checker::*;
use driver::*;
use futures::StreamExt;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use pause::pause;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

const NS: &str = "app";
const BACKENDS: [&str; 3] = ["b0", "b1", "b2"];
/// Changes per second the driver aims for.
const RATE: u64 = 10;

/// One test at a time: the churn numbers mean more without the other beside them.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn churn_every_accepted_generation_is_what_envoy_serves() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    in_netns(churn());
}

#[test]
fn a_paused_envoy_holds_back_every_new_claim_until_it_resumes_and_acks() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    in_netns(pause());
}

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn gateway(listeners: &[(&str, u16)]) -> Value {
    let listeners: Vec<Value> = listeners
        .iter()
        .map(|(name, port)| json!({"name": name, "protocol": "HTTP", "port": port}))
        .collect();
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": NS},
        "spec": {"gatewayClassName": "aether", "listeners": listeners},
    })
}

/// Route `name` on `gw`: path prefix `/<name>` to `backend`.
fn route(name: &str, backend: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": format!("/{name}")}}],
                "backendRefs": [{"name": backend, "port": 80}],
            }],
        },
    })
}

/// One request through Envoy: the backend that answered, else what came back.
fn ask(port: u16, path: &str) -> String {
    match http_get(&format!("{POD_IP}:{port}"), "example.test", path, &[]) {
        Ok(r) => r
            .backend()
            .map_or_else(|| format!("HTTP {}: {}", r.status, r.body), str::to_string),
        Err(e) => format!("error: {e}"),
    }
}

/// `(name, uid, generation)`.
fn identity(v: &Value) -> (String, String, i64) {
    let m = &v["metadata"];
    let s = |k: &str| m[k].as_str().unwrap_or_default().to_string();
    (s("name"), s("uid"), m["generation"].as_i64().unwrap_or(0))
}

/// Our parent's Accepted: `(is True, observedGeneration)`.
fn accepted_at(route: &Value) -> Option<(bool, i64)> {
    let c = condition(&our_parent(route, "gw", None)?["conditions"], "Accepted")?;
    Some((c["status"] == "True", c["observedGeneration"].as_i64()?))
}

/// `Programmed` of the Gateway (or a listener): `(is True, observedGeneration)`.
fn programmed_at(status: &Value) -> Option<(bool, i64)> {
    let c = condition(&status["conditions"], "Programmed")?;
    Some((c["status"] == "True", c["observedGeneration"].as_i64()?))
}

fn listener<'a>(gw: &'a Value, name: &str) -> Option<&'a Value> {
    gw["status"]["listeners"]
        .as_array()?
        .iter()
        .find(|l| l["name"] == name)
}

/// Programmed=True at the Gateway's current generation.
fn gateway_programmed(gw: &Value) -> bool {
    programmed_at(&gw["status"]) == Some((true, identity(gw).2))
}

/// An API server, the agent, its Envoy and the backends; the Gateway Programmed.
/// Fields drop in order: the API server last.
struct World {
    client: kube::Client,
    envoy: Envoy,
    agent: KubeAgent,
    _backends: Vec<Backend>,
    server: aether_testkit::ApiServer,
    _logs: PathBuf,
}

async fn world(tag: &str) -> World {
    let logs = temp_dir(tag);
    let server = aether_testkit::ApiServer::start().await;
    let client = server.client();
    let backends: Vec<Backend> = BACKENDS.iter().map(|b| Backend::on(POD_IP, b)).collect();
    let mut yaml = vec![base_yaml(&[NS])];
    yaml.extend(backends.iter().map(|b| b.yaml(NS)));
    yaml.push(gateway(&[("http", 80)]).to_string());
    server.apply(&yaml.join("---\n")).await.unwrap();
    let agent = kube_agent(server.kubeconfig_path(), &STATIC_AT_POD_IP, &logs);
    let envoy = envoy("node-a", &agent.xds, true, &logs);
    let c = &client;
    eventually(
        Duration::from_secs(60),
        "Gateway Programmed",
        || async move {
            let gw = get_json::<Gateway>(c, Some(NS), "gw").await.ok_or("none")?;
            gateway_programmed(&gw)
                .then_some(())
                .ok_or_else(|| gw["status"].to_string())
        },
    )
    .await;
    World {
        client,
        envoy,
        agent,
        _backends: backends,
        server,
        _logs: logs,
    }
}

/// Watches `K` in [`NS`], calling `on` with each object as it arrives; returns once
/// the initial list is through, so nothing after this call is missed.
async fn watch<K>(
    client: &kube::Client,
    mut on: impl FnMut(Instant, Value) + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + 'static,
{
    let api: kube::Api<K> = kube::Api::namespaced(client.clone(), NS);
    let (listed, ready) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut listed = Some(listed);
        // Backoff: against a stopped API server an unpaced watcher never yields.
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = events.next().await {
            match ev {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                    on(Instant::now(), serde_json::to_value(o).unwrap())
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(l) = listed.take() {
                        let _ = l.send(());
                    }
                }
                _ => {}
            }
        }
    });
    ready.await.expect("the watch lists");
    task
}

async fn churn() {
    let routes = knob("AETHER_CHURN_ROUTES", 20).max(1) as usize;
    let secs = knob("AETHER_CHURN_SECS", 20);
    let clock = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
    let seed = knob("AETHER_CHURN_SEED", clock.unwrap().as_nanos() as u64 | 1);
    println!("churn: {routes} routes, {secs} s at {RATE} changes/s, AETHER_CHURN_SEED={seed}");
    let w = world("kube-churn").await;
    let (checker, watches) = given_a_checker_watching(&w.client).await;
    let t0 = Instant::now();
    let driver = changes_at_the_rate_for(&w.client, seed, routes, secs).await;
    settled(&w.client, &driver).await;
    for watch in watches {
        watch.abort();
    }
    let requests = std::mem::take(&mut checker.lock().unwrap().requests);
    let mut observations = Vec::new();
    for r in requests {
        observations.push(r.await.unwrap());
    }
    let checker = checker.lock().unwrap();
    let tally = Tally::new(t0, &observations, &driver, &checker);
    print_the_divergences(t0, &tally, &driver, &checker);
    let applied = print_the_run(t0, &observations, &driver, &checker, &w.agent);
    print_the_summary(&tally, &driver, &checker, seed);
    then_every_claim_was_true_and_enough_were_judged(&tally, applied);
}

/// The checker, fed by a watch on the Gateways and one on the routes.
async fn given_a_checker_watching(
    c: &kube::Client,
) -> (Arc<Mutex<Checker>>, [tokio::task::JoinHandle<()>; 2]) {
    let checker: Arc<Mutex<Checker>> = Arc::default();
    let on_gw = checker.clone();
    let gw_watch = watch::<Gateway>(c, move |at, gw| on_gw.lock().unwrap().gateway(at, &gw)).await;
    let on_route = checker.clone();
    let route_watch =
        watch::<HttpRoute>(c, move |at, r| on_route.lock().unwrap().route(at, &r)).await;
    (checker, [route_watch, gw_watch])
}

/// `routes` routes created, then changed at [`RATE`] for `secs` seconds.
async fn changes_at_the_rate_for(c: &kube::Client, seed: u64, routes: usize, secs: u64) -> Driver {
    let mut driver = Driver {
        api: kube::Api::namespaced(c.clone(), NS),
        rng: XorShift(seed.max(1)),
        history: BTreeMap::new(),
        backend: BTreeMap::new(),
        live: BTreeSet::new(),
    };
    for i in 0..routes {
        driver.apply(i, BACKENDS[i % BACKENDS.len()]).await;
    }
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / RATE));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        tick.tick().await;
        driver.step(routes).await;
    }
    driver
}

/// The divergences' timelines and the counts; returns how many changes were applied.
fn print_the_run(
    t0: Instant,
    observations: &[Observation],
    driver: &Driver,
    checker: &Checker,
    agent: &KubeAgent,
) -> usize {
    let changes: Vec<&Change> = driver.history.values().flatten().collect();
    let applied = changes.iter().filter(|c| c.made.is_some()).count();
    let seen_accepted = applied_latencies(driver, checker).len();
    println!(
        "churn: {} changes ({applied} applies, {seen_accepted} of them seen Accepted), {} requests, {} Accepted while the Gateway was not Programmed, Gateway un-Programmed {} times, {} Accepted→not flips, agent wrote: {}",
        changes.len(),
        observations.len(),
        checker.unprogrammed,
        checker.gateway_unprogrammed.len(),
        checker.flips.len(),
        status_writes(&agent.metrics()),
    );
    let gateway = checker
        .gateway_unprogrammed
        .iter()
        .map(|(at, p)| (at, "Gateway", p));
    let routes = checker.flips.iter().map(|(at, f)| (at, "route", f));
    for (at, what, status) in gateway.take(3).chain(routes.take(3)) {
        let ms = at.saturating_duration_since(t0).as_millis();
        println!("  {what} un-Programmed/un-Accepted at {ms} ms: {status}");
    }
    applied
}

/// For each applied change seen Accepted: from the API server's answer to the
/// first Accepted=True at its (uid, generation).
fn applied_latencies(driver: &Driver, checker: &Checker) -> Vec<Duration> {
    let changes = driver.history.values().flatten();
    changes
        .filter_map(|ch| {
            let (uid, g, _) = ch.made.as_ref()?;
            let at = checker.accepted.get(&(uid.clone(), *g))?;
            Some(at.saturating_duration_since(ch.returned))
        })
        .collect()
}

/// Each divergent route's timeline (the first ten).
fn print_the_divergences(t0: Instant, tally: &Tally, driver: &Driver, checker: &Checker) {
    for (name, why) in tally.divergences.iter().take(10) {
        let writes = checker.writes.get(name).map_or(&[][..], |w| &w[..]);
        let changes = driver.history.get(name).map_or(&[][..], |c| &c[..]);
        println!(
            "DIVERGENCE {name}: {why}\n{}",
            timeline(t0, changes, writes)
        );
    }
}

fn print_the_summary(tally: &Tally, driver: &Driver, checker: &Checker, seed: u64) {
    let (p50, p99) = median_p99(&mut applied_latencies(driver, checker));
    let writes: usize = checker.writes.values().map(Vec::len).sum();
    println!(
        "churn: observations={} divergences={} superseded={} writes={writes} apply->Accepted p50={}ms p99={}ms seed={seed}",
        tally.observed,
        tally.divergences.len(),
        tally.superseded,
        p50.as_millis(),
        p99.as_millis()
    );
}

fn then_every_claim_was_true_and_enough_were_judged(tally: &Tally, applied: usize) {
    assert!(
        tally.divergences.is_empty(),
        "{} divergences (above)",
        tally.divergences.len()
    );
    // Meaningful: a good share of the applies was judged, not lost to supersession.
    let minimum = (applied / 3).max(20);
    assert!(
        tally.observed >= minimum,
        "{} observations, {minimum} wanted",
        tally.observed
    );
}

/// Waits until every live route is Accepted at its generation and attached, then
/// checks each answers with its backend.
async fn settled(c: &kube::Client, driver: &Driver) {
    let (api, live) = (&driver.api, driver.live.len());
    eventually(
        Duration::from_secs(60),
        "every route Accepted, all attached",
        || async move {
            let list = api
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let routes = list
                .items
                .into_iter()
                .map(|r| serde_json::to_value(r).unwrap());
            let pending: Vec<String> = routes
                .filter(|r| accepted_at(r) != Some((true, identity(r).2)))
                .map(|r| identity(&r).0)
                .collect();
            let gw = get_json::<Gateway>(c, Some(NS), "gw")
                .await
                .ok_or("no gw")?;
            let attached = listener(&gw, "http").and_then(|l| l["attachedRoutes"].as_u64());
            if pending.is_empty() && attached == Some(live as u64) {
                Ok(())
            } else {
                Err(format!(
                    "not Accepted: {pending:?}, attachedRoutes {attached:?} of {live}"
                ))
            }
        },
    )
    .await;
    for i in &driver.live {
        assert_eq!(
            ask(80, &format!("/r{i}")),
            driver.backend[i],
            "settled r{i}"
        );
    }
}

/// The agent's successful status writes by kind, from `/metrics`.
fn status_writes(metrics: &str) -> String {
    let ok = metrics.lines().filter_map(|l| {
        let rest = l.strip_prefix("aether_edge_status_writes_total{kind=\"")?;
        let (kind, rest) = rest.split_once("\",result=\"ok\"} ")?;
        (rest != "0").then(|| format!("{kind} {rest}"))
    });
    ok.collect::<Vec<_>>().join(", ")
}

type Events = Arc<Mutex<Vec<(Instant, Value)>>>;
