//! Incremental (Delta) ADS: one stream's state machine, with no networking in it.
//!
//! ```text
//!  per type:  subscription (wildcard and/or names)
//!             held      name → version Envoy holds once our responses are applied
//!             in flight nonce → (updated versions, removed names)
//!             acked     name → version Envoy confirmed
//!             parked    name → version Envoy rejected (never sent again)
//!             suspects  name → version blamed together, tried one at a time
//! ```
//!
//! Delta requests carry no version, so every response remembers, by nonce, what it
//! changed; an ACK of that nonce moves exactly that into `acked`. A response carries
//! only resources whose version differs from what Envoy holds (starting from the
//! `initial_resource_versions` it reports on a new stream), and `removed_resources`
//! for held resources that left the snapshot or the subscription. When Envoy
//! rejects a response and names the resources at fault, it took the rest: those
//! count as ACKed, and only the named ones are parked. When it names none and the
//! response changed several resources, one of them is bad and the rest may be
//! fine: they become suspects, sent again one per response until each is taken
//! or parked, so one Gateway's bad resource holds back no other's. Subscription
//! changes are deltas, so they are applied even when the nonce is stale. A wildcard
//! subscriber's first request is always answered, even with nothing new, since
//! Envoy waits for that answer to finish initializing. As in SotW, an update to
//! CDS is followed by the endpoints of the clusters it updated.

use crate::event::{Event, Nack, Output, blame};
use crate::gate::{Acked, Gate};
use crate::subscription::{Subscription, Versions};
use aether_xds::{ResourceType, Snapshot};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, Resource as DeltaResource,
};
use envoy_types::pb::google::protobuf::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[cfg(test)]
mod tests;

/// Responses per type remembered while waiting for Envoy's ACK or NACK.
const MAX_IN_FLIGHT: usize = 256;

/// One Delta ADS stream.
#[derive(Debug)]
pub struct DeltaStream {
    /// The desired snapshot; what is sent is the gate's view of it.
    snapshot: Arc<Snapshot>,
    gate: Gate,
    node_id: Option<String>,
    last_nonce: u64,
    types: BTreeMap<ResourceType, TypeState>,
}

#[derive(Debug, Default)]
struct TypeState {
    subscription: Subscription,
    held: Versions,
    in_flight: BTreeMap<u64, Sent>,
    acked: Versions,
    parked: Versions,
    suspects: Versions,
    nack: Option<Nack>,
}

#[derive(Debug)]
struct Sent {
    system_version: String,
    updated: Versions,
    removed: BTreeSet<String>,
}

impl DeltaStream {
    /// A stream that removes what nothing names any more as soon as Envoy
    /// ACKed the config that stopped naming it (no grace).
    pub fn new(snapshot: Arc<Snapshot>) -> Self {
        Self::with_removal_grace(snapshot, Duration::ZERO)
    }

    /// A stream that keeps what nothing names any more for `grace` after
    /// that (see [`crate::gate`]).
    pub fn with_removal_grace(snapshot: Arc<Snapshot>, grace: Duration) -> Self {
        DeltaStream {
            gate: Gate::new(&snapshot, grace, Instant::now()),
            snapshot,
            node_id: None,
            last_nonce: 0,
            types: BTreeMap::new(),
        }
    }

    /// The Envoy node id, from the first request that carried one.
    pub fn node_id(&self) -> Option<&str> {
        self.node_id.as_deref()
    }

    pub fn acked(&self, ty: ResourceType) -> Option<&Versions> {
        self.types.get(&ty).map(|s| &s.acked)
    }

    pub fn nack(&self, ty: ResourceType) -> Option<&Nack> {
        self.types.get(&ty).and_then(|s| s.nack.as_ref())
    }

    /// When [`DeltaStream::on_tick`] has something to do: a removal's grace ends.
    pub fn wake_at(&self) -> Option<Instant> {
        self.gate.wake_at()
    }

    /// Time passed: send what the gate now lets through (removals past their grace).
    pub fn on_tick(&mut self, now: Instant) -> Output<DeltaDiscoveryResponse> {
        let mut out = Output::default();
        if self.regate(now) {
            self.respond_all(&mut out);
        }
        out
    }

    /// Recomputes the gate's view; whether it changed.
    fn regate(&mut self, now: Instant) -> bool {
        let acked: Acked<'_> = self.types.iter().map(|(ty, s)| (*ty, &s.acked)).collect();
        let refused: Acked<'_> = self.types.iter().map(|(ty, s)| (*ty, &s.parked)).collect();
        self.gate.regate(&self.snapshot, &acked, &refused, now)
    }

    pub fn on_request(&mut self, req: DeltaDiscoveryRequest) -> Output<DeltaDiscoveryResponse> {
        self.on_request_at(req, Instant::now())
    }

