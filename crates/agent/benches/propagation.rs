//! Route propagation in standalone mode: the time from a new route file
//! appearing to Envoy serving it, over 100 changes (median, p99, max), with
//! 0 / 1,000 / 3,000 / 10,000 HTTPRoutes already served over 100 Gateways.
//!
//! A real Envoy and the release `aether-edge` binary with its default flags
//! (the clock starts before the file is written). Each change moves one new
//! HTTPRoute file into place (written beside it, then renamed), as README's
//! edit contract asks: a rename is read at once, while a file written in
//! place waits for the directory's settle window; the clock stops at the first 200 for its
//! path (polled every 0.2 ms over fresh connections for the first second, then
//! every 10 ms). The routes served before are one file per Gateway, all to one
//! backend (one shared cluster). It also prints the time from starting the
//! control plane to every Gateway serving its last base route, and, after the
//! changes, the control plane's and Envoy's resident memory.
//!
//! `cargo bench -p aether-edge --bench propagation [-- [delta] [gateways=N] [own-hosts] [peer [eg-changes=N]] SIZE...]`
//! (SotW ADS unless `delta`). `gateways=1 own-hosts` is the topology users
//! and gateway-api-bench run: every route on one shared Gateway, each route
//! its own hostname, so a change rebuilds one route table of SIZE + 1 virtual
//! hosts. Under each of our rows, Envoy's own apply time per xDS type (its
//! `update_duration` histograms, p50/p99/max since it started).
//!
//! `peer` runs Envoy Gateway after aether-edge on the same workload, in its
//! standalone mode (File resources, Host infrastructure, the same Envoy binary),
//! and prints both rows and their ratio. `benches/peer/run` builds it first;
//! the binary is `EG_BIN`, else the one `benches/peer/build-envoy-gateway`
//! leaves in the cache dir. Its file provider answers every file event by
//! re-reading and re-validating every object, which takes minutes per change
//! at 1,000 routes, so it makes `eg-changes` changes per size (default 3).
//! Where its workload differs, and why: its file mode stores no Services and
//! ignores EndpointSlices, so its routes point at an Envoy Gateway `Backend`
//! holding the same address; and its GatewayClass refers to an `EnvoyProxy`
//! that merges the Gateways onto one Envoy (else it runs one Envoy per Gateway).

#[path = "../tests/support/mod.rs"]
mod support;

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::*;

/// Changes per size: aether-edge's, and Envoy Gateway's by default (minutes
/// each at 1,000 routes).
const CHANGES: usize = 100;
const EG_CHANGES: usize = 3;
const GATEWAYS: usize = 100;

/// How the routes are laid out.
#[derive(Clone, Copy)]
struct Shape {
    gateways: usize,
    /// Each route its own hostname (else 50 hostnames shared, and the changed
    /// routes on the catch-all virtual host).
    own_hosts: bool,
}

impl Shape {
    /// Base route `i`'s hostname.
    fn base_host(&self, i: usize) -> String {
        match self.own_hosts {
            true => format!("base{i}.example.com"),
            false => format!("h{}.example.com", i % 50),
        }
    }

    /// Changed route `i`'s hostnames (YAML) and the Host a request sends.
    fn change_host(&self, i: usize) -> (String, String) {
        match self.own_hosts {
            true => {
                let h = format!("r{i}.example.com");
                (format!("  hostnames: [\"{h}\"]\n"), h)
            }
            false => (String::new(), "bench.test".into()),
        }
    }
}

