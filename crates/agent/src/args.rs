//! The flags more than one command shares: the controller name, the config
//! directory and loader limits (`ConfigArgs`), standalone mode's (`StandaloneArgs`),
//! and what shapes the Envoy config (`XdsArgs`).

use crate::source;
use clap::Args;
use std::path::PathBuf;

/// The controllerName a GatewayClass must name for us to serve its Gateways.
pub const DEFAULT_CONTROLLER_NAME: &str = "gateway.aether.io/edge";

#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// Directory of Gateway API YAML (`*.yaml`, `*.yml`; multi-document files allowed).
    #[arg(long)]
    pub config_dir: PathBuf,
    /// Serve only Gateways whose GatewayClass names this controllerName.
    #[arg(long, default_value = DEFAULT_CONTROLLER_NAME)]
    pub controller_name: String,
    /// Address Gateway listeners bind on when a Gateway has no `spec.addresses`.
    #[arg(long, default_value = "127.0.0.1")]
    pub default_address: String,
    /// A bigger YAML file is not read (an error naming it instead).
    #[arg(long, default_value_t = crate::source::DEFAULT_MAX_FILE_BYTES)]
    pub max_file_bytes: u64,
    /// All YAML files together: a file that would take the directory past this
    /// is not read (an error naming it instead); the files loaded stay.
    #[arg(long, default_value_t = crate::source::DEFAULT_MAX_TOTAL_BYTES)]
    pub max_total_bytes: u64,
    /// Serve XBackends of type ExternalHostname. Off by default: whoever may
    /// write an XBackend could name any host this machine reaches (localhost
    /// and Envoy's admin port, private addresses behind a public name).
    #[arg(long)]
    pub allow_external_hostname_backends: bool,
}

impl ConfigArgs {
    /// What a file must be to be read, with `settle` as the settle window.
    pub fn limits(&self, settle: std::time::Duration) -> crate::source::Limits {
        crate::source::Limits {
            max_file_bytes: self.max_file_bytes,
            max_total_bytes: self.max_total_bytes,
            settle,
        }
    }

    /// The directory, read once and strictly (the one-shot commands).
    pub fn load_once(&self) -> Result<aether_gateway::Store, source::LoadFailure> {
        source::ParseCache::new(self.limits(std::time::Duration::ZERO)).load(&self.config_dir)
    }

    pub fn translate_config(&self) -> aether_gateway::Config {
        aether_gateway::Config {
            controller_name: self.controller_name.clone(),
            default_address: self.default_address.clone(),
            shared_ports: true,
            external_hostnames: self.allow_external_hostname_backends,
        }
    }
}

/// Where standalone ADS listens by default: a unix socket in a directory only
/// this user can enter (ADS carries private keys, and a loopback port is open
/// to every local user).
pub fn default_xds_address() -> String {
    use std::os::unix::fs::MetadataExt;
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_dir());
    let dir = match runtime {
        Some(d) => d.join("aether-edge"),
        None => {
            let uid = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
            std::env::temp_dir().join(format!("aether-edge-{uid}"))
        }
    };
    format!("unix:{}", dir.join("ads.sock").display())
}

