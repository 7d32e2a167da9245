//! Route propagation in Kubernetes mode, with 3,000 HTTPRoutes served (issue 13,
//! point 3): a real kube-apiserver + etcd (the binaries the conformance cluster
//! runs), the release `aether-edge agent` (leader) and a real Envoy (Delta ADS,
//! as the DaemonSet's bootstrap), in a network namespace of their own.
//!
//! - one by one: `AETHER_BENCH_CHANGES` (50) HTTPRoutes applied (server-side
//!   apply, as `kubectl apply --server-side`), each timed from the apply call to
//!   the first 200 through Envoy for its path (polled every 0.2 ms), and to a
//!   watch seeing its parent `Accepted=True`; plus, per status batch, status
//!   written − last ACK (the agent's `follow_us`); and where each change's
//!   time went, stage by stage, from the agent's publication log lines: the
//!   apply until the agent's index has it (API server write and watch
//!   delivery), the wait before translating (only a burst's coalescing waits),
//!   translate, build, and the rest until the first 200 (ADS push, Envoy's
//!   apply, the prober's poll), with Envoy's own apply times beside;
//! - a burst: `AETHER_BENCH_BURST` (1,000) more routes applied at once
//!   (32 in flight), timed from the last apply returning to every one of them
//!   answering 200 (each path's first 200 to a keep-alive prober that runs
//!   through the burst, see `first_200s`), to the Gateway's `attachedRoutes` counting them all and to
//!   every one being seen `Accepted=True`; and the status writes it took, per
//!   route.
//!
//! `cargo bench -p aether-edge --bench kube_propagation`
//! (`AETHER_BENCH_ROUTES` resizes what is served before.)

#[path = "../tests/support/mod.rs"]
mod support;

use futures::StreamExt;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::*;

const NS: &str = "bench";

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    if !isolated_main() {
        return;
    }
    runtime().block_on(bench());
}

