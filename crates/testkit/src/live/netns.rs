//! A network namespace per Kubernetes-mode test, so that its backends can have an
//! address the API server takes in an EndpointSlice (it refuses loopback ones) and
//! that exists nowhere else.
//!
//! ```text
//!  cargo test ─► test fn ─► isolated() ─┬─ marker unset: ip netns add aether-t-<pid>-<n>
//!                                       │    lo up, 10.99.0.1/32 on lo
//!                                       │    ip netns exec … <this test binary> <module::test> --exact
//!                                       │    (marker set) ─► asserts it passed, deletes the netns
//!                                       └─ marker set: run the body here
//!  inside:  ApiServer 127.0.0.1 ◄── agent ──ADS 127.0.0.1──► Envoy ──► backends 10.99.0.1
//! ```
//!
//! The test to re-execute is the current thread's name: libtest names each test's
//! thread after the test's full path, module included, which `--exact` wants.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Set (to the namespace's name) in the re-executed test binary.
pub const NETNS_MARKER: &str = "AETHER_EDGE_TEST_NETNS";
/// The backends' address: on `lo` inside the test's namespace only.
pub const POD_IP: &str = "10.99.0.1";
/// A DNS name of [`POD_IP`], inside the test's namespace only: `ip netns exec`
/// lays `/etc/netns/<namespace>/hosts` over `/etc/hosts` for what it runs.
pub const POD_HOSTNAME: &str = "pods.aether.test";

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
        let address = format!("{POD_IP}/32");
        ip(&["-n", &ns.name, "addr", "add", &address, "dev", "lo"]);
        let etc = ns.etc();
        std::fs::create_dir_all(&etc).expect("creating /etc/netns/<namespace>");
        let hosts = format!("127.0.0.1 localhost\n{POD_IP} {POD_HOSTNAME}\n");
        std::fs::write(etc.join("hosts"), hosts).expect("writing the namespace's hosts file");
        ns
    }

    /// What `ip netns exec` lays over `/etc` in this namespace.
    fn etc(&self) -> PathBuf {
        PathBuf::from("/etc/netns").join(&self.name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = std::fs::remove_dir_all(self.etc());
    }
}

fn netns_exists(name: &str) -> bool {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.split_whitespace().next() == Some(name))
}

/// Whether to run the test body here: true inside the test's own namespace. Outside,
/// re-executes the current test (by its full name) in a fresh namespace, prints its
/// output, asserts it passed, removes the namespace, and returns false.
pub fn isolated() -> bool {
    isolated_with(Needs::Cluster)
}

/// [`isolated`] for a test that starts no API server: it does not wait for
/// kube-apiserver and etcd to be built (on a fresh machine, minutes that
/// `make test` spends building them beside the tests that need none).
pub fn isolated_standalone() -> bool {
    isolated_with(Needs::Nothing)
}

/// What an isolated test needs resolved before it runs in its namespace.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Needs {
    /// kube-apiserver, etcd and the Gateway API CRDs.
    Cluster,
    Nothing,
}

