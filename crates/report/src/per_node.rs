//! The status gate's join, one node at a time: per Gateway of the leader's
//! snapshot, what each node that must serve it serves (for `aether-edge fleet`).
//!
//! ```text
//!  Reports (last report per node) + Members (who takes each Gateway's traffic)
//!    ──join([that node's report])──► Served | Behind { pending } | Nacked | Unreported
//! ```
//!
//! The same [`join`](crate::join) the status gate runs over all of a
//! Gateway's nodes, so a node shown served here is one the gate counts.

use crate::AckReport;
use crate::join::{Current, Members, Reports, join};
use crate::recent::Recent;
use aether_ir::{AckState, ObjectRef, Pending};
use aether_xds::Snapshot;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one node serves of one Gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum NodeState {
    /// Everything of the Gateway, at the leader's config.
    Served,
    /// Not yet: these parts (`Gateway` for its own listeners, or route keys;
    /// empty means everything) are not at the leader's config.
    Behind { pending: Vec<String> },
    /// Envoy rejected the Gateway's config: its message.
    Nacked { message: String },
    /// The node takes the Gateway's traffic but its agent has not reported.
    Unreported,
}

/// One Gateway: the leader's content hash, how many member nodes serve it,
/// and the state of each one that does not. Served nodes are a count only: at
/// a thousand Gateways and a hundred nodes, a map of them per Gateway would
/// cost more than the join itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayNodes {
    pub hash: String,
    /// Member nodes that serve the Gateway at the leader's config.
    pub served: usize,
    /// The others (behind, NACKed or not reporting), by node.
    pub others: BTreeMap<String, NodeState>,
    /// Of the others, the content hash of the Gateway their Envoy ACKed, where
    /// their report says (the Gateway's hash, or a whole snapshot the leader
    /// still remembers); a node that reports only parts has none here.
    pub acked: BTreeMap<String, String>,
    /// Of the others, the snapshot version their Envoy ACKed whole, where they
    /// report one (a node on another config than the leader's names its own).
    pub acked_snapshot: BTreeMap<String, String>,
}

impl GatewayNodes {
    /// Every member node.
    pub fn total(&self) -> usize {
        self.served + self.others.len()
    }

    /// From each member node's state (no ACKed hashes known).
    pub fn from_states(hash: &str, states: impl IntoIterator<Item = (String, NodeState)>) -> Self {
        let mut view = GatewayNodes {
            hash: hash.to_string(),
            served: 0,
            others: BTreeMap::new(),
            acked: BTreeMap::new(),
            acked_snapshot: BTreeMap::new(),
        };
        for (node, state) in states {
            if state == NodeState::Served {
                view.served += 1;
            } else {
                view.others.insert(node, state);
            }
        }
        view
    }
}

/// The Gateway's content hash `report` says its Envoy ACKed, if it says.
fn acked_hash(report: &AckReport, current: &Current<'_>, recent: &Recent) -> Option<String> {
    if report.acked_snapshot == current.snapshot.version {
        return Some(current.resources.hash.clone());
    }
    if let Some(hash) = report.acked.get(&current.key) {
        return Some(hash.clone());
    }
    (!report.acked_snapshot.is_empty())
        .then(|| recent.in_snapshot(&report.acked_snapshot, current.gw))
        .flatten()
        .map(|prints| prints.hash.clone())
}

