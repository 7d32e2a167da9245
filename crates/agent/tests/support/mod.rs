//! The agent's tests and benches on [`aether_testkit::live`]: the kit, with this
//! crate's `aether-edge` binary passed in (only this crate's targets know its path).
#![allow(dead_code, unused_imports)] // the test binaries and the benches each use a part

use std::path::Path;
use std::time::Duration;

pub mod change;
pub mod xbackend;

pub use aether_testkit::live::*;
pub use aether_testkit::{envoy_bin, metric_sum, status_writes};
pub use xbackend::*;

pub fn agent_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_aether-edge"))
}

/// One agent, leading without an election, its listeners on [`POD_IP`].
pub const STATIC_AT_POD_IP: [&str; 5] = [
    "--leader-elect=false",
    "--address-mode",
    "static",
    "--default-address",
    POD_IP,
];

/// A real Envoy for node `node_id` on ADS at `xds` (Delta when `delta`).
pub fn envoy(node_id: &str, xds: &str, delta: bool, log_dir: &Path) -> Envoy {
    Envoy::start(agent_bin(), node_id, xds, delta, log_dir)
}

/// One edge node in Kubernetes mode: the API server, an agent (a [`KubeAgent`]
/// unless a test runs its own), its Envoy and backend `b0`. Fields drop in order,
/// the API server last.
pub struct OneNode<A = KubeAgent> {
    pub client: kube::Client,
    pub agent: A,
    /// The controller (`--role controller`) of [`OneNode::deployed`]; none where
    /// the agent writes itself (`--role all`).
    pub controller: Option<Controller>,
    pub envoy: Envoy,
    pub b0: Backend,
    pub server: aether_testkit::ApiServer,
}

impl OneNode {
    /// `aether-edge agent` with `flags` on `server` (its objects already applied),
    /// and a Delta Envoy on the agent's ADS.
    pub fn start(
        server: aether_testkit::ApiServer,
        b0: Backend,
        flags: &[&str],
        logs: &Path,
    ) -> Self {
        let agent = kube_agent(server.kubeconfig_path(), flags, logs);
        let xds = agent.xds.clone();
        OneNode::with(server, b0, agent, &xds, logs)
    }
}

impl OneNode<Proc> {
    /// As deploy/ runs it: deploy/'s namespace, RBAC and GatewayClass, then
    /// `app` (YAML documents); the edge agent `agent-a` (`--role edge`) on node
    /// `node-a` with the edge ServiceAccount's token and its pod-bound report
    /// token, ADS on a socket; the controller `controller-a` (`--role
    /// controller`, leader election on) with the writer ServiceAccount's token,
    /// taking reports over TLS; a Delta Envoy on the socket.
    pub async fn deployed(tag: &str, app: &str, b0: Backend) -> Self {
        let logs = temp_dir(tag);
        let server = aether_testkit::ApiServer::start().await;
        for file in ["00-namespace.yaml", "10-rbac.yaml", "20-gatewayclass.yaml"] {
            server.apply(&deploy_file(file)).await.unwrap();
        }
        server.apply(app).await.unwrap();
        let controller = deployed_controller(&server, tag, &logs).await;
        let kubeconfig = server
            .service_account_kubeconfig("aether-ingress", "aether-edge")
            .await
            .unwrap();
        issue_report_token(&server, "node-a", "agent-a", &logs).await;
        let token = logs.join("agent-a.report-token");
        let socket = format!("unix:{}", logs.join("run/ads.sock").display());
        let admin = format!("127.0.0.1:{}", free_port());
        let agent = Proc::spawn(
            &format!("agent-{tag}"),
            std::process::Command::new(agent_bin())
                .args(["agent", "--role", "edge", "--kubeconfig"])
                .arg(&kubeconfig)
                .args(["--namespace", "aether-ingress", "--node-name", "node-a"])
                .args(["--pod-name", "agent-a"])
                .args(["--xds-address", &socket, "--admin-address", &admin])
                .arg("--report-token-file")
                .arg(&token),
            &logs,
        );
        let mut world = OneNode::with(server, b0, agent, &socket, &logs);
        world.controller = Some(controller);
        world
    }
}

/// `aether-edge agent --role controller`, killed on drop.
pub struct Controller {
    pub proc: Proc,
    pub admin: String,
}

impl Controller {
    pub fn metrics(&self) -> String {
        http_get(&self.admin, "localhost", "/metrics", &[])
            .map(|r| r.body)
            .unwrap_or_default()
    }
}

