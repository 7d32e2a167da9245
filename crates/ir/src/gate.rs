//! The status gate's vocabulary: what the Envoy fleet serves of a Gateway.
//!
//! ```text
//!  per node: AckState of its listeners, routes it serves   (aether_ads, per Envoy)
//!    └─ joined over the nodes that must serve the Gateway  (aether_report::join)
//!         └─ Served { gateway: AckState, pending, unreported, refused }
//!              └─ assemble: the status to write            (aether_gateway)
//! ```
//!
//! A NACK is data here ([`Rejection`]: node, Envoy's words); the sentence a
//! user reads is worded once, where status is assembled.

use std::collections::{BTreeMap, BTreeSet};

/// What the Envoy fleet has done with (part of) a Gateway's current config: the
/// one vocabulary of the ACK gate, from the ADS fleet view to the status plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckState {
    /// Every connected Envoy ACKed it (and there is at least one).
    Acked,
    /// Not everywhere yet, or no Envoy is connected.
    Pending,
    /// An Envoy rejected it.
    Nacked(Rejection),
}

/// An Envoy's NACK, as data: the sentence a user reads is rendered from it in
/// one place, where status is assembled (`aether_gateway::assemble`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The node id of the Envoy that rejected it.
    pub node: String,
    /// What was rejected and Envoy's words:
    /// "RDS version 0123456789ab: <Envoy's message>".
    pub message: String,
}

impl Rejection {
    pub fn new(node: impl Into<String>, message: impl Into<String>) -> Self {
        Rejection {
            node: node.into(),
            message: message.into(),
        }
    }
}

/// What the fleet serves of one Gateway: the status gate's answer, joined
/// over the nodes that must serve it (`aether_report::join`), whatever the
/// size of the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// The Gateway's own config: its listeners.
    pub gateway: AckState,
    /// Routes not served at their current config by every Envoy.
    pub pending: Pending,
    /// Nodes that must serve the Gateway (they take its traffic) but have not
    /// reported what their Envoy serves: named in the `Pending` messages.
    pub unreported: BTreeSet<String>,
    /// Routes an Envoy refused (served as they were before), by route key:
    /// `Accepted=False/UnsupportedValue` with a message worded from this
    /// instead of `Pending`.
    pub refused: BTreeMap<String, Rejection>,
}

/// Which routes of a Gateway wait for the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// Every route (nothing of the Gateway is known to be served).
    All,
    /// These route keys (see [`crate::names::route_key`]); every other route is served.
    Only(BTreeSet<String>),
}

impl Served {
    /// The whole Gateway in one state: all served when Acked, none otherwise.
    pub fn whole(state: AckState) -> Self {
        let pending = if state == AckState::Acked {
            Pending::Only(BTreeSet::new())
        } else {
            Pending::All
        };
        Served {
            gateway: state,
            pending,
            unreported: BTreeSet::new(),
            refused: BTreeMap::new(),
        }
    }

    pub fn serves_route(&self, key: &str) -> bool {
        match &self.pending {
            Pending::All => false,
            Pending::Only(keys) => !keys.contains(key),
        }
    }
}
