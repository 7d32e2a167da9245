//! Live: edits that are not atomic never publish half a config, and a restart
//! with a broken file serves what served before. Keep-alive-free clients ask a
//! real Envoy for two routes of one file while the file (or the directory) is
//! rewritten the ways the hostile-input probe did; every request must be
//! answered by one version or the other, never 404 (a route missing from a
//! half-read file or directory).
//!
//! `AETHER_EDGE_BIN=path` runs another build of `aether-edge` (to measure
//! what an older one does with the same edits).

use crate::support::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    std::env::var_os("AETHER_EDGE_BIN").map_or_else(|| agent_bin().to_path_buf(), PathBuf::from)
}

fn gateway_yaml(port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: aether}}\nspec: {{controllerName: gateway.aether.io/edge}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: {port}}}\n"
    )
}

fn route(name: &str, backend: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /{name}}}}}]\n    backendRefs: [{{name: {backend}, port: 80}}]\n"
    )
}

/// routes.yaml: two documents, `/one` and `/two`, both to `backend`.
fn routes(backend: &str) -> (String, String) {
    (
        route("one", backend),
        format!("---\n{}", route("two", backend)),
    )
}

struct Setup {
    dir: PathBuf,
    logs: PathBuf,
    gateway: String,
    xds: String,
    admin: String,
    files: Vec<(String, String)>,
    _backends: Vec<Backend>,
}

fn setup(tag: &str) -> Setup {
    let dir = temp_dir(tag);
    let logs = temp_dir(&format!("{tag}-logs"));
    let backends = vec![Backend::start("b0"), Backend::start("b1")];
    let port = free_port();
    let services: String = backends
        .iter()
        .map(|b| b.yaml("default") + "---\n")
        .collect();
    let (one, two) = routes("b0");
    let files = vec![
        ("gateway.yaml".to_string(), gateway_yaml(port)),
        ("routes.yaml".to_string(), one + &two),
        ("services.yaml".to_string(), services),
    ];
    for (name, text) in &files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    // Older than any quiet period: the first load reads them at once.
    let a_minute_ago = std::time::SystemTime::now() - Duration::from_secs(60);
    for (name, _) in &files {
        let f = std::fs::File::options()
            .write(true)
            .open(dir.join(name))
            .unwrap();
        f.set_modified(a_minute_ago).unwrap();
    }
    Setup {
        dir,
        logs,
        gateway: format!("127.0.0.1:{port}"),
        xds: format!("127.0.0.1:{}", free_port()),
        admin: format!("127.0.0.1:{}", free_port()),
        files,
        _backends: backends,
    }
}

impl Setup {
    fn standalone(&self) -> Agent {
        Agent::start(&bin(), &self.dir, &self.xds, &self.admin, &self.logs, &[])
    }
}

fn backend_of(gateway: &str, path: &str) -> Option<String> {
    http_get(gateway, "example.test", path, &[])
        .ok()?
        .backend()
        .map(str::to_string)
}

fn both_served_by(s: &Setup, backend: &str, secs: u64, what: &str) {
    wait_until(Duration::from_secs(secs), what, || {
        let ok = ["/one", "/two"]
            .iter()
            .all(|p| backend_of(&s.gateway, p).as_deref() == Some(backend));
        ok.then_some(())
    });
}