async fn bench() {
    let served = knob("AETHER_BENCH_ROUTES", 3_000);
    let changes = knob("AETHER_BENCH_CHANGES", 50);
    let burst = knob("AETHER_BENCH_BURST", 1_000);
    let logs = temp_dir("kube-bench-propagation");
    let b0 = Backend::on(POD_IP, "b0");
    let server = given_cluster(&[
        base_yaml(&[NS]),
        b0.yaml(NS),
        mk_gateway(NS, "gw", &[HTTP_80]),
    ])
    .await;
    let client = server.client();
    let routes: Api<HttpRoute> = Api::namespaced(client.clone(), NS);
    // The routes served before go in 32 at a time: how fast
    // the API server takes them is not what is measured.
    let t = Instant::now();
    apply_all(&routes, (0..served).map(|i| format!("s{i}")), 32).await;
    println!("{served} routes created in {} ms", t.elapsed().as_millis());
    let w = OneNode::start(server, b0, &STATIC_AT_POD_IP, &logs);
    let accepted = Accepted::watch(&client);
    let t = Instant::now();
    until_attached(&client, served, Duration::from_secs(300)).await;
    wait_served(
        &format!("/s{}", served.saturating_sub(1)),
        t,
        Duration::from_secs(300),
    )
    .await;
    until_accepted(
        &accepted,
        (0..served).map(|i| format!("s{i}")),
        Duration::from_secs(600),
    )
    .await;
    println!(
        "{served} routes served, attached and Accepted {} ms after the agent started",
        t.elapsed().as_millis()
    );

    // One by one. The served routes' own status writes end in long batches
    // whose log lines must not count among the changes': wait until the
    // writer has been quiet for a second.
    let route_writes = || status_writes(&w.agent.metrics(), "HTTPRoute", "ok");
    let mut writes_seen = route_writes();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = route_writes();
        if now == writes_seen {
            break;
        }
        writes_seen = now;
    }
    let log_before = w.agent.proc.log_text().len();
    let (mut to_200, mut to_accepted) = (Vec::new(), Vec::new());
    let mut applied_unix_us = Vec::new();
    for i in 0..changes {
        let name = format!("n{i}");
        let start = Instant::now();
        applied_unix_us.push(unix_us(SystemTime::now()));
        apply(&routes, &name).await;
        to_200.push(wait_served(&format!("/{name}"), start, Duration::from_secs(10)).await);
        until_accepted(&accepted, [name.clone()], Duration::from_secs(10)).await;
        to_accepted.push(accepted.at(&name) - start);
        // Apart: each change is a status batch of its own.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = w.agent.proc.log_text();
    let mut stages = Stages::of(
        log.get(log_before..).unwrap_or_default(),
        &applied_unix_us,
        &to_200,
    );
    let mut follow = field_us(
        log.get(log_before..).unwrap_or_default(),
        "status batch written",
        "follow_us=",
    );
    println!("one route applied at a time, {changes} times, {served} routes served (release):");
    print_line("apply → first 200 through Envoy", &mut to_200);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (m, p) = median_p99(&mut to_200);
    aether_benches::summary(
        "kube_propagation",
        &format!("{served} routes served: apply → 200, median / p99"),
        format!("{:.1} / {:.1} ms", ms(m), ms(p)),
        "p99 ≤ 50 ms",
    );
    println!(
        "  where it went (the agent's publication log lines, {} of {changes} changes matched):",
        stages.matched
    );
    print_line(
        "  apply → the agent's index has it (API server write + watch delivery)",
        &mut stages.watch,
    );
    print_line(
        "  index change → translate starts (coalescing wait)",
        &mut stages.waited,
    );
    print_line("  translate", &mut stages.translate);
    print_line("  build", &mut stages.build);
    print_line(
        "  published → first 200 (ADS push, Envoy apply, the prober)",
        &mut stages.rest,
    );
    println!(
        "  Envoy's own apply (update_duration p50/p99/max ms, since it started): {}",
        aether_testkit::live::traffic::apply_times(&w.envoy.admin)
    );
    print_line("apply → watch sees Accepted=True", &mut to_accepted);
    print_line("status written − last ACK (per batch)", &mut follow);
    if !follow.is_empty() {
        let (m, p) = median_p99(&mut follow);
        aether_benches::summary(
            "kube_propagation",
            &format!("{served} routes served: status written − last ACK, median / p99"),
            format!("{:.1} / {:.1} ms", ms(m), ms(p)),
            "≤ 150 ms",
        );
    }

    // A burst.
    let total = served + changes + burst;
    let writes = |m: &str| {
        (
            status_writes(m, "HTTPRoute", "ok"),
            status_writes(m, "Gateway", "ok"),
        )
    };
    let before = writes(&w.agent.metrics());
    let names: Vec<String> = (0..burst).map(|i| format!("b{i}")).collect();
    let paths: Vec<String> = names.iter().map(|n| format!("/{n}")).collect();
    let first_200 = {
        let paths = paths.clone();
        tokio::task::spawn_blocking(move || first_200s(&paths, Duration::from_secs(60)))
    };
    let t = Instant::now();
    apply_all(&routes, names.iter().cloned(), 32).await;
    let last_apply = Instant::now();
    println!(
        "burst of {burst} routes, {served} + {changes} served before; the last apply returned {} ms after the first began:",
        (last_apply - t).as_millis()
    );
    until_attached(&client, total, Duration::from_secs(30)).await;
    let attached = Instant::now();
    until_accepted(&accepted, names.iter().cloned(), Duration::from_secs(60)).await;
    let all_accepted = names
        .iter()
        .map(|n| accepted.at(n))
        .max()
        .unwrap_or(last_apply);
    let all_200 = first_200
        .await
        .unwrap()
        .into_iter()
        .max()
        .unwrap_or(last_apply);
    // What probing every path in turn takes, each on a fresh connection, all
    // of them served: the floor of a prober that walks them one by one
    // after the last apply (this bench's until 2026-12-07).
    let sweep = tokio::task::spawn_blocking(move || {
        let start = Instant::now();
        for p in &paths {
            poll_200(p, Duration::from_secs(5));
        }
        start.elapsed()
    })
    .await
    .unwrap();
    let after_last = |at: Instant| at.saturating_duration_since(last_apply).as_millis();
    println!(
        "  every route 200 through Envoy: {} ms after the last apply",
        after_last(all_200)
    );
    println!(
        "  (a sweep of the {burst} paths, one fresh connection each, all served: {} ms)",
        sweep.as_millis()
    );
    println!(
        "  attachedRoutes = {total} seen: {} ms after the last apply",
        after_last(attached)
    );
    println!(
        "  every route seen Accepted=True: {} ms after the last apply",
        after_last(all_accepted)
    );
    aether_benches::summary(
        "kube_propagation",
        &format!("burst of {burst}: all 200 / attachedRoutes / all Accepted, after the last apply"),
        format!(
            "{} / {} / {} ms",
            after_last(all_200),
            after_last(attached),
            after_last(all_accepted)
        ),
        "≤ 1,000 ms",
    );
    // What the burst cost in writes, once nothing moves any more.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = writes(&w.agent.metrics());
    let (routes, gateways) = (after.0 - before.0, after.1 - before.1);
    let per_route = (routes + gateways) as f64 / burst as f64;
    println!("  status writes: {routes} HTTPRoute + {gateways} Gateway = {per_route:.2} per route");
    aether_benches::summary(
        "kube_propagation",
        &format!("burst of {burst}: status writes per route"),
        format!("{per_route:.2}"),
        "≤ 1.2",
    );
    accepted.task.abort();
}

