//! The versioned output of a build: what the ADS server serves.
//!
//! ```text
//!  Snapshot ── resources[type] = shared map: [name] = Resource { version = sha256(encoded body), body: Any }
//!          ├─ gateways[ns/name] = GatewayResources { hash, members: {(type, name)},
//!          │                                       own, routes[key]: ObjectParts }
//!          └─ fragments[(type, name)] = { object key: hash }   (see `parts.rs`)
//! ```
//!
//! A resource's version is the hex sha256 of its protobuf encoding, so an unchanged
//! resource keeps its version across builds and is never re-sent. Each type's map
//! is shared (`Arc`) between snapshots while none of its resources moved, and so
//! is its digest, over which the snapshot's version is taken. A Gateway's hash
//! is the sha256 over the sorted `(type, name, version)` of every resource it uses;
//! an Envoy has "ACKed a Gateway" when the versions it ACKed for those resources
//! produce the same hash (see [`GatewayResources::hash_of`]).

use crate::parts::{KeyHashes, ObjectParts, RouteParts};
use aether_ir::ObjectRef;
use envoy_types::pb::google::protobuf::Any;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The xDS resource types we serve, in the order they must be pushed on one ADS
/// stream (CDS, EDS, LDS, RDS, then SDS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    Cluster,
    Endpoint,
    Listener,
    Route,
    Secret,
}

impl ResourceType {
    /// Whether an Envoy that holds a resource of this type at any version
    /// serves what reads it (`parts::Part::Present`): endpoints, which come
    /// and go without any route or Gateway changing. A Gateway's hash and
    /// "served whole" take their presence, not their versions, so pod churn
    /// neither rehashes a Gateway nor holds its status back.
    pub fn any_version_serves(self) -> bool {
        self == ResourceType::Endpoint
    }

    /// Push order on one stream.
    pub const ALL: [ResourceType; 5] = [
        ResourceType::Cluster,
        ResourceType::Endpoint,
        ResourceType::Listener,
        ResourceType::Route,
        ResourceType::Secret,
    ];

    pub fn type_url(self) -> &'static str {
        match self {
            ResourceType::Cluster => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            ResourceType::Endpoint => {
                "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
            }
            ResourceType::Listener => "type.googleapis.com/envoy.config.listener.v3.Listener",
            ResourceType::Route => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
            ResourceType::Secret => {
                "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
            }
        }
    }

    pub fn from_type_url(url: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.type_url() == url)
    }

    /// Short name as used in logs, metrics and the debug endpoint.
    pub fn short_name(self) -> &'static str {
        match self {
            ResourceType::Cluster => "CDS",
            ResourceType::Endpoint => "EDS",
            ResourceType::Listener => "LDS",
            ResourceType::Route => "RDS",
            ResourceType::Secret => "SDS",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub name: String,
    /// Hex sha256 of `body.value`.
    pub version: String,
    /// Shared: every snapshot holds every resource, and a new snapshot per
    /// change must not copy every encoded body.
    pub body: Arc<Any>,
    /// What this resource names that an Envoy must hold, warm, before this
    /// version may be sent to it (make-before-break, see `aether_ads::gate`):
    /// a route table or an L4 listener names its clusters; a cluster names its
    /// endpoints and the secrets its TLS reads. Sorted, deduplicated.
    pub references: Arc<[(ResourceType, String)]>,
}

impl Resource {
    pub fn new(name: impl Into<String>, type_url: &str, encoded: Vec<u8>) -> Self {
        let version = hex::encode(Sha256::digest(&encoded));
        Resource {
            name: name.into(),
            version,
            body: Arc::new(Any {
                type_url: type_url.to_string(),
                value: encoded,
            }),
            references: Arc::from([]),
        }
    }

    /// The same resource, naming `references` (see [`Resource::references`]).
    pub fn with_references(
        mut self,
        references: impl IntoIterator<Item = (ResourceType, String)>,
    ) -> Self {
        let sorted: BTreeSet<(ResourceType, String)> = references.into_iter().collect();
        self.references = sorted.into_iter().collect();
        self
    }
}

