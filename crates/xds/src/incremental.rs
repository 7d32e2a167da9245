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
//!         ──► Snapshot::new + with_parts: versions, hashes, fingerprints
//! ```
//!
//! Only encoding is cached; the snapshot's version, each Gateway's hash and
//! each part's fingerprint are computed again from the resources every time,
//! so a cached piece can never carry a stale hash. An empty [`Builder`] is
//! the full rebuild; a warm one gives an equal snapshot (property test in
//! `incremental_tests.rs`).

use crate::gateway::{GatewayBuild, build_gateway};
use crate::in_order::InOrder;
use crate::snapshot::{FingerprintedParts, Resource, ResourceType, Snapshot};
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
    /// What the last build reused and encoded.
    pub last: Reuse,
    /// How every HTTP connection manager and TCP proxy logs.
    access_log: AccessLog,
    /// Whether every TCP listener reads a PROXY protocol header first.
    proxy_protocol: ProxyProtocol,
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
        self.assemble(&moved.0)
    }

    /// The snapshot of what the cache holds now (exactly the last IR's
    /// pieces); `moved` are the resources a route can take whole whose
    /// versions differ from the snapshot before.
    fn assemble(&mut self, moved: &BTreeSet<Named>) -> Snapshot {
        let mut resources: BTreeMap<ResourceType, BTreeMap<String, Resource>> = BTreeMap::new();
        for (name, (_, b)) in &self.clusters {
            resources
                .entry(ResourceType::Cluster)
                .or_default()
                .insert(name.clone(), b.cluster.clone());
            if let Some(endpoints) = &b.endpoints {
                resources
                    .entry(ResourceType::Endpoint)
                    .or_default()
                    .insert(name.clone(), endpoints.clone());
            }
            // Unused clusters are served, so are their secrets. One Secret's
            // content is the same wherever the IR carries it (one store read).
            for s in &b.secrets {
                resources
                    .entry(ResourceType::Secret)
                    .or_default()
                    .insert(s.name.clone(), s.clone());
            }
        }
        let mut members: BTreeMap<ir::ObjectRef, crate::snapshot::Members> = BTreeMap::new();
        let mut fragments = BTreeMap::new();
        for (key, (_, b)) in &self.gateways {
            for (ty, r) in &b.resources {
                resources
                    .entry(*ty)
                    .or_default()
                    .insert(r.name.clone(), r.clone());
            }
            members.insert(key.clone(), b.members.clone());
            for (k, f) in &b.fragments {
                fragments.insert(k.clone(), f.clone());
            }
        }
        let version_of = |ty: ResourceType, name: &str| {
            resources
                .get(&ty)
                .and_then(|m| m.get(name))
                .map(|r| r.version.as_str())
        };
        let mut parts = FingerprintedParts::new();
        let mut fingerprinted = BTreeMap::new();
        for (key, (_, b)) in &self.gateways {
            let was = self.fingerprinted.remove(key);
            let f = match was {
                Some(f) if Arc::ptr_eq(&f.build, b) && moved.is_empty() => f,
                was => Fingerprinted {
                    build: b.clone(),
                    routes: Arc::new(fingerprint_routes(
                        &b.routes,
                        was,
                        moved,
                        version_of,
                        &mut self.last.route_fingerprints_made,
                    )),
                },
            };
            parts.insert(key.clone(), (b.own.clone(), f.routes.clone()));
            fingerprinted.insert(key.clone(), f);
        }
        self.fingerprinted = fingerprinted;
        Snapshot::with_members(resources, members).with_fingerprinted_parts(parts, fragments)
    }
}

/// One Gateway's routes' parts, fingerprinted against `build`'s resources
/// and the versions of the resources they take whole.
struct Fingerprinted {
    build: Arc<GatewayBuild>,
    routes: Arc<BTreeMap<String, ObjectParts>>,
}

/// A resource and the name it goes by.
type Named = (ResourceType, String);

/// The resources a route's parts can take whole (clusters, secrets) whose
/// versions one build moved: those of the clusters and Gateways it encoded
/// again whose versions differ from before, and of those that went or came.
#[derive(Default)]
struct Moved(BTreeSet<Named>);

impl Moved {
    fn add<'a>(
        &mut self,
        before: impl IntoIterator<Item = (ResourceType, &'a Resource)>,
        after: impl IntoIterator<Item = (ResourceType, &'a Resource)>,
    ) {
        let taken_whole = |(ty, r): (ResourceType, &'a Resource)| {
            matches!(ty, ResourceType::Cluster | ResourceType::Secret)
                .then_some(((ty, r.name.as_str()), r.version.as_str()))
        };
        let before: BTreeMap<_, _> = before.into_iter().filter_map(taken_whole).collect();
        let after: BTreeMap<_, _> = after.into_iter().filter_map(taken_whole).collect();
        for key in before.keys().chain(after.keys()) {
            if before.get(key) != after.get(key) {
                self.0.insert((key.0, key.1.to_string()));
            }
        }
    }
}

/// Each route's parts with their fingerprint: the one in `was` (the
/// Gateway's fingerprints before) for the same parts (the same `Arc`) when
/// none of the resources they take whole moved, else computed.
fn fingerprint_routes<'a>(
    routes: &BTreeMap<String, ObjectParts>,
    was: Option<Fingerprinted>,
    moved: &BTreeSet<Named>,
    version_of: impl Fn(ResourceType, &str) -> Option<&'a str> + Copy,
    made: &mut usize,
) -> BTreeMap<String, ObjectParts> {
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
