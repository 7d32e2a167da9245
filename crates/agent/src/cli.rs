//! The command line: a contract scripts and users rely on (see ARCHITECTURE.md).
//!
//! ```text
//! aether-edge standalone --config-dir DIR [--xds-address H:P] [--admin-address H:P]
//! aether-edge status     --config-dir DIR      # computed status as Kubernetes YAML
//! aether-edge translate  --config-dir DIR      # Envoy resources as YAML
//! aether-edge bootstrap  --node-id ID --xds-address H:P [--admin-address H:P]
//! aether-edge explain    [METHOD] URL [-H 'k: v'] [--sni N] (--config-dir DIR | --admin H:P)
//! aether-edge agent      --node-name NODE [--namespace NS] ...   # Kubernetes mode
//! ```

use crate::logging::{self, LogFormat};
use crate::{source, standalone};
use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// The controllerName a GatewayClass must name for us to serve its Gateways.
pub const DEFAULT_CONTROLLER_NAME: &str = "gateway.aether.io/edge";

#[derive(Debug, Parser)]
#[command(
    name = "aether-edge",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("AETHER_EDGE_COMMIT"), ")"),
    about = "Envoy xDS control plane and Kubernetes Gateway API controller",
    propagate_version = true
)]
struct Cli {
    /// Log output format.
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Log filter, e.g. `info` or `aether_ads=debug,info`.
    #[arg(long, global = true, env = "AETHER_EDGE_LOG", default_value = "info", value_parser = logging::parse_filter)]
    log_level: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve xDS (ADS over gRPC) for the Gateway API YAML in a directory; reload on change.
    Standalone(StandaloneArgs),
    /// Print the computed status of every object as Kubernetes-shaped YAML, then exit.
    Status(ConfigArgs),
    /// Print the Envoy resources built from the directory as YAML, then exit.
    Translate(ConfigArgs),
    /// Print an Envoy bootstrap that connects to an aether-edge ADS server.
    Bootstrap(BootstrapArgs),
    /// Say what the edge does with one request, and why (offline on a directory,
    /// or live against a running aether-edge's admin address).
    Explain(crate::explain::ExplainArgs),
    /// Kubernetes mode, like kubectl: per Gateway and per node, whether each Envoy
    /// serves the leader's config (the hash it ACKed, NACK text, how long behind).
    Fleet(crate::fleet_cmd::FleetArgs),
    /// Kubernetes mode: the edge agent beside Envoy and the GatewayClass controller.
    Agent(Box<crate::kubernetes::AgentArgs>),
    /// Tell the local Envoy to drain its listeners gracefully, then wait (the
    /// edge pod's preStop step, so clients move before Envoy stops).
    Drain(crate::drain::DrainArgs),
    /// Print a shell completion script, e.g. `aether-edge completions bash >
    /// /etc/bash_completion.d/aether-edge`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Where the Gateway API objects come from and how they are interpreted.
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

#[derive(Debug, Clone, Args)]
struct BootstrapArgs {
    /// Envoy node id (unique per Envoy).
    #[arg(long)]
    node_id: String,
    /// Envoy node cluster.
    #[arg(long, default_value = "aether-edge")]
    node_cluster: String,
    /// The ADS server: `unix:/path/to/socket` or `HOST:PORT` (the default is
    /// `standalone`'s default socket).
    #[arg(long, default_value_t = default_xds_address())]
    xds_address: String,
    /// Where Envoy's own admin interface listens.
    #[arg(long, default_value = "127.0.0.1:19000")]
    admin_address: String,
    /// Use the state-of-the-world ADS protocol instead of the incremental
    /// (Delta) one, the default: with SotW every change resends every resource
    /// of its type, which at thousands of routes costs Envoy more than the change.
    #[arg(long, conflicts_with = "delta")]
    sotw: bool,
    /// Delta ADS (the default; kept for scripts that ask for it).
    #[arg(long, hide = true)]
    delta: bool,
    /// Envoy's heap limit for its overload manager, in MiB: at 95 % it returns
    /// free memory to the system, at 98 % it refuses new requests. Set it a little
    /// under the Envoy container's memory limit.
    #[arg(long, default_value_t = aether_xds::bootstrap::DEFAULT_MAX_HEAP_BYTES >> 20)]
    max_heap_mib: u64,
    /// Write the bootstrap to this file instead of stdout (for an init container
    /// without a shell).
    #[arg(long)]
    output: Option<PathBuf>,
    /// `IP:PORT` of a listener that serves Envoy's stats for Prometheus
    /// (`GET /stats/prometheus` alone; Envoy's admin stays on loopback).
    #[arg(long)]
    stats_address: Option<String>,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.log_format, &cli.log_level);
    // `fleet` says "late" with 1, so its own failures are 2.
    let failure = match cli.command {
        Command::Fleet(_) => ExitCode::from(2),
        _ => ExitCode::FAILURE,
    };
    match run(cli.command) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            failure
        }
    }
}

fn run(command: Command) -> anyhow::Result<ExitCode> {
    let ok = |()| ExitCode::SUCCESS;
    match command {
        Command::Fleet(args) => crate::fleet_cmd::run(args),
        Command::Bootstrap(args) => bootstrap(args).map(ok),
        Command::Standalone(args) => standalone::run(args).map(ok),
        Command::Agent(args) => crate::kubernetes::run(*args).map(ok),
        Command::Explain(args) => crate::explain::run(args).map(ok),
        Command::Drain(args) => crate::drain::run(args).map(ok),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "aether-edge", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Status(args) => {
            let store = args.load_once()?;
            let translation = aether_gateway::translate(&store, &args.translate_config());
            print!("{}", translation.status.to_yaml());
            Ok(ExitCode::SUCCESS)
        }
        Command::Translate(args) => {
            let store = args.load_once()?;
            let translation = aether_gateway::translate(&store, &args.translate_config());
            let snapshot = aether_xds::build(&translation.ir);
            let yaml = aether_xds::to_yaml(&snapshot).context("rendering Envoy resources")?;
            print!("{yaml}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn bootstrap(args: BootstrapArgs) -> anyhow::Result<()> {
    let yaml = aether_xds::try_bootstrap(&aether_xds::BootstrapOptions {
        node_id: args.node_id,
        cluster: args.node_cluster,
        xds_address: args.xds_address,
        admin_address: args.admin_address,
        delta: args.delta || !args.sotw,
        max_heap_bytes: args.max_heap_mib << 20,
        stats_address: args.stats_address,
    })?;
    match args.output {
        Some(path) => {
            std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?
        }
        None => print!("{yaml}"),
    }
    Ok(())
}