/// How long the agent is left with no change before its memory is read again:
/// jemalloc gives freed pages back after 10 s (its `dirty_decay_ms`), on
/// its background thread.
const QUIET: Duration = Duration::from_secs(12);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let delta = args.iter().any(|a| a == "delta");
    let peer = args.iter().any(|a| a == "peer");
    let eg_changes = args
        .iter()
        .find_map(|a| a.strip_prefix("eg-changes=")?.parse().ok())
        .unwrap_or(EG_CHANGES);
    let shape = Shape {
        gateways: args
            .iter()
            .find_map(|a| a.strip_prefix("gateways=")?.parse().ok())
            .unwrap_or(GATEWAYS),
        own_hosts: args.iter().any(|a| a == "own-hosts"),
    };
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![0, 1_000, 3_000, 10_000]
    } else {
        sizes
    };
    let eg = peer.then(EnvoyGateway::locate);
    println!(
        "route propagation, standalone: new route file → first 200 through Envoy, over {} Gateways{}",
        shape.gateways,
        if shape.own_hosts {
            ", each route its own hostname"
        } else {
            ""
        }
    );
    println!(
        "aether-edge: {} ADS, {CHANGES} changes per size",
        if delta { "Delta" } else { "SotW" }
    );
    if let Some(eg) = &eg {
        println!(
            "envoy-gateway {}: File provider, Host infrastructure, Delta ADS (its only kind), {eg_changes} changes per size",
            eg.version
        );
    }
    println!("ready = control plane start → every Gateway serving its last base route");
    println!(
        "{:<14} {:>6} {:>7} {:>10} {:>9} {:>9} {:>8} {:>9} {:>9}",
        "", "served", "changes", "median ms", "p99 ms", "max ms", "ready s", "ctl MiB", "envoy MiB"
    );
    for base in sizes {
        let ours = measure(&Subject::Aether { delta }, shape, base, CHANGES);
        ours.print("aether-edge", base);
        ours.summarize(base, delta, shape);
        if let Some(eg) = &eg {
            let theirs = measure(&Subject::EnvoyGateway(eg), shape, base, eg_changes);
            theirs.print("envoy-gateway", base);
            theirs.print_ratio(&ours, base);
        }
    }
}

/// The control plane under test.
enum Subject<'a> {
    Aether { delta: bool },
    EnvoyGateway(&'a EnvoyGateway),
}

impl Subject<'_> {
    /// The GatewayClass, the objects beside it (the backend's), and how a
    /// route names the backend.
    fn workload(&self, backend: &Backend) -> (String, String, String) {
        match self {
            Subject::Aether { .. } => (
                "spec: {controllerName: gateway.aether.io/edge}\n".into(),
                backend.yaml("default"),
                "{name: bench, port: 80}".into(),
            ),
            // Envoy Gateway runs one Envoy per Gateway unless its EnvoyProxy
            // merges them; merged, one Envoy serves all 100, as ours does. The
            // EnvoyProxy also names the Envoy version func-e is to run, and lets
            // that Envoy pick a free shared-memory base id (other Envoys may run
            // on the machine).
            Subject::EnvoyGateway(eg) => (
                "spec:\n  controllerName: gateway.aether.io/edge\n  parametersRef: {group: gateway.envoyproxy.io, kind: EnvoyProxy, name: merged, namespace: default}\n".into(),
                format!(
                    "apiVersion: gateway.envoyproxy.io/v1alpha1\nkind: EnvoyProxy\nmetadata: {{name: merged, namespace: default}}\nspec:\n  mergeGateways: true\n  extraArgs: [--use-dynamic-base-id]\n  provider: {{type: Host, host: {{envoyVersion: \"{}\"}}}}\n---\napiVersion: gateway.envoyproxy.io/v1alpha1\nkind: Backend\nmetadata: {{name: bench, namespace: default}}\nspec:\n  endpoints:\n  - ip: {{address: {}, port: {}}}\n",
                    eg.envoy_version, backend.ip, backend.port
                ),
                "{group: gateway.envoyproxy.io, kind: Backend, name: bench}".into(),
            ),
        }
    }

    /// Long enough for a slow run, short enough that a stuck one ends: Envoy
    /// Gateway's first load and each of its changes at 1,000 routes take ~2 min.
    fn timeouts(&self) -> (Duration, Duration) {
        match self {
            Subject::Aether { .. } => (Duration::from_secs(120), Duration::from_secs(10)),
            Subject::EnvoyGateway(_) => (Duration::from_secs(900), Duration::from_secs(600)),
        }
    }

    fn start(&self, dir: &Path, logs: &Path) -> Running {
        match self {
            Subject::Aether { delta } => {
                let xds = format!("127.0.0.1:{}", free_port());
                let admin = format!("127.0.0.1:{}", free_port());
                let started = Instant::now();
                let control = Proc::spawn(
                    "aether-edge",
                    Command::new(agent_bin())
                        .arg("standalone")
                        .arg("--config-dir")
                        .arg(dir)
                        .args(["--xds-address", &xds, "--admin-address", &admin])
                        .arg("--xds-tcp-open-to-local-users"),
                    logs,
                );
                let envoy = envoy("bench", &xds, *delta, logs);
                Running {
                    control,
                    envoy: Some(envoy),
                    started,
                    admin: Some(admin),
                }
            }
            Subject::EnvoyGateway(eg) => {
                let (control, started) = eg.start(dir, logs);
                Running {
                    control,
                    envoy: None,
                    started,
                    admin: None,
                }
            }
        }
    }
}

