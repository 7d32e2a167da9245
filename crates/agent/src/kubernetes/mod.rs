//! Kubernetes mode (`aether-edge agent`): one agent beside one Envoy per edge node.
//!
//! ```text
//!  kube watches ─► Index ─(all listed)─► Pipeline ─(allocations rewrite)─► snapshot ─► ADS (unix socket) ─► local Envoy
//!                                           │                                                │ ACK/NACK
//!                                           │            local report ◄── Fleet ◄────────────┘
//!                                           │                 │ gRPC stream (or in process on the leader)
//!                                           ▼                 ▼
//!  leader only:  duties::reconcile_services, xbackend_service::run
//!                                             Reports (every node) ─► duties::Join (assemble) ─► status writer (SSA)
//! ```
//!
//! Every agent serves its own Envoy from its own watches; only the elected leader
//! writes (the duties live in `aether_k8s::duties`; this module wires them): per-Gateway Services (allocating Envoy ports) and status, where
//! `Programmed`, `attachedRoutes` and route `Accepted` wait for every Envoy that
//! takes the Gateway's traffic (its Service's Ready endpoints, or the Ready edge
//! pods in static mode) to serve the object's current config. `/readyz` waits
//! for the local Envoy to catch up, so a node takes traffic only then.

mod fleet;
mod metrics;

use crate::admin::{self, AdminState};
use crate::pipeline::Pipeline;
use crate::serve;
use aether_ads::Fleet;
use aether_k8s::Index;
use aether_k8s::duties::{self, SETTLE};
use aether_k8s::leader::{self, LeaderConfig, LeaderElector};
use aether_k8s::service::{self, AddressMode, ServiceConfig, ServiceMetrics};
use aether_k8s::status::StatusWriter;
use aether_report::Reports;
use anyhow::Context;
use clap::{Args, ValueEnum};
use metrics::{Registered, registry};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tracing::info;

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
    /// Serve only Gateways whose GatewayClass names this controllerName.
    #[arg(long, default_value = crate::cli::DEFAULT_CONTROLLER_NAME)]
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
    pub xds: crate::cli::XdsArgs,
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
    /// Where this agent takes fleet reports when it leads. A report stream is
    /// taken only with a token of `--service-account` bound to an edge pod, and
    /// speaks for that pod's node.
    #[arg(long, default_value = "0.0.0.0:18001")]
    pub report_address: String,
    /// This agent's token for reporting to the leader: a projected ServiceAccount
    /// token with audience `aether-edge-report`, read again at every connect.
    #[arg(long, default_value = "/var/run/secrets/aether-edge/report/token")]
    pub report_token_file: PathBuf,
    /// The ServiceAccount (in the edge namespace) whose pod-bound tokens the
    /// report port accepts.
    #[arg(long, default_value = "aether-edge")]
    pub service_account: String,
    /// Elect a leader among agents through a Lease (false: this agent always leads).
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
    runtime.block_on(serve(args))
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

