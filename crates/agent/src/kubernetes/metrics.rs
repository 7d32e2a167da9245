//! The Kubernetes mode's registry: every component's metrics, registered once.
//!
//! ```text
//!  aether_ads_*    the local ADS server (this node's Envoy)
//!  aether_edge_*   pipeline, status writer, Services, report refusals, served
//!                  kinds, leader; while leading: convergence and
//!                  fleet_envoy_connected (the fleet as the leader joins it)
//! ```

use crate::metrics::{LeaderOnly, Leading};
use crate::pipeline::Stats;
use aether_ads::Fleet;
use aether_k8s::ServedVersions;
use aether_k8s::convergence::Convergence;
use aether_k8s::discovery::ServedKinds;
use aether_k8s::service::ServiceMetrics;
use aether_k8s::status::StatusMetrics;
use aether_report::auth::Refusals;
use aether_report::{EnvoyConnected, Reports};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use tokio::sync::watch;

/// What the agent counts, handed over once to build its registry.
pub(super) struct Registered<'a> {
    pub fleet: &'a Fleet,
    pub stats: &'a Stats,
    pub writer: &'a StatusMetrics,
    pub services: &'a ServiceMetrics,
    pub refusals: &'a Refusals,
    pub convergence: Arc<Convergence>,
    pub reports: &'a Reports,
    pub served: watch::Receiver<Option<ServedVersions>>,
    pub is_leader: watch::Receiver<bool>,
}

pub(super) fn registry(r: &Registered<'_>) -> Registry {
    let mut registry = crate::metrics::registry();
    r.fleet
        .metrics()
        .register(registry.sub_registry_with_prefix("aether_ads"));
    let edge = registry.sub_registry_with_prefix("aether_edge");
    r.stats.register(edge);
    r.writer.register(edge);
    r.services.register(edge);
    r.refusals.register(edge);
    edge.register_collector(Box::new(LeaderOnly {
        leading: r.is_leader.clone(),
        inner: r.convergence.clone(),
    }));
    edge.register_collector(Box::new(LeaderOnly {
        leading: r.is_leader.clone(),
        inner: EnvoyConnected(r.reports.clone()),
    }));
    edge.register_collector(Box::new(ServedKinds(r.served.clone())));
    edge.register_collector(Box::new(Leading(r.is_leader.clone())));
    registry
}
