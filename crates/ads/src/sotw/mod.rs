//! State-of-the-world ADS: one stream's state machine, with no networking in it.
//!
//! ```text
//!  DiscoveryRequest ─┐                         ┌─► DiscoveryResponse* (CDS, EDS, LDS, RDS, SDS)
//!                    ├─► SotwStream (per type) ─┤
//!  Arc<Snapshot> ────┘   subscription           └─► Event* (Acked / Nacked)
//!                        last sent (nonce, version_info, versions)
//!                        ACKed versions, parked (NACKed) versions
//! ```
//!
//! Per type, the first request whose `response_nonce` is the last nonce sent is an
//! ACK (no `error_detail`) or a NACK; later requests with that nonce only restate
//! the subscription (Envoy clears the error after sending a NACK, so they are not
//! ACKs of the rejected content). Any other non-empty nonce is stale and the
//! request is ignored whole, as Envoy will restate its interest with the latest
//! nonce.
//!
//! A NACKed content is parked: it is not sent again until the snapshot selects
//! something different for that type (no resend loop). When Envoy names the
//! listeners or clusters it rejected, it kept the others: those count as ACKed.
//!
//! Route tables, endpoints and secrets Envoy takes all or nothing, so one bad
//! resource would hold back every other in the same response. A resource
//! refused alone is quarantined: withheld (left out of the response, so Envoy
//! keeps the version it held) while the snapshot still selects the refused
//! version, and the rest of the type flows on. When a NACK blames several
//! resources at once, they are tried one per response until each is taken or
//! quarantined.
//!
//! A response is sent only when the selected content differs from what was last
//! sent on this stream, except that the first request of a type is always answered
//! and EDS is always answered right after a CDS response (updated clusters warm
//! again and wait for their endpoints; without it Envoy waits its 15 s initial
//! fetch timeout).

use crate::event::{Event, Nack, Output, blame};
use crate::gate::{Acked, Gate};
use crate::subscription::{Subscription, Versions, version_info, versions_of};
use aether_xds::{Resource, ResourceType, Snapshot};
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::Any;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[cfg(test)]
pub(crate) mod tests;

/// One SotW ADS stream.
#[derive(Debug)]
pub struct SotwStream {
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
    sent: Option<Sent>,
    acked: Option<Versions>,
    /// The whole content of the last NACKed response: not sent again.
    parked: Option<Versions>,
    nack: Option<Nack>,
    /// All-or-nothing types: resources refused alone, at the refused version.
    quarantined: Versions,
    /// All-or-nothing types: resources blamed together, tried one at a time.
    suspects: std::collections::BTreeSet<String>,
}

#[derive(Debug, Clone)]
struct Sent {
    nonce: String,
    version_info: String,
    versions: Versions,
    /// Envoy already ACKed or NACKed this response.
    answered: bool,
}

/// Whether Envoy applies the resources of a response of this type one by one,
/// keeping the good ones when it rejects others (listeners and clusters; route
/// tables and endpoints are all or nothing, as a real Envoy 1.40 shows, in
/// SotW and in Delta alike, even when its message names the bad one).
pub(crate) fn applies_one_by_one(ty: ResourceType) -> bool {
    matches!(ty, ResourceType::Cluster | ResourceType::Listener)
}

/// What Envoy holds after a response it partly rejected: the response, with the
/// rejected resources at the version it `held` before (or absent).
fn partly_applied(sent: &Versions, held: &Versions, rejected: &Versions) -> Versions {
    sent.iter()
        .filter_map(|(name, version)| {
            if rejected.contains_key(name) {
                held.get(name).map(|v| (name.clone(), v.clone()))
            } else {
                Some((name.clone(), version.clone()))
            }
        })
        .collect()
}