/// A control plane and the Envoy it feeds.
struct Running {
    control: Proc,
    /// Ours, started beside the agent; Envoy Gateway starts its own.
    envoy: Option<Envoy>,
    /// When the control plane was spawned.
    started: Instant,
    /// Ours: the agent's admin address (its `/metrics`).
    admin: Option<String>,
}

impl Running {
    fn envoy_pid(&self) -> Option<u32> {
        match &self.envoy {
            Some(envoy) => Some(envoy.proc.pid()),
            None => child_named(self.control.pid(), "envoy"),
        }
    }

    /// Envoy Gateway stops its Envoy on SIGTERM; a SIGKILL would leave that to
    /// the parent-death signal func-e sets.
    fn stop(mut self) {
        if self.envoy.is_none() {
            self.control.signal("TERM");
            let deadline = Instant::now() + Duration::from_secs(20);
            while self.control.is_running() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// One size's numbers for one control plane.
struct Row {
    changes: usize,
    /// Start → every Gateway serving its last base route, s; `None` if it never did.
    ready: Option<f64>,
    /// One per change served, ms.
    samples: Vec<f64>,
    /// The change that was never served within the timeout (the run stops there).
    timed_out: Option<usize>,
    control_mib: f64,
    /// Ours: of `control_mib`, what the agent's allocator has handed out and
    /// not taken back, what its pages hold (`aether_edge_heap_allocated_bytes`,
    /// `_active_bytes`, `_resident_bytes`), and the resident pages that are
    /// files (the binary's, `RssFile`).
    heap_mib: Option<[f64; 3]>,
    file_mib: f64,
    /// Ours: the agent's RSS and heap resident bytes after [`QUIET`] with no
    /// change, once jemalloc has given back what the last changes freed.
    settled_mib: Option<[f64; 2]>,
    envoy_mib: f64,
    /// Envoy's own apply times (ours only: Envoy Gateway's Envoy has its own admin).
    envoy_apply: String,
    /// Where our changes' time went (ours only), from the agent's log.
    stages: String,
}

impl Row {
    fn stats(&self) -> Option<(f64, f64, f64)> {
        if self.samples.is_empty() || self.timed_out.is_some() {
            return None;
        }
        let mut s = self.samples.clone();
        let max = s.iter().cloned().fold(0.0, f64::max);
        let (median, p99) = aether_benches::median_p99(&mut s);
        Some((median, p99, max))
    }

    fn print(&self, name: &str, base: usize) {
        let ready = self.ready.map_or("timeout".into(), |s| format!("{s:.2}"));
        let latency = match (self.stats(), self.timed_out) {
            (Some((median, p99, max)), _) => format!("{median:>10.2} {p99:>9.2} {max:>9.2}"),
            (None, Some(i)) => format!(
                "{:>30}",
                format!("change {i} timed out after {} done", self.samples.len())
            ),
            (None, None) => format!("{:>30}", "no changes (base not served)"),
        };
        println!(
            "{name:<14} {base:>6} {:>7} {latency} {ready:>8} {:>9.1} {:>9.1}",
            self.changes, self.control_mib, self.envoy_mib
        );
        if let Some([allocated, active, resident]) = self.heap_mib {
            println!(
                "{:<14} agent heap allocated / active / resident: {allocated:.1} / {active:.1} / {resident:.1} MiB; of its RSS, files (the binary) {:.1} MiB",
                "", self.file_mib
            );
        }
        if let Some([rss, resident]) = self.settled_mib {
            println!(
                "{:<14} after {} s with no change: agent RSS {rss:.1} MiB, heap resident {resident:.1} MiB",
                "",
                QUIET.as_secs()
            );
        }
        if !self.envoy_apply.is_empty() {
            println!(
                "{:<14} Envoy's own apply, ms p50/p99/max: {}",
                "", self.envoy_apply
            );
        }
        if !self.stages.is_empty() {
            println!("{:<14} where it went, ms p50: {}", "", self.stages);
        }
    }

    /// This row (ours) in the table `make bench` prints.
    fn summarize(&self, base: usize, delta: bool, shape: Shape) {
        let ads = if delta { "Delta" } else { "SotW" };
        let at = match (shape.gateways, shape.own_hosts) {
            (GATEWAYS, false) => format!("{base} routes served ({ads})"),
            (1, true) => format!("{base} routes on one Gateway, own hostnames ({ads})"),
            (g, own) => format!(
                "{base} routes over {g} Gateways{} ({ads})",
                if own { ", own hostnames" } else { "" }
            ),
        };
        let latency = self
            .stats()
            .map_or("timeout".into(), |(m, p, _)| format!("{m:.1} / {p:.1} ms"));
        aether_benches::summary(
            "propagation",
            &format!("{at}: file → 200, median / p99"),
            latency,
            "p99 ≤ 10 ms",
        );
        aether_benches::summary(
            "propagation",
            &format!(
                "{at}: agent RSS at the last change / {} s later; Envoy RSS",
                QUIET.as_secs()
            ),
            format!(
                "{:.0} / {} MiB; {:.0} MiB",
                self.control_mib,
                self.settled_mib
                    .map_or("-".into(), |[rss, _]| format!("{rss:.0}")),
                self.envoy_mib
            ),
            if base == 10_000 {
                "agent ≤ 100 MiB"
            } else {
                "-"
            },
        );
    }

    /// `self` / `ours` per column, `-` where either has no number.
    fn print_ratio(&self, ours: &Row, base: usize) {
        let ratio = |a: Option<f64>, b: Option<f64>, width: usize| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:>width$}", format!("{:.1}x", a / b)),
            _ => format!("{:>width$}", "-"),
        };
        let (t, o) = (self.stats(), ours.stats());
        println!(
            "{:<14} {base:>6} {:>7} {} {} {} {} {} {}",
            "ratio EG/ours",
            "",
            ratio(t.map(|s| s.0), o.map(|s| s.0), 10),
            ratio(t.map(|s| s.1), o.map(|s| s.1), 9),
            ratio(t.map(|s| s.2), o.map(|s| s.2), 9),
            ratio(self.ready, ours.ready, 8),
            ratio(Some(self.control_mib), Some(ours.control_mib), 9),
            ratio(Some(self.envoy_mib), Some(ours.envoy_mib), 9),
        );
    }
}

fn measure(subject: &Subject, shape: Shape, base: usize, changes: usize) -> Row {
    let count = shape.gateways;
    let dir = temp_dir("bench-propagation");
    let logs = temp_dir("bench-propagation-logs");
    let backend = Backend::start("bench");
    let (class_spec, objects, backend_ref) = subject.workload(&backend);
    let (ready_timeout, change_timeout) = subject.timeouts();
    let ports: Vec<u16> = (0..count).map(|_| free_port()).collect();
    let mut gateways = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: aether}}\n{class_spec}"
    );
    for (g, port) in ports.iter().enumerate() {
        let _ = write!(
            gateways,
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw-{g}, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: {port}}}\n"
        );
    }
    let _ = write!(gateways, "---\n{objects}");
    std::fs::write(dir.join("gateways.yaml"), gateways).unwrap();
    for g in 0..count {
        let routes: String = (g..base)
            .step_by(count)
            .map(|i| format!(
                "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: base{i}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw-{g}}}]\n  hostnames: [\"{h}\"]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /base{i}}}}}]\n    backendRefs: [{backend_ref}]\n",
                h = shape.base_host(i)
            ))
            .collect();
        std::fs::write(dir.join(format!("base-{g:03}.yaml")), routes).unwrap();
    }
    let running = subject.start(&dir, &logs);
    // Every Gateway serves its last base route before the clock runs.
    let ready = ports.iter().enumerate().all(|(g, port)| {
        let gateway = format!("127.0.0.1:{port}");
        let (host, path) = match (g..base).step_by(count).next_back() {
            Some(i) => (shape.base_host(i), format!("/base{i}")),
            None => ("bench.test".to_string(), "/".to_string()),
        };
        let want = if base > g { 200 } else { 404 };
        poll(running.started, ready_timeout, || {
            http_get(&gateway, &host, &path, &[]).is_ok_and(|r| r.status == want)
        })
    });
    let mut row = Row {
        changes,
        ready: ready.then(|| running.started.elapsed().as_secs_f64()),
        samples: Vec::with_capacity(changes),
        timed_out: None,
        control_mib: 0.0,
        settled_mib: None,
        heap_mib: None,
        file_mib: 0.0,
        envoy_mib: 0.0,
        envoy_apply: String::new(),
        stages: String::new(),
    };
    let log_before = running.control.log_text().len();
    let mut written_unix_us = Vec::with_capacity(changes);
    for i in (0..changes).take_while(|_| ready) {
        let g = i * 37 % count;
        let (hostnames, host) = shape.change_host(i);
        let gateway = format!("127.0.0.1:{}", ports[g]);
        let route = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r{i}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw-{g}}}]\n{hostnames}  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /r{i}}}}}]\n    backendRefs: [{backend_ref}]\n"
        );
        let path = format!("/r{i}");
        let started = Instant::now();
        written_unix_us.push(unix_us());
        aether_testkit::live::traffic::write_atomically(
            &dir.join(format!("route-{i:03}.yaml")),
            &route,
        );
        if !poll(started, change_timeout, || {
            http_get(&gateway, &host, &path, &[]).is_ok_and(|r| r.status == 200)
        }) {
            row.timed_out = Some(i);
            break;
        }
        row.samples.push(started.elapsed().as_secs_f64() * 1e3);
        // Let the file system's mtime move on so each change is its own event.
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Some(envoy) = &running.envoy {
        row.envoy_apply = aether_testkit::live::traffic::apply_times(&envoy.admin);
        let log = running.control.log_text();
        row.stages = stages(
            log.get(log_before..).unwrap_or_default(),
            &written_unix_us,
            &row.samples,
        );
    }
    row.control_mib = rss_mib(running.control.pid());
    row.heap_mib = running.admin.as_deref().and_then(heap_mib);
    row.file_mib = status_mib(running.control.pid(), "RssFile:");
    row.envoy_mib = running.envoy_pid().map_or(0.0, rss_mib);
    if let Some(admin) = running.admin.as_deref() {
        std::thread::sleep(QUIET);
        let resident = heap_mib(admin).map_or(0.0, |[_, _, resident]| resident);
        row.settled_mib = Some([rss_mib(running.control.pid()), resident]);
    }
    running.stop();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&logs);
    row
}

