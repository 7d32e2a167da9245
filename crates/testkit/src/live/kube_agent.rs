//! `aether-edge agent` against a test API server, as one pod of the DaemonSet:
//! node `node`, leader identity `pod`, edge namespace `aether-ingress`.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Proc, Response, free_port, http_get};
use crate::ApiServer;

/// Killed on drop.
pub struct KubeAgent {
    pub proc: Proc,
    pub admin: String,
    pub xds: String,
    /// Where it takes fleet reports when it leads.
    pub report: String,
    pub pod: String,
    bin: PathBuf,
    args: Vec<String>,
    log_dir: PathBuf,
    starts: u32,
}

/// Where [`KubeAgent::start`] tells agent `pod` its report token is.
fn token_file(log_dir: &Path, pod: &str) -> PathBuf {
    log_dir.join(format!("{pod}.report-token"))
}

/// Gives agent `pod` on `node` what a kubelet would project for it: a token of
/// the edge ServiceAccount bound to its Pod (created if missing), for the
/// report port's `audience`. Without it the agent cannot report to a leader.
pub async fn issue_report_token(
    server: &ApiServer,
    node: &str,
    pod: &str,
    audience: &str,
    log_dir: &Path,
) {
    let token = server
        .pod_token("aether-ingress", "aether-edge", pod, node, audience)
        .await
        .unwrap();
    std::fs::write(token_file(log_dir, pod), token).unwrap();
}

impl KubeAgent {
    /// `agent_bin agent` for node `node` (its Envoy's node id) with leader identity
    /// `pod`, on fresh loopback ports; `extra` are further flags (e.g.
    /// `--address-mode static`).
    pub fn start(
        agent_bin: &Path,
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
            "--xds-tcp-open-to-local-users",
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
            Command::new(agent_bin).args(&args),
            log_dir,
        );
        KubeAgent {
            proc,
            admin,
            xds,
            report,
            pod: pod.to_string(),
            bin: agent_bin.to_path_buf(),
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
            Command::new(&self.bin).args(&self.args),
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