impl TypeState {
    /// Envoy answered the response `sent`: an ACK, or a NACK with `error`.
    fn answer(&mut self, ty: ResourceType, sent: Sent, error: Option<&str>) -> Vec<Event> {
        if let Some(last) = self.sent.as_mut() {
            last.answered = true;
        }
        let Some(message) = error else {
            self.acked = Some(sent.versions.clone());
            self.nack = None;
            // Envoy took something else since the rejection: a later return to
            // the rejected content deserves a fresh answer.
            if self.parked.as_ref() != Some(&sent.versions) {
                self.parked = None;
            }
            return vec![Event::Acked {
                ty,
                versions: sent.versions,
            }];
        };
        let mut events = Vec::new();
        let held = self.acked.clone().unwrap_or_default();
        let blame = blame(&sent.versions, &held, message);
        if blame.named && applies_one_by_one(ty) {
            let now = partly_applied(&sent.versions, &held, &blame.rejected);
            self.acked = Some(now.clone());
            events.push(Event::Acked { ty, versions: now });
        }
        if !applies_one_by_one(ty) {
            if blame.rejected.len() == 1 {
                for name in blame.rejected.keys() {
                    self.suspects.remove(name);
                }
                self.quarantined.extend(blame.rejected.clone());
            } else {
                self.suspects = blame.rejected.keys().cloned().collect();
            }
        }
        let nack = Nack {
            version: sent.version_info,
            // Blamed on the whole text; kept redacted, one line, bounded.
            message: aether_ir::untrusted::message(message),
            rejected: blame.rejected,
        };
        self.parked = Some(sent.versions);
        self.nack = Some(nack.clone());
        events.push(Event::Nacked { ty, nack });
        events
    }
}

impl TypeState {
    /// What to send of an all-or-nothing type: everything `selected`, except
    /// quarantined resources and all suspects but the one on trial, which stay
    /// at the version Envoy holds (left out of the response). Returns the
    /// versions Envoy holds once it takes the response, and the bodies to send.
    fn contain(&mut self, selected: &BTreeMap<&str, &Resource>) -> (Versions, Vec<Any>) {
        let held = self.acked.clone().unwrap_or_default();
        let wanted = |name: &str| selected.get(name).map(|r| r.version.as_str());
        self.quarantined
            .retain(|name, version| wanted(name) == Some(version.as_str()));
        self.suspects.retain(|name| {
            wanted(name).is_some_and(|v| held.get(name).map(String::as_str) != Some(v))
        });
        let trial = self.suspects.iter().next().cloned();
        let mut versions = Versions::new();
        let mut bodies = Vec::new();
        for (name, resource) in selected {
            let withheld = self.quarantined.get(*name) == Some(&resource.version)
                || (self.suspects.contains(*name) && trial.as_deref() != Some(*name));
            if withheld {
                if let Some(v) = held.get(*name) {
                    versions.insert(name.to_string(), v.clone());
                }
                continue;
            }
            versions.insert(name.to_string(), resource.version.clone());
            bodies.push(Any::clone(&resource.body));
        }
        (versions, bodies)
    }
}

impl SotwStream {
    /// A stream that removes what nothing names any more as soon as Envoy
    /// ACKed the config that stopped naming it (no grace).
    pub fn new(snapshot: Arc<Snapshot>) -> Self {
        Self::with_removal_grace(snapshot, Duration::ZERO)
    }

