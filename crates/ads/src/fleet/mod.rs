//! The fleet ACK view: what each connected Envoy holds, per node.
//!
//! ```text
//!  Fleet ── streams[id] = { node, protocol, acked[type][name] = version, nacks[type] }
//!        │        (one entry per open ADS stream; removed when the stream ends;
//!        │         a concurrent map: each stream writes its own entry)
//!        ├─ nodes()                  the node ids of the open streams
//!        ├─ served_by(node, snapshot) per Gateway: its listeners and each route,
//!        │                           as that node's Envoy serves them (`served.rs`);
//!        │                           the input of its `AckReport`, never the gate
//!        ├─ gateway_acks(snapshot)   per node, per Gateway: hash of what it ACKed
//!        ├─ gateway_state(snapshot, gw)  Acked / Pending / Nacked: whole Gateways
//!        │                           on every node (for the ADS tests, not status);
//!        │                           gateway_config_state: endpoints at any version
//!        ├─ debug_view()             per node, per type: ACKed version, last NACK
//!        ├─ metrics()                the ADS counters (`AdsMetrics`, registered by the binary)
//!        └─ subscribe()              a counter bumped on every change
//! ```
//!
//! Several streams may carry one node id (a reconnect overlapping the old stream);
//! they are merged by node, later streams winning per resource. A node with no open
//! stream is not in the view: when it comes back it starts from nothing until it
//! ACKs again, which is what Envoy's own state is worth after a restart.
//!
//! The status gate joins per-node reports (`aether_report::join`), one node
//! or many; see the crate docs for the one path.
//!
//! Many streams record at once while the status gate reads: the streams live in
//! a sharded map (`DashMap`), a stream's write locks only its shard, and a
//! reader copies the entries out (each type's ACKed versions are a shared
//! `Arc`, so a copy is a few pointers) and computes with no lock held. No ACK
//! waits for a read of the whole fleet, and no stream for another one. Every
//! read sorts the copies by stream id, so what it returns is in a stable order.

mod hold;
mod metrics;
mod served;
mod view;

#[cfg(test)]
mod tests;

pub use metrics::{AdsMetrics, Protocol};
pub use served::GatewayServed;
pub use view::{FleetView, NackView, NodeView, TypeView};

use crate::event::{Event, Nack};
use crate::holdback::HoldBack;
use crate::subscription::Versions;
use aether_ir::{AckState, ObjectRef, Rejection};
use aether_xds::{GatewayResources, ResourceType, Snapshot};
use dashmap::DashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tokio::sync::watch;

/// Shared by every stream of one ADS server; cheap to clone.
#[derive(Clone)]
pub struct Fleet {
    shared: Arc<Shared>,
    changes: Arc<watch::Sender<u64>>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Shared {
    next_stream: AtomicU64,
    streams: DashMap<u64, StreamState>,
    metrics: AdsMetrics,
    history: RwLock<served::History>,
    holdback: Mutex<HoldBack>,
}

#[derive(Clone)]
struct StreamState {
    id: u64,
    node: String,
    protocol: Protocol,
    acked: BTreeMap<ResourceType, Arc<Versions>>,
    nacks: BTreeMap<ResourceType, Nack>,
    /// The type of the most recent NACK, to tell which one is "last".
    last_nack: Option<ResourceType>,
    /// Rejections that still stand, newest last: each NACK's rejected resources
    /// that Envoy has not since ACKed at the rejected version. An ACK of other
    /// resources of the type does not lift one (the stream withholds what Envoy
    /// refused and sends the rest), so the Gateway that owns a refused resource
    /// keeps its reason while the others move on.
    refused: Vec<(ResourceType, Nack)>,
}

/// Standing rejections kept per stream; older ones are dropped first.
const MAX_REFUSED: usize = 32;

/// One open stream's registration; dropping it disconnects the stream.
#[derive(Debug)]
pub struct FleetStream {
    fleet: Fleet,
    id: u64,
}

/// One node's open streams, oldest first. Lookups go through the streams rather
/// than a merged copy, so asking about one Gateway costs its members, not the
/// fleet's size.
struct NodeState<'a> {
    streams: Vec<&'a StreamState>,
}