async fn serve(args: AgentArgs) -> anyhow::Result<()> {
    args.xds.checked_address(&args.xds_address)?;
    let client = client(args.kubeconfig.as_ref()).await?;
    let identity = args.pod_name.clone().unwrap_or(args.node_name.clone());
    let mode = match args.address_mode {
        AddressModeArg::Service => AddressMode::Service(ServiceConfig {
            controller_name: args.controller_name.clone(),
            namespace: args.namespace.clone(),
            port_range: args.port_range,
            bind_address: args.bind_address.clone(),
            external_traffic_policy: args.external_traffic_policy.clone(),
            load_balancer_class: args.load_balancer_class.clone(),
            ..ServiceConfig::default()
        }),
        AddressModeArg::Static => AddressMode::Static,
    };
    let pipeline = Arc::new(Pipeline::new(
        aether_gateway::Config {
            controller_name: args.controller_name.clone(),
            default_address: args.default_address.clone(),
            // Service mode gives each Gateway Envoy ports of its own.
            shared_ports: matches!(mode, AddressMode::Static),
            external_hostnames: args.allow_external_hostname_backends,
        },
        args.xds.builder(),
    ));
    let fleet = Fleet::new();
    let reports = Reports::default();
    let (shutdown_tx, shutdown_rx) = watch::channel(false);

    // Watches → index → pipeline (nothing publishes before every kind has listed;
    // a Gateway API kind whose CRD is not installed counts as listed and empty).
    let index = Arc::new(Index::new(aether_k8s::watch::KINDS));
    let (served_tx, served) = watch::channel(None);
    tokio::spawn(aether_k8s::watch::run(
        client.clone(),
        index.clone(),
        served_tx,
        Duration::from_secs(args.discovery_interval),
    ));
    tokio::spawn(drive_pipeline(
        index.clone(),
        pipeline.clone(),
        mode.clone(),
    ));

    // Leadership.
    let report_port = args
        .report_address
        .rsplit_once(':')
        .map(|(_, p)| p.to_string())
        .unwrap_or_default();
    let advertised = args
        .advertise_address
        .as_ref()
        .map(|ip| format!("{ip}:{report_port}"));
    let (is_leader, elector_task) = if args.leader_elect {
        let mut config = LeaderConfig::new(&args.namespace, &args.lease_name, &identity);
        config.report_address = advertised.clone();
        let elector = LeaderElector::new(client.clone(), config);
        let rx = elector.is_leader();
        let task = tokio::spawn(elector.run(wait_true(shutdown_rx.clone())));
        (rx, Some(task))
    } else {
        (leader::always_leader(), None)
    };

    // Fleet reports: ours in process when we lead, over gRPC to the leader otherwise.
    let local = fleet::local_reports(&args.node_name, pipeline.subscribe(), fleet.clone());
    let envoy_ready = fleet::envoy_ready(local.clone(), pipeline.subscribe());
    tokio::spawn(fleet::self_report(
        local.clone(),
        is_leader.clone(),
        reports.clone(),
    ));
    fleet::report_to_leader(
        client.clone(),
        local,
        args.namespace.clone(),
        args.lease_name.clone(),
        identity.clone(),
        args.leader_elect,
        args.report_token_file.clone(),
    );
    let report_refusals = Arc::new(aether_report::auth::Refusals::default());
    let report_auth = Arc::new(fleet::ApiServerTokens(
        aether_k8s::agent_token::AgentTokens::new(
            client.clone(),
            &args.namespace,
            &args.service_account,
            aether_report::auth::AUDIENCE,
        ),
    ));
    let report_listener = tokio::net::TcpListener::bind(&args.report_address)
        .await
        .with_context(|| format!("binding the report address {}", args.report_address))?;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(aether_report::server::ReportService::new(
                reports.clone(),
                report_auth,
                report_refusals.clone(),
            ))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(
                report_listener,
            )),
    );

    // Leader duties: Services, then status.
    let (problems_tx, problems_rx) = watch::channel(BTreeMap::new());
    let service_metrics = Arc::new(ServiceMetrics::default());
    if let AddressMode::Service(cfg) = &mode {
        tokio::spawn(duties::reconcile_services(
            client.clone(),
            index.clone(),
            pipeline.subscribe(),
            is_leader.clone(),
            cfg.clone(),
            problems_tx,
            service_metrics.clone(),
        ));
    }
    // Static mode: every Ready edge pod takes every Gateway's traffic.
    let ready_pods = matches!(mode, AddressMode::Static).then(|| {
        let selector = ServiceConfig::default()
            .selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        aether_k8s::pods::ready_nodes(client.clone(), &args.namespace, selector)
    });
    // The same join, node by node, for `aether-edge fleet` (leader only).
    let (fleet_tx, fleet_rx) = watch::channel(Arc::default());
    tokio::spawn(aether_k8s::fleet_doc::publish(
        client.clone(),
        args.namespace.clone(),
        identity.clone(),
        fleet_rx.clone(),
        is_leader.clone(),
    ));
    let convergence = Arc::new(aether_k8s::convergence::Convergence::default());
    tokio::spawn({
        let (convergence, mut joins) = (convergence.clone(), fleet_rx.clone());
        async move {
            while joins.changed().await.is_ok() {
                let join = joins.borrow_and_update().clone();
                convergence.observe(&join, std::time::Instant::now());
            }
        }
    });
    let status_inputs = duties::Join {
        index: index.clone(),
        published: pipeline.subscribe(),
        reports: reports.clone(),
        mode: mode.clone(),
        ready_pods,
        service_problems: problems_rx,
        served: served.clone(),
        controller_name: args.controller_name.clone(),
        supported_features: SUPPORTED_FEATURES.iter().map(|f| f.to_string()).collect(),
        fleet: Some(fleet_tx),
    }
    .spawn();
    let writer = Arc::new(StatusWriter::default());
    tokio::spawn(aether_k8s::status::run(
        client.clone(),
        status_inputs.clone(),
        is_leader.clone(),
        writer.clone(),
    ));
    tokio::spawn(aether_k8s::finalizer::run(
        client.clone(),
        status_inputs.clone(),
        is_leader.clone(),
    ));
    // EndpointSelector XBackends: the headless Service translation resolves them through.
    tokio::spawn(aether_k8s::xbackend_service::run(
        client.clone(),
        index.clone(),
        is_leader.clone(),
        aether_k8s::events::Events::new(client.clone(), identity.clone()),
    ));
    tokio::spawn(aether_k8s::events::run(
        aether_k8s::events::Events::new(client.clone(), identity.clone()),
        status_inputs.clone(),
        is_leader.clone(),
        args.pod_name
            .clone()
            .map(|pod| (args.namespace.clone(), pod)),
    ));

    // Admin and probes.
    let admin_state = Arc::new(AdminState {
        published: pipeline.subscribe(),
        fleet: fleet.clone(),
        metrics: registry(&Registered {
            fleet: &fleet,
            stats: &pipeline.stats,
            writer: writer.metrics(),
            services: &service_metrics,
            refusals: &report_refusals,
            convergence,
            reports: &reports,
            served: served.clone(),
            is_leader: is_leader.clone(),
        }),
        status_view: Box::new(move |_| status_inputs.borrow().plan.clone()),
        envoy_ready: Some(envoy_ready),
        config_problems: None,
    });
    let admin_task = admin::spawn(
        &args.admin_address,
        admin_state.clone(),
        shutdown_rx.clone(),
    )
    .await?;
    let metrics_task = match &args.metrics_address {
        Some(address) => {
            Some(admin::spawn_metrics(address, admin_state.clone(), shutdown_rx.clone()).await?)
        }
        None => None,
    };
    let health_task = match &args.health_address {
        Some(address) => Some(admin::spawn_health(address, admin_state, shutdown_rx).await?),
        None => None,
    };

    if let Some(dir) = args
        .xds_address
        .strip_prefix("unix:")
        .and_then(|p| std::path::Path::new(p).parent())
    {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the ADS socket directory {}", dir.display()))?;
    }
    let ads = serve::Ads {
        address: &args.xds_address,
        removal_grace: args.xds.removal_grace(),
    };
    let result = serve::ads_when_ready(pipeline.subscribe(), fleet, ads, {
        let reports = reports.clone();
        move |s| reports.remember(s)
    })
    .await;
    let _ = shutdown_tx.send(true);
    let _ = admin_task.await;
    if let Some(t) = metrics_task {
        let _ = t.await;
    }
    if let Some(t) = health_task {
        let _ = t.await;
    }
    // Releasing the Lease lets the next leader take over at once instead of
    // waiting out the lease duration.
    if let Some(t) = elector_task {
        let _ = tokio::time::timeout(Duration::from_secs(3), t).await;
    }
    info!("stopped");
    result
}