    /// A stream that keeps what nothing names any more for `grace` after
    /// that (see [`crate::gate`]).
    pub fn with_removal_grace(snapshot: Arc<Snapshot>, grace: Duration) -> Self {
        SotwStream {
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

    /// What this stream last ACKed for a type (for tests and debugging).
    pub fn acked(&self, ty: ResourceType) -> Option<&Versions> {
        self.types.get(&ty).and_then(|s| s.acked.as_ref())
    }

    /// The last NACK of a type not since followed by an ACK.
    pub fn nack(&self, ty: ResourceType) -> Option<&Nack> {
        self.types.get(&ty).and_then(|s| s.nack.as_ref())
    }

    /// When [`SotwStream::on_tick`] has something to do: a removal's grace ends.
    pub fn wake_at(&self) -> Option<Instant> {
        self.gate.wake_at()
    }

    pub fn on_request(&mut self, req: DiscoveryRequest) -> Output<DiscoveryResponse> {
        self.on_request_at(req, Instant::now())
    }

    /// Time passed: send what the gate now lets through (removals past their grace).
    pub fn on_tick(&mut self, now: Instant) -> Output<DiscoveryResponse> {
        let mut out = Output::default();
        if self.regate(now) {
            self.respond_all(&mut out);
        }
        out
    }

    /// Recomputes the gate's view; whether it changed.
    fn regate(&mut self, now: Instant) -> bool {
        let acked: Acked<'_> = self
            .types
            .iter()
            .filter_map(|(ty, s)| s.acked.as_ref().map(|a| (*ty, a)))
            .collect();
        let refused: Acked<'_> = self
            .types
            .iter()
            .filter_map(|(ty, s)| s.nack.as_ref().map(|n| (*ty, &n.rejected)))
            .collect();
        self.gate.regate(&self.snapshot, &acked, &refused, now)
    }

    pub fn on_request_at(
        &mut self,
        req: DiscoveryRequest,
        now: Instant,
    ) -> Output<DiscoveryResponse> {
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
        let subscription = Subscription::from_sotw(ty, &req.resource_names);
        let state = self.types.entry(ty).or_default();
        let initial = match (&state.sent, req.response_nonce.is_empty()) {
            // A first request, or a type we never answered: serve it.
            (None, _) | (_, true) => true,
            (Some(sent), false) if sent.nonce != req.response_nonce => {
                tracing::trace!(ty = ty.short_name(), nonce = %req.response_nonce, "stale nonce ignored");
                return out;
            }
            // Envoy repeats the last nonce on later requests (a new name set, or
            // after its NACK with the error cleared): those answer nothing anew.
            (Some(sent), false) if sent.answered => false,
            (Some(sent), false) => {
                let sent = sent.clone();
                let error = req.error_detail.as_ref().map(|e| e.message.as_str());
                out.events.extend(state.answer(ty, sent, error));
                false
            }
        };
        state.subscription = subscription;
        let answered = !out.events.is_empty();
        self.respond(ty, initial, &mut out);
        // What Envoy took may let held-back resources through.
        if answered && self.regate(now) {
            self.respond_all(&mut out);
        }
        out
    }

    /// A new snapshot: push every requested type whose selected content changed,
    /// in CDS, EDS, LDS, RDS, SDS order.
    pub fn on_snapshot(&mut self, snapshot: Arc<Snapshot>) -> Output<DiscoveryResponse> {
        self.on_snapshot_at(snapshot, Instant::now())
    }

    pub fn on_snapshot_at(
        &mut self,
        snapshot: Arc<Snapshot>,
        now: Instant,
    ) -> Output<DiscoveryResponse> {
        let mut out = Output::default();
        self.snapshot = snapshot;
        self.regate(now);
        self.respond_all(&mut out);
        out
    }

    /// Pushes every type whose selected content changed, in push order.
    fn respond_all(&mut self, out: &mut Output<DiscoveryResponse>) {
        // EDS answered right after CDS is not sent again: it is unchanged then.
        for ty in ResourceType::ALL {
            self.respond(ty, false, out);
        }
    }

    /// Sends `ty` if its content changed (or `force`), then EDS after CDS.
    fn respond(&mut self, ty: ResourceType, force: bool, out: &mut Output<DiscoveryResponse>) {
        let sent = self.respond_one(ty, force, out);
        if sent && ty == ResourceType::Cluster && self.types.contains_key(&ResourceType::Endpoint) {
            self.respond_one(ResourceType::Endpoint, true, out);
        }
    }

    fn respond_one(
        &mut self,
        ty: ResourceType,
        force: bool,
        out: &mut Output<DiscoveryResponse>,
    ) -> bool {
        let Some(state) = self.types.get_mut(&ty) else {
            return false;
        };
        let selected = state.subscription.select_in(self.gate.view(), ty);
        let (versions, bodies) = if applies_one_by_one(ty) {
            let bodies = selected.values().map(|r| Any::clone(&r.body)).collect();
            (versions_of(&selected), bodies)
        } else {
            state.contain(&selected)
        };
        if state.parked.as_ref() == Some(&versions) {
            return false;
        }
        let unchanged = state.sent.as_ref().map(|s| &s.versions) == Some(&versions);
        // Nothing Envoy does not hold already (say, all that changed is withheld).
        let held = state.acked.as_ref() == Some(&versions);
        if (unchanged || held) && !force {
            return false;
        }
        self.last_nonce += 1;
        let nonce = self.last_nonce.to_string();
        let version_info = version_info(&versions);
        out.responses.push(DiscoveryResponse {
            version_info: version_info.clone(),
            resources: bodies,
            type_url: ty.type_url().to_string(),
            nonce: nonce.clone(),
            ..Default::default()
        });
        state.sent = Some(Sent {
            nonce,
            version_info,
            versions,
            answered: false,
        });
        true
    }
}