/// Requests to `/one` and `/two` in turn until stopped: (ok, failed).
struct Traffic {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Traffic {
    fn start(gateway: &str) -> Traffic {
        let (stop, ok, failed) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
        );
        let thread = std::thread::spawn({
            let (stop, ok, failed, gw) = (
                stop.clone(),
                ok.clone(),
                failed.clone(),
                gateway.to_string(),
            );
            move || {
                for path in ["/one", "/two"].iter().cycle() {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    match backend_of(&gw, path).as_deref() {
                        Some("b0" | "b1") => ok.fetch_add(1, Ordering::Relaxed),
                        _ => failed.fetch_add(1, Ordering::Relaxed),
                    };
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        });
        Traffic {
            stop,
            ok,
            failed,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        (
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

fn rewrite_in_chunks(path: &Path, chunks: &[&str], pause: Duration, close_between: bool) {
    let mut file = Some(std::fs::File::create(path).unwrap());
    for (i, chunk) in chunks.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(pause);
            if close_between {
                file = Some(std::fs::File::options().append(true).open(path).unwrap());
            }
        }
        file.as_mut().unwrap().write_all(chunk.as_bytes()).unwrap();
        if close_between {
            file = None;
        }
    }
}

/// Each way of editing, from `b0` to `b1` and back: how many requests failed.
#[test]
fn edits_that_are_not_atomic_fail_no_request() {
    let s = setup("edits-live");
    let agent = s.standalone();
    let _envoy = envoy("edits-live", &s.xds, true, &s.logs);
    both_served_by(&s, "b0", 30, "first routes");
    let path = s.dir.join("routes.yaml");
    type Edit = fn(&Setup, &Path, &str);
    let cases: [(&str, Edit); 5] = [
        (
            "a slow writer holding the file open (4 chunks, 400 ms apart)",
            |_, path, b| {
                let (one, two) = routes(b);
                let (a, c) = one.split_at(one.len() / 2);
                let (d, e) = two.split_at(two.len() / 2);
                rewrite_in_chunks(path, &[a, c, d, e], Duration::from_millis(400), false);
            },
        ),
        (
            "an appender that closes between chunks (400 ms)",
            |_, path, b| {
                let (one, two) = routes(b);
                rewrite_in_chunks(path, &[&one, &two], Duration::from_millis(400), true);
            },
        ),
        ("truncate, then write 1.5 s later", |_, path, b| {
            let (one, two) = routes(b);
            drop(std::fs::File::create(path).unwrap());
            std::thread::sleep(Duration::from_millis(1500));
            std::fs::write(path, one + &two).unwrap();
        }),
        (
            "a two-document file cut between documents, whole 600 ms later",
            |_, path, b| {
                let (one, two) = routes(b);
                std::fs::write(path, &one).unwrap();
                std::thread::sleep(Duration::from_millis(600));
                std::fs::write(path, one + &two).unwrap();
            },
        ),
        (
            "the directory emptied and refilled one file per 0.3 s",
            |s, _, b| {
                for (name, _) in &s.files {
                    std::fs::remove_file(s.dir.join(name)).unwrap();
                }
                for (name, text) in &s.files {
                    std::thread::sleep(Duration::from_millis(300));
                    let text = if name == "routes.yaml" {
                        let (one, two) = routes(b);
                        one + &two
                    } else {
                        text.clone()
                    };
                    std::fs::write(s.dir.join(name), text).unwrap();
                }
            },
        ),
    ];
    let mut lines = Vec::new();
    let mut backend = "b0";
    for (what, edit) in cases {
        backend = if backend == "b0" { "b1" } else { "b0" };
        let traffic = Traffic::start(&s.gateway);
        edit(&s, &path, backend);
        both_served_by(&s, backend, 20, what);
        let (ok, failed) = traffic.stop();
        lines.push(format!("{failed:>5} failed / {:>5}  {what}", ok + failed));
    }
    let table = lines.join("\n");
    eprintln!("{table}");
    let log = agent.proc.log_text();
    for line in &lines {
        assert!(line.trim_start().starts_with("0 failed"), "{table}\n{log}");
    }
}

/// Envoy and aether-edge restart (a node restart) while a file is broken:
/// what served before serves again, and /readyz and /metrics name the file.
#[test]
fn a_restart_with_a_broken_file_serves_what_served_before() {
    let s = setup("restart-broken");
    let mut agent = s.standalone();
    let mut envoy1 = envoy("restart-broken", &s.xds, true, &s.logs);
    both_served_by(&s, "b0", 30, "first routes");
    envoy1.proc.kill();
    agent.proc.kill();
    drop(envoy1);
    std::fs::write(s.dir.join("routes.yaml"), "kind: [broken\n").unwrap();
    let agent = s.standalone();
    let _envoy = envoy("restart-broken", &s.xds, true, &s.logs);
    let started = Instant::now();
    let traffic = Traffic::start(&s.gateway);
    let served = (|| {
        while started.elapsed() < Duration::from_secs(15) {
            if backend_of(&s.gateway, "/two").as_deref() == Some("b0") {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    })();
    let first = started.elapsed();
    let before = traffic.stop();
    let traffic = Traffic::start(&s.gateway);
    std::thread::sleep(Duration::from_secs(2));
    let (ok, failed) = traffic.stop();
    eprintln!(
        "restart with a broken file: served after {first:?} ({} of {} requests before that failed, \
         Envoy starting); then {failed} failed / {}",
        before.1,
        before.0 + before.1,
        ok + failed
    );
    let log = agent.proc.log_text();
    assert!(served, "nothing served after the restart:\n{log}");
    assert_eq!(failed, 0, "{log}");
    let ready = agent.admin_get("/readyz").unwrap();
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert!(ready.body.contains("routes.yaml:"), "{}", ready.body);
    let metrics = agent.admin_get("/metrics").unwrap().body;
    assert!(metrics.contains("aether_edge_config_broken 1"), "{metrics}");
    assert!(
        metrics.contains("aether_edge_config_file_problem{file=\"routes.yaml\"} 1"),
        "{metrics}"
    );
}