/// Server-side applies HTTPRoute `name` (`mk_prefix_route`), as
/// `kubectl apply --server-side` does, on a client already connected: the
/// clock measures the API server and what follows, not a TLS handshake or
/// discovery.
async fn apply(routes: &Api<HttpRoute>, name: &str) {
    let route: HttpRoute = serde_norway::from_str(&mk_prefix_route(NS, name, "b0")).unwrap();
    let params = PatchParams::apply("bench").force();
    routes
        .patch(name, &params, &Patch::Apply(&route))
        .await
        .unwrap();
}

/// [`apply`] for each name, `in_flight` at a time.
async fn apply_all(routes: &Api<HttpRoute>, names: impl Iterator<Item = String>, in_flight: usize) {
    futures::stream::iter(names.map(|n| async move { apply(routes, &n).await }))
        .buffer_unordered(in_flight)
        .collect::<Vec<()>>()
        .await;
}

/// Polls `path` until it answers 200; the time since `start`.
async fn wait_served(path: &str, start: Instant, timeout: Duration) -> Duration {
    let path = path.to_string();
    tokio::task::spawn_blocking(move || {
        poll_200(&path, timeout);
        start.elapsed()
    })
    .await
    .unwrap()
}

fn poll_200(path: &str, timeout: Duration) {
    let start = Instant::now();
    let gateway = format!("{POD_IP}:80");
    while !http_get(&gateway, "example.test", path, &[]).is_ok_and(|r| r.status == 200) {
        assert!(start.elapsed() < timeout, "{path} never served");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// When each path first answered 200 through Envoy. Probes on one keep-alive
/// connection (Envoy routes each request by the table current when it
/// arrives), in rounds over the first [`FRONTIER`] paths not yet served, in
/// the order they are applied: a path is timed when a round reaches it after
/// it is served, so each time is an upper bound, off by at most a round
/// (~64 requests) unless paths are served far out of their apply order.
fn first_200s(paths: &[String], timeout: Duration) -> Vec<Instant> {
    const FRONTIER: usize = 64;
    let start = Instant::now();
    let gateway = format!("{POD_IP}:80");
    let mut conn: Option<std::io::BufReader<std::net::TcpStream>> = None;
    let mut first: Vec<Option<Instant>> = vec![None; paths.len()];
    while first.iter().any(Option::is_none) {
        assert!(start.elapsed() < timeout, "not every path served");
        let round: Vec<usize> = (0..paths.len())
            .filter(|&i| first[i].is_none())
            .take(FRONTIER)
            .collect();
        for i in round {
            let status = keep_alive_get(&mut conn, &gateway, &paths[i]);
            if status == Some(200) {
                first[i] = Some(Instant::now());
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    first.into_iter().flatten().collect()
}

/// One GET on the kept connection (a new one if there is none or it failed):
/// the status, `None` if the request failed.
fn keep_alive_get(
    conn: &mut Option<std::io::BufReader<std::net::TcpStream>>,
    addr: &str,
    path: &str,
) -> Option<u16> {
    use std::io::Write;
    if conn.is_none() {
        let stream = std::net::TcpStream::connect(addr).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        *conn = Some(std::io::BufReader::new(stream));
    }
    let reader = conn.as_mut()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: example.test\r\ncontent-length: 0\r\n\r\n");
    let answer = reader
        .get_mut()
        .write_all(request.as_bytes())
        .and_then(|()| read_response(reader));
    match answer {
        Ok(r)
            if !r
                .header("connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("close")) =>
        {
            Some(r.status)
        }
        Ok(r) => {
            *conn = None;
            Some(r.status)
        }
        Err(_) => {
            *conn = None;
            None
        }
    }
}

async fn until_attached(client: &kube::Client, n: usize, timeout: Duration) {
    eventually(timeout, &format!("attachedRoutes = {n}"), || async move {
        let gw = get_json::<Gateway>(client, Some(NS), "gw")
            .await
            .ok_or("no Gateway")?;
        let got = &gw["status"]["listeners"][0]["attachedRoutes"];
        if got == n {
            Ok(())
        } else {
            Err(got.to_string())
        }
    })
    .await;
}

/// When each route was first seen with its parent `Accepted=True`.
struct Accepted {
    seen: Arc<Mutex<BTreeMap<String, Instant>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Accepted {
    fn watch(client: &kube::Client) -> Accepted {
        let seen: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
        let api: kube::Api<HttpRoute> = kube::Api::namespaced(client.clone(), NS);
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                let mut events = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                while let Some(ev) = events.next().await {
                    let Ok(watcher::Event::Apply(r) | watcher::Event::InitApply(r)) = ev else {
                        continue;
                    };
                    let v = serde_json::to_value(&r).unwrap();
                    if parent_accepted(&v, "gw", None) == cond("True", "Accepted") {
                        let name = v["metadata"]["name"].as_str().unwrap_or_default();
                        seen.lock()
                            .unwrap()
                            .entry(name.to_string())
                            .or_insert_with(Instant::now);
                    }
                }
            }
        });
        Accepted { seen, task }
    }

    fn at(&self, name: &str) -> Instant {
        self.seen.lock().unwrap()[name]
    }
}

async fn until_accepted(
    accepted: &Accepted,
    names: impl IntoIterator<Item = String>,
    timeout: Duration,
) {
    let names: Vec<String> = names.into_iter().collect();
    eventually(timeout, "every route Accepted", || {
        let seen = accepted.seen.lock().unwrap();
        let missing = names.iter().filter(|n| !seen.contains_key(*n)).count();
        async move {
            if missing == 0 {
                Ok(())
            } else {
                Err(format!("{missing} not yet"))
            }
        }
    })
    .await;
}

fn unix_us(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as u64
}

/// Each one-by-one change's time, stage by stage: the agent logs every
/// publication with `changed_unix_us` (when its index saw a change, by the
/// wall clock) and how long it waited, translated and built; a change's
/// publication is the first whose index change came after its apply began.
#[derive(Default)]
struct Stages {
    matched: usize,
    watch: Vec<Duration>,
    waited: Vec<Duration>,
    translate: Vec<Duration>,
    build: Vec<Duration>,
    rest: Vec<Duration>,
}

impl Stages {
    fn of(log: &str, applied_unix_us: &[u64], to_200: &[Duration]) -> Stages {
        let published = log_fields(
            log,
            "configuration published",
            [
                "changed_unix_us=",
                "waited_us=",
                "translate_us=",
                "build_us=",
            ],
        );
        let mut out = Stages::default();
        for (&applied, &to_200) in applied_unix_us.iter().zip(to_200) {
            let Some(&[changed, waited, translate, build]) =
                published.iter().find(|p| p[0] >= applied)
            else {
                continue;
            };
            out.matched += 1;
            let us = Duration::from_micros;
            let [watch, waited, translate, build] =
                [us(changed - applied), us(waited), us(translate), us(build)];
            out.rest
                .push(to_200.saturating_sub(watch + waited + translate + build));
            out.watch.push(watch);
            out.waited.push(waited);
            out.translate.push(translate);
            out.build.push(build);
        }
        out
    }
}
