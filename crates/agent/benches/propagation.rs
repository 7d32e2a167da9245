//! Route propagation in standalone mode: the time from a file change to Envoy
//! serving the new route, over 100 changes (median and p99).
//!
//! A real Envoy and the release `aether-edge` binary; each change adds one
//! HTTPRoute file and the clock stops at the first 200 for its path (polled every
//! millisecond over fresh connections).
//!
//! Runs twice: on an otherwise empty Gateway, and with 1,000 HTTPRoutes already
//! served (in a file of their own, which a reload does not re-parse).
//!
//! `cargo bench -p aether-edge --bench propagation`

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};
use support::*;

const CHANGES: usize = 100;

fn main() {
    for base in [0, 1_000] {
        run(base);
    }
}

fn run(base: usize) {
    let dir = temp_dir("bench-propagation");
    let logs = temp_dir("bench-propagation-logs");
    let backend = Backend::start("bench");
    let port = free_port();
    std::fs::write(
        dir.join("gateway.yaml"),
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: aether}}\nspec: {{controllerName: gateway.aether.io/edge}}\n---\n\
             apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: {port}}}\n---\n{}",
            backend.yaml("default")
        ),
    )
    .unwrap();
    let existing: String = (0..base)
        .map(|i| format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: base{i}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [\"h{h}.example.com\"]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /base{i}}}}}]\n    backendRefs: [{{name: bench, port: 80}}]\n",
            h = i % 50
        ))
        .collect();
    std::fs::write(dir.join("base.yaml"), existing).unwrap();
    let xds = format!("127.0.0.1:{}", free_port());
    let admin = format!("127.0.0.1:{}", free_port());
    let _agent = Agent::start(agent_bin(), &dir, &xds, &admin, &logs, &[]);
    let _envoy = envoy("bench", &xds, false, &logs);
    let gateway = format!("127.0.0.1:{port}");
    wait_until(Duration::from_secs(30), "Envoy listening", || {
        http_get(&gateway, "bench.test", "/", &[]).ok()
    });

    let mut samples = Vec::with_capacity(CHANGES);
    for i in 0..CHANGES {
        let route = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r{i}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /r{i}}}}}]\n    backendRefs: [{{name: bench, port: 80}}]\n"
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
            std::thread::sleep(Duration::from_millis(1));
        }
        samples.push(started.elapsed().as_secs_f64() * 1e3);
        // Let the file system's mtime move on so each change is its own event.
        std::thread::sleep(Duration::from_millis(20));
    }
    let (median, p99) = aether_benches::median_p99(&mut samples);
    println!(
        "route propagation with {base} routes served (file change → first 200 through Envoy), {CHANGES} changes: median {median:.1} ms, p99 {p99:.1} ms, max {:.1} ms",
        samples.iter().cloned().fold(0.0, f64::max)
    );
}