impl Default for Fleet {
    fn default() -> Self {
        Self::new()
    }
}

impl Fleet {
    pub fn new() -> Self {
        Fleet {
            shared: Arc::default(),
            changes: Arc::new(watch::Sender::new(0)),
        }
    }

    /// A counter that moves on every ACK, NACK, connect and disconnect.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Registers a stream from `node` (the first request's `node.id`).
    pub fn connect(&self, node: &str, protocol: Protocol) -> FleetStream {
        let id = self.shared.next_stream.fetch_add(1, Ordering::Relaxed) + 1;
        self.shared.streams.insert(
            id,
            StreamState {
                id,
                node: node.to_string(),
                protocol,
                acked: BTreeMap::new(),
                nacks: BTreeMap::new(),
                last_nack: None,
                refused: Vec::new(),
            },
        );
        self.metrics().connect(protocol);
        self.bump();
        FleetStream {
            fleet: self.clone(),
            id,
        }
    }

    /// The node ids of every open stream, sorted: the members of a fleet of
    /// Envoys connected to this server (standalone's whole fleet).
    pub fn nodes(&self) -> BTreeSet<String> {
        self.shared
            .streams
            .iter()
            .map(|e| e.value().node.clone())
            .collect()
    }

    /// Per connected node, per Gateway of `snapshot`: the hash over the versions
    /// that node ACKed, `None` while some member is not ACKed at all.
    pub fn gateway_acks(
        &self,
        snapshot: &Snapshot,
    ) -> BTreeMap<String, BTreeMap<ObjectRef, Option<String>>> {
        let streams = self.streams();
        nodes(&streams)
            .into_iter()
            .map(|(node, state)| {
                let per_gateway = snapshot
                    .gateways
                    .iter()
                    .map(|(gw, resources)| (gw.clone(), state.hash_of(resources)))
                    .collect();
                (node.to_string(), per_gateway)
            })
            .collect()
    }

    /// Whether every connected Envoy holds Gateway `gw` of `snapshot` whole:
    /// Acked when each one ACKed every member at its current version, Nacked
    /// when one that does not stands on a NACK of a member (the first such
    /// node by id), Pending otherwise and with no node connected. Not the
    /// status gate, which is per object and joins per-node reports
    /// (`aether_report::join`): this whole-Gateway answer is what the ADS
    /// server's own tests wait on.
    pub fn gateway_state(&self, snapshot: &Snapshot, gw: &ObjectRef) -> AckState {
        self.gateway_state_by(snapshot, gw, |node, snapshot, resources| {
            node.serves(snapshot, resources)
        })
    }

    /// As [`Fleet::gateway_state`], but endpoints at any version count, as
    /// they do in a Gateway's hash: whether every connected Envoy serves the
    /// Gateway's config, which pod churn does not move.
    pub fn gateway_config_state(&self, snapshot: &Snapshot, gw: &ObjectRef) -> AckState {
        self.gateway_state_by(snapshot, gw, |node, snapshot, resources| {
            node.lagging(snapshot, resources).is_empty()
        })
    }

