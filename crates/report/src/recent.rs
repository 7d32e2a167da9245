//! The leader's memory of its recent snapshots, as fingerprints.
//!
//! A node's report is relative to the snapshot its agent had: "all of snapshot
//! V" (`acked_snapshot`) or "Gateway hash H" (`acked`). When the leader has moved
//! on to a newer snapshot, such a report still tells which routes the node
//! serves: those whose fingerprint in V (or in the snapshot where the Gateway had
//! hash H) equals the current one. Without this memory every route of a Gateway
//! would turn Pending whenever any of them changed.

use aether_ir::ObjectRef;
use aether_xds::Snapshot;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// Snapshots remembered.
const KEPT: usize = 8;

/// One Gateway of one snapshot, as fingerprints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prints {
    pub hash: String,
    /// Empty when the snapshot carries no parts.
    pub own: String,
    pub routes: BTreeMap<String, String>,
}

impl Prints {
    fn of(snapshot: &Snapshot) -> BTreeMap<ObjectRef, Prints> {
        snapshot
            .gateways
            .iter()
            .map(|(gw, r)| {
                let own = if r.own.parts.is_empty() {
                    String::new()
                } else {
                    r.own.fingerprint.clone()
                };
                let routes = r
                    .routes
                    .iter()
                    .map(|(k, p)| (k.clone(), p.fingerprint.clone()))
                    .collect();
                (
                    gw.clone(),
                    Prints {
                        hash: r.hash.clone(),
                        own,
                        routes,
                    },
                )
            })
            .collect()
    }
}

/// The last few snapshots' fingerprints, newest last.
#[derive(Default)]
pub(crate) struct Recent {
    snapshots: VecDeque<(String, Arc<BTreeMap<ObjectRef, Prints>>)>,
}

impl Recent {
    /// Remembers `snapshot`; beyond [`KEPT`], forgets the oldest snapshots no
    /// node's report refers to (`held`: the versions reported as ACKed). A
    /// report of a forgotten snapshot tells nothing, and everything of every
    /// Gateway would read as not served.
    pub(crate) fn remember(&mut self, snapshot: &Snapshot, held: &BTreeSet<&str>) {
        if self.snapshots.iter().any(|(v, _)| *v == snapshot.version) {
            return;
        }
        self.snapshots
            .push_back((snapshot.version.clone(), Arc::new(Prints::of(snapshot))));
        let mut excess = self.snapshots.len().saturating_sub(KEPT);
        self.snapshots.retain(|(v, _)| {
            let drop = excess > 0 && !held.contains(v.as_str());
            if drop {
                excess -= 1;
            }
            !drop
        });
    }

    /// Gateway `gw` as of snapshot `version`.
    pub(crate) fn in_snapshot(&self, version: &str, gw: &ObjectRef) -> Option<&Prints> {
        self.snapshots
            .iter()
            .rev()
            .find(|(v, _)| v == version)
            .and_then(|(_, g)| g.get(gw))
    }

    /// Gateway `gw` when its hash was `hash`.
    pub(crate) fn with_hash(&self, gw: &ObjectRef, hash: &str) -> Option<&Prints> {
        self.snapshots
            .iter()
            .rev()
            .find_map(|(_, g)| g.get(gw).filter(|p| p.hash == hash))
    }
}
