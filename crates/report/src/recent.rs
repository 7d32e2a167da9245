//! The leader's memory of its recent snapshots, as fingerprints.
//!
//! A node's report is relative to the snapshot its agent had: "all of snapshot
//! V" (`acked_snapshot`) or "Gateway hash H" (`acked`). When the leader has moved
//! on to a newer snapshot, such a report still tells which routes the node
//! serves: those whose fingerprint in V (or in the snapshot where the Gateway had
//! hash H) equals the current one. Without this memory every route of a Gateway
//! would turn Pending whenever any of them changed.
//!
//! ```text
//!  pictures (oldest first, at most KEPT):  [versions] ─► per Gateway: hash, own, routes' parts
//!                                           v1 v2 v3       (a snapshot that changed no
//!                                           v4             Gateway's picture, endpoints
//!                                           v5 v6 … v40    only, is one more version of
//!                                                          the last picture)
//! ```
//!
//! Memory is counted in pictures, not snapshots: pod churn makes a snapshot
//! every few milliseconds without changing what any route is served as, and a
//! memory of the last few snapshots would forget, within a second, the one a
//! node's Envoy is still applying; its report would then tell nothing, and
//! every route of the Gateway would be written Pending and then Accepted.

use aether_ir::ObjectRef;
use aether_xds::{RouteParts, Snapshot};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// Pictures remembered.
const KEPT: usize = 8;
/// Versions remembered, over all pictures: at a snapshot per pod change, a
/// few minutes of churn.
const VERSIONS_KEPT: usize = 1024;

/// One Gateway of one snapshot, as fingerprints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prints {
    pub hash: String,
    /// Empty when the snapshot carries no parts.
    pub own: String,
    /// Each route's parts with their fingerprint, shared with the snapshot.
    pub routes: Arc<RouteParts>,
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
                (
                    gw.clone(),
                    Prints {
                        hash: r.hash.clone(),
                        own,
                        routes: r.routes.clone(),
                    },
                )
            })
            .collect()
    }
}

/// Every Gateway of one snapshot, as fingerprints.
type Picture = Arc<BTreeMap<ObjectRef, Prints>>;

/// The last few pictures of the Gateways, each with the versions that had
/// it, newest last.
#[derive(Default)]
pub(crate) struct Recent {
    pictures: VecDeque<(Vec<String>, Picture)>,
}

impl Recent {
    /// Remembers `snapshot`: a new picture, or one more version of the last
    /// one when no Gateway's prints changed. Beyond [`KEPT`] pictures and
    /// [`VERSIONS_KEPT`] versions, forgets the oldest no node's report refers
    /// to (`held`: the versions reported as ACKed). A report of a forgotten
    /// snapshot tells nothing, and everything of every Gateway would read as
    /// not served. Returns the Gateways (as "namespace/name") the last picture
    /// had and this one has not.
    pub(crate) fn remember(
        &mut self,
        snapshot: &Snapshot,
        held: &BTreeSet<&str>,
    ) -> BTreeSet<String> {
        let version = &snapshot.version;
        if self.pictures.iter().any(|(vs, _)| vs.contains(version)) {
            return BTreeSet::new();
        }
        let prints = Prints::of(snapshot);
        let mut gone = BTreeSet::new();
        match self.pictures.back_mut() {
            Some((versions, last)) if **last == prints => versions.push(version.clone()),
            last => {
                if let Some((_, last)) = last {
                    gone = last
                        .keys()
                        .filter(|gw| !prints.contains_key(*gw))
                        .map(ToString::to_string)
                        .collect();
                }
                let picture = (vec![version.clone()], Arc::new(prints));
                self.pictures.push_back(picture);
            }
        }
        let held_any =
            |(vs, _): &(Vec<String>, Picture)| vs.iter().any(|v| held.contains(v.as_str()));
        let excess = self.pictures.len().saturating_sub(KEPT);
        self.pictures.retain(oldest_not(excess, held_any));
        let versions: usize = self.pictures.iter().map(|(vs, _)| vs.len()).sum();
        let excess = versions.saturating_sub(VERSIONS_KEPT);
        let mut keep = oldest_not(excess, |v: &String| held.contains(v.as_str()));
        for (vs, _) in self.pictures.iter_mut() {
            vs.retain(&mut keep);
        }
        gone
    }

    /// Gateway `gw` as of snapshot `version`.
    pub(crate) fn in_snapshot(&self, version: &str, gw: &ObjectRef) -> Option<&Prints> {
        self.pictures
            .iter()
            .rev()
            .find(|(vs, _)| vs.iter().any(|v| v == version))
            .and_then(|(_, g)| g.get(gw))
    }

    /// Gateway `gw` when its hash was `hash`.
    pub(crate) fn with_hash(&self, gw: &ObjectRef, hash: &str) -> Option<&Prints> {
        self.pictures
            .iter()
            .rev()
            .find_map(|(_, g)| g.get(gw).filter(|p| p.hash == hash))
    }
}

/// A `retain` predicate, for items oldest first: drops the first `excess`
/// items that `held` does not keep.
fn oldest_not<T>(mut excess: usize, held: impl Fn(&T) -> bool) -> impl FnMut(&T) -> bool {
    move |item| {
        let drop = excess > 0 && !held(item);
        if drop {
            excess -= 1;
        }
        !drop
    }
}
