//! Per object: does one node's Envoy serve its current config?
//!
//! ```text
//!  remember(snapshot) ── the snapshot's fragments (History), before any stream gets it
//!  served_by(node, snapshot) ── per Gateway: whole (every member current),
//!                               gateway (its own listeners), routes it serves
//! ```
//!
//! This is one node's side of the status gate, never the gate: each node's
//! answer becomes its `AckReport` and the gate is the join over the nodes
//! that must serve a Gateway (`aether_report::join`), one node or many.
//!
//! An Envoy that has not ACKed the newest version of a route table still serves
//! the routes that version carries unchanged: [`History`] keeps, per resource,
//! the fragments of the versions an Envoy may hold (see `aether_xds::parts`).

use super::{AckState, Fleet, NodeState, StreamState};
use aether_ir::{ObjectRef, Rejection};
use aether_xds::parts::OWN;
use aether_xds::{ObjectParts, ResourceType, Snapshot};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// Versions remembered per resource beyond those some stream holds.
const RECENT: usize = 4;

/// What one node's Envoy serves of one Gateway of a snapshot (whose route
/// keys it names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayServed<'s> {
    /// Every member at the snapshot's version.
    pub whole: bool,
    /// The Gateway's own share (its listeners): Acked when the Envoy serves
    /// it; Nacked when it rejected any of the Gateway's resources.
    pub gateway: AckState,
    /// Route keys whose current config the Envoy serves: the snapshot's own
    /// strings, none copied (a report is made on every ACK).
    pub routes: BTreeSet<&'s str>,
    /// Routes an Envoy refused, served as they were (`crate::holdback`):
    /// who refused each and Envoy's words.
    pub refused: BTreeMap<String, Rejection>,
}

type Fragments = Arc<aether_xds::KeyHashes>;

/// Per resource (by type, then name: a lookup by `&str` allocates nothing,
/// and a route table's history is read once per route), the fragments of its
/// recent versions, newest last.
#[derive(Default)]
pub(super) struct History {
    versions: BTreeMap<ResourceType, BTreeMap<String, VecDeque<(String, Fragments)>>>,
}

impl History {
    fn remember(&mut self, snapshot: &Snapshot, held: &BTreeSet<(ResourceType, &str, &str)>) {
        for ((ty, name), fragments) in &snapshot.fragments {
            let Some(version) = snapshot.version_of(*ty, name) else {
                continue;
            };
            let kept = self
                .versions
                .entry(*ty)
                .or_default()
                .entry(name.clone())
                .or_default();
            if !kept.iter().any(|(v, _)| v == version) {
                kept.push_back((version.to_string(), fragments.clone()));
            }
            // Drop the oldest versions no stream holds.
            let mut excess = kept.len().saturating_sub(RECENT);
            kept.retain(|(v, _)| {
                let drop = excess > 0 && !held.contains(&(*ty, name.as_str(), v.as_str()));
                if drop {
                    excess -= 1;
                }
                !drop
            });
        }
        // A resource gone from the snapshot serves no current object any more.
        for (ty, by_name) in &mut self.versions {
            by_name.retain(|name, _| snapshot.fragments.contains_key(&(*ty, name.clone())));
        }
        self.versions.retain(|_, by_name| !by_name.is_empty());
    }

    fn fragment(&self, ty: ResourceType, name: &str, version: &str, key: &str) -> Option<&str> {
        self.versions
            .get(&ty)?
            .get(name)?
            .iter()
            .find(|(v, _)| v == version)?
            .1
            .get(key)
            .map(|h| &**h)
    }
}

impl Fleet {
    /// Remembers a snapshot's fragments; call it before the snapshot can reach
    /// any stream, so every version an Envoy ACKs can be read.
    pub fn remember(&self, snapshot: &Snapshot) {
        let streams = self.streams();
        let held = held(&streams);
        self.history_mut().remember(snapshot, &held);
    }

