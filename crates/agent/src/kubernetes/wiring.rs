//! How the agent's parts are wired, step by step ([`serve`]):
//!
//! ```text
//!  watch_cluster ─► Index ─► drive_pipeline ─► Pipeline ─────────────────────────┐
//!  lead ─► is_leader (writers; edge: never) ─────────────┐                        │
//!  exchange_reports: local report ─► (self | gRPC+TLS to the leader);             │
//!                    report server (writers, TLS)                                 │
//!  leader_duties (writers): edge Services, Join ─► status, finalizer, XBackend Services, Events
//!  admin_endpoints: admin, metrics, health                                        │
//!  ADS to the local Envoy, once the first snapshot is ready ◄─────────────────────┘
//!    (role controller: no Envoy, it runs until the shutdown signal)
//!  shutdown: endpoints drained, the Lease released
//! ```
//!
//! The role ([`RoleArg`]) decides which steps run: `edge` serves its Envoy and
//! reports, and writes nothing; `controller` elects, takes reports and writes,
//! and serves no Envoy; `all` does both.

use super::metrics::{Registered, registry};
use super::{AddressModeArg, AgentArgs, RoleArg, SUPPORTED_FEATURES, client, fleet};
use crate::admin::{self, AdminState};
use crate::pipeline::Pipeline;
use crate::serve;
use aether_ads::Fleet;
use aether_k8s::Index;
use aether_k8s::ServedVersions;
use aether_k8s::convergence::Convergence;
use aether_k8s::duties::{self, SETTLE};
use aether_k8s::leader::{self, LeaderConfig, LeaderElector};
use aether_k8s::service::{self, AddressMode, ServiceConfig, ServiceMetrics};
use aether_k8s::status::{StatusInputs, StatusWriter};
use aether_report::Reports;
use aether_report::auth::Refusals;
use aether_report::tls::ServingCertificate;
use anyhow::Context;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

/// What every step shares.
struct Agent {
    args: AgentArgs,
    client: kube::Client,
    /// The pod's name (the node's without one): the Lease holder and Event reporter.
    identity: String,
    mode: AddressMode,
    pipeline: Arc<Pipeline>,
    fleet: Fleet,
    reports: Reports,
    /// The report port's certificate (writers only); its key stays here.
    serving: Option<Arc<ServingCertificate>>,
}

/// The served API versions, as discovery finds them.
type Served = watch::Receiver<Option<ServedVersions>>;

/// Who leads, and the elector's task (none without `--leader-elect`, nor
/// for an edge agent, which never leads).
struct Leadership {
    is_leader: watch::Receiver<bool>,
    elector: Option<JoinHandle<()>>,
    /// An edge agent's "never": kept open for as long as the process runs.
    _never: Option<watch::Sender<bool>>,
}

/// The leader's duties, as the admin endpoints and metrics read them.
struct Duties {
    status_inputs: watch::Receiver<Arc<StatusInputs>>,
    writer: Arc<StatusWriter>,
    service_metrics: Arc<ServiceMetrics>,
    convergence: Arc<Convergence>,
}

impl Duties {
    /// An edge agent's: it writes nothing, so its write metrics stay at zero.
    fn none() -> Self {
        Duties {
            status_inputs: watch::channel(Arc::default()).1,
            writer: Arc::default(),
            service_metrics: Arc::default(),
            convergence: Arc::default(),
        }
    }
}

pub(super) async fn serve(args: AgentArgs) -> anyhow::Result<()> {
    args.xds.checked_address(&args.xds_address)?;
    if args.role == RoleArg::Controller && !args.leader_elect {
        // Edge agents find the controller, and the certificate to trust,
        // through the Lease alone.
        anyhow::bail!(
            "--role=controller needs --leader-elect: edge agents find it through the Lease"
        );
    }
    let agent = Agent::new(args).await?;
    let (shutdown_tx, shutdown) = watch::channel(false);
    let (index, served) = agent.watch_cluster();
    let leadership = agent.lead(shutdown.clone());
    let is_leader = &leadership.is_leader;
    let (envoy_ready, refusals) = agent.exchange_reports(is_leader).await?;
    let duties = if agent.args.role.writes() {
        agent.leader_duties(&index, &served, is_leader)
    } else {
        Duties::none()
    };
    let endpoints = agent
        .admin_endpoints(duties, envoy_ready, refusals, served, is_leader, shutdown)
        .await?;
    let result = if agent.args.role.serves_envoy() {
        agent.ads().await
    } else {
        serve::shutdown_signal().await;
        Ok(())
    };
    let _ = shutdown_tx.send(true);
    for task in endpoints {
        let _ = task.await;
    }
    // Releasing the Lease lets the next leader take over at once instead of
    // waiting out the lease duration.
    if let Some(t) = leadership.elector {
        let _ = tokio::time::timeout(Duration::from_secs(3), t).await;
    }
    info!("stopped");
    result
}

