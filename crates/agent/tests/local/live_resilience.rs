//! Live: what happens when things go wrong. Envoy NACKs a config (the previous one
//! keeps serving and the NACK is reported), Envoy restarts, aether-edge restarts
//! under steady traffic — with no failed request once connections are back.

use crate::support::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

fn gateway_yaml(port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: aether}}\nspec: {{controllerName: gateway.aether.io/edge}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: {port}}}\n"
    )
}

fn route_yaml(name: &str, path_type: &str, path: &str, backend: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - matches: [{{path: {{type: {path_type}, value: \"{path}\"}}}}]\n    backendRefs: [{{name: {backend}, port: 80}}]\n"
    )
}

pub(crate) struct Setup {
    dir: std::path::PathBuf,
    pub(crate) logs: std::path::PathBuf,
    pub(crate) gateway: String,
    pub(crate) xds: String,
    admin: String,
    _backends: Vec<Backend>,
}

impl Setup {
    /// `aether-edge standalone` on this setup's directory and ports, `flags` appended.
    pub(crate) fn standalone(&self, flags: &[&str]) -> Agent {
        Agent::start(
            agent_bin(),
            &self.dir,
            &self.xds,
            &self.admin,
            &self.logs,
            flags,
        )
    }
}

pub(crate) fn setup(tag: &str) -> Setup {
    let dir = temp_dir(tag);
    let logs = temp_dir(&format!("{tag}-logs"));
    let backends = vec![Backend::start("b0"), Backend::start("b1")];
    let port = free_port();
    std::fs::write(dir.join("gateway.yaml"), gateway_yaml(port)).unwrap();
    let services: String = backends
        .iter()
        .map(|b| b.yaml("default") + "---\n")
        .collect();
    std::fs::write(dir.join("services.yaml"), services).unwrap();
    std::fs::write(
        dir.join("good.yaml"),
        route_yaml("good", "PathPrefix", "/good", "b0"),
    )
    .unwrap();
    Setup {
        dir,
        logs,
        gateway: format!("127.0.0.1:{port}"),
        xds: format!("127.0.0.1:{}", free_port()),
        admin: format!("127.0.0.1:{}", free_port()),
        _backends: backends,
    }
}

fn backend_of(gateway: &str, path: &str) -> Option<String> {
    http_get(gateway, "example.test", path, &[])
        .ok()?
        .backend()
        .map(str::to_string)
}

/// Waits (`secs`) until `path` is answered by `backend`.
pub(crate) fn then_served(s: &Setup, path: &str, backend: &str, secs: u64, what: &str) {
    wait_until(Duration::from_secs(secs), what, || {
        (backend_of(&s.gateway, path)? == backend).then_some(())
    });
}

/// `n` requests for `/good` in a row, each answered by `backend`.
fn then_every_request_reaches(s: &Setup, backend: &str, n: usize, why: &str) {
    for i in 0..n {
        assert_eq!(
            backend_of(&s.gateway, "/good").as_deref(),
            Some(backend),
            "request {i}: {why}"
        );
    }
}

fn counter(agent: &Agent, name: &str) -> u64 {
    metric_sum(&agent.admin_get("/metrics").unwrap().body, name, &[])
}

fn wait_programmed(agent: &Agent) -> String {
    wait_until(Duration::from_secs(20), "Programmed status", || {
        let s = agent.admin_get("/debug/status")?;
        let programmed = s.status == 200
            && s.body.contains("reason: Programmed")
            && !s.body.contains("Pending")
            && !s.body.contains("reason: Invalid");
        programmed.then_some(s.body)
    })
}

#[test]
fn a_nacked_config_is_reported_and_the_previous_one_keeps_serving() {
    let s = setup("nack");
    let agent = s.standalone(&[]);
    let _envoy = envoy("nack", &s.xds, true, &s.logs);
    then_served(&s, "/good", "b0", 30, "first route");
    wait_programmed(&agent);
    a_nack_is_reported_and_the_previous_table_serves(&s, &agent);
    // Fixing the config recovers.
    let fixed = route_yaml("bad", "PathPrefix", "/fixed", "b1");
    std::fs::write(s.dir.join("bad.yaml"), fixed).unwrap();
    then_served(&s, "/fixed", "b1", 20, "the fixed route");
    wait_programmed(&agent);
}

/// Passes translate's RE2 checks (a lower bound of the program size), but Envoy's
/// RE2 program for it is just over the 1000 our bootstraps allow: the route is
/// held back (`Accepted=False` with Envoy's text) and the rest goes on.
fn a_nack_is_reported_and_the_previous_table_serves(s: &Setup, agent: &Agent) {
    let bad = route_yaml("bad", "RegularExpression", "/[a-z]{997}", "b1");
    std::fs::write(s.dir.join("bad.yaml"), bad).unwrap();
    let nack = wait_until(
        Duration::from_secs(20),
        "the NACK in /debug/snapshot",
        || {
            let r = agent.admin_get("/debug/snapshot")?;
            r.body.contains("program size").then_some(r.body)
        },
    );
    let status = wait_until(Duration::from_secs(10), "Programmed=False", || {
        let r = agent.admin_get("/debug/status")?;
        (r.body.contains("status: \"False\"") || r.body.contains("status: 'False'"))
            .then_some(r.body)
    });
    assert!(
        status.contains("program size"),
        "status names Envoy's error:\n{status}"
    );
    assert!(
        status.contains("reason: UnsupportedValue") && status.contains("served as it was"),
        "the refused route says it is held back:\n{status}"
    );
    then_every_request_reaches(s, "b0", 20, &format!("the previous route table: {nack}"));
    // The rest of the Gateway's route table goes on while the route is held.
    let other = route_yaml("other", "PathPrefix", "/other", "b1");
    std::fs::write(s.dir.join("other.yaml"), other).unwrap();
    then_served(s, "/other", "b1", 20, "another route of the same table");
    let status = wait_programmed(agent);
    assert!(status.contains("program size"), "{status}");
    // Not resent in a loop: the NACK count stays put while nothing changes.
    let before = counter(agent, "aether_ads_nacks_total");
    assert!(before >= 1, "{before} NACKs");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        before,
        counter(agent, "aether_ads_nacks_total"),
        "a NACKed version must not be resent"
    );
}

#[test]
fn envoy_restart_recovers_with_no_failed_requests() {
    let s = setup("envoy-restart");
    let agent = s.standalone(&[]);
    let mut first = envoy("restart", &s.xds, false, &s.logs);
    then_served(&s, "/good", "b0", 30, "first route");
    first.proc.kill();
    drop(first);
    let _envoy = envoy("restart", &s.xds, false, &s.logs);
    then_served(&s, "/good", "b0", 30, "route after Envoy restart");
    then_every_request_reaches(&s, "b0", 100, "after reconnect");
    wait_programmed(&agent);

    // The fleet view: the restarted node ACKed exactly the Gateway's current hash.
    let debug = agent.admin_get("/debug/snapshot").unwrap().body;
    let debug: serde_json::Value = serde_json::from_str(&debug).unwrap();
    let want = &debug["gateways"]["default/gw"];
    assert!(want.is_string(), "{debug}");
    assert_eq!(
        &debug["gateway_acks"]["restart"]["default/gw"], want,
        "{debug}"
    );
}

#[test]
fn aether_edge_restart_under_traffic_fails_no_request() {
    let s = setup("agent-restart");
    let mut agent = s.standalone(&[]);
    let _envoy = envoy("agent-restart", &s.xds, true, &s.logs);
    then_served(&s, "/good", "b0", 30, "first route");
    wait_programmed(&agent);

    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let traffic = {
        let (stop, ok, failed, gw) = (stop.clone(), ok.clone(), failed.clone(), s.gateway.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match backend_of(&gw, "/good").as_deref() {
                    Some("b0") => ok.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    agent.proc.kill();
    std::thread::sleep(Duration::from_secs(1));
    let agent = s.standalone(&[]);
    wait_programmed(&agent);
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    traffic.join().unwrap();
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    eprintln!("requests through the restart: {ok} ok, {failed} failed");
    assert!(ok > 50, "too little traffic to mean anything: {ok}");
    assert_eq!(failed, 0, "requests failed across the aether-edge restart");
}

/// The agent's standalone log so far.
fn log_of(agent: &Agent) -> String {
    agent.proc.log_text()
}

#[test]
fn edits_publish_neither_half_written_files_nor_an_emptied_directory() {
    let s = setup("edits");
    let settle = Duration::from_millis(400).as_millis().to_string();
    let agent = s.standalone(&["--settle-ms", &settle]);
    let _envoy = envoy("edits", &s.xds, false, &s.logs);
    then_served(&s, "/good", "b0", 30, "first route");
    a_file_written_in_two_steps_is_never_read_half_written(&s, &agent);
    let away = an_emptied_directory_is_not_published(&s, &agent);
    a_recreated_directory_is_found_again(&s, &away);
    a_second_definition_leaves_the_live_one(&s, &agent);
}

/// An editor that truncates, then writes in two steps.
fn a_file_written_in_two_steps_is_never_read_half_written(s: &Setup, agent: &Agent) {
    let errors = "aether_edge_config_loads_total{result=\"error\"}";
    for (round, backend) in ["b1", "b0", "b1"].into_iter().enumerate() {
        use std::io::Write;
        let full = route_yaml("good", "PathPrefix", "/good", backend);
        let (head, tail) = full.split_at(full.len() / 2);
        let mut file = std::fs::File::create(s.dir.join("good.yaml")).unwrap();
        file.write_all(head.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        file.write_all(tail.as_bytes()).unwrap();
        drop(file);
        then_served(s, "/good", backend, 20, "the edited route");
        assert_eq!(
            counter(agent, errors),
            0,
            "round {round}:\n{}",
            log_of(agent)
        );
    }
}

/// A file moved into place is read at once, whatever the quiet period; one
/// written in place (closed or not) waits for a quiet directory, and one
/// still open for writing for its writer to close it, however long that takes.
#[test]
fn a_moved_file_is_read_at_once_and_an_in_place_write_waits_for_quiet() {
    use std::io::Write;
    let s = setup("writers");
    // The first files are older than the quiet period (no event is seen for
    // files written before the agent starts).
    let a_minute_ago = std::time::SystemTime::now() - Duration::from_secs(60);
    for f in std::fs::read_dir(&s.dir).unwrap() {
        let f = std::fs::File::options()
            .write(true)
            .open(f.unwrap().path())
            .unwrap();
        f.set_modified(a_minute_ago).unwrap();
    }
    let agent = s.standalone(&["--settle-ms", "2000"]);
    let _envoy = envoy("writers", &s.xds, false, &s.logs);
    then_served(&s, "/good", "b0", 30, "first route");

    // Written in place and closed: one step of an edit that may have more.
    std::fs::write(
        s.dir.join("good.yaml"),
        route_yaml("good", "PathPrefix", "/good", "b1"),
    )
    .unwrap();
    let written = std::time::Instant::now();
    then_every_request_reaches(&s, "b0", 5, "an in-place write before the quiet period");
    assert!(
        written.elapsed() < Duration::from_secs(2),
        "probing took the whole quiet period"
    );
    then_served(
        &s,
        "/good",
        "b1",
        10,
        "the in-place write once the directory is quiet",
    );
    assert!(written.elapsed() >= Duration::from_secs(2));

    let tmp = s.dir.join("good.yaml.tmp");
    std::fs::write(&tmp, route_yaml("good", "PathPrefix", "/good", "b0")).unwrap();
    let moved = std::time::Instant::now();
    std::fs::rename(&tmp, s.dir.join("good.yaml")).unwrap();
    then_served(&s, "/good", "b0", 5, "a file moved into place");
    let latency = moved.elapsed();
    eprintln!("a rename into place served after {latency:?}");
    assert!(latency < Duration::from_secs(1), "{latency:?}");

    // Held open past the quiet period: not read until closed.
    let full = route_yaml("good", "PathPrefix", "/good", "b1");
    let (head, tail) = full.split_at(full.len() / 2);
    let mut file = std::fs::File::create(s.dir.join("good.yaml")).unwrap();
    file.write_all(head.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(3000));
    then_every_request_reaches(&s, "b0", 5, "a file still open for writing is not read");
    file.write_all(tail.as_bytes()).unwrap();
    drop(file);
    then_served(&s, "/good", "b1", 10, "the file once its writer closed it");
    assert_eq!(
        counter(&agent, "aether_edge_config_loads_total{result=\"error\"}"),
        0,
        "{}",
        log_of(&agent)
    );
}

/// Its files moved away: not published, logged, counted. Returns where they went.
fn an_emptied_directory_is_not_published(s: &Setup, agent: &Agent) -> std::path::PathBuf {
    let away = temp_dir("edits-away");
    for f in std::fs::read_dir(&s.dir).unwrap() {
        let f = f.unwrap().file_name();
        std::fs::rename(s.dir.join(&f), away.join(&f)).unwrap();
    }
    wait_until(Duration::from_secs(10), "the refusal counted", || {
        (counter(agent, "aether_edge_config_refused_total") >= 1).then_some(())
    });
    assert!(
        log_of(agent).contains("no Gateway left"),
        "{}",
        log_of(agent)
    );
    then_every_request_reaches(s, "b1", 10, "the last published config");
    away
}

/// Recreated empty (nothing published), then filled again: the rescan finds it.
fn a_recreated_directory_is_found_again(s: &Setup, away: &std::path::Path) {
    std::fs::remove_dir_all(&s.dir).unwrap();
    std::fs::create_dir(&s.dir).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(backend_of(&s.gateway, "/good").as_deref(), Some("b1"));
    for f in std::fs::read_dir(away).unwrap() {
        let f = f.unwrap().file_name();
        std::fs::rename(away.join(&f), s.dir.join(&f)).unwrap();
    }
    let good = route_yaml("good", "PathPrefix", "/good", "b0");
    std::fs::write(s.dir.join("good.yaml"), good).unwrap();
    then_served(s, "/good", "b0", 20, "the refilled directory");
}

/// A second definition in another file: the live one stays, both files named.
fn a_second_definition_leaves_the_live_one(s: &Setup, agent: &Agent) {
    let again = route_yaml("good", "PathPrefix", "/good", "b1");
    std::fs::write(s.dir.join("zz.yaml"), again).unwrap();
    let log = wait_until(Duration::from_secs(10), "the duplicate named", || {
        let log = log_of(agent);
        log.contains("zz.yaml: HTTPRoute default/good is already defined in good.yaml")
            .then_some(log)
    });
    then_every_request_reaches(s, "b0", 10, &log);
}

#[test]
fn health_and_readiness_answer_while_a_big_config_parses() {
    let s = setup("big");
    let max = (16u64 << 20).to_string();
    let agent = s.standalone(&["--max-file-bytes", &max]);
    wait_until(Duration::from_secs(30), "ready", || {
        (agent.admin_get("/readyz")?.status == 200).then_some(())
    });
    let (big, routes) = mk_big_file();
    let loads = || counter(&agent, "aether_edge_config_loads_total");
    let before = loads();
    std::fs::write(s.dir.join("big.yaml"), &big).unwrap();
    let (took, probes, slowest) = probe_until(&agent, || loads() > before);
    let log = log_of(&agent);
    assert!(loads() > before, "the big file loaded:\n{log}");
    eprintln!(
        "{routes} routes ({} bytes) loaded in {took:?}; {probes} probes, slowest {slowest:?}",
        big.len()
    );
    // The load takes seconds; a probe stuck behind it would take as long.
    assert!(
        took > Duration::from_secs(1) && slowest < took / 4,
        "slowest probe {slowest:?} during a {took:?} load"
    );
}

/// ~10 MB of routes in one file, and how many.
fn mk_big_file() -> (String, usize) {
    let mut big = String::new();
    let mut i = 0;
    while big.len() < 10 << 20 {
        let name = format!("r{i}");
        big.push_str(&route_yaml(&name, "PathPrefix", &format!("/{name}"), "b0"));
        big.push_str("---\n");
        i += 1;
    }
    (big, i)
}

/// Probes `/healthz` and `/readyz` (each must answer 200) until `done` (600 s at
/// most): `(how long, how many probes, the slowest)`.
fn probe_until(agent: &Agent, done: impl Fn() -> bool) -> (Duration, usize, Duration) {
    let mut slowest = Duration::ZERO;
    let mut probes = 0;
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(600) {
        for path in ["/healthz", "/readyz"] {
            let t = std::time::Instant::now();
            let r = agent.admin_get(path).expect("the admin server answers");
            slowest = slowest.max(t.elapsed());
            probes += 1;
            assert_eq!(r.status, 200, "{path}: {}", r.body);
        }
        if done() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (started.elapsed(), probes, slowest)
}

#[test]
fn the_default_ads_socket_admits_this_user_only() {
    use std::os::unix::fs::PermissionsExt;
    let s = setup("private");
    let runtime = temp_dir("private-runtime");
    let _agent = Proc::spawn(
        "aether-edge",
        std::process::Command::new(agent_bin())
            .env("XDG_RUNTIME_DIR", &runtime)
            .args(["standalone", "--config-dir"])
            .arg(&s.dir)
            .args(["--admin-address", &s.admin]),
        &s.logs,
    );
    let socket = runtime.join("aether-edge/ads.sock");
    wait_until(Duration::from_secs(20), "the default ADS socket", || {
        socket.exists().then_some(())
    });
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(socket.parent().unwrap()), 0o700);
    assert_eq!(mode(&socket), 0o600);
    // `bootstrap` without --xds-address points Envoy at the same socket.
    let out = std::process::Command::new(agent_bin())
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["bootstrap", "--node-id", "private"])
        .output()
        .unwrap();
    let bootstrap = String::from_utf8_lossy(&out.stdout);
    assert!(
        bootstrap.contains(&socket.display().to_string()),
        "{bootstrap}"
    );
    let _envoy = envoy(
        "private",
        &format!("unix:{}", socket.display()),
        false,
        &s.logs,
    );
    then_served(&s, "/good", "b0", 30, "traffic over the default socket");
    // Another local user is refused.
    let other = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
        ])
        .arg("import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])")
        .arg(&socket)
        .output()
        .expect("setpriv and python3");
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert!(!other.status.success(), "another user connected");
    assert!(stderr.contains("PermissionError"), "{stderr}");
}

/// The edge pod's preStop step: `aether-edge drain` makes the real Envoy drain
/// its listeners (Envoy runs with a 1 s drain time here), so once the drain is
/// over a new connection is refused while the one before was answered.
#[test]
fn drain_makes_envoy_stop_taking_connections_after_its_drain_time() {
    let s = setup("drain");
    let _agent = s.standalone(&[]);
    let envoy = envoy("drain", &s.xds, true, &s.logs);
    then_served(&s, "/good", "b0", 30, "first route");
    let out = std::process::Command::new(agent_bin())
        .args(["drain", "--envoy-admin", &envoy.admin, "--seconds", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "drain: {out:?}");
    let refused =
        std::net::TcpStream::connect_timeout(&s.gateway.parse().unwrap(), Duration::from_secs(2))
            .is_err()
            || backend_of(&s.gateway, "/good").is_none();
    assert!(refused, "Envoy still takes connections after draining");

    let nowhere = std::process::Command::new(agent_bin())
        .args(["drain", "--envoy-admin", "127.0.0.1:1", "--seconds", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&nowhere.stderr);
    assert!(
        !nowhere.status.success() && err.contains("asking Envoy at 127.0.0.1:1 to drain"),
        "{err}"
    );
}
