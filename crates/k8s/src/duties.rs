//! Leader duties: one Service per served Gateway ([`reconcile_services`]), and
//! the status to write ([`Join`]): the translated plan assembled
//! ([`aether_gateway::assemble`]) with the reports of the nodes that take each
//! Gateway's traffic and the addresses of its Service. The binary only wires
//! them: it hands over what its pipeline published ([`Translated`]).
//!
//! ```text
//!  published (snapshot, plan, ir) ─┬─► reconcile_services ──► edge Services; failures per Gateway ─┐
//!                                  │                                                                 ▼
//!  reports + members (Service endpoints | Ready pods) ─► Join ─► assemble(plan, served, addresses) ─► StatusInputs ─► status::run
//! ```

use crate::backoff::{Failed, Writer, run_writer};
use crate::service::{self, AddressMode, RecentWrites, ServiceConfig, ServiceMetrics};
use crate::status::StatusInputs;
use crate::{Index, ServedVersions};
use aether_gateway::{AckState, Addresses, Served, StatusPlan, Store, assemble};
use aether_ir::{Ir, ObjectRef};
use aether_report::{Members, Reports};
use aether_xds::Snapshot;
use k8s_openapi::api::core::v1::Service;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tracing::warn;

pub use crate::backoff::SETTLE;
/// A (re)started agent knows nothing yet of what the Envoys serve: they reconnect
/// with backoff, still serving the last config. Gating on that empty picture would
/// flip every served Gateway to Pending and back on each restart of the leader (a
/// false status and two writes per object). So status waits for the first report
/// of a connected Envoy, or this long (an Envoy that never comes is Pending).
pub const STARTUP_GRACE: Duration = Duration::from_secs(5);

/// One published generation of the pipeline, as the duties read it.
pub trait Translated: Send + Sync + 'static {
    /// What the ADS server serves.
    fn snapshot(&self) -> &Snapshot;
    /// The status as translated, before [`assemble`].
    fn plan(&self) -> &StatusPlan;
    /// The IR as translated, before port allocations.
    fn ir(&self) -> &Arc<Ir>;
    /// Gateways left (partly) out of [`Translated::snapshot`], e.g. ports with no
    /// Envoy port allocated yet ([`service::problems`] of the
    /// [`service::apply_allocations`] result), and why. Part of the publication,
    /// never a separate channel: status must be joined from the snapshot it
    /// describes and what that snapshot lacks, read together.
    fn left_out(&self) -> &BTreeMap<ObjectRef, String>;
}

type Published<P> = watch::Receiver<Option<Arc<P>>>;

/// Leader only: keeps one Service per served Gateway; per-Gateway failures go to
/// `problems` (and so to the status), retried ([`run_writer`]).
pub async fn reconcile_services<P: Translated>(
    client: kube::Client,
    index: Arc<Index>,
    published: Published<P>,
    is_leader: watch::Receiver<bool>,
    cfg: ServiceConfig,
    problems: watch::Sender<BTreeMap<ObjectRef, String>>,
    metrics: Arc<ServiceMetrics>,
) {
    let generation = index.subscribe();
    let services = EdgeServices {
        client,
        index,
        generation,
        published,
        cfg,
        problems,
        metrics,
        recent: RecentWrites::default(),
    };
    run_writer(services, is_leader).await
}

struct EdgeServices<P> {
    client: kube::Client,
    index: Arc<Index>,
    generation: watch::Receiver<u64>,
    published: Published<P>,
    cfg: ServiceConfig,
    problems: watch::Sender<BTreeMap<ObjectRef, String>>,
    metrics: Arc<ServiceMetrics>,
    /// Our own writes until the watch shows them: allocating from a store that
    /// trails the API server could move a Gateway's ports.
    recent: RecentWrites,
}

impl<P: Translated> Writer for EdgeServices<P> {
    async fn pass(&mut self, leading: bool) -> Result<(), Failed> {
        self.generation.borrow_and_update();
        let ir = self
            .published
            .borrow_and_update()
            .as_ref()
            .map(|p| p.ir().clone());
        let (true, Some(ir), Some(store)) = (leading, ir, self.index.store()) else {
            return Ok(());
        };
        let (client, cfg, metrics) = (&self.client, &self.cfg, &self.metrics);
        let by_gateway = reconcile_once(client, &store, &ir, cfg, &mut self.recent, metrics).await;
        let failed = !by_gateway.is_empty();
        self.problems.send_if_modified(|p| {
            let changed = *p != by_gateway;
            *p = by_gateway;
            changed
        });
        if failed { Err(Failed) } else { Ok(()) }
    }