/// The controller as 35-controller.yaml runs it: `controller-a`, under the
/// writer ServiceAccount, leader election on, reports on a loopback port.
pub async fn deployed_controller(
    server: &aether_testkit::ApiServer,
    tag: &str,
    logs: &Path,
) -> Controller {
    let kubeconfig = server
        .service_account_kubeconfig("aether-ingress", "aether-edge-controller")
        .await
        .unwrap();
    let admin = format!("127.0.0.1:{}", free_port());
    let report = format!("127.0.0.1:{}", free_port());
    let proc = Proc::spawn(
        &format!("controller-{tag}"),
        std::process::Command::new(agent_bin())
            .args(["agent", "--role", "controller", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--namespace", "aether-ingress", "--node-name", "node-c"])
            .args([
                "--pod-name",
                "controller-a",
                "--advertise-address",
                "127.0.0.1",
            ])
            .args(["--admin-address", &admin, "--report-address", &report]),
        logs,
    );
    Controller { proc, admin }
}

/// Where the leader takes reports and the certificate it serves there, as
/// its Lease (`aether-ingress/aether-edge`) names them, once it does.
pub async fn leader_endpoint(client: &kube::Client) -> aether_report::client::LeaderEndpoint {
    eventually(
        Duration::from_secs(30),
        "the leader's report endpoint",
        || {
            let client = client.clone();
            async move {
                let holder =
                    aether_k8s::leader::current_leader(&client, "aether-ingress", "aether-edge")
                        .await
                        .ok_or("no leader yet")?;
                match (holder.report_address, holder.report_certificate) {
                    (Some(address), Some(certificate)) => {
                        Ok(aether_report::client::LeaderEndpoint {
                            address,
                            certificate,
                        })
                    }
                    other => Err(format!("{other:?}")),
                }
            }
        },
    )
    .await
}

/// A file of deploy/, as the repository has it.
pub fn deploy_file(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

impl<A> OneNode<A> {
    /// `agent`, already running on `server`, and a Delta Envoy on its ADS at `xds`.
    pub fn with(
        server: aether_testkit::ApiServer,
        b0: Backend,
        agent: A,
        xds: &str,
        logs: &Path,
    ) -> Self {
        let envoy = envoy("node-a", xds, true, logs);
        OneNode {
            client: server.client(),
            agent,
            controller: None,
            envoy,
            b0,
            server,
        }
    }
}

/// `aether-edge agent` as node `node-a`, pod `agent-a`; `extra` are further flags
/// (e.g. `--address-mode static`).
pub fn kube_agent(kubeconfig: &Path, extra: &[&str], log_dir: &Path) -> KubeAgent {
    KubeAgent::start(agent_bin(), "node-a", "agent-a", kubeconfig, extra, log_dir)
}

/// [`aether_testkit::live::issue_report_token`] for the report port's audience.
pub async fn issue_report_token(
    server: &aether_testkit::ApiServer,
    node: &str,
    pod: &str,
    log_dir: &Path,
) {
    let audience = aether_report::auth::AUDIENCE;
    aether_testkit::live::issue_report_token(server, node, pod, audience, log_dir).await
}

/// The `key` microseconds of every line of an agent's log containing `message`
/// (the benches read the agent's own stage timers this way).
pub fn field_us(log: &str, message: &str, key: &str) -> Vec<std::time::Duration> {
    log.lines()
        .filter(|l| l.contains(message))
        .filter_map(|l| log_field(l, key))
        .map(std::time::Duration::from_micros)
        .collect()
}

/// Per log line that contains `message` and every one of `keys`, their numbers
/// in the order of `keys` (e.g. `["translate_us=", "build_us="]`).
pub fn log_fields<const N: usize>(log: &str, message: &str, keys: [&str; N]) -> Vec<[u64; N]> {
    log.lines()
        .filter(|l| l.contains(message))
        .filter_map(|l| {
            let mut out = [0; N];
            for (slot, key) in out.iter_mut().zip(keys) {
                *slot = log_field(l, key)?;
            }
            Some(out)
        })
        .collect()
}

/// The number after `key` (e.g. `build_us=`) in one log line; an `Option`'s
/// `Some(n)` reads as `n`.
pub fn log_field(line: &str, key: &str) -> Option<u64> {
    let v = line.split(key).nth(1)?.split_whitespace().next()?;
    let v = v
        .strip_prefix("Some(")
        .map_or(v, |v| v.trim_end_matches(')'));
    v.parse().ok()
}

/// One bench line: median, p99 and max of `samples`, in ms.
pub fn print_line(what: &str, samples: &mut [std::time::Duration]) {
    if samples.is_empty() {
        println!("  {what}: no samples");
        return;
    }
    let (p50, p99) = median_p99(samples);
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    println!(
        "  {what}: median {:.1} ms, p99 {:.1} ms, max {:.1} ms over {}",
        ms(p50),
        ms(p99),
        ms(*samples.iter().max().unwrap()),
        samples.len()
    );
}
