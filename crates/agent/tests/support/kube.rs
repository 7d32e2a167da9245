//! Kubernetes-mode live kit: each test runs in a network namespace of its own, with a
//! real kube-apiserver (aether_testkit), the real `aether-edge agent`, a real Envoy
//! and backends on an address that exists only in that namespace.
//!
//! ```text
//!  cargo test ─► test fn ─► isolated("name") ─┬─ marker unset: ip netns add aether-t-<pid>-<n>
//!                                             │    lo up, 10.99.0.1/32 on lo
//!                                             │    ip netns exec … <this test binary> name --exact
//!                                             │    (marker set) ─► asserts it passed, deletes the netns
//!                                             └─ marker set: run the body here
//!  inside:  ApiServer 127.0.0.1 ◄── agent ──ADS 127.0.0.1──► Envoy ──► backends 10.99.0.1
//! ```
//!
//! The API server rejects loopback addresses in EndpointSlices, and no test address
//! may exist in the host namespace: hence the namespace and its private address.

use super::{Proc, Response, agent_bin, free_port, http_get, serve_backend_conn};
use serde_json::Value;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Set (to the namespace's name) in the re-executed test binary.
pub const NETNS_MARKER: &str = "AETHER_EDGE_TEST_NETNS";
/// The backends' address: on `lo` inside the test's namespace only.
pub const POD_IP: &str = "10.99.0.1";

/// A network namespace deleted on drop (also when the test panics).
struct Netns {
    name: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    fn create() -> Netns {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "aether-t-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        let ns = Netns { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
        ip(&[
            "-n",
            &ns.name,
            "addr",
            "add",
            &format!("{POD_IP}/32"),
            "dev",
            "lo",
        ]);
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn netns_exists(name: &str) -> bool {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.split_whitespace().next() == Some(name))
}

/// Whether to run the test body here: true inside the test's own namespace. Outside,
/// re-executes `test` (its exact name) in a fresh namespace, prints its output,
/// asserts it passed, removes the namespace, and returns false.
pub fn isolated(test: &str) -> bool {
    if std::env::var_os(NETNS_MARKER).is_some() {
        return true;
    }
    let run = run_isolated(&[test, "--exact", "--nocapture", "--test-threads=1"]);
    assert!(
        run.success && run.stdout.contains("test result: ok. 1 passed"),
        "{test} failed in netns {}: {} (its output is above; process logs in {}/aether-edge-live-kube-*-{}-*)",
        run.netns,
        run.status,
        std::env::temp_dir().display(),
        run.pid
    );
    run.clean_up();
    false
}

/// [`isolated`] for a benchmark driver (no test harness): true inside its own
/// namespace; outside, runs this binary again there, asserts it succeeded and
/// returns false.
pub fn isolated_main() -> bool {
    if std::env::var_os(NETNS_MARKER).is_some() {
        return true;
    }
    let run = run_isolated(&[]);
    assert!(run.success, "failed in netns {}: {}", run.netns, run.status);
    run.clean_up();
    false
}

/// What one isolated run left.
struct Isolated {
    success: bool,
    status: std::process::ExitStatus,
    stdout: String,
    netns: String,
    pid: u32,
}

impl Isolated {
    /// Passed: its logs are not needed (a failure keeps them for the post-mortem).
    fn clean_up(&self) {
        let mine = format!("-{}-", self.pid);
        for entry in std::fs::read_dir(std::env::temp_dir())
            .into_iter()
            .flatten()
            .flatten()
        {
            let file_name = entry.file_name();
            let n = file_name.to_string_lossy();
            if n.starts_with("aether-edge-live-kube-") && n.contains(&mine) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// Runs this binary with `args` in a fresh namespace, prints its output, and
/// asserts it finished in time and left no namespace behind.
fn run_isolated(args: &[&str]) -> Isolated {
    let test = args.first().copied().unwrap_or("the benchmark");
    // Resolved here, where the Go toolchain may reach its caches; the child only runs.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let bins = rt
        .block_on(aether_testkit::kube_bin_dir())
        .expect("kube-apiserver + etcd (conformance/build-tools apiserver)");
    let crds = rt
        .block_on(aether_testkit::gateway_api_crd_dir())
        .expect("the Gateway API CRDs from the Go module cache");
    let ns = Netns::create();
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(std::env::current_exe().unwrap())
        .args(args)
        .env(NETNS_MARKER, &ns.name)
        .env("AETHER_KUBE_BIN_DIR", bins)
        .env("AETHER_GATEWAY_API_CRD_DIR", crds)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // Its own process group: on a deadline, the test and everything it
        // started (API server, etcd, agents, Envoys) go together.
        .process_group(0)
        .spawn()
        .expect("ip netns exec");
    // `ip netns exec` execs the test binary: this pid names its temp_dir()s.
    let pid = child.id();
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout_reader = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr_reader = drain(child.stderr.take().map(|p| Box::new(p) as _));
    // A test that hangs (a task that never yields keeps its runtime from
    // shutting down) fails after its deadline instead of holding up the run.
    let deadline = Instant::now() + child_deadline();
    let (status, timed_out) = loop {
        if let Some(status) = child.try_wait().expect("wait for the test") {
            break (status, false);
        }
        if Instant::now() >= deadline {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
            break (child.wait().expect("wait for the killed test"), true);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Whatever it started is stopped now too: the pipes close.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .stderr(std::process::Stdio::null())
        .status();
    let out = std::process::Output {
        status,
        stdout: stdout_reader.join().unwrap_or_default(),
        stderr: stderr_reader.join().unwrap_or_default(),
    };
    let name = ns.name.clone();
    drop(ns);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("--- {test} in netns {name} ---\n{stdout}\n{stderr}");
    assert!(
        !timed_out,
        "{test} did not finish within {:?} in netns {name} and was killed (its output is above)",
        child_deadline()
    );
    assert!(!netns_exists(&name), "netns {name} left behind");
    Isolated {
        success: out.status.success(),
        status: out.status,
        stdout: stdout.into_owned(),
        netns: name,
        pid,
    }
}

/// How long one isolated test may run (`AETHER_KUBE_TEST_DEADLINE_SECS`, 600 s).
fn child_deadline() -> Duration {
    let secs = std::env::var("AETHER_KUBE_TEST_DEADLINE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    Duration::from_secs(secs)
}

/// A multi-threaded runtime for a test body.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `aether-edge agent` against a test API server; killed on drop.
pub struct KubeAgent {
    pub proc: Proc,
    pub admin: String,
    pub xds: String,
    /// Where it takes fleet reports when it leads.
    pub report: String,
    pub pod: String,
    args: Vec<String>,
    log_dir: PathBuf,
    starts: u32,
}

/// Where [`KubeAgent::start_as`] tells agent `pod` its report token is.
fn token_file(log_dir: &Path, pod: &str) -> PathBuf {
    log_dir.join(format!("{pod}.report-token"))
}

/// Gives agent `pod` on `node` what a kubelet would project for it: a token of
/// the edge ServiceAccount bound to its Pod (created if missing), for the
/// report port. Without it the agent cannot report to a leader.
pub async fn issue_report_token(
    server: &aether_testkit::ApiServer,
    node: &str,
    pod: &str,
    log_dir: &Path,
) {
    let token = server
        .pod_token(
            "aether-ingress",
            "aether-edge",
            pod,
            node,
            aether_report::auth::AUDIENCE,
        )
        .await
        .unwrap();
    std::fs::write(token_file(log_dir, pod), token).unwrap();
}

impl KubeAgent {
    /// Node `node-a`, pod `agent-a`, edge namespace `aether-ingress`; `extra` are
    /// further flags (e.g. `--address-mode static`).
    pub fn start(kubeconfig: &Path, extra: &[&str], log_dir: &Path) -> KubeAgent {
        KubeAgent::start_as("node-a", "agent-a", kubeconfig, extra, log_dir)
    }

    /// An agent for node `node` (its Envoy's node id) with leader identity `pod`.
    pub fn start_as(
        node: &str,
        pod: &str,
        kubeconfig: &Path,
        extra: &[&str],
        log_dir: &Path,
    ) -> KubeAgent {
        let xds = format!("127.0.0.1:{}", free_port());
        let admin = format!("127.0.0.1:{}", free_port());
        let report = format!("127.0.0.1:{}", free_port());
        let mut args: Vec<String> = vec!["agent".into(), "--kubeconfig".into()];
        args.push(kubeconfig.display().to_string());
        args.push("--report-token-file".into());
        args.push(token_file(log_dir, pod).display().to_string());
        for a in [
            "--node-name",
            node,
            "--pod-name",
            pod,
            "--namespace",
            "aether-ingress",
            "--xds-address",
            &xds,
            "--admin-address",
            &admin,
            "--report-address",
            &report,
            "--advertise-address",
            "127.0.0.1",
            "--log-level",
            "info,aether_ads=debug,aether_k8s::status=debug",
        ] {
            args.push(a.to_string());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let proc = Proc::spawn(
            &format!("{pod}-1"),
            Command::new(agent_bin()).args(&args),
            log_dir,
        );
        KubeAgent {
            proc,
            admin,
            xds,
            report,
            pod: pod.to_string(),
            args,
            log_dir: log_dir.to_path_buf(),
            starts: 1,
        }
    }

    /// SIGKILL, then the same command again (same ports).
    pub fn restart(&mut self) {
        self.proc.kill();
        self.starts += 1;
        self.proc = Proc::spawn(
            &format!("{}-{}", self.pod, self.starts),
            Command::new(agent_bin()).args(&self.args),
            &self.log_dir,
        );
    }

    /// SIGKILL, then the same command with `extra` flags appended.
    pub fn restart_with(&mut self, extra: &[&str]) {
        self.args.extend(extra.iter().map(|s| s.to_string()));
        self.restart();
    }

    /// SIGKILL, then the same command with `drop` flags (and their values) left out.
    pub fn restart_without(&mut self, drop: &[&str]) {
        let mut args = Vec::new();
        let mut skip = false;
        for a in std::mem::take(&mut self.args) {
            if skip {
                skip = false;
            } else if drop.contains(&a.as_str()) {
                skip = true;
            } else {
                args.push(a);
            }
        }
        self.args = args;
        self.restart();
    }

    pub fn get(&self, path: &str) -> Option<Response> {
        http_get(&self.admin, "localhost", path, &[]).ok()
    }

    pub fn metrics(&self) -> String {
        self.get("/metrics").map(|r| r.body).unwrap_or_default()
    }

    pub fn snapshot(&self) -> Option<Value> {
        let r = self.get("/debug/snapshot")?;
        (r.status == 200)
            .then(|| serde_json::from_str(&r.body).ok())
            .flatten()
    }

    /// Whether `node` has ACKed every resource of the current snapshot at its version.
    pub fn node_acked_all(&self, node: &str) -> bool {
        self.snapshot().is_some_and(|s| snapshot_acked(&s, node))
    }
}

/// Every resource in `versions` ACKed by `node` at that version.
pub fn snapshot_acked(s: &Value, node: &str) -> bool {
    let Some(versions) = s["versions"].as_object() else {
        return false;
    };
    let acked = &s["nodes"]["nodes"][node]["acked"];
    versions.iter().all(|(ty, by_name)| {
        by_name
            .as_object()
            .is_some_and(|m| m.iter().all(|(name, v)| acked[ty]["resources"][name] == *v))
    })
}

/// A backend on [`POD_IP`] answering `<name> <path> <host>`.
pub struct PodBackend {
    pub name: String,
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl PodBackend {
    pub fn start(name: &str) -> PodBackend {
        let listener = TcpListener::bind((POD_IP, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let (n, s) = (name.to_string(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let n = n.clone();
                std::thread::spawn(move || serve_backend_conn(conn, &n));
            }
        });
        PodBackend {
            name: name.to_string(),
            port,
            stop,
        }
    }

    /// Its Service (port 80 → the backend port) and EndpointSlice (address [`POD_IP`]).
    pub fn yaml(&self, ns: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  ports:\n  - {{name: http, port: 80, targetPort: {port}}}\n---\n\
             apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports:\n- {{name: http, port: {port}}}\nendpoints:\n- addresses: [\"{POD_IP}\"]\n  conditions: {{ready: true}}\n",
            name = self.name,
            port = self.port,
        )
    }
}

impl Drop for PodBackend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect((POD_IP, self.port));
    }
}

/// The namespaces, the `aether` GatewayClass: what every Kubernetes test needs first.
pub fn base_yaml(namespaces: &[&str]) -> String {
    let mut y = String::new();
    for ns in std::iter::once(&"aether-ingress").chain(namespaces) {
        y.push_str(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\n"
        ));
    }
    y.push_str(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n",
    );
    y
}

/// An object as JSON (`None` while it does not exist or cannot be read).
pub async fn get_json<K>(client: &kube::Client, ns: Option<&str>, name: &str) -> Option<Value>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: kube::Api<K> = kube::Api::namespaced(client.clone(), ns.unwrap_or("default"));
    let obj = api.get_opt(name).await.ok()??;
    serde_json::to_value(obj).ok()
}

/// The condition of `type_` in a `conditions` array.
pub fn condition<'a>(conditions: &'a Value, type_: &str) -> Option<&'a Value> {
    conditions.as_array()?.iter().find(|c| c["type"] == type_)
}

/// `(status, reason)` of a condition, for terse assertions.
pub fn status_reason(conditions: &Value, type_: &str) -> Option<(String, String)> {
    let c = condition(conditions, type_)?;
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
    ))
}

/// Our route parent entry for Gateway `gateway` (and section, if any).
pub fn our_parent<'a>(route: &'a Value, gateway: &str, section: Option<&str>) -> Option<&'a Value> {
    route["status"]["parents"].as_array()?.iter().find(|p| {
        p["controllerName"] == "gateway.aether.io/edge"
            && p["parentRef"]["name"] == gateway
            && p["parentRef"]["sectionName"].as_str() == section
    })
}

/// Polls `f` (async) every 20 ms until `Some`, else panics naming `what` and the last value.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(last) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Median and 99th percentile (nearest rank) of `samples`, sorted in place.
pub fn median_p99(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let n = samples.len();
    assert!(n > 0);
    let rank = |q: f64| samples[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
    (rank(0.5), rank(0.99))
}

/// `Ok` once route `ns/name` has our parent entry for Gateway `gateway` with
/// Accepted=True/Accepted; otherwise what it has (for `eventually`'s message).
pub async fn route_accepted(
    client: &kube::Client,
    ns: &str,
    name: &str,
    gateway: &str,
) -> Result<(), String> {
    let r = get_json::<gateway_api::apis::standard::httproutes::HttpRoute>(client, Some(ns), name)
        .await
        .ok_or("no such route")?;
    let a = our_parent(&r, gateway, None).and_then(|p| status_reason(&p["conditions"], "Accepted"));
    if a == Some(("True".into(), "Accepted".into())) {
        Ok(())
    } else {
        Err(format!("{a:?}"))
    }
}
