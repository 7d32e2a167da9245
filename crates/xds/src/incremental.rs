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
        let mut clusters = BTreeMap::new();
        for c in &ir.clusters {
            let built = match self.clusters.get(&c.name) {
                // The same shared IR cluster, or an equal one.
                Some((cached, built)) if Arc::ptr_eq(cached, c) || cached == c => {
                    reuse.clusters_reused += 1;
                    built.clone()
                }
                _ => {
                    reuse.clusters_encoded += 1;
                    Arc::new(build_cluster(c))
                }
            };
            clusters.insert(c.name.clone(), (c.clone(), built));
        }
        self.clusters = clusters;

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
                    let built =
                        build_gateway(gw, &known, self.access_log, self.proxy_protocol, before);
                    reuse.routes_reused += built.route_count.reused;
                    reuse.routes_encoded += built.route_count.encoded;
                    Arc::new(built)
                }
            };
            gateways.insert(key, (gw.clone(), built));
        }
        self.gateways = gateways;
        self.last = reuse;
        self.assemble()
    }

    /// The snapshot of what the cache holds now (exactly the last IR's pieces).
    fn assemble(&mut self) -> Snapshot {
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
        let mut members: BTreeMap<ir::ObjectRef, BTreeSet<(ResourceType, String)>> =
            BTreeMap::new();
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
            let kept = self.fingerprinted.remove(key).filter(|f| {
                Arc::ptr_eq(&f.build, b)
                    && f.wholes
                        .iter()
                        .all(|((ty, name), v)| version_of(*ty, name) == v.as_deref())
            });
            let f = kept.unwrap_or_else(|| {
                let mut routes = b.routes.clone();
                for r in routes.values_mut() {
                    r.fingerprint = r.fingerprint_of(version_of);
                }
                Fingerprinted {
                    build: b.clone(),
                    wholes: b
                        .wholes
                        .iter()
                        .map(|(ty, name)| {
                            (
                                (*ty, name.clone()),
                                version_of(*ty, name).map(str::to_string),
                            )
                        })
                        .collect(),
                    routes: Arc::new(routes),
                }
            });
            parts.insert(key.clone(), (b.own.clone(), f.routes.clone()));
            fingerprinted.insert(key.clone(), f);
        }
        self.fingerprinted = fingerprinted;
        Snapshot::new(resources, members).with_fingerprinted_parts(parts, fragments)
    }
}

/// One Gateway's routes' parts, fingerprinted against the versions in `wholes`
/// (the resources they take whole) and `build`'s own.
struct Fingerprinted {
    build: Arc<GatewayBuild>,
    wholes: Vec<((ResourceType, String), Option<String>)>,
    routes: Arc<BTreeMap<String, ObjectParts>>,
}

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