impl Agent {
    async fn new(args: AgentArgs) -> anyhow::Result<Self> {
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
        let serving = args
            .role
            .writes()
            .then(ServingCertificate::generate)
            .transpose()
            .context("making the report port's certificate")?
            .map(Arc::new);
        Ok(Agent {
            args,
            client,
            identity,
            mode,
            pipeline,
            fleet: Fleet::new(),
            reports: Reports::default(),
            serving,
        })
    }

    /// Watches → index → pipeline (nothing publishes before every kind has
    /// listed; a Gateway API kind whose CRD is not installed counts as listed
    /// and empty).
    fn watch_cluster(&self) -> (Arc<Index>, Served) {
        let index = Arc::new(Index::new(aether_k8s::watch::KINDS));
        let (served_tx, served) = watch::channel(None);
        tokio::spawn(aether_k8s::watch::run(
            self.client.clone(),
            index.clone(),
            served_tx,
            Duration::from_secs(self.args.discovery_interval),
        ));
        let (pipeline, mode) = (self.pipeline.clone(), self.mode.clone());
        // A writer joins reports relative to the snapshots it made itself.
        let remember = self.args.role.writes().then(|| self.reports.clone());
        tokio::spawn(drive_pipeline(index.clone(), pipeline, mode, remember));
        (index, served)
    }

    fn lead(&self, shutdown: watch::Receiver<bool>) -> Leadership {
        if !self.args.role.writes() {
            let (never, is_leader) = watch::channel(false);
            return Leadership {
                is_leader,
                elector: None,
                _never: Some(never),
            };
        }
        if !self.args.leader_elect {
            let is_leader = leader::always_leader();
            return Leadership {
                is_leader,
                elector: None,
                _never: None,
            };
        }
        let args = &self.args;
        let report_port = args
            .report_address
            .rsplit_once(':')
            .map(|(_, p)| p.to_string())
            .unwrap_or_default();
        let mut config = LeaderConfig::new(&args.namespace, &args.lease_name, &self.identity);
        config.report_address = args
            .advertise_address
            .as_ref()
            .map(|ip| format!("{ip}:{report_port}"));
        config.report_certificate = self
            .serving
            .as_ref()
            .map(|s| s.certificate_pem().to_string());
        let elector = LeaderElector::new(self.client.clone(), config);
        let is_leader = elector.is_leader();
        let task = tokio::spawn(elector.run(wait_true(shutdown)));
        Leadership {
            is_leader,
            elector: Some(task),
            _never: None,
        }
    }

    /// Fleet reports: with a local Envoy, ours in process when we lead, over
    /// gRPC and TLS to the leader otherwise; the report server every writer
    /// runs (only the leader's is dialled). Returns whether the local Envoy
    /// serves the latest config (none without one).
    async fn exchange_reports(
        &self,
        is_leader: &watch::Receiver<bool>,
    ) -> anyhow::Result<(Option<watch::Receiver<bool>>, Arc<Refusals>)> {
        let args = &self.args;
        let mut envoy_ready = None;
        if args.role.serves_envoy() {
            let local = fleet::local_reports(
                &args.node_name,
                self.pipeline.subscribe(),
                self.fleet.clone(),
            );
            envoy_ready = Some(fleet::envoy_ready(local.clone(), self.pipeline.subscribe()));
            tokio::spawn(fleet::self_report(
                local.clone(),
                is_leader.clone(),
                self.reports.clone(),
            ));
            fleet::report_to_leader(
                self.client.clone(),
                local,
                args.namespace.clone(),
                args.lease_name.clone(),
                self.identity.clone(),
                args.leader_elect || args.role == RoleArg::Edge,
                args.report_token_file.clone(),
            );
        }
        let refusals = Arc::new(Refusals::default());
        let Some(serving) = &self.serving else {
            return Ok((envoy_ready, refusals));
        };
        let auth = Arc::new(fleet::ApiServerTokens(
            aether_k8s::agent_token::AgentTokens::new(
                self.client.clone(),
                &args.namespace,
                &args.service_account,
                aether_report::auth::AUDIENCE,
            ),
        ));
        let listener = tokio::net::TcpListener::bind(&args.report_address)
            .await
            .with_context(|| format!("binding the report address {}", args.report_address))?;
        let service =
            aether_report::server::ReportService::new(self.reports.clone(), auth, refusals.clone());
        let server = aether_report::server::serve(listener, service, serving)
            .context("the report port's TLS")?;
        tokio::spawn(server);
        Ok((envoy_ready, refusals))
    }

