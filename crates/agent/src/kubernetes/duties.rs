//! Leader duties: one Service per served Gateway, and the status to write (the
//! plan gated on the reports of the nodes that take each Gateway's traffic,
//! with addresses from the Services).

use super::SETTLE;
use super::STARTUP_GRACE;
use super::SUPPORTED_FEATURES;
use crate::pipeline::Published;
use aether_gateway::{AckState, Addresses, Served, StatusPlan, Store, assemble};
use aether_ir::ObjectRef;
use aether_k8s::service::{
    self, AddressMode, RecentWrites, ServiceConfig, ServiceMetrics, Unallocated,
};
use aether_k8s::status::StatusInputs;
use aether_k8s::{Index, ServedVersions};
use aether_report::{Members, Reports};
use k8s_openapi::api::core::v1::Service;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tracing::warn;

/// Leader only: keeps one Service per served Gateway; per-Gateway failures go to
/// the status (and are retried with backoff).
pub(super) async fn reconcile_services(
    client: kube::Client,
    index: Arc<Index>,
    mut published: watch::Receiver<Option<Arc<Published>>>,
    mut is_leader: watch::Receiver<bool>,
    cfg: ServiceConfig,
    problems: watch::Sender<BTreeMap<ObjectRef, String>>,
    metrics: Arc<ServiceMetrics>,
) {
    let mut generation = index.subscribe();
    let mut backoff = Duration::from_millis(200);
    // Our own writes until the watch shows them: allocating from a store that
    // trails the API server could move a Gateway's ports.
    let mut recent = RecentWrites::default();
    loop {
        let ir = published.borrow_and_update().as_ref().map(|p| p.ir.clone());
        let leading = *is_leader.borrow_and_update();
        let mut failed = false;
        if let (true, Some(ir), Some(store)) = (leading, ir, index.store()) {
            let current = recent.overlay(&store, &cfg.namespace);
            let desired = service::desired_services(&current, &ir, &cfg);
            let existing: Vec<Service> = store
                .all::<Service>()
                .values()
                .filter(|s| service::is_edge_service(s, &cfg.namespace))
                .cloned()
                .collect();
            let result =
                service::reconcile(&client, desired, existing.iter(), &cfg.namespace).await;
            recent.record(&result);
            metrics.observe(&result);
            let by_gateway = match result {
                Ok(_) => BTreeMap::new(),
                Err(errors) => {
                    warn!(error = %errors, "reconciling edge Services failed; retrying");
                    failed = true;
                    errors.by_gateway()
                }
            };
            problems.send_if_modified(|p| {
                let changed = *p != by_gateway;
                *p = by_gateway;
                changed
            });
        }
        if failed {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(10));
            continue;
        }
        backoff = Duration::from_millis(200);
        tokio::select! {
            r = published.changed() => if r.is_err() { return },
            r = generation.changed() => if r.is_err() { return },
            r = is_leader.changed() => if r.is_err() { return },
        }
        tokio::time::sleep(SETTLE).await;
    }
}