/// Polls `done` until it holds or `timeout` has passed since `since`: every
/// 0.2 ms for the first second, then every 10 ms, so that a wait of minutes
/// does not take a core from the control plane it waits for.
fn poll(since: Instant, timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    loop {
        if done() {
            return true;
        }
        let waited = since.elapsed();
        if waited >= timeout {
            return false;
        }
        std::thread::sleep(if waited < Duration::from_secs(1) {
            Duration::from_micros(200)
        } else {
            Duration::from_millis(10)
        });
    }
}

/// Envoy Gateway's binary, and the version of our Envoy for its Host
/// infrastructure to run.
struct EnvoyGateway {
    bin: PathBuf,
    version: String,
    envoy_version: String,
}

impl EnvoyGateway {
    fn locate() -> EnvoyGateway {
        let bin = std::env::var_os("EG_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let cache = std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| {
                        Path::new(&std::env::var_os("HOME").unwrap()).join(".cache")
                    });
                cache.join("aether-edge/envoy-gateway-v1.9.1/envoy-gateway")
            });
        assert!(
            bin.is_file(),
            "no Envoy Gateway at {}: run benches/peer/build-envoy-gateway (or set EG_BIN)",
            bin.display()
        );
        let version = output(Command::new(&bin).arg("version"));
        let version = version
            .lines()
            .find_map(|l| l.strip_prefix("ENVOY_GATEWAY_VERSION:"))
            .unwrap_or_default()
            .trim()
            .to_string();
        // `envoy  version: <sha>/1.40.0/Clean/RELEASE/BoringSSL`
        let envoy = output(Command::new(envoy_bin()).arg("--version"));
        let envoy_version = envoy.split('/').nth(1).unwrap_or_default().to_string();
        assert!(!envoy_version.is_empty(), "no Envoy version in: {envoy}");
        EnvoyGateway {
            bin,
            version,
            envoy_version,
        }
    }

    /// `envoy-gateway server` watching `dir`, its homes under `logs`, with the
    /// workload's controller name. func-e, which Host infrastructure runs Envoy
    /// with, downloads a version only when `<dataHome>/envoy-versions/<version>/bin/envoy`
    /// is missing: ours is put there. Certificates for its xDS TLS come from
    /// `certgen --local` (before the clock starts).
    fn start(&self, dir: &Path, logs: &Path) -> (Proc, Instant) {
        // Ports it always binds, on every address: xDS, the file provider's
        // health probe, the Wasm HTTP server, metrics.
        for port in [18000, 8081, 18002, 19001] {
            assert!(
                TcpListener::bind(("0.0.0.0", port)).is_ok(),
                "Envoy Gateway needs port {port}, which is taken"
            );
        }
        let home = logs.join("eg");
        let versions = home.join("data/envoy-versions").join(&self.envoy_version);
        std::fs::create_dir_all(versions.join("bin")).unwrap();
        std::os::unix::fs::symlink(envoy_bin(), versions.join("bin/envoy")).unwrap();
        output(
            Command::new(&self.bin)
                .args(["certgen", "--local", "--config-home"])
                .arg(home.join("config")),
        );
        let config = logs.join("envoy-gateway.yaml");
        let h = home.display();
        std::fs::write(
            &config,
            format!(
                "apiVersion: gateway.envoyproxy.io/v1alpha1\nkind: EnvoyGateway\ngateway: {{controllerName: gateway.aether.io/edge}}\nprovider:\n  type: Custom\n  custom:\n    resource: {{type: File, file: {{paths: [\"{}\"]}}}}\n    infrastructure:\n      type: Host\n      host: {{configHome: \"{h}/config\", dataHome: \"{h}/data\", stateHome: \"{h}/state\", runtimeDir: \"{h}/run\"}}\nlogging: {{level: {{default: info}}}}\nextensionApis: {{enableBackend: true}}\nadmin: {{address: {{host: 127.0.0.1, port: {}}}}}\n",
                dir.display(),
                free_port()
            ),
        )
        .unwrap();
        let started = Instant::now();
        let proc = Proc::spawn(
            "envoy-gateway",
            Command::new(&self.bin)
                .args(["server", "--config-path"])
                .arg(&config),
            logs,
        );
        (proc, started)
    }
}

