//! Fleet reports: what one agent's Envoys serve, per Gateway, in a form another
//! process can join.
//!
//! ```text
//!  agent 1: Fleet ──report(snapshot)──► FleetReport ─┐
//!  agent 2: Fleet ──report(snapshot)──► FleetReport ─┼─► FleetReport::merge ──► gateway_state
//!  ...                                               ┘        (the leader, against its own snapshot)
//! ```
//!
//! In the DaemonSet each agent serves its local Envoy, so only the agent knows
//! what that Envoy ACKed; the leader writes status. A report carries, per node and
//! per Gateway, the hash of what the node ACKed and any rejection, so the leader
//! can compare against the hashes of its own snapshot (builds are deterministic:
//! the same store gives the same hashes everywhere) with the same rule as
//! [`Fleet::gateway_state`].

use super::{Fleet, GatewayAck, NodeGateway, join};
use aether_ir::ObjectRef;
use aether_xds::Snapshot;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FleetReport {
    /// Connected nodes by id.
    pub nodes: BTreeMap<String, NodeReport>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeReport {
    /// By Gateway (`namespace/name`); a Gateway the node knows nothing of is absent.
    pub gateways: BTreeMap<String, GatewayReport>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GatewayReport {
    /// The hash over the versions the node ACKed for the Gateway's resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_hash: Option<String>,
    /// Envoy's rejection of the Gateway's current config, as the status shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
}

impl Fleet {
    /// What the connected nodes serve of every Gateway of `snapshot`.
    pub fn report(&self, snapshot: &Snapshot) -> FleetReport {
        let inner = self.lock();
        let nodes = inner
            .nodes()
            .iter()
            .map(|(node, state)| {
                let gateways = snapshot
                    .gateways
                    .iter()
                    .filter_map(|(gw, resources)| {
                        let acked_hash = state.hash_of(resources);
                        let rejected = state.standing(snapshot, resources).rejected;
                        let known = acked_hash.is_some() || rejected.is_some();
                        known.then(|| {
                            (
                                gw.to_string(),
                                GatewayReport {
                                    acked_hash,
                                    rejected,
                                },
                            )
                        })
                    })
                    .collect();
                (node.to_string(), NodeReport { gateways })
            })
            .collect();
        FleetReport { nodes }
    }
}

impl FleetReport {
    /// Several agents' reports as one fleet. A node reported twice (an Envoy that
    /// moved between agents) takes the later report.
    pub fn merge(reports: impl IntoIterator<Item = FleetReport>) -> FleetReport {
        let mut merged = FleetReport::default();
        for report in reports {
            merged.nodes.extend(report.nodes);
        }
        merged
    }

    /// [`Fleet::gateway_state`] over the reported nodes, against `snapshot`'s hash.
    pub fn gateway_state(&self, snapshot: &Snapshot, gw: &ObjectRef) -> GatewayAck {
        let Some(resources) = snapshot.gateways.get(gw) else {
            return GatewayAck::Pending;
        };
        self.join(gw, &resources.hash)
    }

    /// [`FleetReport::gateway_state`] for every Gateway of `snapshot`.
    pub fn gateway_states(&self, snapshot: &Snapshot) -> BTreeMap<ObjectRef, GatewayAck> {
        snapshot
            .gateways
            .iter()
            .map(|(gw, resources)| (gw.clone(), self.join(gw, &resources.hash)))
            .collect()
    }

    fn join(&self, gw: &ObjectRef, hash: &str) -> GatewayAck {
        let key = gw.to_string();
        join(self.nodes.iter().map(|(node, report)| {
            let standing = report
                .gateways
                .get(&key)
                .map(|g| NodeGateway {
                    serves_current: g.acked_hash.as_deref() == Some(hash),
                    rejected: g.rejected.clone(),
                })
                .unwrap_or_default();
            (node.as_str(), standing)
        }))
    }
}
