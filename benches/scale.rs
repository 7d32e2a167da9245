//! Translate + build at scale: 1,000 and 10,000 HTTPRoutes over 100 Gateways
//! (`AETHER_BENCH_GATEWAYS` changes how many).
//!
//! Each size runs in a child process of its own so that its peak RSS (VmHWM) is
//! that size's alone. Prints, per size: parse, translate and build medians over
//! the runs, resources produced, and the process's peak memory; then one route
//! changed through warm caches (the incremental translate and build), and one
//! pod replaced behind one route's Service (its EndpointSlice's address).
//!
//! `cargo bench -p aether-benches --bench scale` (add `-- 1000` for one size).
//! `AETHER_BENCH_RUNS` (default 7) sets the full runs, `AETHER_BENCH_CHANGES`
//! (default the same) the one-route changes: `AETHER_BENCH_RUNS=1
//! AETHER_BENCH_CHANGES=200` under a profiler shows where a change's time goes.

use aether_benches::{median_p99, peak_rss_bytes, scale_yaml};
use std::time::Instant;

/// The allocator the `aether-edge` binary runs on.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Gateways the routes spread over (`AETHER_BENCH_GATEWAYS`, default 100; 1
/// puts every route on one Gateway, the worst case for a one-route change).
fn gateways() -> usize {
    std::env::var("AETHER_BENCH_GATEWAYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}
const RUNS: usize = 7;

/// `name` from the environment, else `default`.
fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if let Some(n) = args.iter().find_map(|a| a.strip_prefix("--child=")) {
        child(n.parse().expect("--child=N"));
        return;
    }
    let sizes: Vec<usize> = match args.first().and_then(|a| a.parse().ok()) {
        Some(n) => vec![n],
        None => vec![1_000, 10_000],
    };
    let gateways = gateways();
    let runs = env_or("AETHER_BENCH_RUNS", RUNS);
    println!("translate + build, {gateways} Gateways, median of {runs} runs (release build)");
    println!(
        "{:>8} {:>10} {:>12} {:>10} {:>10} {:>10} {:>12} {:>16} {:>12} {:>14} {:>10}",
        "routes",
        "parse ms",
        "translate ms",
        "build ms",
        "total ms",
        "resources",
        "peak RSS MiB",
        "1-route trans ms",
        "1-route b ms",
        "1-pod trans ms",
        "1-pod b ms"
    );
    for n in sizes {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .arg(format!("--child={n}"))
            .output()
            .expect("running the child");
        assert!(out.status.success(), "child failed: {out:?}");
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
}

fn child(routes: usize) {
    let gateways = gateways();
    let yaml = scale_yaml(gateways, routes);
    let config = aether_gateway::Config::default();
    let (mut parse, mut translate, mut build) = (vec![], vec![], vec![]);
    let mut resources = 0;
    for _ in 0..env_or("AETHER_BENCH_RUNS", RUNS) {
        let t = Instant::now();
        let mut store = aether_gateway::Store::default();
        store
            .add_yaml("scale.yaml", &yaml)
            .expect("scale input parses");
        parse.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let translation = aether_gateway::translate(&store, &config);
        translate.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let snapshot = aether_xds::build(&translation.ir);
        build.push(t.elapsed().as_secs_f64() * 1e3);
        resources = snapshot.resources.values().map(|m| m.len()).sum::<usize>();
        assert_eq!(snapshot.gateways.len(), gateways, "every Gateway is served");
    }
    // One route changed (its path), through warm caches: what a reload costs.
    let mut store = aether_gateway::Store::default();
    store
        .add_yaml("scale.yaml", &yaml)
        .expect("scale input parses");
    let mut translator = aether_gateway::incremental::Translator::new(config.clone());
    let mut builder = aether_xds::Builder::default();
    builder.build(&translator.translate(&store).ir);
    let (mut one_translate, mut one_build) = (vec![], vec![]);
    for run in 0..env_or("AETHER_BENCH_CHANGES", env_or("AETHER_BENCH_RUNS", RUNS)) {
        let r = run * 7 % routes;
        let mut one = aether_gateway::Store::default();
        one.add_yaml("one.yaml", &one_route(r, gateways, run))
            .expect("the changed route parses");
        store.merge(&one);
        let t = Instant::now();
        let translation = translator.translate(&store);
        one_translate.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let snapshot = builder.build(&translation.ir);
        one_build.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            translator.last.gateways_translated, 1,
            "one Gateway retranslated"
        );
        assert_eq!(builder.last.gateways_encoded, 1, "one Gateway re-encoded");
        assert_eq!(builder.last.routes_encoded, 1, "one IR route re-encoded");
        assert_eq!(snapshot.gateways.len(), gateways);
    }
    // One pod replaced behind one route's Service (its EndpointSlice's address):
    // what a cluster's pod churn costs per change.
    let (mut ep_translate, mut ep_build) = (vec![], vec![]);
    for run in 0..env_or("AETHER_BENCH_CHANGES", env_or("AETHER_BENCH_RUNS", RUNS)) {
        let r = run * 11 % routes;
        let mut one = aether_gateway::Store::default();
        one.add_yaml("one-pod.yaml", &one_pod(r, run))
            .expect("the changed EndpointSlice parses");
        store.merge(&one);
        let t = Instant::now();
        let translation = translator.translate(&store);
        ep_translate.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let snapshot = builder.build(&translation.ir);
        ep_build.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            (
                translator.last.routes_modeled,
                translator.last.gateways_translated
            ),
            (0, 0),
            "no route or Gateway translated again: only the cluster's endpoints"
        );
        assert_eq!(builder.last.gateways_encoded, 0, "no Gateway re-encoded");
        assert_eq!(builder.last.routes_encoded, 0, "no route re-encoded");
        assert_eq!(snapshot.gateways.len(), gateways);
    }
    let (ot, _) = median_p99(&mut one_translate);
    let (ob, _) = median_p99(&mut one_build);
    let (et, _) = median_p99(&mut ep_translate);
    let (eb, _) = median_p99(&mut ep_build);
    let (p, _) = median_p99(&mut parse);
    let (t, _) = median_p99(&mut translate);
    let (b, _) = median_p99(&mut build);
    let rss = peak_rss_bytes().unwrap_or(0) as f64 / (1024.0 * 1024.0);
    let at = format!("{routes} routes, {gateways} Gateways");
    aether_benches::summary(
        "scale",
        &format!("{at}: full translate + build"),
        format!("{:.1} ms", t + b),
        "-",
    );
    aether_benches::summary(
        "scale",
        &format!("{at}: one route changed, translate / build"),
        format!("{ot:.1} / {ob:.1} ms"),
        "flat in the number of routes",
    );
    aether_benches::summary(
        "scale",
        &format!("{at}: one pod replaced, translate / build"),
        format!("{et:.1} / {eb:.1} ms"),
        "flat in the number of routes",
    );
    println!(
        "{routes:>8} {p:>10.1} {t:>12.1} {b:>10.1} {:>10.1} {resources:>10} {rss:>12.1} {ot:>16.2} {ob:>12.2} {et:>14.2} {eb:>10.2}",
        t + b
    );
}

/// The EndpointSlice of [`scale_yaml`]'s `svc-<r>` with its one pod replaced by
/// another (a new address).
fn one_pod(r: usize, run: usize) -> String {
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: svc-{r}-1, namespace: default, labels: {{kubernetes.io/service-name: svc-{r}}}}}\naddressType: IPv4\nports: [{{name: http, port: 8080}}]\nendpoints:\n- addresses: [\"127.{a}.{b}.{c}\"]\n  conditions: {{ready: true}}\n",
        a = 100 + run / 62500 % 100,
        b = run / 250 % 250 + 1,
        c = run % 250 + 1
    )
}

/// Route `r` of [`scale_yaml`] with its first rule's path moved (`/moved-<run>/`).
fn one_route(r: usize, gateways: usize, run: usize) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: route-{r}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw-{g}}}]\n  hostnames: [\"host-{h}.example.com\"]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /moved-{run}/r{r}}}}}]\n    backendRefs: [{{name: svc-{r}, port: 80}}]\n",
        g = r % gateways,
        h = r % 50
    )
}