    async fn changed(&mut self) -> bool {
        tokio::select! {
            r = self.published.changed() => r.is_ok(),
            r = self.generation.changed() => r.is_ok(),
        }
    }
}

/// One reconcile of every edge Service; why each failed Gateway's did not go
/// through (empty when all did).
async fn reconcile_once(
    client: &kube::Client,
    store: &Store,
    ir: &Ir,
    cfg: &ServiceConfig,
    recent: &mut RecentWrites,
    metrics: &ServiceMetrics,
) -> BTreeMap<ObjectRef, String> {
    let current = recent.overlay(store, &cfg.namespace);
    let desired = service::desired_services(&current, ir, cfg);
    let existing: Vec<Service> = store
        .all::<Service>()
        .values()
        .filter(|s| service::is_edge_service(s, &cfg.namespace))
        .map(|s| (**s).clone())
        .collect();
    let public = service::desired_public(store, &desired, cfg);
    let result = service::reconcile(client, desired, existing.iter(), &cfg.namespace).await;
    recent.record(&result, store);
    metrics.observe(&result);
    // The public Services copy the records' ports and endpoints: from the store
    // (a record written just now is copied on the next pass, which its watch
    // event starts).
    let public = service::reconcile_public(client, &public, store).await;
    metrics.observe(&public);
    let mut failed = BTreeMap::new();
    for errors in [result.err(), public.err()].into_iter().flatten() {
        warn!(error = %errors, "reconciling edge Services failed; retrying");
        for (gw, why) in errors.by_gateway() {
            failed
                .entry(gw)
                .and_modify(|m: &mut String| {
                    m.push_str("; ");
                    m.push_str(&why);
                })
                .or_insert(why);
        }
    }
    failed
}

/// Why Gateways lack addresses: what publication `p` left out (ports not
/// allocated yet), then the Service writes that failed.
fn why_unaddressed<P: Translated>(
    p: &P,
    services: Option<&mut watch::Receiver<BTreeMap<ObjectRef, String>>>,
) -> BTreeMap<ObjectRef, String> {
    let mut all = p.left_out().clone();
    let Some(services) = services else {
        return all;
    };
    for (gw, message) in services.borrow_and_update().iter() {
        all.entry(gw.clone())
            .and_modify(|m| {
                m.push_str("; ");
                m.push_str(message);
            })
            .or_insert_with(|| message.clone());
    }
    all
}

/// The status inputs, recomputed on any change of what they are joined from.
pub struct Join<P> {
    pub index: Arc<Index>,
    pub published: Published<P>,
    pub reports: Reports,
    pub mode: AddressMode,
    /// Static mode's Ready edge pods (service mode reads each Service's
    /// endpoints from the store).
    pub ready_pods: Option<watch::Receiver<BTreeSet<String>>>,
    /// Service mode's per-Gateway failures of the Service writes
    /// ([`reconcile_services`]); static mode writes no Services.
    pub service_problems: Option<watch::Receiver<BTreeMap<ObjectRef, String>>>,
    pub served: watch::Receiver<Option<ServedVersions>>,
    pub controller_name: String,
    /// What the GatewayClass claims in `status.supportedFeatures`.
    pub supported_features: Vec<String>,
    /// Where the same join, node by node, goes for `aether-edge fleet`
    /// ([`crate::fleet_doc::publish`]), if anywhere.
    pub fleet: Option<watch::Sender<Arc<crate::fleet_doc::FleetJoin>>>,
}

impl<P: Translated> Join<P> {
    /// Joins in a task of its own; the latest inputs for [`crate::status::run`].
    pub fn spawn(self) -> watch::Receiver<Arc<StatusInputs>> {
        let (tx, rx) = watch::channel(Arc::new(StatusInputs {
            controller_name: self.controller_name.clone(),
            ..Default::default()
        }));
        tokio::spawn(self.run(tx));
        rx
    }

