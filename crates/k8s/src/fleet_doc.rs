//! The fleet as the leader sees it, published for `aether-edge fleet`: a
//! ConfigMap in the edge namespace that anyone with a kubeconfig can read.
//!
//! ```text
//!  Join (status gate inputs) ──Reports::per_node──► FleetJoin ──Tracker──► FleetDoc
//!      (same reports, same members as the gate)       (since when each node is behind)
//!  FleetDoc ──changed? at most once a second──► ConfigMap aether-edge-fleet, key fleet.json (SSA)
//! ```
//!
//! Only what is not served is listed per node (a Gateway every node serves is
//! its hash and two counts), and times are when a state began, never how long
//! it has lasted: the document changes when the fleet does, not every second.

use crate::service::FIELD_MANAGER;
use aether_ir::ObjectRef;
use aether_report::{GatewayNodes, NodeState};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;
use tracing::warn;

/// Not watched into the store (`watch::CONFIG_MAPS` names it).
pub const CONFIGMAP: &str = "aether-edge-fleet";
pub const KEY: &str = "fleet.json";
/// Writes at most this often.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// What one status join knows of the fleet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetJoin {
    /// The leader's snapshot version.
    pub version: String,
    pub per_node: BTreeMap<ObjectRef, GatewayNodes>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetDoc {
    /// The leader's identity (pod name).
    pub leader: String,
    /// The leader's snapshot version.
    pub snapshot: String,
    /// Unix seconds: when the leader wrote this (it writes on a change only).
    #[serde(default)]
    pub updated: u64,
    /// By `namespace/name`.
    pub gateways: BTreeMap<String, GatewayDoc>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayDoc {
    /// The leader's content hash of the Gateway.
    pub hash: String,
    /// Nodes that take its traffic (or, none being known, that report).
    pub nodes: usize,
    /// Of those, the ones that serve it at the leader's config.
    pub served: usize,
    /// The others, by node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub behind: BTreeMap<String, NodeDoc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDoc {
    #[serde(flatten)]
    pub state: NodeState,
    /// The Gateway's content hash this node's Envoy ACKed, where its report says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked: Option<String>,
    /// The snapshot version this node's Envoy ACKed whole, where it reports one:
    /// one other than the leader's is another config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_snapshot: Option<String>,
    /// Unix seconds: since when the node has not served this Gateway.
    pub since: u64,
}

/// Since when each (Gateway, node) has not been served; forgets a pair once
/// it is served again (or gone).
#[derive(Debug, Default)]
pub struct Tracker {
    since: BTreeMap<(String, String), u64>,
}

impl Tracker {
    /// The document for `join`, at `now` (unix seconds).
    pub fn doc(&mut self, leader: &str, join: &FleetJoin, now: u64) -> FleetDoc {
        let mut seen = BTreeMap::new();
        let gateways = join
            .per_node
            .iter()
            .map(|(gw, g)| {
                let key = gw.to_string();
                let mut behind = BTreeMap::new();
                for (node, state) in &g.others {
                    let pair = (key.clone(), node.clone());
                    let since = *self.since.get(&pair).unwrap_or(&now);
                    seen.insert(pair, since);
                    behind.insert(
                        node.clone(),
                        NodeDoc {
                            state: state.clone(),
                            acked: g.acked.get(node).cloned(),
                            acked_snapshot: g.acked_snapshot.get(node).cloned(),
                            since,
                        },
                    );
                }
                let doc = GatewayDoc {
                    hash: g.hash.clone(),
                    nodes: g.total(),
                    served: g.served,
                    behind,
                };
                (key, doc)
            })
            .collect();
        self.since = seen;
        FleetDoc {
            leader: leader.to_string(),
            snapshot: join.version.clone(),
            updated: 0,
            gateways,
        }
    }
}

/// The ConfigMap that carries `doc`.
pub fn configmap(namespace: &str, doc: &FleetDoc) -> ConfigMap {
    let json = serde_json::to_string_pretty(doc).unwrap_or_default();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP, "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "aether-edge"}},
        "data": {KEY: json},
    }))
    .expect("a ConfigMap")
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Leader only: keeps the fleet ConfigMap up to date with `joins`.
pub async fn publish(
    client: kube::Client,
    namespace: String,
    leader: String,
    mut joins: watch::Receiver<Arc<FleetJoin>>,
    mut is_leader: watch::Receiver<bool>,
) {
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, &namespace);
    let mut tracker = Tracker::default();
    let mut written: Option<FleetDoc> = None;
    loop {
        let join = joins.borrow_and_update().clone();
        let doc = tracker.doc(&leader, &join, unix_now());
        if *is_leader.borrow_and_update()
            && written.as_ref() != Some(&doc)
            && !join.version.is_empty()
        {
            let params = PatchParams::apply(FIELD_MANAGER).force();
            let stamped = FleetDoc {
                updated: unix_now(),
                ..doc.clone()
            };
            match api
                .patch(
                    CONFIGMAP,
                    &params,
                    &Patch::Apply(&configmap(&namespace, &stamped)),
                )
                .await
            {
                Ok(_) => written = Some(doc),
                Err(e) => {
                    warn!(error = %e, configmap = CONFIGMAP, "writing the fleet view failed; retrying")
                }
            }
            tokio::time::sleep(MIN_INTERVAL).await;
            continue;
        }
        tokio::select! {
            r = joins.changed() => if r.is_err() { return },
            r = is_leader.changed() => if r.is_err() { return },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(version: &str, states: &[(&str, NodeState)]) -> FleetJoin {
        let states = states.iter().map(|(n, s)| (n.to_string(), s.clone()));
        let mut view = GatewayNodes::from_states(&format!("hash-{version}"), states);
        if view.others.contains_key("b") {
            view.acked.insert("b".into(), "hash-v0".into());
        }
        FleetJoin {
            version: version.into(),
            per_node: BTreeMap::from([(ObjectRef::new("apps", "web"), view)]),
        }
    }

    #[test]
    fn the_store_s_watch_leaves_out_the_fleet_view() {
        let selector = format!("metadata.name!={CONFIGMAP}");
        assert_eq!(crate::watch::CONFIG_MAPS, selector);
    }

    #[test]
    fn a_node_keeps_its_since_while_behind_and_loses_it_once_served() {
        let mut t = Tracker::default();
        let behind = NodeState::Behind {
            pending: vec!["HTTPRoute/apps/r".into()],
        };
        let d1 = t.doc(
            "agent-a",
            &join("v1", &[("a", NodeState::Served), ("b", behind.clone())]),
            100,
        );
        let gw = &d1.gateways["apps/web"];
        assert_eq!((gw.nodes, gw.served), (2, 1));
        assert_eq!(gw.behind["b"].since, 100);
        assert_eq!(gw.behind["b"].acked.as_deref(), Some("hash-v0"));
        // Still behind later: the same document, so nothing to write.
        let d2 = t.doc(
            "agent-a",
            &join("v1", &[("a", NodeState::Served), ("b", behind.clone())]),
            160,
        );
        assert_eq!(d2, d1);
        // Served, then behind again: a new since.
        let d3 = t.doc(
            "agent-a",
            &join("v1", &[("a", NodeState::Served), ("b", NodeState::Served)]),
            170,
        );
        assert!(d3.gateways["apps/web"].behind.is_empty());
        let d4 = t.doc(
            "agent-a",
            &join("v2", &[("a", NodeState::Served), ("b", behind)]),
            200,
        );
        assert_eq!(d4.gateways["apps/web"].behind["b"].since, 200);
    }

    #[test]
    fn the_document_round_trips_through_its_configmap() {
        let mut t = Tracker::default();
        let nack = NodeState::Nacked {
            message: "Envoy b rejected RDS: bad regex".into(),
        };
        let doc = t.doc(
            "agent-a",
            &join("v1", &[("b", nack), ("c", NodeState::Unreported)]),
            5,
        );
        let cm = configmap("aether-ingress", &doc);
        let text = &cm.data.as_ref().unwrap()[KEY];
        let back: FleetDoc = serde_json::from_str(text).unwrap();
        assert_eq!(back, doc);
        assert!(text.contains("\"state\": \"nacked\""), "{text}");
        assert!(text.contains("bad regex"), "{text}");
    }
}
