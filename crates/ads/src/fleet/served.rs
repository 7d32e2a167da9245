//! Per object: does every connected Envoy serve its current config?
//!
//! ```text
//!  remember(snapshot) ── the snapshot's fragments (History), before any stream gets it
//!  served(snapshot) ── per Gateway: whole (every member current everywhere),
//!                      gateway (its own listeners), routes served everywhere
//! ```
//!
//! An Envoy that has not ACKed the newest version of a route table still serves
//! the routes that version carries unchanged: [`History`] keeps, per resource,
//! the fragments of the versions an Envoy may hold (see `aether_xds::parts`).

use super::{AckState, Fleet, NodeState, StreamState};
use aether_ir::ObjectRef;
use aether_xds::parts::OWN;
use aether_xds::{ObjectParts, ResourceType, Snapshot};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// Versions remembered per resource beyond those some stream holds.
const RECENT: usize = 4;

/// What the fleet serves of one Gateway of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayServed {
    /// Every member at the snapshot's version on every connected node.
    pub whole: bool,
    /// The Gateway's own share (its listeners): Acked when every node serves
    /// it; Nacked when a node rejected any of the Gateway's resources.
    pub gateway: AckState,
    /// Route keys whose current config every connected node serves.
    pub routes: BTreeSet<String>,
    /// Routes an Envoy refused, served as they were (`crate::holdback`):
    /// what their status says.
    pub refused: BTreeMap<String, String>,
}

type Fragments = Arc<BTreeMap<String, String>>;

/// Per resource, the fragments of its recent versions, newest last.
#[derive(Default)]
pub(super) struct History {
    versions: BTreeMap<(ResourceType, String), VecDeque<(String, Fragments)>>,
}

impl History {
    fn remember(&mut self, snapshot: &Snapshot, held: &BTreeSet<(ResourceType, &str, &str)>) {
        for ((ty, name), fragments) in &snapshot.fragments {
            let Some(version) = snapshot.version_of(*ty, name) else {
                continue;
            };
            let kept = self.versions.entry((*ty, name.clone())).or_default();
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
        self.versions
            .retain(|key, _| snapshot.fragments.contains_key(key));
    }

    fn fragment(&self, ty: ResourceType, name: &str, version: &str, key: &str) -> Option<&str> {
        self.versions
            .get(&(ty, name.to_string()))?
            .iter()
            .find(|(v, _)| v == version)?
            .1
            .get(key)
            .map(String::as_str)
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

    /// Per Gateway of `snapshot`, what every connected node serves of it. A
    /// version an Envoy holds is read from the fragments [`Fleet::remember`]
    /// kept of it; one never remembered serves only what is current.
    pub fn served(&self, snapshot: &Snapshot) -> BTreeMap<ObjectRef, GatewayServed> {
        self.served_among(snapshot, |_| true)
    }

    /// [`Fleet::served`] counting only the Envoy of `node`: an agent's report
    /// says what its own Envoy serves, and another client of its ADS server
    /// (a stray process with another node id) must neither hold it back nor
    /// put its NACK text into it.
    pub fn served_by(&self, node: &str, snapshot: &Snapshot) -> BTreeMap<ObjectRef, GatewayServed> {
        self.served_among(snapshot, |n| n == node)
    }

    /// Routes an Envoy refused, held back (`crate::holdback`): by route key,
    /// what their status says.
    pub fn refused_routes(&self) -> BTreeMap<String, String> {
        self.holdback()
            .holds()
            .into_iter()
            .filter_map(|(k, h)| Some((k.to_string(), h.refusal()?)))
            .collect()
    }

    fn served_among(
        &self,
        snapshot: &Snapshot,
        counts: impl Fn(&str) -> bool,
    ) -> BTreeMap<ObjectRef, GatewayServed> {
        let streams = self.streams();
        let mut nodes = super::nodes(&streams);
        nodes.retain(|n, _| counts(n));
        let history = &*self.history();
        let holds = self.refused_routes();
        snapshot
            .gateways
            .iter()
            .map(|(gw, resources)| {
                let standings: Vec<(&str, bool, bool)> = nodes
                    .iter()
                    .map(|(node, state)| {
                        let whole = state.serves(snapshot, resources);
                        let own = whole
                            || (!resources.own.parts.is_empty()
                                && serves(state, snapshot, history, OWN, &resources.own));
                        (*node, whole, own)
                    })
                    .collect();
                let any = !standings.is_empty();
                let whole = any && standings.iter().all(|(_, w, _)| *w);
                // A NACK of any of the Gateway's resources surfaces on the
                // Gateway, even while Envoy serves its listeners from before.
                let rejected =
                    nodes
                        .iter()
                        .zip(&standings)
                        .find_map(|((node, state), (_, whole, _))| {
                            if *whole {
                                return None;
                            }
                            let why = state.rejection(snapshot, resources)?;
                            Some(format!("Envoy {node} {why}"))
                        });
                let gateway = match rejected {
                    Some(msg) => AckState::Nacked(msg),
                    None if any && standings.iter().all(|(_, _, own)| *own) => AckState::Acked,
                    None => AckState::Pending,
                };
                let routes = if !any {
                    BTreeSet::new()
                } else {
                    resources
                        .routes
                        .iter()
                        .filter(|(key, parts)| {
                            nodes
                                .values()
                                .zip(&standings)
                                .all(|(state, (_, whole, _))| {
                                    *whole || serves(state, snapshot, history, key, parts)
                                })
                        })
                        .map(|(key, _)| key.clone())
                        .collect()
                };
                let refused = resources
                    .routes
                    .keys()
                    .filter_map(|k| holds.get(k).map(|h| (k.clone(), h.clone())))
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
