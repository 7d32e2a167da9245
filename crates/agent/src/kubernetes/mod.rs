//! Kubernetes mode (`aether-edge agent`): one agent beside one Envoy per edge node.
//!
//! ```text
//!  kube watches ─► Index ─(all listed)─► Pipeline ─(allocations rewrite)─► snapshot ─► ADS (unix socket) ─► local Envoy
//!                                           │                                                │ ACK/NACK
//!                                           │            local report ◄── Fleet ◄────────────┘
//!                                           │                 │ gRPC stream over TLS (or in process on the leader)
//!                                           ▼                 ▼
//!  leader only (role controller or all):  duties::reconcile_services, xbackend_service::run
//!                                             Reports (every node) ─► duties::Join (assemble) ─► status writer (SSA)
//! ```
//!
//! Every agent serves its own Envoy from its own watches; only the elected leader
//! writes, and with `--role` the writer is a process and an identity of its own
//! ([`RoleArg`]: edge agents that only read, a controller that writes; RBAC
//! cannot condition a right on the Lease). The duties live in
//! `aether_k8s::duties`; `wiring.rs` wires them: per-Gateway Services (allocating Envoy ports) and status, where
//! `Programmed`, `attachedRoutes` and route `Accepted` wait for every Envoy that
//! takes the Gateway's traffic (its Service's Ready endpoints, or the Ready edge
//! pods in static mode) to serve the object's current config. `/readyz` waits
//! for the local Envoy to catch up, so a node takes traffic only then.

mod fleet;
mod metrics;
mod wiring;

use anyhow::Context;
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// Features our GatewayClass claims in `status.supportedFeatures`, by Gateway API
/// v1.7.0's names: exactly those the upstream suite passes
/// (conformance/reports/v1.7.0: every extended feature of the GATEWAY-HTTP,
/// -GRPC, -TLS, -TCP and -UDP profiles). Claim a feature only with a run that
/// passes it. Older suites know some of them by other names (v1.6.1:
/// `GatewayInfrastructurePropagation`, `HTTPRouteRetry`,
/// `HTTPRouteRetryBackendTimeout`); their tests do not run there.
///
/// Two experimental features v1.7.0 has no conformance test for yet are
/// claimed on our own live tests through a real Envoy instead
/// (`crates/agent/tests/local`): `GatewayListenerFilters` (live_listener_filters)
/// and `ClusterTrustBundle` (live_trust_bundle: frontend validation and
/// BackendTLSPolicy).
pub const SUPPORTED_FEATURES: &[&str] = &[
    "BackendTLSPolicy",
    "BackendTLSPolicySANValidation",
    "ClusterTrustBundle",
    "GRPCRoute",
    "GRPCRouteNamedRouteRule",
    "GRPCRouteRequestHeaderModifier",
    "Gateway",
    "GatewayAddressEmpty",
    "GatewayAddressRoutability",
    "GatewayAddressRoutabilityCluster",
    "GatewayBackendClientCertificate",
    "GatewayFrontendClientCertificateValidation",
    "GatewayFrontendClientCertificateValidationInsecureFallback",
    "GatewayHTTPListenerIsolation",
    "GatewayHTTPSListenerDetectMisdirectedRequests",
    "GatewayInfrastructure",
    "GatewayListenerFilters",
    "GatewayPort8080",
    "GatewayRouteHostnameIntersectionPrecedence",
    "GatewayStaticAddresses",
    "HTTPRoute",
    "HTTPRoute303RedirectStatusCode",
    "HTTPRoute307RedirectStatusCode",
    "HTTPRoute308RedirectStatusCode",
    "HTTPRouteBackendProtocolH2C",
    "HTTPRouteBackendProtocolWebSocket",
    "HTTPRouteBackendRequestHeaderModification",
    "HTTPRouteBackendTimeout",
    "HTTPRouteBackendURLRewrite",
    "HTTPRouteCORS",
    "HTTPRouteDestinationPortMatching",
    "HTTPRouteHostRewrite",
    "HTTPRouteMethodMatching",
    "HTTPRouteNamedRouteRule",
    "HTTPRouteParentRefPort",
    "HTTPRoutePathRedirect",
    "HTTPRoutePathRewrite",
    "HTTPRoutePortRedirect",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteRequestMirror",
    "HTTPRouteRequestMultipleMirrors",
    "HTTPRouteRequestPercentageMirror",
    "HTTPRouteRequestTimeout",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteRetryCodes",
    "HTTPRouteRetryConnectionError",
    "HTTPRouteSchemeRedirect",
    "ListenerSet",
    "ReferenceGrant",
    "TCPRoute",
    "TLSRoute",
    "TLSRouteModeMixed",
    "TLSRouteModeTerminate",
    "UDPRoute",
];