impl Reports {
    /// Per Gateway of `snapshot`, per node that must serve it, what it serves.
    pub fn per_node(
        &self,
        snapshot: &Snapshot,
        members: &Members,
    ) -> BTreeMap<ObjectRef, GatewayNodes> {
        let recent = self.recent.lock().expect("recent snapshots lock");
        let nodes = self.nodes.lock().expect("reports lock");
        snapshot
            .gateways
            .iter()
            .map(|(gw, resources)| {
                let current = Current {
                    snapshot,
                    gw,
                    resources,
                    key: gw.to_string(),
                };
                let (reporting, unreported) = members.required(gw, &nodes);
                let mut view = GatewayNodes {
                    hash: resources.hash.clone(),
                    served: 0,
                    others: unreported
                        .into_iter()
                        .map(|n| (n, NodeState::Unreported))
                        .collect(),
                    acked: BTreeMap::new(),
                    acked_snapshot: BTreeMap::new(),
                };
                for node in reporting.into_iter().flatten() {
                    let report = &node.report;
                    // The common case, without a join: the report covers the
                    // Gateway whole (what the join's `whole` says) and no NACK.
                    let whole = report.acked_snapshot == snapshot.version
                        || report.acked.get(&current.key) == Some(&resources.hash);
                    if whole && !report.nacked.contains_key(&current.key) {
                        view.served += 1;
                        continue;
                    }
                    let served = join(&[Some(node)], &current, &recent);
                    let state = match (&served.gateway, &served.pending) {
                        // Envoy's own words; the node is the map's key.
                        (AckState::Nacked(rejection), _) => NodeState::Nacked {
                            message: rejection.message.clone(),
                        },
                        (AckState::Acked, Pending::Only(p)) if p.is_empty() => NodeState::Served,
                        (AckState::Acked, Pending::Only(p)) => NodeState::Behind {
                            pending: p.iter().cloned().collect(),
                        },
                        (AckState::Pending, Pending::Only(p)) => NodeState::Behind {
                            pending: std::iter::once(aether_ir::Kind::Gateway.as_str().to_string())
                                .chain(p.iter().cloned())
                                .collect(),
                        },
                        (_, _) => NodeState::Behind { pending: vec![] },
                    };
                    if state == NodeState::Served {
                        view.served += 1;
                        continue;
                    }
                    if let Some(hash) = acked_hash(report, &current, &recent) {
                        view.acked.insert(report.node.clone(), hash);
                    }
                    if !report.acked_snapshot.is_empty() {
                        view.acked_snapshot
                            .insert(report.node.clone(), report.acked_snapshot.clone());
                    }
                    view.others.insert(report.node.clone(), state);
                }
                (gw.clone(), view)
            })
            .collect()
    }
}

impl Reports {
    /// Per node that reports, whether its Envoy has an ADS stream open.
    pub fn envoy_connected(&self) -> BTreeMap<String, bool> {
        let nodes = self.nodes.lock().expect("reports lock");
        nodes
            .iter()
            .map(|(node, r)| (node.clone(), r.report.envoy_connected))
            .collect()
    }
}

/// `aether_edge_fleet_envoy_connected{node}` (under a registry prefixed
/// `aether_edge`), read from the last reports at each scrape: a node that
/// stops reporting leaves no series behind.
#[derive(Clone)]
pub struct EnvoyConnected(pub Reports);

impl std::fmt::Debug for EnvoyConnected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("EnvoyConnected").finish_non_exhaustive()
    }
}

impl Collector for EnvoyConnected {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let mut family = encoder.encode_descriptor(
            "fleet_envoy_connected",
            "Per reporting node, whether its Envoy has an ADS stream open to its agent (leader).",
            None,
            MetricType::Gauge,
        )?;
        for (node, connected) in self.0.envoy_connected() {
            let labels = [("node", node.as_str())];
            ConstGauge::new(i64::from(connected)).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{mk_report, mk_snapshot};

    #[test]
    fn each_member_node_is_served_behind_nacked_or_unreported_with_what_it_acked() {
        let old = mk_snapshot(b"v1");
        let snapshot = mk_snapshot(b"v2");
        let gw = ObjectRef::new("ns", "gw");
        let reports = Reports::default();
        reports.remember(&old);
        reports.remember(&snapshot);

        let mut a = mk_report("a", true);
        a.acked_snapshot = snapshot.version.clone();
        reports.apply(a);
        let mut b = mk_report("b", true);
        b.acked_snapshot = old.version.clone();
        reports.apply(b);
        let mut c = mk_report("c", true);
        c.nacked
            .insert("ns/gw".into(), "rejected: bad regex".into());
        reports.apply(c);
        let members = Members {
            per_gateway: BTreeMap::from([(
                gw.clone(),
                ["a", "b", "c", "d"].map(String::from).into(),
            )]),
            ..Default::default()
        };

        let view = &reports.per_node(&snapshot, &members)[&gw];
        assert_eq!(view.hash, snapshot.gateways[&gw].hash);
        assert_eq!((view.served, view.total()), (1, 4), "a serves it");
        assert!(!view.others.contains_key("a"));
        assert!(
            matches!(&view.others["b"], NodeState::Behind { .. }),
            "{:?}",
            view.others["b"]
        );
        assert_eq!(
            view.others["c"],
            NodeState::Nacked {
                message: "rejected: bad regex".into()
            }
        );
        assert_eq!(view.others["d"], NodeState::Unreported);
        // b ACKed the Gateway as of the older snapshot.
        assert_eq!(view.acked["b"], old.gateways[&gw].hash);
        assert_ne!(view.acked["b"], view.hash);
        assert!(!view.acked.contains_key("c") && !view.acked.contains_key("d"));
        assert_eq!(view.acked_snapshot["b"], old.version);
        assert_eq!(view.acked_snapshot.len(), 1, "{:?}", view.acked_snapshot);
        let connected = reports.envoy_connected();
        assert_eq!(connected.get("a"), Some(&true));
        assert!(!connected.contains_key("d"), "d never reported");
    }
}
