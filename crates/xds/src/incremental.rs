//! Incremental build: [`build`](crate::build) as a cache keyed by its inputs.
//!
//! ```text
//!  Ir ─┬─ each cluster ─► CDS + EDS + SDS resources   (equal IR cluster: reused)
//!      └─ each Gateway ─► listeners, route tables, secrets, members, parts,
//!          │              fragments (equal IR Gateway, and the clusters it
//!          │              names still defined or not, with the same
//!          │              references, as before: reused)
//!          └─ changed ──► each route table from its routes' encodings: an
//!                         IR route equal to the one before (same name,
//!                         virtual host and scheme) keeps its encoding
//!                         (`route_cache.rs`)
//!         ──► the snapshot: each type's map and digest, each Gateway's hash,
//!             each part's fingerprint
//! ```
//!
//! What moved decides what is computed again: a type's map and digest only
//! when one of its resources moved (otherwise the snapshot before's are
//! shared), a Gateway's hash only when its members or one of their versions
//! moved, a route's fingerprint only when its parts or a resource they take
//! whole moved. Which resources moved is a diff of the pieces encoded again,
//! so a piece taken from the cache never carries a stale version. An empty
//! [`Builder`] is the full rebuild; a warm one gives an equal snapshot
//! (property test in `incremental_tests.rs`).

use crate::gateway::{GatewayBuild, build_gateway};
use crate::in_order::InOrder;
use crate::parts::PartName;
use crate::parts::RouteParts;
use crate::snapshot::{
    ByName, FingerprintedParts, GatewayMembers, Members, Resource, ResourceType, Snapshot,
    TypeDigest, type_digest,
};
use crate::{AccessLog, ClusterBuild, ObjectParts, ProxyProtocol, build_cluster};
use aether_ir as ir;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Builds snapshots one after another, re-encoding only what changed.
#[derive(Default)]
pub struct Builder {
    clusters: BTreeMap<String, (Arc<ir::Cluster>, Arc<ClusterBuild>)>,
    gateways: BTreeMap<ir::ObjectRef, (Arc<ir::Gateway>, Arc<GatewayBuild>)>,
    /// Per Gateway, its routes' parts fingerprinted: against which build, and
    /// which versions of the resources they take whole.
    fingerprinted: BTreeMap<ir::ObjectRef, Fingerprinted>,
    /// What the last snapshot was assembled from, to share what did not move.
    assembled: Assembled,
    /// What the last build reused and encoded.
    pub last: Reuse,
    /// How every HTTP connection manager and TCP proxy logs.
    access_log: AccessLog,
    /// Whether every TCP listener reads a PROXY protocol header first.
    proxy_protocol: ProxyProtocol,
}

/// The last snapshot's maps per type with their digests, and each Gateway's
/// members with their hash.
#[derive(Default)]
struct Assembled {
    resources: BTreeMap<ResourceType, ByName>,
    digests: BTreeMap<ResourceType, TypeDigest>,
    hashes: BTreeMap<ir::ObjectRef, (Members, String)>,
}

/// How much of the last build came from the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reuse {
    pub clusters_reused: usize,
    pub clusters_encoded: usize,
    pub gateways_reused: usize,
    pub gateways_encoded: usize,
    /// IR routes of the encoded Gateways whose Envoy routes were taken from
    /// the Gateway's build before, and those encoded.
    pub routes_reused: usize,
    pub routes_encoded: usize,
    /// Route keys of the encoded Gateways whose share of a route table
    /// (their parts there) was made anew rather than taken from before.
    pub route_shares_made: usize,
    /// Routes whose parts' fingerprint was computed anew.
    pub route_fingerprints_made: usize,
    /// Resource types whose map was assembled anew (not shared with the
    /// snapshot before), and Gateways whose hash was computed anew.
    pub types_assembled: usize,
    pub gateway_hashes_made: usize,
}

impl Builder {
    /// A builder whose listeners log as `log` says (the default: JSON).
    pub fn with_access_log(log: AccessLog) -> Self {
        Builder {
            access_log: log,
            ..Builder::default()
        }
    }

    /// This builder with every TCP listener reading a PROXY protocol header
    /// first (`proxy_protocol.rs`), or not.
    pub fn with_proxy_protocol(self, proxy_protocol: ProxyProtocol) -> Self {
        Builder {
            proxy_protocol,
            ..self
        }
    }