/// A command's stdout; panics with its output if it fails.
fn output(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The first child of `parent` whose command name is `name`.
fn child_named(parent: u32, name: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        // `pid (comm) state ppid …`; comm may hold spaces, so split after its `)`.
        let (head, tail) = stat.rsplit_once(") ")?;
        let comm = head.split_once(" (")?.1;
        let ppid: u32 = tail.split_whitespace().nth(1)?.parse().ok()?;
        (ppid == parent && comm == name).then_some(pid)
    })
}

/// The agent's heap now, from its `/metrics` at `admin`, in MiB: allocated,
/// active and resident.
fn heap_mib(admin: &str) -> Option<[f64; 3]> {
    let r = http_get(admin, "localhost", "/metrics", &[]).ok()?;
    let read = |name: &str| {
        r.body
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|b| b / (1024.0 * 1024.0))
    };
    Some([
        read("aether_edge_heap_allocated_bytes")?,
        read("aether_edge_heap_active_bytes")?,
        read("aether_edge_heap_resident_bytes")?,
    ])
}

/// A process's resident memory now (`VmRSS`), in MiB.
fn rss_mib(pid: u32) -> f64 {
    status_mib(pid, "VmRSS:")
}

/// A size `field` of a process's `/proc/<pid>/status` (`VmRSS:`, `RssFile:`), in MiB.
fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status"))
        .unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// Now, in microseconds since the Unix epoch (the agent's log uses that clock).
