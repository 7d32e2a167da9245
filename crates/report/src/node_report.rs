//! What the leader holds of one node: its last report and, for an agent that
//! lists every part its Envoy serves (`every_part`), per Gateway the last of
//! the leader's pictures that Envoy served whole (its anchor).
//!
//! ```text
//!  report: Gateway G at hash H, parts P
//!    ├─ H is one of the leader's pictures ─► anchor(G) := that picture; P of G dropped
//!    └─ H unknown (the agent is ahead, or coalesced changes the leader saw apart)
//!                                          ─► P of G kept: what changed since anchor(G)
//!  a part of an anchored Gateway cleared ─► kept as "" (served no more), not dropped:
//!                                           dropped, the anchor would still say it
//! ```
//!
//! So of an anchored Gateway the node serves each part at the fingerprint its
//! report holds, else at the anchor's: exactly what its agent listed, in the
//! memory of the parts that changed since the leader last knew its hash.

use crate::pb::AckReport;
use crate::recent::{Prints, Recent};
use aether_ir::ObjectRef;
use std::collections::{BTreeMap, BTreeSet};

/// A node's last report as the leader holds it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct NodeReport {
    pub(crate) report: AckReport,
    /// Per Gateway (key "namespace/name"): the leader's picture of it at the
    /// last hash this node's Envoy served that the leader knew. Only for a
    /// report with `every_part`.
    anchors: BTreeMap<String, Prints>,
}

impl NodeReport {
    /// A whole report.
    pub(crate) fn new(report: AckReport, recent: &Recent) -> Self {
        let mut node = NodeReport {
            report,
            anchors: BTreeMap::new(),
        };
        let every: Vec<String> = node.report.acked.keys().cloned().collect();
        node.anchor(every, recent);
        node
    }

    /// Applies a delta (see fleet.proto): first every key in `cleared` leaves
    /// all four maps (a part of an anchored Gateway stays, as served no more),
    /// then its entries are set.
    pub(crate) fn apply_delta(&mut self, delta: AckReport, recent: &Recent) {
        let r = &mut self.report;
        if r.every_part != delta.every_part {
            self.anchors.clear();
        }
        for key in &delta.cleared {
            r.acked.remove(key);
            r.nacked.remove(key);
            r.refused_routes.remove(key);
            let anchored = key
                .split_once('|')
                .is_some_and(|(gw, _)| self.anchors.contains_key(gw));
            if anchored {
                r.acked_parts.insert(key.clone(), String::new());
            } else {
                r.acked_parts.remove(key);
            }
        }
        let hashes: Vec<String> = delta.acked.keys().cloned().collect();
        r.acked.extend(delta.acked);
        r.nacked.extend(delta.nacked);
        r.acked_parts.extend(delta.acked_parts);
        r.refused_routes.extend(delta.refused_routes);
        r.envoy_connected = delta.envoy_connected;
        r.acked_snapshot = delta.acked_snapshot;
        r.every_part = delta.every_part;
        self.anchor(hashes, recent);
    }

    /// Anchors each of `gateways` whose reported hash is one of the leader's
    /// pictures and drops the parts listed for it: the picture says them all.
    fn anchor(&mut self, gateways: Vec<String>, recent: &Recent) {
        if !self.report.every_part {
            self.anchors.clear();
            return;
        }
        let mut anchored = BTreeSet::new();
        for key in gateways {
            let Some(hash) = self.report.acked.get(&key) else {
                continue;
            };
            let Some((namespace, name)) = key.split_once('/') else {
                continue;
            };
            let Some(prints) = recent.with_hash(&ObjectRef::new(namespace, name), hash) else {
                continue;
            };
            self.anchors.insert(key.clone(), prints.clone());
            anchored.insert(key);
        }
        self.drop_parts(&anchored);
    }

    /// Drops the parts listed for `gateways`.
    fn drop_parts(&mut self, gateways: &BTreeSet<String>) {
        if gateways.is_empty() || self.report.acked_parts.is_empty() {
            return;
        }
        self.report.acked_parts.retain(|part, _| {
            !part
                .split_once('|')
                .is_some_and(|(gw, _)| gateways.contains(gw))
        });
    }

    /// Forgets the anchors (and the parts listed) of Gateways the leader no
    /// longer has: a Gateway deleted while anchored would otherwise keep a
    /// "served no more" entry per part until the agent's stream ends.
    pub(crate) fn forget(&mut self, gone: &BTreeSet<String>) {
        let anchored: BTreeSet<String> = self
            .anchors
            .keys()
            .filter(|gw| gone.contains(*gw))
            .cloned()
            .collect();
        for gw in &anchored {
            self.anchors.remove(gw);
        }
        self.drop_parts(&anchored);
    }

    /// The anchor of Gateway `key`.
    pub(crate) fn anchor_of(&self, key: &str) -> Option<&Prints> {
        self.anchors.get(key)
    }
}
