//! Each route key's share of a route table's parts, kept from one build to
//! the next while what it was made from is the same, so that a table of
//! 10,000 routes with one changed makes one route's parts, not 10,000.
//!
//! ```text
//!  route table ─ per route key: Share { its fragment's hash,
//!   (Context:     │                    the clusters it names, with what the
//!    listener,    │                    IR defines of each,
//!    Gateway's    │                    parts: (RDS, table) = Fragment(hash)
//!    share of it, │                           (LDS, listener) = Fragment(Gateway's share)
//!    its secrets) │                           (SDS, each Gateway secret) = Whole
//!                 │                           (CDS, cluster) = Whole, its EDS Present,
//!                 │                           its secrets Whole }
//!                 └─ kept when the context, the hash and every cluster's
//!                    definition are what they were (the same `Arc`s)
//! ```
//!
//! The parts are what `gateway.rs` required of each key before, one
//! `require` at a time; a fresh build makes every share, a warm one only the
//! changed keys', and both give equal parts (`incremental_tests.rs`). A key
//! in two tables (a route on an HTTP and an HTTPS listener) has its shares
//! merged, and the merge is kept too while it merges the same two.

use crate::gateway::ClusterReads;
use crate::in_order::InOrder;
use crate::parts::{ObjectParts, Part, Parts};
use crate::route_cache::{EncodedTable, KeyClusters, KeyFragment};
use crate::snapshot::ResourceType;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What every route key's share of one table reads besides the key itself:
/// the listener serving the table, the Gateway's share of that listener, and
/// the Gateway's certificates on it. Each name is shared by every key's parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Context {
    pub(crate) table: Arc<str>,
    pub(crate) listener: Arc<str>,
    pub(crate) own_share: Arc<str>,
    pub(crate) secrets: Vec<Arc<str>>,
}

/// One table's shares, by route key.
#[derive(Debug)]
pub(crate) struct TableShares {
    context: Context,
    pub(crate) by_key: BTreeMap<Arc<str>, Arc<Share>>,
    /// How many of them this build made (the rest it took from before).
    pub(crate) made: usize,
}

/// One route key's share of a table.
#[derive(Debug)]
pub(crate) struct Share {
    /// Its fragment's hash, shared with its route table part.
    hash: Arc<str>,
    clusters: Arc<KeyClusters>,
    /// Each cluster the key forwards to, with what the IR defines of it, in
    /// the order of its fragment's cluster names (shared with its parts).
    pub(crate) reads: Vec<(Arc<str>, ClusterReads)>,
    pub(crate) parts: ObjectParts,
}

/// Every route key's share of `encoded` (a table served in `context`), each
/// taken from `before` (the same table's shares in the build before) when
/// its inputs are the same; `moved` are the clusters whose definitions (what
/// `known` says of them) moved since.
pub(crate) fn shares(
    encoded: &EncodedTable,
    context: Context,
    known: &dyn Fn(&str) -> ClusterReads,
    moved: &BTreeSet<String>,
    before: Option<&TableShares>,
) -> TableShares {
    let before = before.filter(|b| b.context == context);
    let mut made = 0;
    let mut share_before = InOrder::new(before.map(|b| &b.by_key));
    let by_key = encoded
        .keys()
        .iter()
        .map(|(key, fragment)| {
            let was = share_before.get(key);
            let share = share(fragment, &context, known, moved, was);
            if !was.is_some_and(|was| Arc::ptr_eq(was, &share)) {
                made += 1;
            }
            (key.clone(), share)
        })
        .collect();
    TableShares {
        context,
        by_key,
        made,
    }
}

/// A key's share: `was` when its fragment's hash, its clusters and their
/// definitions are still what `was` was made from.
fn share(
    fragment: &KeyFragment,
    context: &Context,
    known: &dyn Fn(&str) -> ClusterReads,
    moved: &BTreeSet<String>,
    was: Option<&Arc<Share>>,
) -> Arc<Share> {
    if let Some(was) = was
        && *was.hash == *fragment.hash
        && (Arc::ptr_eq(&was.clusters, &fragment.clusters) || was.clusters == fragment.clusters)
        && !was.reads.iter().any(|(c, _)| moved.contains(&**c))
    {
        return was.clone();
    }
    let names = &fragment.clusters.forward;
    let reads: Vec<(Arc<str>, ClusterReads)> =
        names.iter().map(|c| (c.clone(), known(c))).collect();
    let hash = fragment.hash.clone();
    let mut parts = ObjectParts::default();
    parts.require_shared(
        ResourceType::Route,
        &context.table,
        Part::Fragment(hash.clone()),
    );
    // Served on the listener as it is now (its address, its certificates):
    // the Gateway's share of it.
    parts.require_shared(
        ResourceType::Listener,
        &context.listener,
        Part::Fragment(context.own_share.clone()),
    );
    for secret in &context.secrets {
        parts.require_shared(ResourceType::Secret, secret, Part::Whole);
    }
    // A backend naming a cluster the IR does not define would be a
    // translator bug; it simply is not a part then.
    for (cluster, reads) in &reads {
        if let Some(reads) = reads {
            parts.require_cluster(cluster, reads);
        }
    }
    parts.fit();
    Arc::new(Share {
        hash,
        clusters: fragment.clusters.clone(),
        reads,
        parts,
    })
}

/// A route key's parts and one more share of them, merged: kept while both
/// are the same `Arc`s.
#[derive(Debug)]
pub(crate) struct Merge {
    inputs: [Arc<Parts>; 2],
    pub(crate) result: ObjectParts,
}

/// `parts` with `share` added: `was`'s result (the key's merge at the same
/// place in the build before) when it merged the same two.
pub(crate) fn merge(parts: &ObjectParts, share: &ObjectParts, was: Option<&Merge>) -> Merge {
    let inputs = [parts.parts.clone(), share.parts.clone()];
    if let Some(was) = was
        && Arc::ptr_eq(&was.inputs[0], &inputs[0])
        && Arc::ptr_eq(&was.inputs[1], &inputs[1])
    {
        return Merge {
            inputs,
            result: was.result.clone(),
        };
    }
    let mut result = parts.clone();
    for ((ty, name), part) in share.parts.iter() {
        result.require_shared(*ty, name, part.clone());
    }
    result.fit();
    Merge { inputs, result }
}