fn unix_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Each change's time, stage by stage, medians: the agent logs every
/// publication with when its load started (wall clock) and how long the load,
/// translate and build took; a change's publication is the first whose load
/// started after its file was written. What is left of file → 200 is the ADS
/// push, Envoy's apply and the prober's poll.
fn stages(log: &str, written_unix_us: &[u64], to_200_ms: &[f64]) -> String {
    let published = log_fields(
        log,
        "configuration loaded and published",
        [
            "load_started_unix_us=",
            "load_us=",
            "translate_us=",
            "build_us=",
        ],
    );
    let mut columns: [Vec<f64>; 5] = Default::default();
    for (&written, &to_200) in written_unix_us.iter().zip(to_200_ms) {
        let Some(&[started, load, translate, build]) = published.iter().find(|p| p[0] >= written)
        else {
            continue;
        };
        let ms = |us: u64| us as f64 / 1e3;
        let parts = [ms(started - written), ms(load), ms(translate), ms(build)];
        for (c, v) in columns.iter_mut().zip(parts) {
            c.push(v);
        }
        columns[4].push(to_200 - parts.iter().sum::<f64>());
    }
    let matched = columns[0].len();
    if matched == 0 {
        return String::new();
    }
    let names = [
        "file → load starts",
        "load",
        "translate",
        "build",
        "published → 200",
    ];
    let mut out: Vec<String> = names
        .iter()
        .zip(columns.iter_mut())
        .map(|(name, c)| format!("{name} {:.1}", aether_benches::median_p99(c).0))
        .collect();
    out.push(format!(
        "({matched} of {} changes matched)",
        to_200_ms.len()
    ));
    out.join(", ")
}
