//! A real Envoy bootstrapped by `aether-edge bootstrap`.

use std::path::Path;
use std::process::Command;

use super::{Proc, free_port};
use crate::envoy_bin;

pub struct Envoy {
    pub proc: Proc,
    pub admin: String,
}

impl Envoy {
    /// Envoy node `node_id` on ADS at `xds` (SotW, or Delta when `delta`), its
    /// bootstrap written by `agent_bin bootstrap`.
    pub fn start(agent_bin: &Path, node_id: &str, xds: &str, delta: bool, log_dir: &Path) -> Envoy {
        Self::start_with(agent_bin, node_id, xds, delta, log_dir, &[])
    }

    /// [`Envoy::start`] with more `bootstrap` flags.
    pub fn start_with(
        agent_bin: &Path,
        node_id: &str,
        xds: &str,
        delta: bool,
        log_dir: &Path,
        bootstrap_flags: &[&str],
    ) -> Envoy {
        let admin = format!("127.0.0.1:{}", free_port());
        let mut cmd = Command::new(agent_bin);
        cmd.args(["bootstrap", "--node-id", node_id, "--xds-address", xds])
            .args(["--admin-address", &admin])
            .args(bootstrap_flags);
        if !delta {
            cmd.arg("--sotw");
        }
        let out = cmd.output().expect("aether-edge bootstrap");
        assert!(out.status.success(), "bootstrap failed: {out:?}");
        let path = log_dir.join(format!("envoy-{node_id}.yaml"));
        std::fs::write(&path, &out.stdout).unwrap();
        let mut envoy = Command::new(envoy_bin());
        envoy
            .arg("-c")
            .arg(&path)
            // Several Envoys run at once: let each pick a free shared-memory id.
            .args(["--log-level", "warn", "--use-dynamic-base-id"])
            .args(["--drain-time-s", "1", "--parent-shutdown-time-s", "2"]);
        // To follow a change through Envoy (`config:debug,rds:debug`), with
        // microsecond timestamps to line up with the agent's log.
        if let Ok(levels) = std::env::var("AETHER_TESTKIT_ENVOY_LOG") {
            envoy.args(["--component-log-level", &levels]);
            envoy.args(["--log-format", "[%Y-%m-%dT%T.%fZ][%t][%l][%n] %v"]);
        }
        let proc = Proc::spawn(&format!("envoy-{node_id}"), &mut envoy, log_dir);
        Envoy { proc, admin }
    }
}
