//! The fleet as the debug endpoint shows it: plain, serializable, sorted.

use super::NodeState;
use crate::subscription::{Versions, version_info};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FleetView {
    /// Connected nodes by id.
    pub nodes: BTreeMap<String, NodeView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeView {
    /// Open ADS streams from this node.
    pub streams: usize,
    /// By type short name (`CDS`, `EDS`, ...): what the node ACKed.
    pub acked: BTreeMap<String, TypeView>,
    /// The most recent NACK not since followed by an ACK of that type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_nack: Option<NackView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TypeView {
    /// The SotW `version_info` of this content (the same hash in Delta).
    pub version_info: String,
    /// Resource name → version.
    pub resources: Versions,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NackView {
    #[serde(rename = "type")]
    pub resource_type: String,
    pub version: String,
    pub message: String,
    /// The new or changed resources of the rejected response.
    pub resources: Vec<String>,
}

impl FleetView {
    pub(super) fn of(nodes: &BTreeMap<&str, NodeState<'_>>) -> Self {
        let nodes = nodes
            .iter()
            .map(|(id, state)| {
                let acked = state
                    .acked()
                    .iter()
                    .map(|(ty, merged)| {
                        let resources: Versions = merged
                            .iter()
                            .map(|(n, v)| (n.to_string(), v.to_string()))
                            .collect();
                        let view = TypeView {
                            version_info: version_info(&resources),
                            resources,
                        };
                        (ty.short_name().to_string(), view)
                    })
                    .collect();
                let last_nack = state.last_nack().map(|(ty, nack)| NackView {
                    resource_type: ty.short_name().to_string(),
                    version: nack.version.clone(),
                    message: nack.message.clone(),
                    resources: nack.rejected.keys().cloned().collect(),
                });
                let view = NodeView {
                    streams: state.streams.len(),
                    acked,
                    last_nack,
                };
                (id.to_string(), view)
            })
            .collect();
        FleetView { nodes }
    }
}
