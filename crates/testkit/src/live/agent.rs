//! `aether-edge standalone` on a config directory.

use std::path::Path;
use std::process::Command;

use super::{Proc, Response, http_get};

pub struct Agent {
    pub proc: Proc,
    pub xds: String,
    pub admin: String,
}

impl Agent {
    /// `agent_bin standalone` serving `config_dir` with ADS on `xds`, admin on
    /// `admin`, and `flags` appended.
    pub fn start(
        agent_bin: &Path,
        config_dir: &Path,
        xds: &str,
        admin: &str,
        log_dir: &Path,
        flags: &[&str],
    ) -> Agent {
        let proc = Proc::spawn(
            "aether-edge",
            Command::new(agent_bin)
                // The last configuration served is kept with the test's logs.
                .env("AETHER_EDGE_STATE_DIR", log_dir.join("state"))
                .arg("standalone")
                .arg("--config-dir")
                .arg(config_dir)
                .args(["--xds-address", xds, "--admin-address", admin])
                .args(tcp_xds_flag(xds))
                .args(["--log-level", "info,aether_ads=debug"])
                .args(flags),
            log_dir,
        );
        Agent {
            proc,
            xds: xds.to_string(),
            admin: admin.to_string(),
        }
    }

    pub fn admin_get(&self, path: &str) -> Option<Response> {
        http_get(&self.admin, "localhost", path, &[]).ok()
    }
}

/// The flag a loopback TCP `--xds-address` needs (tests talk TCP to Envoys
/// they start themselves; production uses the unix socket).
pub fn tcp_xds_flag(xds: &str) -> Option<&'static str> {
    (!xds.starts_with("unix:")).then_some("--xds-tcp-open-to-local-users")
}