    fn gateway_state_by(
        &self,
        snapshot: &Snapshot,
        gw: &ObjectRef,
        whole: impl Fn(&NodeState<'_>, &Snapshot, &GatewayResources) -> bool,
    ) -> AckState {
        let Some(resources) = snapshot.gateways.get(gw) else {
            return AckState::Pending;
        };
        let streams = self.streams();
        let nodes = nodes(&streams);
        let mut all_whole = !nodes.is_empty();
        for (node, state) in &nodes {
            if whole(state, snapshot, resources) {
                continue;
            }
            all_whole = false;
            if let Some(rejection) = state.rejection(node, snapshot, resources) {
                return AckState::Nacked(rejection);
            }
        }
        if all_whole {
            AckState::Acked
        } else {
            AckState::Pending
        }
    }

    /// Per node, per type: the ACKed version and resources, and the last NACK.
    pub fn debug_view(&self) -> FleetView {
        let streams = self.streams();
        FleetView::of(&nodes(&streams))
    }

    /// The ADS counters: registered once by the binary, read by tests.
    pub fn metrics(&self) -> &AdsMetrics {
        &self.shared.metrics
    }

    /// Counts a stream refused for want of room.
    pub fn stream_refused(&self) {
        self.metrics().refuse();
    }

    /// Counts a stream ended because its peer stopped reading.
    pub fn slow_reader_disconnected(&self) {
        self.metrics().stall();
    }

    /// Counts a response sent on some stream.
    pub fn record_push(&self, ty: ResourceType, protocol: Protocol) {
        self.metrics().push(ty, protocol);
    }

    fn record(&self, id: u64, event: &Event) {
        {
            // This stream's entry alone (its shard's lock), released before
            // the counters are touched.
            let Some(mut stream) = self.shared.streams.get_mut(&id) else {
                return;
            };
            match event {
                Event::Acked { ty, versions } => {
                    for (t, nack) in &mut stream.refused {
                        if t == ty {
                            nack.rejected
                                .retain(|name, v| versions.get(name) != Some(v));
                        }
                    }
                    stream.refused.retain(|(_, nack)| !nack.rejected.is_empty());
                    stream.acked.insert(*ty, Arc::new(versions.clone()));
                    stream.nacks.remove(ty);
                    if stream.last_nack == Some(*ty) {
                        stream.last_nack = None;
                    }
                    drop(stream);
                    self.metrics().ack(*ty);
                }
                Event::Nacked { ty, nack } => {
                    if stream.refused.len() == MAX_REFUSED {
                        stream.refused.remove(0);
                    }
                    stream.refused.push((*ty, nack.clone()));
                    stream.nacks.insert(*ty, nack.clone());
                    stream.last_nack = Some(*ty);
                    drop(stream);
                    self.metrics().nack(*ty);
                }
            }
        }
        self.bump();
    }

    fn disconnect(&self, id: u64) {
        if let Some((_, stream)) = self.shared.streams.remove(&id) {
            self.metrics().disconnect(stream.protocol);
        }
        self.bump();
    }

    fn bump(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A copy of every open stream's state, oldest first: readers compute on
    /// it with no lock held.
    fn streams(&self) -> Vec<StreamState> {
        let mut streams: Vec<StreamState> = self
            .shared
            .streams
            .iter()
            .map(|e| e.value().clone())
            .collect();
        streams.sort_by_key(|s| s.id);
        streams
    }

    // A panic while holding a lock leaves plain data behind; keep serving it.
    fn history(&self) -> RwLockReadGuard<'_, served::History> {
        self.shared
            .history
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn history_mut(&self) -> RwLockWriteGuard<'_, served::History> {
        self.shared
            .history
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl FleetStream {
    /// Records what the stream's state machine learnt.
    pub fn record(&self, event: &Event) {
        self.fleet.record(self.id, event);
    }

    pub fn record_push(&self, ty: ResourceType, protocol: Protocol) {
        self.fleet.record_push(ty, protocol);
    }
}

impl Drop for FleetStream {
    fn drop(&mut self) {
        self.fleet.disconnect(self.id);
    }
}

/// Connected nodes by id, from [`Fleet::streams`] (oldest stream first).
fn nodes(streams: &[StreamState]) -> BTreeMap<&str, NodeState<'_>> {
    let mut nodes: BTreeMap<&str, NodeState<'_>> = BTreeMap::new();
    for stream in streams {
        nodes
            .entry(stream.node.as_str())
            .or_insert_with(|| NodeState {
                streams: Vec::new(),
            })
            .streams
            .push(stream);
    }
    nodes
}

impl<'a> NodeState<'a> {
    /// The version ACKed for a resource; the newest stream that has one wins.
    fn version_of(&self, ty: ResourceType, name: &str) -> Option<&'a str> {
        self.streams
            .iter()
            .rev()
            .find_map(|s| s.acked.get(&ty).and_then(|m| m.get(name)))
            .map(String::as_str)
    }

    fn hash_of(&self, resources: &GatewayResources) -> Option<String> {
        resources.hash_of(|ty, name| self.version_of(ty, name))
    }

    /// Every ACKed resource, per type, merged across streams (newest wins).
    fn acked(&self) -> BTreeMap<ResourceType, BTreeMap<&'a str, &'a str>> {
        let mut merged: BTreeMap<ResourceType, BTreeMap<&'a str, &'a str>> = BTreeMap::new();
        for stream in &self.streams {
            for (ty, versions) in &stream.acked {
                let m = merged.entry(*ty).or_default();
                for (name, version) in versions.iter() {
                    m.insert(name, version);
                }
            }
        }
        merged
    }

    /// The newest stream's most recent standing NACK.
    fn last_nack(&self) -> Option<(ResourceType, &'a Nack)> {
        self.streams.iter().rev().find_map(|s| {
            let ty = s.last_nack?;
            s.nacks.get(&ty).map(|n| (ty, n))
        })
    }

    /// The newest standing rejection of a resource of the Gateway at the
    /// version the snapshot still holds (a rejection of a version since
    /// replaced says nothing), as [`Rejection`] data: "<type> version <v>:
    /// <Envoy's message>". Its sentence is worded where status is assembled.
    fn rejection(
        &self,
        node: &str,
        snapshot: &Snapshot,
        resources: &GatewayResources,
    ) -> Option<Rejection> {
        self.nack_concerning(snapshot, resources).map(|(ty, nack)| {
            Rejection::new(
                node,
                format!(
                    "{} version {}: {}",
                    ty.short_name(),
                    short_version(&nack.version),
                    nack.message
                ),
            )
        })
    }

    fn nack_concerning(
        &self,
        snapshot: &Snapshot,
        resources: &GatewayResources,
    ) -> Option<(ResourceType, &'a Nack)> {
        self.streams.iter().rev().find_map(|s| {
            s.refused
                .iter()
                .rev()
                .find(|(ty, nack)| {
                    nack.rejected.iter().any(|(name, version)| {
                        resources.members.contains(&(*ty, name.clone()))
                            && snapshot.version_of(*ty, name) == Some(version.as_str())
                    })
                })
                .map(|(ty, nack)| (*ty, nack))
        })
    }
}

impl<'a> NodeState<'a> {
    /// Every member held at the snapshot's version, endpoints too: what the
    /// ADS server's own tests wait on ([`Fleet::gateway_state`]).
    fn serves(&self, snapshot: &Snapshot, resources: &GatewayResources) -> bool {
        resources.members.iter().all(|(ty, name)| {
            let acked = self.version_of(*ty, name);
            acked.is_some() && acked == snapshot.version_of(*ty, name)
        })
    }

    /// The Gateway's members this Envoy does not hold as the snapshot has
    /// them (at its version; of endpoints, any version), in member order: none
    /// when it serves the Gateway whole. Equal hashes, without hashing: this
    /// is the hot path of the status gate.
    fn lagging<'r>(
        &self,
        snapshot: &Snapshot,
        resources: &'r GatewayResources,
    ) -> Vec<&'r (ResourceType, String)> {
        (resources.members.iter())
            .filter(|(ty, name)| !self.holds_current(snapshot, *ty, name))
            .collect()
    }

    fn holds_current(&self, snapshot: &Snapshot, ty: ResourceType, name: &str) -> bool {
        let acked = self.version_of(ty, name);
        acked.is_some() && (ty.any_version_serves() || acked == snapshot.version_of(ty, name))
    }
}

/// Versions are sha256 hex; twelve characters identify one in a message.
fn short_version(v: &str) -> &str {
    v.get(..12).unwrap_or(v)
}