fn isolated_with(needs: Needs) -> bool {
    if std::env::var_os(NETNS_MARKER).is_some() {
        return true;
    }
    let thread = std::thread::current();
    let test = match thread.name() {
        Some(name) if name != "main" => name,
        _ => panic!("isolated() must run on a libtest test thread (it is named after the test)"),
    };
    let run = run_isolated(&[test, "--exact", "--nocapture", "--test-threads=1"], needs);
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

/// The usual test body: `body` on a fresh [`runtime`], inside the test's own
/// namespace ([`isolated`]); outside, only the re-run and its verdict.
pub fn in_netns(body: impl std::future::Future<Output = ()>) {
    if isolated() {
        runtime().block_on(body);
    }
}

/// [`isolated`] for a benchmark driver (no test harness): true inside its own
/// namespace; outside, runs this binary again there, asserts it succeeded and
/// returns false.
pub fn isolated_main() -> bool {
    if std::env::var_os(NETNS_MARKER).is_some() {
        return true;
    }
    let run = run_isolated(&[], Needs::Cluster);
    assert!(run.success, "failed in netns {}: {}", run.netns, run.status);
    run.clean_up();
    false
}

/// What one isolated run left.
struct Isolated {
    success: bool,
    status: ExitStatus,
    stdout: String,
    netns: String,
    pid: u32,
}

impl Isolated {
    /// Passed: its logs are not needed (a failure keeps them for the post-mortem,
    /// and so does `AETHER_TESTKIT_KEEP=1`).
    fn clean_up(&self) {
        if std::env::var_os("AETHER_TESTKIT_KEEP").is_some_and(|v| v == "1") {
            return;
        }
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
fn run_isolated(args: &[&str], needs: Needs) -> Isolated {
    let test = args.first().copied().unwrap_or("the benchmark");
    let kube = match needs {
        Needs::Cluster => kube_env().to_vec(),
        Needs::Nothing => Vec::new(),
    };
    let ns = Netns::create();
    let mut child = isolated_command(&ns.name, args, &kube)
        .spawn()
        .expect("ip netns exec");
    // `ip netns exec` execs the test binary: this pid names its temp_dir()s.
    let pid = child.id();
    let stdout_reader = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr_reader = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let (status, timed_out) = wait_or_kill(&mut child, pid);
    let stdout = String::from_utf8_lossy(&stdout_reader.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&stderr_reader.join().unwrap_or_default()).into_owned();
    let name = ns.name.clone();
    drop(ns);
    println!("--- {test} in netns {name} ---\n{stdout}\n{stderr}");
    assert!(
        !timed_out,
        "{test} did not finish within {:?} in netns {name} and was killed (its output is above)",
        child_deadline()
    );
    assert!(!netns_exists(&name), "netns {name} left behind");
    Isolated {
        success: status.success(),
        status,
        stdout,
        netns: name,
        pid,
    }
}

/// `AETHER_KUBE_BIN_DIR` and `AETHER_GATEWAY_API_CRD_DIR` for the child, resolved
/// here, where the Go toolchain may reach its caches; the child only runs.
fn kube_env() -> [(&'static str, PathBuf); 2] {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let bins = rt
        .block_on(crate::kube_bin_dir())
        .expect("kube-apiserver + etcd (conformance/build-tools apiserver)");
    let crds = rt
        .block_on(crate::gateway_api_crd_dir())
        .expect("the Gateway API CRDs from the Go module cache");
    [
        ("AETHER_KUBE_BIN_DIR", bins),
        ("AETHER_GATEWAY_API_CRD_DIR", crds),
    ]
}

/// This binary with `args`, to run in namespace `netns` in a process group of its
/// own: on a deadline, the test and everything it started (API server, etcd,
/// agents, Envoys) go together.
fn isolated_command(netns: &str, args: &[&str], kube: &[(&str, PathBuf)]) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", netns])
        .arg(std::env::current_exe().unwrap())
        .args(args)
        .env(NETNS_MARKER, netns)
        .envs(kube.iter().cloned())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    cmd
}

/// Reads a pipe to its end on a thread of its own.
fn drain(pipe: Option<Box<dyn Read + Send>>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    })
}

/// Waits for the child (process group `pid`) up to the deadline, then kills the
/// whole group either way; whether it had to be killed. A test that hangs (a task
/// that never yields keeps its runtime from shutting down) fails after its deadline
/// instead of holding up the run.
fn wait_or_kill(child: &mut std::process::Child, pid: u32) -> (ExitStatus, bool) {
    let kill_group = || {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stderr(Stdio::null())
            .status();
    };
    let deadline = Instant::now() + child_deadline();
    let outcome = loop {
        if let Some(status) = child.try_wait().expect("wait for the test") {
            break (status, false);
        }
        if Instant::now() >= deadline {
            kill_group();
            break (child.wait().expect("wait for the killed test"), true);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Whatever it started is stopped now too: the pipes close.
    kill_group();
    outcome
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