    pub fn on_request_at(
        &mut self,
        req: DeltaDiscoveryRequest,
        now: Instant,
    ) -> Output<DeltaDiscoveryResponse> {
        let mut out = Output::default();
        if self.node_id.is_none()
            && let Some(node) = &req.node
        {
            self.node_id = Some(node.id.clone());
        }
        let Some(ty) = ResourceType::from_type_url(&req.type_url) else {
            tracing::debug!(type_url = %req.type_url, "ignoring request for a type we do not serve");
            return out;
        };
        let Some(state) = self.types.get_mut(&ty) else {
            // First request of this type on the stream: Envoy states what it holds.
            let held: Versions = req.initial_resource_versions.into_iter().collect();
            self.gate.reported(ty, held.keys());
            let state = TypeState {
                subscription: Subscription::from_delta_initial(ty, &req.resource_names_subscribe),
                acked: held.clone(),
                held,
                ..Default::default()
            };
            if !state.acked.is_empty() {
                out.events.push(Event::Acked {
                    ty,
                    versions: state.acked.clone(),
                });
            }
            // A wildcard subscriber waits for a first answer even if it is empty.
            let force = state.subscription.wildcard;
            self.types.insert(ty, state);
            // What Envoy says it holds may let held-back resources through.
            let changed = self.regate(now);
            self.respond(ty, force, &mut out);
            if changed {
                self.respond_all(&mut out);
            }
            return out;
        };

        if let Some(sent) = state.take_in_flight(&req.response_nonce) {
            match &req.error_detail {
                None => out.events.push(state.ack(ty, sent)),
                Some(status) => out.events.extend(state.nack(ty, sent, &status.message)),
            }
        } else if !req.response_nonce.is_empty() {
            tracing::trace!(ty = ty.short_name(), nonce = %req.response_nonce, "stale nonce");
        }

        // Re-subscribing a name asks for it again, whatever Envoy held.
        for name in &req.resource_names_subscribe {
            state.held.remove(name);
        }
        state.subscription.subscribe(&req.resource_names_subscribe);
        state
            .subscription
            .unsubscribe(&req.resource_names_unsubscribe);
        // Envoy forgets what it unsubscribed from; no removal is sent for it.
        let subscription = &state.subscription;
        let before = state.acked.len();
        state.held.retain(|name, _| subscription.covers(name));
        state.acked.retain(|name, _| subscription.covers(name));
        if state.acked.len() != before {
            out.events.push(Event::Acked {
                ty,
                versions: state.acked.clone(),
            });
        }
        let changed = !out.events.is_empty() && self.regate(now);
        self.respond(ty, false, &mut out);
        // What Envoy took may let held-back resources through.
        if changed {
            self.respond_all(&mut out);
        }
        out
    }

    /// A new snapshot: send what changed, per type in CDS, EDS, LDS, RDS, SDS order.
    pub fn on_snapshot(&mut self, snapshot: Arc<Snapshot>) -> Output<DeltaDiscoveryResponse> {
        self.on_snapshot_at(snapshot, Instant::now())
    }

    pub fn on_snapshot_at(
        &mut self,
        snapshot: Arc<Snapshot>,
        now: Instant,
    ) -> Output<DeltaDiscoveryResponse> {
        let mut out = Output::default();
        self.snapshot = snapshot;
        self.regate(now);
        self.respond_all(&mut out);
        out
    }

    /// Sends what changed of every type, in push order. Endpoints sent right
    /// after their clusters are not sent again: they are held then.
    fn respond_all(&mut self, out: &mut Output<DeltaDiscoveryResponse>) {
        for ty in ResourceType::ALL {
            self.respond(ty, false, out);
        }
    }

    /// Sends what changed for `ty`; after clusters, the endpoints of those clusters.
    fn respond(&mut self, ty: ResourceType, force: bool, out: &mut Output<DeltaDiscoveryResponse>) {
        let Some(updated) = self.respond_one(ty, force, out) else {
            return;
        };
        if ty == ResourceType::Cluster
            && let Some(eds) = self.types.get_mut(&ResourceType::Endpoint)
        {
            // An updated cluster warms again and waits for its endpoints.
            for name in updated.keys() {
                if self
                    .gate
                    .view()
                    .version_of(ResourceType::Endpoint, name)
                    .is_some()
                {
                    eds.held.remove(name);
                }
            }
            self.respond_one(ResourceType::Endpoint, false, out);
        }
    }