#[derive(Debug, Clone, Args)]
pub struct StandaloneArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// ADS (gRPC) listen address: `unix:/path/to/socket` (mode 0600, in a 0700
    /// directory) or, with `--xds-tcp-open-to-local-users`, a loopback
    /// `HOST:PORT`. The default is a socket only this
    /// user can reach, `$XDG_RUNTIME_DIR/aether-edge/ads.sock` (or
    /// `/tmp/aether-edge-<uid>/ads.sock`); `bootstrap` has the same default.
    #[arg(long, default_value_t = default_xds_address())]
    pub xds_address: String,
    /// Admin HTTP listen address (/healthz, /readyz, /metrics, /debug/snapshot, /debug/status).
    #[arg(long, default_value = "127.0.0.1:19001")]
    pub admin_address: String,
    /// `/metrics` alone, on an address Prometheus can reach (e.g. 0.0.0.0:19003).
    #[arg(long)]
    pub metrics_address: Option<String>,
    /// Publish a configuration with no Gateway over a running one that has some
    /// (by default that is refused, logged and counted: an emptied or half-copied
    /// directory would take every listener down).
    #[arg(long)]
    pub allow_empty_config: bool,
    /// The quiet period: a file written in place (or removed) is read once no
    /// file of the directory has been written in place or removed for this
    /// many milliseconds, so an edit in several steps is never read half-done.
    /// A file moved into place (rename, a ConfigMap swap) is read at once.
    #[arg(long, default_value_t = 1000)]
    pub settle_ms: u64,
    /// Where the last configuration served is kept, so a restart with a broken
    /// file serves it (default `$XDG_STATE_HOME/aether-edge`, else
    /// `~/.local/state/aether-edge`).
    #[arg(long, env = "AETHER_EDGE_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    #[command(flatten)]
    pub xds: XdsArgs,
}

/// How ADS serves changes to each Envoy.
#[derive(Debug, Clone, Args)]
pub struct XdsArgs {
    /// How long a cluster, its endpoints or a secret stays on an Envoy after the
    /// config that named it was replaced and ACKed, so requests already routed
    /// to it finish (make-before-break; 0 removes it as soon as that ACK came).
    #[arg(long, default_value_t = aether_ads::DEFAULT_REMOVAL_GRACE.as_secs())]
    pub removal_grace_seconds: u64,
    /// Accept a loopback TCP `--xds-address`. ADS is not authenticated and
    /// carries every TLS private key: any local user (any process on the node)
    /// can connect to a TCP port and read them all. Without this flag only a
    /// unix socket (mode 0600, in a directory only this user can write) is served.
    #[arg(long)]
    pub xds_tcp_open_to_local_users: bool,
    /// Envoy's access log on its stdout: one JSON object per request (HTTP) or
    /// connection (TCP), Envoy's default text line, or none.
    #[arg(long, value_enum, default_value = "json")]
    pub access_log: AccessLogFormat,
    /// Every TCP listener expects a PROXY protocol (v1 or v2) header first and
    /// takes the client's address from it: set this when a load balancer that
    /// sends one (e.g. AWS NLB with proxy protocol v2) is in front of Envoy.
    /// A connection without the header is closed, so only that load balancer
    /// may reach Envoy's ports: any other client could claim any address.
    #[arg(long)]
    pub proxy_protocol: bool,
}

/// `--access-log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AccessLogFormat {
    Json,
    Text,
    Off,
}

impl XdsArgs {
    /// Builds Envoy's resources as these flags say (access log, PROXY protocol).
    pub fn builder(&self) -> aether_xds::Builder {
        let log = match self.access_log {
            AccessLogFormat::Json => aether_xds::AccessLog::Json,
            AccessLogFormat::Text => aether_xds::AccessLog::Text,
            AccessLogFormat::Off => aether_xds::AccessLog::Off,
        };
        let proxy = if self.proxy_protocol {
            aether_xds::ProxyProtocol::Required
        } else {
            aether_xds::ProxyProtocol::Off
        };
        aether_xds::Builder::with_access_log(log).with_proxy_protocol(proxy)
    }

    pub fn removal_grace(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.removal_grace_seconds)
    }

    /// `address` if ADS may serve on it: a unix socket, or TCP when the flag
    /// says every local user may read the keys.
    pub fn checked_address<'a>(&self, address: &'a str) -> anyhow::Result<&'a str> {
        if address.starts_with("unix:") || self.xds_tcp_open_to_local_users {
            return Ok(address);
        }
        anyhow::bail!(
            "--xds-address {address} is a TCP port: every local user can connect to it and read \
             every TLS private key ADS carries. Use a unix socket (the default), or pass \
             --xds-tcp-open-to-local-users to accept that"
        )
    }
}