/// An agent sends the leader at most one report per interval.
const REPORT_INTERVAL: Duration = Duration::from_millis(100);
/// How often a follower looks up who leads (and where it takes reports).
const LEADER_LOOKUP: Duration = Duration::from_secs(2);

/// Which part of the edge this process plays (`--role`). RBAC cannot make a
/// right depend on holding the Lease, so the writes belong to an identity of
/// their own: deploy/ runs `edge` agents in the DaemonSet under a read-only
/// ServiceAccount and `controller` replicas in a Deployment under the writer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RoleArg {
    /// Beside an Envoy: serve it over ADS, report what it ACKed to the
    /// controller that leads (TLS), write nothing to the API server.
    Edge,
    /// No Envoy: elect a leader among the controllers; the leader takes the
    /// edge agents' reports and writes status, Services, EndpointSlices,
    /// Events, the GatewayClass finalizer and the fleet ConfigMap.
    Controller,
    /// Both in one process, under one identity holding every right (a
    /// single-node setup, tests): agents elect a leader among themselves.
    All,
}

impl RoleArg {
    /// Whether this process serves a local Envoy.
    pub fn serves_envoy(self) -> bool {
        self != RoleArg::Controller
    }

    /// Whether this process campaigns for the Lease and writes when it leads.
    pub fn writes(self) -> bool {
        self != RoleArg::Edge
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AddressModeArg {
    /// One LoadBalancer Service per Gateway; Envoy binds allocated ports.
    Service,
    /// Listeners bind on the Gateway's spec.addresses (or --default-address).
    Static,
}

#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// A kubeconfig file; default: in-cluster config, else $KUBECONFIG / ~/.kube/config.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The edge namespace: Services, the leader Lease, the DaemonSet.
    #[arg(long, env = "POD_NAMESPACE", default_value = "aether-ingress")]
    pub namespace: String,
    /// `edge` (beside an Envoy, read-only), `controller` (the writer, no
    /// Envoy) or `all` (both, one identity).
    #[arg(long, value_enum, default_value = "all")]
    pub role: RoleArg,
    /// Serve only Gateways whose GatewayClass names this controllerName.
    #[arg(long, default_value = crate::args::DEFAULT_CONTROLLER_NAME)]
    pub controller_name: String,
    /// This node's name: the local Envoy's node id.
    #[arg(long, env = "NODE_NAME")]
    pub node_name: String,
    /// This pod's name: the leader-election identity (default: the node name).
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// The address other agents reach this one's report port on (the pod IP).
    #[arg(long, env = "POD_IP")]
    pub advertise_address: Option<String>,
    /// Where Gateway addresses come from.
    #[arg(long, value_enum, default_value = "service")]
    pub address_mode: AddressModeArg,
    #[command(flatten)]
    pub xds: crate::args::XdsArgs,
    /// Service mode: the address Envoy binds every allocated port on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: String,
    /// Service mode: Envoy ports are allocated from this inclusive range.
    #[arg(long, default_value = "20000-29999", value_parser = parse_range)]
    pub port_range: (u16, u16),
    /// Service mode: `spec.externalTrafficPolicy` of each Gateway's load-balanced
    /// Service (unset: the API default, Cluster). `Local` keeps the client's
    /// source address: the load balancer sends only to nodes with an edge pod.
    #[arg(long, value_parser = ["Cluster", "Local"])]
    pub external_traffic_policy: Option<String>,
    /// Service mode: `spec.loadBalancerClass` of each Gateway's load-balanced
    /// Service, to pick one of several load-balancer implementations.
    #[arg(long)]
    pub load_balancer_class: Option<String>,
    /// Serve XBackends of type ExternalHostname. Off by default: whoever may
    /// write an XBackend could name any host the edge node reaches (localhost
    /// and Envoy's admin port, the node's and the cluster's private addresses
    /// behind a public name).
    #[arg(long)]
    pub allow_external_hostname_backends: bool,
    /// Static mode: the address listeners bind on when a Gateway has no spec.addresses.
    #[arg(long, default_value = "0.0.0.0")]
    pub default_address: String,
    /// ADS listen address for the local Envoy: `unix:/path` (preferred) or loopback `HOST:PORT`.
    #[arg(long, default_value = "unix:/var/run/aether-edge/ads.sock")]
    pub xds_address: String,
    /// Admin HTTP (metrics, debug views): keep it on loopback.
    #[arg(long, default_value = "127.0.0.1:19001")]
    pub admin_address: String,
    /// Probes only (/healthz, /readyz), e.g. 0.0.0.0:19002.
    #[arg(long)]
    pub health_address: Option<String>,
    /// `/metrics` alone, on an address Prometheus can reach (e.g. 0.0.0.0:19003).
    #[arg(long)]
    pub metrics_address: Option<String>,
    /// Where this process takes fleet reports when it leads (roles `controller`
    /// and `all`), over TLS only: with a certificate made at start, which the
    /// Lease publishes and agents pin. A report stream is taken only with a
    /// token of `--service-account` bound to an edge pod, and speaks for that
    /// pod's node.
    #[arg(long, default_value = "0.0.0.0:18001")]
    pub report_address: String,
    /// This agent's token for reporting to the leader (roles `edge` and `all`):
    /// a projected ServiceAccount token with audience `aether-edge-report`, read
    /// again at every connect, sent only over TLS to the certificate the Lease
    /// names.
    #[arg(long, default_value = "/var/run/secrets/aether-edge/report/token")]
    pub report_token_file: PathBuf,
    /// The ServiceAccount (in the edge namespace) whose pod-bound tokens the
    /// report port accepts: the edge agents'.
    #[arg(long, default_value = "aether-edge")]
    pub service_account: String,
    /// Elect a leader through a Lease (false: this process always leads; an
    /// `edge` agent still finds the controller through the Lease).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// The leader Lease's name (in the edge namespace).
    #[arg(long, default_value = "aether-edge")]
    pub lease_name: String,
    /// How often to look up again which Gateway API versions the CRDs serve, so a
    /// CRD installed or upgraded later is watched (at its served version).
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub discovery_interval: u64,
}

fn parse_range(s: &str) -> Result<(u16, u16), String> {
    let (lo, hi) = s
        .split_once('-')
        .ok_or_else(|| format!("{s:?}: expected LOW-HIGH"))?;
    let lo: u16 = lo.trim().parse().map_err(|e| format!("{lo:?}: {e}"))?;
    let hi: u16 = hi.trim().parse().map_err(|e| format!("{hi:?}: {e}"))?;
    if lo == 0 || lo > hi {
        return Err(format!("{s:?}: expected 1 <= LOW <= HIGH"));
    }
    Ok((lo, hi))
}

pub fn run(args: AgentArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(wiring::serve(args))
}

pub(crate) async fn client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer()
            .await
            .context("no in-cluster config and no kubeconfig")?,
    };
    kube::Client::try_from(config).context("building the Kubernetes client")
}
