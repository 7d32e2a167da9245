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
use crate::standalone;
use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::args::{ConfigArgs, StandaloneArgs, default_xds_address};

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