    /// Per Gateway of `snapshot`, what the Envoy of `node` serves of it: the
    /// input of that node's `AckReport` (`aether_report::local_report`). A
    /// version it holds is read from the fragments [`Fleet::remember`] kept of
    /// it; one never remembered serves only what is current. Only this node
    /// counts: another client of the same ADS server (a stray process with
    /// another node id) neither holds it back nor puts its NACK into it.
    pub fn served_by<'s>(
        &self,
        node: &str,
        snapshot: &'s Snapshot,
    ) -> BTreeMap<ObjectRef, GatewayServed<'s>> {
        let streams = self.streams();
        let nodes = super::nodes(&streams);
        let state = nodes.get(node);
        let history = &*self.history();
        let holds = self.refused_routes();
        snapshot
            .gateways
            .iter()
            .map(|(gw, resources)| {
                let refused = holds
                    .iter()
                    .filter(|(k, _)| resources.routes.contains_key(k.as_str()))
                    .map(|(k, h)| (k.clone(), h.clone()))
                    .collect();
                let Some(state) = state else {
                    let nothing = GatewayServed {
                        whole: false,
                        gateway: AckState::Pending,
                        routes: BTreeSet::new(),
                        refused,
                    };
                    return (gw.clone(), nothing);
                };
                // Usually few or none: what is in flight to this Envoy.
                let lagging = state.lagging(snapshot, resources);
                let whole = lagging.is_empty();
                let own = whole
                    || (!resources.own.parts.is_empty()
                        && serves(state, snapshot, history, OWN, &resources.own));
                // A NACK of any of the Gateway's resources surfaces on the
                // Gateway, even while Envoy serves its listeners from before.
                let rejected = (!whole)
                    .then(|| state.rejection(node, snapshot, resources))
                    .flatten();
                let gateway = match rejected {
                    Some(rejection) => AckState::Nacked(rejection),
                    None if own => AckState::Acked,
                    None => AckState::Pending,
                };
                let routes = resources
                    .routes
                    .iter()
                    .filter(|(key, parts)| {
                        // A route's parts are members of its Gateway: one that
                        // reads no lagging member is served as it is now.
                        let lags = |(ty, name): &aether_xds::PartName| {
                            let by =
                                |m: &&(ResourceType, String)| (m.0, m.1.as_str()).cmp(&(*ty, name));
                            lagging.binary_search_by(by).is_ok()
                        };
                        let reads_lagging = || parts.parts.keys().any(lags);
                        whole || !reads_lagging() || serves(state, snapshot, history, key, parts)
                    })
                    .map(|(key, _)| &**key)
                    .collect();
                (
                    gw.clone(),
                    GatewayServed {
                        whole,
                        gateway,
                        routes,
                        refused,
                    },
                )
            })
            .collect()
    }

    /// Routes an Envoy refused, held back (`crate::holdback`): by route key,
    /// who refused it and Envoy's words.
    pub fn refused_routes(&self) -> BTreeMap<String, Rejection> {
        self.holdback()
            .holds()
            .into_iter()
            .filter_map(|(k, h)| Some((k.to_string(), h.refusal()?)))
            .collect()
    }
}

/// Every (type, name, version) some stream has ACKed.
fn held(streams: &[StreamState]) -> BTreeSet<(ResourceType, &str, &str)> {
    streams
        .iter()
        .flat_map(|s| {
            s.acked.iter().flat_map(|(ty, versions)| {
                versions
                    .iter()
                    .map(move |(name, v)| (*ty, name.as_str(), v.as_str()))
            })
        })
        .collect()
}

fn serves(
    state: &NodeState<'_>,
    snapshot: &Snapshot,
    history: &History,
    key: &str,
    parts: &ObjectParts,
) -> bool {
    parts.served_by(
        key,
        |ty, name| state.version_of(ty, name),
        |ty, name| snapshot.version_of(ty, name),
        |ty, name, version, key| history.fragment(ty, name, version, key),
    )
}