    /// Leader only (each waits for `is_leader`): the edge Services, the join
    /// of every node's report into the status inputs, then status, the
    /// GatewayClass finalizer, the XBackend Services and Events.
    fn leader_duties(
        &self,
        index: &Arc<Index>,
        served: &Served,
        is_leader: &watch::Receiver<bool>,
    ) -> Duties {
        let (client, args) = (&self.client, &self.args);
        let service_metrics = Arc::new(ServiceMetrics::default());
        let service_problems = match &self.mode {
            AddressMode::Service(cfg) => {
                let (problems_tx, problems) = watch::channel(BTreeMap::new());
                tokio::spawn(duties::reconcile_services(
                    client.clone(),
                    index.clone(),
                    self.pipeline.subscribe(),
                    is_leader.clone(),
                    cfg.clone(),
                    problems_tx,
                    service_metrics.clone(),
                ));
                Some(problems)
            }
            AddressMode::Static => None,
        };
        let (status_inputs, convergence) = self.join(index, served, is_leader, service_problems);
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
        let events = || aether_k8s::events::Events::new(client.clone(), self.identity.clone());
        tokio::spawn(aether_k8s::xbackend_service::run(
            client.clone(),
            index.clone(),
            is_leader.clone(),
            events(),
        ));
        let pod = args
            .pod_name
            .clone()
            .map(|pod| (args.namespace.clone(), pod));
        tokio::spawn(aether_k8s::events::run(
            events(),
            status_inputs.clone(),
            is_leader.clone(),
            pod,
        ));
        Duties {
            status_inputs,
            writer,
            service_metrics,
            convergence,
        }
    }

    /// Every node's report joined into the status inputs (and, node by node,
    /// into the fleet document `aether-edge fleet` reads).
    fn join(
        &self,
        index: &Arc<Index>,
        served: &Served,
        is_leader: &watch::Receiver<bool>,
        service_problems: Option<watch::Receiver<BTreeMap<aether_ir::ObjectRef, String>>>,
    ) -> (watch::Receiver<Arc<StatusInputs>>, Arc<Convergence>) {
        let (client, args) = (&self.client, &self.args);
        // Static mode: every Ready edge pod takes every Gateway's traffic.
        let ready_pods = matches!(self.mode, AddressMode::Static).then(|| {
            let selector = ServiceConfig::default()
                .selector
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            aether_k8s::pods::ready_nodes(client.clone(), &args.namespace, selector)
        });
        // The same join, node by node, for `aether-edge fleet`.
        let (fleet_tx, fleet_rx) = watch::channel(Arc::default());
        tokio::spawn(aether_k8s::fleet_doc::publish(
            client.clone(),
            args.namespace.clone(),
            self.identity.clone(),
            fleet_rx.clone(),
            is_leader.clone(),
        ));
        let convergence = Arc::new(Convergence::default());
        tokio::spawn({
            let (convergence, mut joins) = (convergence.clone(), fleet_rx);
            async move {
                while joins.changed().await.is_ok() {
                    let join = joins.borrow_and_update().clone();
                    convergence.observe(&join, std::time::Instant::now());
                }
            }
        });
        let status_inputs = duties::Join {
            index: index.clone(),
            published: self.pipeline.subscribe(),
            reports: self.reports.clone(),
            mode: self.mode.clone(),
            ready_pods,
            service_problems,
            served: served.clone(),
            controller_name: args.controller_name.clone(),
            supported_features: SUPPORTED_FEATURES.iter().map(|f| f.to_string()).collect(),
            fleet: Some(fleet_tx),
        }
        .spawn();
        (status_inputs, convergence)
    }

