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
//! A response is sent only when the selected content differs from what was last
//! sent on this stream, except that the first request of a type is always answered
//! and EDS is always answered right after a CDS response (updated clusters warm
//! again and wait for their endpoints; without it Envoy waits its 15 s initial
//! fetch timeout).

use crate::event::{Event, Nack, Output, blame};
use crate::subscription::{Subscription, Versions, version_info, versions_of};
use aether_xds::{ResourceType, Snapshot};
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use std::collections::BTreeMap;
use std::sync::Arc;

#[cfg(test)]
mod tests;

/// One SotW ADS stream.
#[derive(Debug)]
pub struct SotwStream {
    snapshot: Arc<Snapshot>,
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
}

#[derive(Debug, Clone)]
struct Sent {
    nonce: String,
    version_info: String,
    versions: Versions,
    /// Envoy already ACKed or NACKed this response.
    answered: bool,
}

/// Whether Envoy applies the resources of a SotW response of this type one by one,
/// keeping the good ones when it rejects others (listeners and clusters; route
/// tables and endpoints are all or nothing, as a real Envoy 1.40 shows).
fn applies_one_by_one(ty: ResourceType) -> bool {
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
        let nack = Nack {
            version: sent.version_info,
            message: message.to_string(),
            rejected: blame.rejected,
        };
        self.parked = Some(sent.versions);
        self.nack = Some(nack.clone());
        events.push(Event::Nacked { ty, nack });
        events
    }
}

impl SotwStream {
    pub fn new(snapshot: Arc<Snapshot>) -> Self {
        SotwStream {
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

    pub fn on_request(&mut self, req: DiscoveryRequest) -> Output<DiscoveryResponse> {
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
        self.respond(ty, initial, &mut out);
        out
    }

    /// A new snapshot: push every requested type whose selected content changed,
    /// in CDS, EDS, LDS, RDS, SDS order.
    pub fn on_snapshot(&mut self, snapshot: Arc<Snapshot>) -> Output<DiscoveryResponse> {
        let mut out = Output::default();
        self.snapshot = snapshot;
        for ty in ResourceType::ALL {
            // EDS may already have been answered right after CDS.
            if ty == ResourceType::Endpoint
                && out
                    .responses
                    .iter()
                    .any(|r: &DiscoveryResponse| r.type_url == ty.type_url())
            {
                continue;
            }
            self.respond(ty, false, &mut out);
        }
        out
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
        let selected = state.subscription.select(&self.snapshot, ty);
        let versions = versions_of(&selected);
        if state.parked.as_ref() == Some(&versions) {
            return false;
        }
        let unchanged = state.sent.as_ref().map(|s| &s.versions) == Some(&versions);
        if unchanged && !force {
            return false;
        }
        self.last_nonce += 1;
        let nonce = self.last_nonce.to_string();
        let version_info = version_info(&versions);
        out.responses.push(DiscoveryResponse {
            version_info: version_info.clone(),
            resources: selected.values().map(|r| r.body.clone()).collect(),
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