    async fn run(mut self, tx: watch::Sender<Arc<StatusInputs>>) {
        let mut generation = self.index.subscribe();
        let mut report_changes = self.reports.subscribe();
        let grace_ends = tokio::time::Instant::now() + STARTUP_GRACE;
        let mut settled = false;
        loop {
            if let Some((members, p, store)) = self.picture() {
                settled = settled
                    || tokio::time::Instant::now() >= grace_ends
                    || members.have_answered(&self.reports.nodes());
                // Nothing is written from a picture that is still forming.
                if settled {
                    tx.send_replace(Arc::new(self.inputs(&members, &p, store)));
                    // After status has its inputs: the same join, node by node.
                    if let Some(fleet) = &self.fleet {
                        fleet.send_replace(Arc::new(crate::fleet_doc::FleetJoin {
                            version: p.snapshot().version.clone(),
                            per_node: self.reports.per_node(p.snapshot(), &members),
                        }));
                    }
                }
            }
            let mut report = false;
            tokio::select! {
                r = self.published.changed() => if r.is_err() { return },
                r = generation.changed() => if r.is_err() { return },
                r = report_changes.changed() => if r.is_err() { return } else { report = true },
                r = changed(&mut self.service_problems), if self.service_problems.is_some() => if r.is_err() { return },
                r = self.served.changed() => if r.is_err() { return },
                r = changed(&mut self.ready_pods), if self.ready_pods.is_some() => if r.is_err() { return },
                _ = tokio::time::sleep_until(grace_ends), if !settled => {}
            }
            // A burst of object changes is joined once. A report is joined at
            // once: the status loop gathers a fleet's burst of reports
            // (`status::driver::FOLLOW`), and waiting here too would only add
            // to how long status trails an ACK.
            if !report {
                tokio::time::sleep(SETTLE).await;
            }
        }
    }

    /// Who must serve each Gateway, the latest publication and store; `None`
    /// until there are both.
    fn picture(&mut self) -> Option<(Members, Arc<P>, Arc<Store>)> {
        let p = self.published.borrow_and_update().clone()?;
        let store = self.index.store()?;
        let members = Members {
            per_gateway: match &self.mode {
                AddressMode::Service(cfg) => service::members(&store, &cfg.namespace),
                AddressMode::Static => BTreeMap::new(),
            },
            every_gateway: self
                .ready_pods
                .as_mut()
                .map(|r| r.borrow_and_update().clone())
                .unwrap_or_default(),
        };
        Some((members, p, store))
    }

    fn inputs(&mut self, members: &Members, p: &P, store: Arc<Store>) -> StatusInputs {
        // Read before the join: the plan covers at least this change.
        let served_at = self.reports.changed_at();
        let gating = std::time::Instant::now();
        let problems = why_unaddressed(p, self.service_problems.as_mut());
        let plan = gate(p, &self.reports, members, &store, &self.mode, &problems);
        // Under the status loop's target: the status latency bench reads it.
        tracing::debug!(target: "aether_k8s::status::inputs", gate_us = gating.elapsed().as_micros(), "status inputs joined");
        StatusInputs {
            plan,
            store,
            supported_features: self.supported_features.clone(),
            controller_name: self.controller_name.clone(),
            // Every Gateway API kind has listed, so discovery has run.
            served: self.served.borrow_and_update().clone().unwrap_or_default(),
            served_at,
        }
    }
}

async fn changed<T>(rx: &mut Option<watch::Receiver<T>>) -> Result<(), watch::error::RecvError> {
    match rx {
        Some(rx) => rx.changed().await,
        None => std::future::pending().await,
    }
}

/// The plan assembled with what the members serve and, in service mode, the
/// Services' addresses.
fn gate<P: Translated>(
    p: &P,
    reports: &Reports,
    members: &Members,
    store: &Store,
    mode: &AddressMode,
    problems: &BTreeMap<ObjectRef, String>,
) -> StatusPlan {
    let served = reports.served(p.snapshot(), members);
    let served = |gw: &ObjectRef| {
        served
            .get(gw)
            .cloned()
            .unwrap_or_else(|| Served::whole(AckState::Pending))
    };
    let addresses = match mode {
        AddressMode::Service(_) => service::assignments(p.plan().gateways.keys(), store, problems),
        AddressMode::Static => Addresses::Planned,
    };
    assemble(p.plan(), served, &addresses)
}

#[cfg(test)]
#[path = "duties_tests.rs"]
mod tests;