    /// Admin (loopback), and the metrics and health addresses when set; the
    /// tasks end with `shutdown`.
    async fn admin_endpoints(
        &self,
        duties: Duties,
        envoy_ready: Option<watch::Receiver<bool>>,
        refusals: Arc<Refusals>,
        served: Served,
        is_leader: &watch::Receiver<bool>,
        shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<Vec<JoinHandle<std::io::Result<()>>>> {
        let args = &self.args;
        let status_inputs = duties.status_inputs;
        let state = Arc::new(AdminState {
            published: self.pipeline.subscribe(),
            fleet: self.fleet.clone(),
            metrics: registry(&Registered {
                fleet: &self.fleet,
                stats: &self.pipeline.stats,
                writer: duties.writer.metrics(),
                services: &duties.service_metrics,
                refusals: &refusals,
                convergence: duties.convergence,
                reports: &self.reports,
                served,
                is_leader: is_leader.clone(),
            }),
            status_view: Box::new(move |_| status_inputs.borrow().plan.clone()),
            envoy_ready,
            config_problems: None,
        });
        let mut tasks =
            vec![admin::spawn(&args.admin_address, state.clone(), shutdown.clone()).await?];
        if let Some(address) = &args.metrics_address {
            tasks.push(admin::spawn_metrics(address, state.clone(), shutdown.clone()).await?);
        }
        if let Some(address) = &args.health_address {
            tasks.push(admin::spawn_health(address, state, shutdown).await?);
        }
        Ok(tasks)
    }

    /// ADS to the local Envoy, from the first published snapshot on, until it
    /// stops.
    async fn ads(self) -> anyhow::Result<()> {
        let args = &self.args;
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
        let reports = self.reports.clone();
        let remember = move |s: &_| reports.remember(s);
        serve::ads_when_ready(self.pipeline.subscribe(), self.fleet, ads, remember).await
    }
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
///
/// Each publication is logged with where its time went: `waited_us` from the
/// index change it answers (a watch event applied) to the translation's start
/// (the rest of a [`SETTLE`], or a translation already under way),
/// `translate_us` and `build_us`; `changed_unix_us` is when that index change
/// happened, by the wall clock, for a bench to set beside its own; `changed`
/// the kinds whose changes it answers.
///
/// A writer (`remember`: its report join) remembers every snapshot it
/// publishes, at once. An edge agent translates the same cluster into the
/// same snapshot and reports "all of version V" once its Envoy ACKed it; when
/// the leader has moved on (a route added), only a remembered V says which
/// routes are unchanged since, and so still served. A controller serves no
/// Envoy (no ADS remembers for it): without this, every such moment read every
/// route of the Gateway as not served, and a status pass then wrote them all
/// `Pending`.
async fn drive_pipeline(
    index: Arc<Index>,
    pipeline: Arc<Pipeline>,
    mode: AddressMode,
    remember: Option<Reports>,
) {
    let published = pipeline.subscribe();
    // Not woken by a status write coming back (ours, most of the time): it
    // changes nothing translation reads, and a change right after it would
    // wait out a SETTLE for nothing.
    let mut generation = index.subscribe_inputs();
    let mut waiting_logged = false;
    let (mut changed_at, mut changed_unix) = (Instant::now(), SystemTime::now());
    loop {
        match index.store() {
            Some(store) => {
                let waited = changed_at.elapsed();
                let kinds: Vec<&str> = (index.take_changed_kinds().into_iter())
                    .map(aether_ir::Kind::as_str)
                    .collect();
                // Translating a big store takes a while: off the async workers,
                // so health checks, ADS and the watches keep being served.
                let applied = tokio::task::block_in_place(|| {
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
                let snapshot = applied
                    .published
                    .then(|| published.borrow().as_ref().map(|p| p.snapshot.clone()))
                    .flatten();
                if let Some(snapshot) = snapshot {
                    if let Some(reports) = &remember {
                        reports.remember(&snapshot);
                    }
                    info!(
                        version = %snapshot.version,
                        objects = store.len(),
                        waited_us = waited.as_micros() as u64,
                        translate_us = applied.translate.as_micros() as u64,
                        build_us = applied.build.as_micros() as u64,
                        changed_unix_us = crate::pipeline::unix_us(changed_unix),
                        changed = kinds.join(","),
                        "configuration published"
                    );
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
        (changed_at, changed_unix) = (Instant::now(), SystemTime::now());
        tokio::time::sleep_until(done + SETTLE).await;
        generation.borrow_and_update();
    }
}