    pub fn build(&mut self, ir: &ir::Ir) -> Snapshot {
        let mut reuse = Reuse::default();
        let mut moved = Moved::default();
        // The clusters whose definitions (defined or not, what they
        // reference) moved: what a route key's parts read of a cluster.
        let mut redefined = BTreeSet::new();
        let mut clusters = BTreeMap::new();
        for c in &ir.clusters {
            // The key moves over with its entry: no name copied per cluster.
            let (name, before) = match self.clusters.remove_entry(&c.name) {
                Some((name, before)) => (name, Some(before)),
                None => (c.name.clone(), None),
            };
            let built = match &before {
                // The same shared IR cluster, or an equal one.
                Some((cached, built)) if Arc::ptr_eq(cached, c) || cached == c => {
                    reuse.clusters_reused += 1;
                    built.clone()
                }
                _ => {
                    reuse.clusters_encoded += 1;
                    let built = Arc::new(build_cluster(c));
                    let was = before.as_ref().map(|(_, b)| b.resources());
                    moved.add(was.into_iter().flatten(), built.resources());
                    let references = before.as_ref().map(|(_, b)| &b.cluster.references);
                    if references != Some(&built.cluster.references) {
                        redefined.insert(c.name.clone());
                    }
                    built
                }
            };
            clusters.insert(name, (c.clone(), built));
        }
        for (name, (_, gone)) in std::mem::replace(&mut self.clusters, clusters) {
            moved.add(gone.resources(), []);
            redefined.insert(name);
        }

        let known = |name: &str| {
            self.clusters
                .get(name)
                .map(|(_, b)| b.cluster.references.clone())
        };
        let mut gateways = BTreeMap::new();
        for gw in &ir.gateways {
            let key = gw.object_ref();
            let built = match self.gateways.get(&key) {
                Some((cached, built))
                    if (Arc::ptr_eq(cached, gw) || cached == gw)
                        && built.clusters_named.iter().all(|(c, d)| known(c) == *d) =>
                {
                    reuse.gateways_reused += 1;
                    built.clone()
                }
                before => {
                    reuse.gateways_encoded += 1;
                    let before = before.map(|(gw, b)| (&**gw, &**b));
                    let (log, proxy) = (self.access_log, self.proxy_protocol);
                    let built = build_gateway(gw, &known, &redefined, log, proxy, before);
                    reuse.routes_reused += built.route_count.reused;
                    reuse.routes_encoded += built.route_count.encoded;
                    reuse.route_shares_made += built.shares_made;
                    let was = before.map(|(_, b)| b.resources());
                    moved.add(was.into_iter().flatten(), built.resources());
                    Arc::new(built)
                }
            };
            gateways.insert(key, (gw.clone(), built));
        }
        for (key, (_, gone)) in &self.gateways {
            if !gateways.contains_key(key) {
                moved.add(gone.resources(), []);
            }
        }
        self.gateways = gateways;
        self.last = reuse;
        self.assemble(&moved)
    }

    /// The snapshot of what the cache holds now (exactly the last IR's
    /// pieces); `moved` are the resources whose versions may differ from the
    /// snapshot before (every one that does is among them).
    fn assemble(&mut self, moved: &Moved) -> Snapshot {
        let types: BTreeSet<ResourceType> = moved.any.iter().map(|(ty, _)| *ty).collect();
        for ty in types {
            self.last.types_assembled += 1;
            let by_name = self.by_name(ty);
            if by_name.is_empty() {
                self.assembled.resources.remove(&ty);
                self.assembled.digests.remove(&ty);
            } else {
                self.assembled.digests.insert(ty, type_digest(&by_name));
                self.assembled.resources.insert(ty, Arc::new(by_name));
            }
        }
        let mut fragments = BTreeMap::new();
        for (_, b) in self.gateways.values() {
            for (k, f) in &b.fragments {
                fragments.insert(k.clone(), f.clone());
            }
        }
        let resources = &self.assembled.resources;
        let version_of = |ty: ResourceType, name: &str| {
            resources
                .get(&ty)
                .and_then(|m| m.get(name))
                .map(|r| r.version.as_str())
        };
        let mut parts = FingerprintedParts::new();
        let mut fingerprinted = BTreeMap::new();
        let mut gateways = vec![];
        for (key, (_, b)) in &self.gateways {
            let was = self.fingerprinted.remove(key);
            let f = match was {
                Some(f) if Arc::ptr_eq(&f.build, b) && moved.whole.is_empty() => f,
                was => Fingerprinted {
                    build: b.clone(),
                    routes: Arc::new(fingerprint_routes(
                        &b.routes,
                        was,
                        &moved.whole,
                        version_of,
                        &mut self.last.route_fingerprints_made,
                    )),
                },
            };
            parts.insert(key.clone(), (b.own.clone(), f.routes.clone()));
            fingerprinted.insert(key.clone(), f);
            let before = self.assembled.hashes.get(key).map(|(m, h)| (m, h));
            let members = GatewayMembers::keeping(b.members.clone(), before, &moved.any);
            self.last.gateway_hashes_made += usize::from(members.hash.is_none());
            gateways.push((key.clone(), members));
        }
        self.fingerprinted = fingerprinted;
        let snapshot = Snapshot::assembled(
            self.assembled.resources.clone(),
            self.assembled.digests.clone(),
            gateways,
        );
        self.assembled.hashes = snapshot
            .gateways
            .iter()
            .map(|(key, g)| (key.clone(), (g.members.clone(), g.hash.clone())))
            .collect();
        snapshot.with_fingerprinted_parts(parts, fragments)
    }