async fn wait_true(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// Re-translates whenever the index changes, once every kind has listed.
/// Ports taken out of the IR because they have no Envoy port yet are published
/// with the snapshot that lacks them (`Published::left_out`), for the status.
///
/// A change after a quiet spell is translated at once; one that arrives within
/// [`SETTLE`] of the last translation waits out the rest of it, so a burst (a
/// `kubectl apply` of many objects, a relist) costs a translation per
/// [`SETTLE`], not one per object.
async fn drive_pipeline(index: Arc<Index>, pipeline: Arc<Pipeline>, mode: AddressMode) {
    let mut generation = index.subscribe();
    let mut waiting_logged = false;
    loop {
        match index.store() {
            Some(store) => {
                // Translating a big store takes a while: off the async workers,
                // so health checks, ADS and the watches keep being served.
                let published = tokio::task::block_in_place(|| {
                    pipeline.apply_with(store.clone(), |store, translation| {
                        let AddressMode::Service(cfg) = &mode else {
                            return BTreeMap::new();
                        };
                        let allocations = service::allocations(store, &cfg.namespace);
                        let unallocated = service::apply_allocations(
                            &mut translation.ir,
                            &allocations,
                            &cfg.bind_address,
                        );
                        service::problems(None, &unallocated)
                    })
                });
                // A cluster change translated is a configuration load (the
                // cluster's objects are already valid: none fails here).
                pipeline.stats.loads_ok.inc();
                if published {
                    info!(objects = store.len(), "configuration published");
                }
            }
            None if !waiting_logged => {
                info!(pending = ?index.pending_kinds(), "waiting for every watch to list");
                waiting_logged = true;
            }
            None => {}
        }
        let done = tokio::time::Instant::now();
        if generation.changed().await.is_err() {
            return;
        }
        tokio::time::sleep_until(done + SETTLE).await;
        generation.borrow_and_update();
    }
}