/// The status to write: the plan, gated on the reports of the nodes that take
/// each Gateway's traffic, with addresses from the Services; recomputed on any
/// change. `ready_pods`: static mode's Ready edge pods (service mode reads
/// each Service's endpoints from the store).
#[allow(clippy::too_many_arguments)]
pub(super) fn status_inputs(
    index: Arc<Index>,
    mut published: watch::Receiver<Option<Arc<Published>>>,
    reports: Reports,
    mode: AddressMode,
    mut ready_pods: Option<watch::Receiver<BTreeSet<String>>>,
    mut problems: Problems,
    mut served: watch::Receiver<Option<ServedVersions>>,
    controller_name: String,
) -> watch::Receiver<Arc<StatusInputs>> {
    let (tx, rx) = watch::channel(Arc::new(StatusInputs {
        controller_name: controller_name.clone(),
        ..Default::default()
    }));
    tokio::spawn(async move {
        let mut generation = index.subscribe();
        let mut report_changes = reports.subscribe();
        let grace_ends = tokio::time::Instant::now() + STARTUP_GRACE;
        let mut settled = false;
        loop {
            let p = published.borrow_and_update().clone();
            // Read before the join: the plan covers at least this change.
            let served_at = reports.changed_at();
            if let (Some(p), Some(store)) = (p, index.store()) {
                let members = Members {
                    per_gateway: match &mode {
                        AddressMode::Service(cfg) => service::members(&store, &cfg.namespace),
                        AddressMode::Static => BTreeMap::new(),
                    },
                    every_gateway: ready_pods
                        .as_mut()
                        .map(|r| r.borrow_and_update().clone())
                        .unwrap_or_default(),
                };
                settled = settled
                    || tokio::time::Instant::now() >= grace_ends
                    || members.have_answered(&reports.nodes());
                // Nothing is written from a picture that is still forming.
                if settled {
                    let gating = std::time::Instant::now();
                    let plan = gate(&p, &reports, &members, &store, &mode, &problems.current());
                    // Under the status loop's target: the status latency bench reads it.
                    tracing::debug!(target: "aether_k8s::status::inputs", gate_us = gating.elapsed().as_micros(), "status inputs joined");
                    // Every Gateway API kind has listed, so discovery has run.
                    let served = served.borrow_and_update().clone().unwrap_or_default();
                    tx.send_replace(Arc::new(StatusInputs {
                        plan,
                        store,
                        supported_features: SUPPORTED_FEATURES
                            .iter()
                            .map(|f| f.to_string())
                            .collect(),
                        controller_name: controller_name.clone(),
                        served,
                        served_at,
                    }));
                }
            }
            let mut report = false;
            tokio::select! {
                r = published.changed() => if r.is_err() { return },
                r = generation.changed() => if r.is_err() { return },
                r = report_changes.changed() => if r.is_err() { return } else { report = true },
                r = problems.services.changed() => if r.is_err() { return },
                r = problems.unallocated.changed() => if r.is_err() { return },
                r = served.changed() => if r.is_err() { return },
                r = changed(&mut ready_pods), if ready_pods.is_some() => if r.is_err() { return },
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
    });
    rx
}

/// Why Gateways lack addresses: Service writes that failed, ports not allocated yet.
pub(super) struct Problems {
    pub(super) services: watch::Receiver<BTreeMap<ObjectRef, String>>,
    pub(super) unallocated: watch::Receiver<Vec<Unallocated>>,
}

impl Problems {
    fn current(&mut self) -> BTreeMap<ObjectRef, String> {
        let mut all = service::problems(None, &self.unallocated.borrow_and_update());
        for (gw, message) in self.services.borrow_and_update().iter() {
            all.entry(gw.clone())
                .and_modify(|m| {
                    m.push_str("; ");
                    m.push_str(message);
                })
                .or_insert_with(|| message.clone());
        }
        all
    }
}

async fn changed<T>(rx: &mut Option<watch::Receiver<T>>) -> Result<(), watch::error::RecvError> {
    match rx {
        Some(rx) => rx.changed().await,
        None => std::future::pending().await,
    }
}

fn gate(
    p: &Published,
    reports: &Reports,
    members: &Members,
    store: &Store,
    mode: &AddressMode,
    problems: &BTreeMap<ObjectRef, String>,
) -> StatusPlan {
    let served = reports.served(&p.snapshot, members);
    let served = |gw: &ObjectRef| {
        served
            .get(gw)
            .cloned()
            .unwrap_or_else(|| Served::whole(AckState::Pending))
    };
    let addresses = match mode {
        AddressMode::Service(cfg) => {
            service::assignments(p.status.gateways.keys(), store, cfg, problems)
        }
        AddressMode::Static => Addresses::Planned,
    };
    assemble(&p.status, served, &addresses)
}