/// Which resources make up one Gateway, and their combined hash.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GatewayResources {
    /// Shared: a build that did not touch the Gateway gives the same set.
    pub members: Arc<BTreeSet<(ResourceType, String)>>,
    /// See [`GatewayResources::hash_of`] with the snapshot's own versions.
    pub hash: String,
    /// The Gateway's own share: its listeners without what routes own of them.
    /// Empty when the snapshot was built without parts.
    pub own: ObjectParts,
    /// Each route's share, by route key (`<kind>/<namespace>/<name>`); shared
    /// between snapshots while nothing it was fingerprinted against moved.
    pub routes: Arc<RouteParts>,
}

/// A Gateway's resources, by type and name.
pub type Members = Arc<BTreeSet<(ResourceType, String)>>;

/// One type's resources, by name; shared between snapshots while none moved.
pub type ByName = Arc<BTreeMap<String, Resource>>;

/// The sha256 over one type's resources' `(name, version)`, in name order.
pub type TypeDigest = [u8; 32];

/// Per resource that objects share, each object's fragment of it.
pub type Fragments = BTreeMap<(ResourceType, String), Arc<KeyHashes>>;

/// What [`Snapshot::with_fingerprinted_parts`] takes, per Gateway: its own
/// share, and its routes' shares already fingerprinted against the snapshot.
pub type FingerprintedParts = BTreeMap<ObjectRef, (ObjectParts, Arc<RouteParts>)>;

impl GatewayResources {
    /// The hash of this Gateway's resources given some versions (the snapshot's,
    /// or those an Envoy ACKed). `None` if a member has no version there. Of
    /// the types any version of which serves, only that one is there counts.
    pub fn hash_of<'a>(
        &self,
        version_of: impl Fn(ResourceType, &str) -> Option<&'a str>,
    ) -> Option<String> {
        let mut h = Sha256::new();
        for (ty, name) in self.members.iter() {
            let v = version_of(*ty, name)?;
            let v = if ty.any_version_serves() { "" } else { v };
            h.update(ty.short_name().as_bytes());
            h.update([0]);
            h.update(name.as_bytes());
            h.update([0]);
            h.update(v.as_bytes());
            h.update([0]);
        }
        Some(hex::encode(h.finalize()))
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Per type, resources by name. A type without resources has no entry.
    pub resources: BTreeMap<ResourceType, ByName>,
    pub gateways: BTreeMap<ObjectRef, GatewayResources>,
    /// Per resource that objects share, each object's fragment at this version.
    pub fragments: Fragments,
    /// Per type in `resources`, its digest.
    pub digests: BTreeMap<ResourceType, TypeDigest>,
    /// sha256 over each type's [`TypeDigest`]: equal snapshots, equal version.
    pub version: String,
}

/// The digest of one type's resources (see [`TypeDigest`]).
pub fn type_digest(by_name: &BTreeMap<String, Resource>) -> TypeDigest {
    let mut h = Sha256::new();
    for (name, r) in by_name {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(r.version.as_bytes());
        h.update([0]);
    }
    h.finalize().into()
}

/// A snapshot's version from its types' digests, in type order.
fn version_of_digests<'a>(
    digests: impl IntoIterator<Item = (ResourceType, &'a TypeDigest)>,
) -> String {
    let mut h = Sha256::new();
    for (ty, digest) in digests {
        h.update(ty.short_name().as_bytes());
        h.update([0]);
        h.update(digest);
    }
    hex::encode(h.finalize())
}

/// What [`Snapshot::assembled`] takes per Gateway: its members, and its hash
/// when the caller knows it holds (the same members, none of whose versions
/// moved since it was computed).
pub struct GatewayMembers {
    pub members: Members,
    pub hash: Option<String>,
}

impl GatewayMembers {
    /// `members`, with the hash `before` had when it still holds: the same
    /// set (the same `Arc`), none of whose resources is among `moved` (those
    /// any version of which serves aside: their versions are not hashed).
    pub fn keeping(
        members: Members,
        before: Option<(&Members, &String)>,
        moved: &BTreeSet<(ResourceType, String)>,
    ) -> Self {
        let hashed = |(ty, _): &&(ResourceType, String)| !ty.any_version_serves();
        let hash = before
            .filter(|(was, _)| Arc::ptr_eq(was, &members))
            .filter(|_| !moved.iter().filter(hashed).any(|n| members.contains(n)))
            .map(|(_, hash)| hash.clone());
        GatewayMembers { members, hash }
    }
}