    /// Every resource of type `ty` the cache holds, by name: the clusters',
    /// then the Gateways' (one Secret's content is the same wherever the IR
    /// carries it: one store read). Unused clusters are served, so are their
    /// secrets. A cluster brings only clusters, endpoints and secrets, so a
    /// listener's or a route table's change does not walk every cluster.
    fn by_name(&self, ty: ResourceType) -> BTreeMap<String, Resource> {
        let of_clusters = !matches!(ty, ResourceType::Listener | ResourceType::Route);
        let clusters = (self.clusters.values())
            .filter(|_| of_clusters)
            .flat_map(|(_, b)| b.resources());
        let gateways = self.gateways.values().flat_map(|(_, b)| b.resources());
        clusters
            .chain(gateways)
            .filter(|(t, _)| *t == ty)
            .map(|(_, r)| (r.name.clone(), r.clone()))
            .collect()
    }
}

/// One Gateway's routes' parts, fingerprinted against `build`'s resources
/// and the versions of the resources they take whole.
struct Fingerprinted {
    build: Arc<GatewayBuild>,
    routes: Arc<RouteParts>,
}

/// A resource and the name it goes by.
type Named = (ResourceType, String);

/// The resources one build moved: those of the clusters and Gateways it
/// encoded again whose versions differ from before, and of those that went
/// or came (a resource several pieces carry may be among them unmoved).
#[derive(Default)]
struct Moved {
    /// Of any type.
    any: BTreeSet<Named>,
    /// Those a route's parts can take whole (clusters, secrets), named as
    /// parts name them.
    whole: BTreeSet<PartName>,
}

impl Moved {
    fn add<'a>(
        &mut self,
        before: impl IntoIterator<Item = (ResourceType, &'a Resource)>,
        after: impl IntoIterator<Item = (ResourceType, &'a Resource)>,
    ) {
        // A resource is its version and what it references (which the
        // version does not cover); a part takes only the version.
        let named = |(ty, r): (ResourceType, &'a Resource)| ((ty, r.name.as_str()), r);
        let before: BTreeMap<_, _> = before.into_iter().map(named).collect();
        let after: BTreeMap<_, _> = after.into_iter().map(named).collect();
        for key in before.keys().chain(after.keys()) {
            let (was, now) = (before.get(key).copied(), after.get(key).copied());
            let version_moved = was.map(|r| &r.version) != now.map(|r| &r.version);
            let named = || (key.0, key.1.to_string());
            if version_moved && matches!(key.0, ResourceType::Cluster | ResourceType::Secret) {
                self.whole.insert((key.0, Arc::from(key.1)));
            }
            if version_moved || was.map(|r| &r.references) != now.map(|r| &r.references) {
                self.any.insert(named());
            }
        }
    }
}

/// Each route's parts with their fingerprint: the one in `was` (the
/// Gateway's fingerprints before) for the same parts (the same `Arc`) when
/// none of the resources they take whole moved, else computed.
fn fingerprint_routes<'a>(
    routes: &RouteParts,
    was: Option<Fingerprinted>,
    moved: &BTreeSet<PartName>,
    version_of: impl Fn(ResourceType, &str) -> Option<&'a str> + Copy,
    made: &mut usize,
) -> RouteParts {
    let mut was_of = InOrder::new(was.as_ref().map(|f| &*f.routes));
    routes
        .iter()
        .map(|(key, r)| {
            let kept = was_of
                .get(key)
                .filter(|w| Arc::ptr_eq(&w.parts, &r.parts))
                .filter(|_| moved.is_empty() || !r.parts.keys().any(|k| moved.contains(k)))
                .map(|w| w.fingerprint.clone());
            let fingerprint = kept.unwrap_or_else(|| {
                *made += 1;
                r.fingerprint_of(version_of)
            });
            let parts = r.parts.clone();
            (key.clone(), ObjectParts { parts, fingerprint })
        })
        .collect()
}

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
