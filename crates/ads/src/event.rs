//! What a stream's state machine hands back: responses to send, and what it learnt
//! about the Envoy on the other end (for the fleet view).

use crate::subscription::Versions;
use aether_xds::ResourceType;

/// The result of feeding one input (a request or a snapshot) to a stream.
#[derive(Debug)]
pub struct Output<R> {
    /// To send, in order (CDS, EDS, LDS, RDS, SDS when several types change).
    pub responses: Vec<R>,
    pub events: Vec<Event>,
}

impl<R> Default for Output<R> {
    fn default() -> Self {
        Output {
            responses: Vec::new(),
            events: Vec::new(),
        }
    }
}

impl<R> Output<R> {
    pub fn is_empty(&self) -> bool {
        self.responses.is_empty() && self.events.is_empty()
    }
}

/// A change in what Envoy holds for one resource type on this stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Envoy accepted a response; `versions` is everything of this type it now
    /// holds from us (the whole state, not the delta).
    Acked {
        ty: ResourceType,
        versions: Versions,
    },
    /// Envoy rejected a response. It keeps serving what it ACKed before.
    Nacked { ty: ResourceType, nack: Nack },
}

impl Event {
    pub fn resource_type(&self) -> ResourceType {
        match self {
            Event::Acked { ty, .. } | Event::Nacked { ty, .. } => *ty,
        }
    }
}

/// A rejected response, as Envoy reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nack {
    /// The version we sent and Envoy refused (SotW `version_info`, Delta
    /// `system_version_info`).
    pub version: String,
    /// Envoy's `error_detail.message`.
    pub message: String,
    /// The resources that response brought that Envoy did not hold yet (new or
    /// changed): the ones the rejection is about.
    pub rejected: Versions,
}

/// The resources of `sent` whose versions differ from `held`: what a rejected
/// response was trying to change. When nothing differs (a pure removal), all of it.
pub fn changes(sent: &Versions, held: &Versions) -> Versions {
    let changed: Versions = sent
        .iter()
        .filter(|(n, v)| held.get(*n) != Some(*v))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    if changed.is_empty() {
        sent.clone()
    } else {
        changed
    }
}