impl Snapshot {
    /// Builds the snapshot version and every Gateway hash from the resources.
    pub fn new(
        resources: BTreeMap<ResourceType, BTreeMap<String, Resource>>,
        gateway_members: BTreeMap<ObjectRef, BTreeSet<(ResourceType, String)>>,
    ) -> Self {
        let members = gateway_members.into_iter();
        let resources = resources
            .into_iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(ty, m)| (ty, Arc::new(m)))
            .collect();
        Self::with_members(resources, members.map(|(gw, m)| (gw, Arc::new(m))))
    }

    /// [`Snapshot::new`] with each type's map and each Gateway's members
    /// shared, as a build keeps them.
    pub fn with_members(
        resources: BTreeMap<ResourceType, ByName>,
        gateway_members: impl IntoIterator<Item = (ObjectRef, Members)>,
    ) -> Self {
        let digests: BTreeMap<ResourceType, TypeDigest> = resources
            .iter()
            .map(|(ty, m)| (*ty, type_digest(m)))
            .collect();
        let gateways = gateway_members.into_iter().map(|(gw, members)| {
            (
                gw,
                GatewayMembers {
                    members,
                    hash: None,
                },
            )
        });
        Self::assembled(resources, digests, gateways)
    }

    /// The snapshot of `resources`, given each type's digest, with each
    /// Gateway's hash computed where it is not given.
    pub fn assembled(
        resources: BTreeMap<ResourceType, ByName>,
        digests: BTreeMap<ResourceType, TypeDigest>,
        gateways: impl IntoIterator<Item = (ObjectRef, GatewayMembers)>,
    ) -> Self {
        debug_assert!(resources.keys().eq(digests.keys()), "a digest per type");
        let mut snapshot = Snapshot {
            resources,
            gateways: BTreeMap::new(),
            fragments: BTreeMap::new(),
            version: version_of_digests(digests.iter().map(|(ty, d)| (*ty, d))),
            digests,
        };
        for (gw, GatewayMembers { members, hash }) in gateways {
            let mut g = GatewayResources {
                members,
                ..Default::default()
            };
            g.hash = hash.unwrap_or_else(|| {
                g.hash_of(|ty, name| snapshot.version_of(ty, name))
                    .expect("every Gateway member is a resource of the snapshot")
            });
            snapshot.gateways.insert(gw, g);
        }
        snapshot
    }

    /// Adds each Gateway's parts (its own and its routes') and the fragments of
    /// shared resources, fingerprinting every part set at this snapshot.
    pub fn with_parts(
        self,
        parts: BTreeMap<ObjectRef, (ObjectParts, RouteParts)>,
        fragments: BTreeMap<(ResourceType, String), KeyHashes>,
    ) -> Self {
        let parts = parts
            .into_iter()
            .map(|(gw, (own, mut routes))| {
                for r in routes.values_mut() {
                    r.fingerprint = r.fingerprint_of(|ty, name| self.version_of(ty, name));
                }
                (gw, (own, Arc::new(routes)))
            })
            .collect();
        let fragments = fragments
            .into_iter()
            .map(|(k, v)| (k, Arc::new(v)))
            .collect();
        self.with_fingerprinted_parts(parts, fragments)
    }

    /// [`Snapshot::with_parts`] with the routes' parts already fingerprinted
    /// against this snapshot's versions (the incremental builder keeps them
    /// while neither the Gateway nor a resource they read whole moved).
    pub fn with_fingerprinted_parts(
        mut self,
        parts: FingerprintedParts,
        fragments: Fragments,
    ) -> Self {
        for (gw, (mut own, routes)) in parts {
            own.fingerprint = own.fingerprint_of(|ty, name| self.version_of(ty, name));
            if let Some(g) = self.gateways.get_mut(&gw) {
                g.own = own;
                g.routes = routes;
            }
        }
        self.fragments = fragments;
        self
    }

    /// This snapshot with some resources of `ty` replaced, each with its
    /// fragments; the version, Gateway hashes and own fingerprints follow the
    /// new resources (the routes' parts are kept as they are). Only `ty`'s
    /// map is copied, and only the hashes of Gateways with a replaced member
    /// are computed again.
    pub fn replacing(
        &self,
        ty: ResourceType,
        replaced: impl IntoIterator<Item = (Resource, KeyHashes)>,
    ) -> Snapshot {
        let mut resources = self.resources.clone();
        let mut fragments = self.fragments.clone();
        let mut names = BTreeSet::new();
        for (r, f) in replaced {
            fragments.insert((ty, r.name.clone()), Arc::new(f));
            names.insert((ty, r.name.clone()));
            let by_name = Arc::make_mut(resources.entry(ty).or_default());
            by_name.insert(r.name.clone(), r);
        }
        let mut digests = self.digests.clone();
        if let Some(by_name) = resources.get(&ty) {
            digests.insert(ty, type_digest(by_name));
        }
        let gateways = self.gateways.iter().map(|(gw, g)| {
            let before = Some((&g.members, &g.hash));
            let members = GatewayMembers::keeping(g.members.clone(), before, &names);
            (gw.clone(), members)
        });
        let parts = self
            .gateways
            .iter()
            .map(|(gw, g)| (gw.clone(), (g.own.clone(), g.routes.clone())))
            .collect();
        Snapshot::assembled(resources, digests, gateways).with_fingerprinted_parts(parts, fragments)
    }

    /// One object's fragment of a resource at this snapshot's version.
    pub fn fragment(&self, ty: ResourceType, name: &str, key: &str) -> Option<&str> {
        self.fragments
            .get(&(ty, name.to_string()))
            .and_then(|f| f.get(key))
            .map(|h| &**h)
    }

    pub fn version_of(&self, ty: ResourceType, name: &str) -> Option<&str> {
        self.resources
            .get(&ty)
            .and_then(|m| m.get(name))
            .map(|r| r.version.as_str())
    }

    pub fn of_type(&self, ty: ResourceType) -> impl Iterator<Item = &Resource> {
        self.resources.get(&ty).into_iter().flat_map(|m| m.values())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(name: &str, body: &[u8]) -> Resource {
        Resource::new(name, ResourceType::Route.type_url(), body.to_vec())
    }

    fn snapshot(a: &[u8], b: &[u8]) -> Snapshot {
        let cluster = Resource::new("c", ResourceType::Cluster.type_url(), b"c".to_vec());
        let resources = BTreeMap::from([
            (
                ResourceType::Cluster,
                BTreeMap::from([("c".into(), cluster)]),
            ),
            (
                ResourceType::Route,
                BTreeMap::from([("a".into(), route("a", a)), ("b".into(), route("b", b))]),
            ),
        ]);
        let members = |table: &str| {
            let set = [(ResourceType::Cluster, "c"), (ResourceType::Route, table)];
            set.into_iter().map(|(ty, n)| (ty, n.to_string())).collect()
        };
        let gateways = BTreeMap::from([
            (ObjectRef::new("ns", "a"), members("a")),
            (ObjectRef::new("ns", "b"), members("b")),
        ]);
        Snapshot::new(resources, gateways)
    }

    /// A replaced table: the version, digests and hashes a fresh snapshot of
    /// the same resources has; the other types' maps and the hash of the
    /// Gateway without that table are the ones before.
    #[test]
    fn replacing_a_resource_moves_what_a_fresh_snapshot_would_and_shares_the_rest() {
        let before = snapshot(b"a1", b"b1");
        let fresh = snapshot(b"a2", b"b1");
        let replaced =
            before.replacing(ResourceType::Route, [(route("a", b"a2"), BTreeMap::new())]);
        assert_eq!(replaced.version, fresh.version);
        assert_ne!(replaced.version, before.version);
        assert_eq!(replaced.digests, fresh.digests);
        assert_eq!(replaced.resources, fresh.resources);
        for (gw, g) in &fresh.gateways {
            assert_eq!(replaced.gateways[gw].hash, g.hash, "{gw}");
        }
        let (a, b) = (ObjectRef::new("ns", "a"), ObjectRef::new("ns", "b"));
        assert_ne!(replaced.gateways[&a].hash, before.gateways[&a].hash);
        assert_eq!(replaced.gateways[&b].hash, before.gateways[&b].hash);
        let clusters = |s: &Snapshot| s.resources[&ResourceType::Cluster].clone();
        assert!(Arc::ptr_eq(&clusters(&replaced), &clusters(&before)));
    }
}
