//! Route propagation in standalone mode: the time from a new route file
//! appearing to Envoy serving it, over 100 changes (median, p99, max), with
//! 0 / 1,000 / 3,000 / 10,000 HTTPRoutes already served over 100 Gateways.
//!
//! A real Envoy and the release `aether-edge` binary with its default flags
//! (the settle window included: the clock starts before the file is written).
//! Each change writes one HTTPRoute file the way most programs save a file
//! (open, truncate, write, close); the clock stops at the first 200 for its
//! path (polled every 0.2 ms over fresh connections). The routes served
//! before are one file per Gateway, all to one backend (one shared cluster).
//! After the changes it prints the agent's and Envoy's resident memory.
//!
//! `cargo bench -p aether-edge --bench propagation [-- [delta] SIZE...]` (SotW
//! ADS unless `delta`).

#[path = "../tests/support/mod.rs"]
mod support;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::*;

const CHANGES: usize = 100;
const GATEWAYS: usize = 100;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let delta = args.iter().any(|a| a == "delta");
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![0, 1_000, 3_000, 10_000]
    } else {
        sizes
    };
    println!(
        "route propagation, standalone: new route file → first 200 through Envoy ({} ADS), {CHANGES} changes over {GATEWAYS} Gateways",
        if delta { "Delta" } else { "SotW" }
    );
    println!(
        "{:>8} {:>10} {:>8} {:>8} {:>12} {:>12}",
        "served", "median ms", "p99 ms", "max ms", "agent MiB", "envoy MiB"
    );
    for base in sizes {
        run(base, delta);
    }
}

fn run(base: usize, delta: bool) {
    let dir = temp_dir("bench-propagation");
    let logs = temp_dir("bench-propagation-logs");
    let backend = Backend::start("bench");
    let ports: Vec<u16> = (0..GATEWAYS).map(|_| free_port()).collect();
    let mut gateways = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n",
    );
    for (g, port) in ports.iter().enumerate() {
        let _ = write!(
            gateways,
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw-{g}, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: {port}}}\n"
        );
    }
    let _ = write!(gateways, "---\n{}", backend.yaml("default"));
    std::fs::write(dir.join("gateways.yaml"), gateways).unwrap();
    for g in 0..GATEWAYS {
        let routes: String = (g..base)
            .step_by(GATEWAYS)
            .map(|i| format!(
                "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: base{i}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw-{g}}}]\n  hostnames: [\"h{h}.example.com\"]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /base{i}}}}}]\n    backendRefs: [{{name: bench, port: 80}}]\n",
                h = i % 50
            ))
            .collect();
        std::fs::write(dir.join(format!("base-{g:03}.yaml")), routes).unwrap();
    }
    let xds = format!("127.0.0.1:{}", free_port());
    let admin = format!("127.0.0.1:{}", free_port());
    let agent = Proc::spawn(
        "aether-edge",
        Command::new(agent_bin())
            .arg("standalone")
            .arg("--config-dir")
            .arg(&dir)
            .args(["--xds-address", &xds, "--admin-address", &admin]),
        &logs,
    );
    let envoy = envoy("bench", &xds, delta, &logs);
    // Every Gateway serves its last base route before the clock runs.
    for (g, port) in ports.iter().enumerate() {
        let gateway = format!("127.0.0.1:{port}");
        let (host, path) = match (g..base).step_by(GATEWAYS).next_back() {
            Some(i) => (format!("h{}.example.com", i % 50), format!("/base{i}")),
            None => ("bench.test".to_string(), "/".to_string()),
        };
        let want = if base > g { 200 } else { 404 };
        wait_until(Duration::from_secs(120), "Envoy serving the base", || {
            http_get(&gateway, &host, &path, &[])
                .ok()
                .filter(|r| r.status == want)
        });
    }

    let mut samples = Vec::with_capacity(CHANGES);
    for i in 0..CHANGES {
        let g = i * 37 % GATEWAYS;
        let gateway = format!("127.0.0.1:{}", ports[g]);
        let route = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r{i}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw-{g}}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /r{i}}}}}]\n    backendRefs: [{{name: bench, port: 80}}]\n"
        );
        let path = format!("/r{i}");
        let started = Instant::now();
        std::fs::write(dir.join(format!("route-{i:03}.yaml")), route).unwrap();
        loop {
            if http_get(&gateway, "bench.test", &path, &[]).is_ok_and(|r| r.status == 200) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "change {i} never served"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        samples.push(started.elapsed().as_secs_f64() * 1e3);
        // Let the file system's mtime move on so each change is its own event.
        std::thread::sleep(Duration::from_millis(20));
    }
    let max = samples.iter().cloned().fold(0.0, f64::max);
    let (median, p99) = aether_benches::median_p99(&mut samples);
    println!(
        "{base:>8} {median:>10.2} {p99:>8.2} {max:>8.2} {:>12.1} {:>12.1}",
        rss_mib(agent.pid()),
        rss_mib(envoy.proc.pid())
    );
    drop(envoy);
    drop(agent);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&logs);
}

/// A process's resident memory now (`VmRSS`), in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status"))
        .unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}