    /// Returns the updated versions if a response was sent.
    fn respond_one(
        &mut self,
        ty: ResourceType,
        force: bool,
        out: &mut Output<DeltaDiscoveryResponse>,
    ) -> Option<Versions> {
        let state = self.types.get_mut(&ty)?;
        let selected = state.subscription.select_in(self.gate.view(), ty);
        let wanted = |name: &str| selected.get(name).map(|r| &r.version);
        let (held, parked) = (&state.held, &state.parked);
        state.suspects.retain(|name, v| {
            wanted(name) == Some(v) && held.get(name) != Some(v) && parked.get(name) != Some(v)
        });
        let trial = state.suspects.keys().next().cloned();
        let mut resources = Vec::new();
        let mut updated = Versions::new();
        for (name, r) in &selected {
            let already_held = state.held.get(*name) == Some(&r.version);
            let rejected = state.parked.get(*name) == Some(&r.version);
            let waiting =
                state.suspects.get(*name) == Some(&r.version) && trial.as_deref() != Some(*name);
            if already_held || rejected || waiting {
                continue;
            }
            updated.insert(name.to_string(), r.version.clone());
            resources.push(DeltaResource {
                name: name.to_string(),
                version: r.version.clone(),
                resource: Some(Any::clone(&r.body)),
                ..Default::default()
            });
        }
        let gate = &self.gate;
        let removed: BTreeSet<String> = state
            .held
            .keys()
            .filter(|name| !selected.contains_key(name.as_str()) && !gate.pinned(ty, name))
            .cloned()
            .collect();
        if updated.is_empty() && removed.is_empty() && !force {
            return None;
        }
        for (name, version) in &updated {
            state.held.insert(name.clone(), version.clone());
        }
        state.held.retain(|name, _| !removed.contains(name));
        self.last_nonce += 1;
        let nonce = self.last_nonce;
        out.responses.push(DeltaDiscoveryResponse {
            system_version_info: self.snapshot.version.clone(),
            resources,
            type_url: ty.type_url().to_string(),
            removed_resources: removed.iter().cloned().collect(),
            nonce: nonce.to_string(),
            ..Default::default()
        });
        // Envoy answers every response; should it not, remember a bounded number.
        while state.in_flight.len() >= MAX_IN_FLIGHT {
            state.in_flight.pop_first();
        }
        state.in_flight.insert(
            nonce,
            Sent {
                system_version: self.snapshot.version.clone(),
                updated: updated.clone(),
                removed,
            },
        );
        Some(updated)
    }
}

/// Sets what Envoy holds for `name` back to what it ACKed.
fn restore(held: &mut Versions, acked: &Versions, name: &str) {
    match acked.get(name) {
        Some(v) => held.insert(name.to_string(), v.clone()),
        None => held.remove(name),
    };
}

impl TypeState {
    /// Envoy applied the response `sent`.
    fn ack(&mut self, ty: ResourceType, sent: Sent) -> Event {
        for (name, version) in &sent.updated {
            self.acked.insert(name.clone(), version.clone());
            self.parked.remove(name);
        }
        self.acked.retain(|name, _| !sent.removed.contains(name));
        self.nack = None;
        Event::Acked {
            ty,
            versions: self.acked.clone(),
        }
    }

    /// Envoy rejected the response `sent`. Listeners and clusters it applies one
    /// by one: when Envoy names the rejected ones, it took the rest of the
    /// response. Route tables and endpoints it does not: what it did not name
    /// is sent again.
    fn nack(&mut self, ty: ResourceType, sent: Sent, message: &str) -> Vec<Event> {
        let mut events = Vec::new();
        let blame = blame(&sent.updated, &self.acked, message);
        // Route tables and endpoints are all or nothing: the rest of the
        // response was not taken even when Envoy names the bad one.
        let one_by_one = crate::sotw::applies_one_by_one(ty);
        let took = |name: &String| one_by_one && blame.named && !blame.rejected.contains_key(name);
        let mut acked_changed = false;
        for (name, version) in &sent.updated {
            if took(name) {
                self.acked.insert(name.clone(), version.clone());
                self.parked.remove(name);
                acked_changed = true;
            } else if self.held.get(name) == Some(version) {
                // Envoy still holds what it ACKed before, unless a later response
                // in flight has moved on already.
                restore(&mut self.held, &self.acked, name);
            }
        }
        for name in &sent.removed {
            if one_by_one && blame.named {
                acked_changed |= self.acked.remove(name).is_some();
            } else if !self.held.contains_key(name) {
                restore(&mut self.held, &self.acked, name);
            }
        }
        if acked_changed {
            events.push(Event::Acked {
                ty,
                versions: self.acked.clone(),
            });
        }
        let nack = Nack {
            version: sent.system_version,
            // Blamed on the whole text; kept redacted, one line, bounded.
            message: aether_ir::untrusted::message(message),
            rejected: blame.rejected,
        };
        if !blame.named && nack.rejected.len() > 1 {
            // Which one is bad is not known: try them one by one.
            self.suspects = nack.rejected.clone();
        } else {
            self.parked
                .extend(nack.rejected.iter().map(|(n, v)| (n.clone(), v.clone())));
        }
        self.nack = Some(nack.clone());
        events.push(Event::Nacked { ty, nack });
        events
    }

    /// The response a nonce answers, if it is one still in flight. Envoy answers
    /// responses in order, so older ones still in flight are dropped with it.
    fn take_in_flight(&mut self, nonce: &str) -> Option<Sent> {
        let n: u64 = nonce.parse().ok()?;
        let sent = self.in_flight.remove(&n)?;
        self.in_flight.retain(|k, _| *k > n);
        Some(sent)
    }
}
