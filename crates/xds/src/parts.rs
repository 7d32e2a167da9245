//! Each object's share of a snapshot, so the status gate can tell per route (and
//! for the Gateway's own listeners) whether an Envoy serves its current config.
//!
//! ```text
//!  GatewayResources.own                    the Gateway's listeners (Programmed)
//!  GatewayResources.routes["HTTPRoute/app/web"] = ObjectParts {
//!      parts: { (RDS, edge_rt_…): Fragment(h),  the routes it owns in that table
//!               (LDS, edge_ls_…): Fragment(g),  the listener as it is now (its
//!                                               address, certificates, own chain)
//!               (CDS, edge_cl_…): Whole,        the clusters it forwards to
//!               (EDS, edge_cl_…): Present },
//!      fingerprint }                           over the parts, at this snapshot
//!  Snapshot.fragments[(RDS, edge_rt_…)] = { "HTTPRoute/app/web": h, … }
//! ```
//!
//! An Envoy serves an object when, for every part, the version it ACKed of that
//! resource is the current one (`Whole`), any one (`Present`), or one whose
//! fragment for the object is `h` (`Fragment`) — looked up in the fragments of the
//! snapshots that carried that version. So a route added to a route table leaves
//! every other route of the table served, and the Gateway stays programmed.
//!
//! A fragment covers what the object owns (its Envoy routes with their virtual
//! host's domains, its filter chain); it does not cover its rank among the other
//! routes of the virtual host.

use crate::snapshot::ResourceType;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The key of the Gateway's own share of a listener (route keys have slashes).
pub const OWN: &str = aether_ir::Kind::Gateway.as_str();

/// What an object needs of one resource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// Some version of it (a listener naming the object's route table, the
    /// endpoints of a cluster: they change without the object changing).
    Present,
    /// A version whose fragment for this object has this hash.
    Fragment(Arc<str>),
    /// Exactly the snapshot's version.
    Whole,
}

/// A resource and the name it goes by, the name shared with every part that
/// names the same resource.
pub type PartName = (ResourceType, Arc<str>);

/// What an object needs of each resource it reads, sorted by resource, no
/// resource twice.
///
/// A short sorted list, not a map: a route has a handful of parts, and a
/// Gateway with 10,000 routes holds 10,000 of these. Names are shared
/// (`Arc<str>`) with the table, listener and clusters they name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parts(Vec<(PartName, Part)>);

impl Parts {
    pub fn iter(&self) -> impl Iterator<Item = (&PartName, &Part)> {
        self.0.iter().map(|(named, part)| (named, part))
    }

    pub fn keys(&self) -> impl Iterator<Item = &PartName> {
        self.0.iter().map(|(named, _)| named)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// What the object needs of resource `name` of type `ty`.
    pub fn get(&self, ty: ResourceType, name: &str) -> Option<&Part> {
        let i = self.find(ty, name).ok()?;
        Some(&self.0[i].1)
    }

    fn find(&self, ty: ResourceType, name: &str) -> Result<usize, usize> {
        self.0
            .binary_search_by(|((t, n), _)| (*t, &**n).cmp(&(ty, name)))
    }

    /// Adds a part (its name from `named` if the resource is new); of two
    /// needs of one resource, the stricter holds.
    fn require(
        &mut self,
        ty: ResourceType,
        name: &str,
        named: impl FnOnce() -> Arc<str>,
        part: Part,
    ) {
        match self.find(ty, name) {
            Ok(i) => {
                if part > self.0[i].1 {
                    self.0[i].1 = part;
                }
            }
            Err(i) => self.0.insert(i, ((ty, named()), part)),
        }
    }
}

/// One object's parts, and a fingerprint of them at the snapshot they belong to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectParts {
    /// Shared: a snapshot's copy with a fingerprint costs no second list.
    pub parts: Arc<Parts>,
    /// Equal fingerprints, equal served config (see [`ObjectParts::fingerprint_of`]).
    pub fingerprint: String,
}

impl ObjectParts {
    /// Adds a part; of two needs of one resource, the stricter holds.
    pub fn require(&mut self, ty: ResourceType, name: &str, part: Part) {
        Arc::make_mut(&mut self.parts).require(ty, name, || name.into(), part);
    }

    /// [`ObjectParts::require`] with the name shared, not copied.
    pub fn require_shared(&mut self, ty: ResourceType, name: &Arc<str>, part: Part) {
        Arc::make_mut(&mut self.parts).require(ty, name, || name.clone(), part);
    }

    /// Gives back what the list holds beyond its parts: call it once the
    /// parts are all there.
    pub(crate) fn fit(&mut self) {
        Arc::make_mut(&mut self.parts).0.shrink_to_fit();
    }

    /// A cluster the object forwards to, and what the cluster references:
    /// the cluster as built, its endpoints as they come, its secrets as they
    /// are now.
    pub fn require_cluster(&mut self, cluster: &Arc<str>, references: &[(ResourceType, String)]) {
        self.require_shared(ResourceType::Cluster, cluster, Part::Whole);
        for (ty, name) in references {
            match ty {
                ResourceType::Endpoint => self.require(*ty, name, Part::Present),
                ResourceType::Secret => self.require(*ty, name, Part::Whole),
                _ => {}
            }
        }
    }

    /// The sha256 over every part: a `Whole` part by the resource's version.
    pub fn fingerprint_of<'a>(
        &self,
        version_of: impl Fn(ResourceType, &str) -> Option<&'a str>,
    ) -> String {
        let mut h = Sha256::new();
        for ((ty, name), part) in self.parts.iter() {
            h.update(ty.short_name().as_bytes());
            h.update([0]);
            h.update(name.as_bytes());
            h.update([0]);
            match part {
                Part::Present => h.update(b"present"),
                Part::Fragment(f) => h.update(f.as_bytes()),
                Part::Whole => h.update(version_of(*ty, name).unwrap_or_default().as_bytes()),
            }
            h.update([0]);
        }
        hex::encode(h.finalize())
    }

    /// Whether an Envoy that ACKed `acked` serves this object: `current` is the
    /// snapshot's version of a resource, `fragment(ty, name, version)` the fragment
    /// this object had in some version (from that version's snapshot).
    pub fn served_by<'a>(
        &self,
        key: &str,
        acked: impl Fn(ResourceType, &str) -> Option<&'a str>,
        current: impl Fn(ResourceType, &str) -> Option<&'a str>,
        fragment: impl Fn(ResourceType, &str, &str, &str) -> Option<&'a str>,
    ) -> bool {
        self.parts.iter().all(|((ty, name), part)| {
            let Some(v) = acked(*ty, name) else {
                return false;
            };
            match part {
                Part::Present => true,
                Part::Whole => current(*ty, name) == Some(v),
                Part::Fragment(h) => {
                    current(*ty, name) == Some(v) || fragment(*ty, name, v, key) == Some(&**h)
                }
            }
        })
    }
}

/// Per object key, the hex sha256 of what that object owns of one shared
/// resource. Keys and hashes are shared: a warm build hands the same ones on,
/// from the route cache to the snapshot and the ADS streams.
pub type KeyHashes = BTreeMap<Arc<str>, Arc<str>>;

/// Each route's parts, by route key (`<kind>/<namespace>/<name>`, shared
/// with the fragments that name it).
pub type RouteParts = BTreeMap<Arc<str>, ObjectParts>;

/// Per object key, a sha256 over the pieces of a resource that object owns.
/// The keys are borrowed: a table adds one piece per Envoy route.
#[derive(Default)]
pub(crate) struct Fragments<'k>(BTreeMap<&'k str, Sha256>);

impl<'k> Fragments<'k> {
    pub(crate) fn add(&mut self, key: &'k str, pieces: &[&[u8]]) {
        let h = self.0.entry(key).or_default();
        for p in pieces {
            h.update((p.len() as u64).to_be_bytes());
            h.update(p);
        }
    }

    pub(crate) fn finish(self) -> KeyHashes {
        self.0
            .into_iter()
            .map(|(k, h)| (Arc::from(k), Arc::from(hex::encode(h.finalize()))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stricter_need_of_a_resource_holds() {
        let mut p = ObjectParts::default();
        p.require(ResourceType::Listener, "l", Part::Fragment("f".into()));
        p.require(ResourceType::Listener, "l", Part::Present);
        assert_eq!(
            p.parts.get(ResourceType::Listener, "l"),
            Some(&Part::Fragment("f".into()))
        );
        p.require(ResourceType::Listener, "l", Part::Whole);
        assert_eq!(p.parts.get(ResourceType::Listener, "l"), Some(&Part::Whole));
        assert_eq!(p.parts.len(), 1);
    }

    #[test]
    fn parts_are_listed_in_resource_order_whatever_order_they_came_in() {
        let mut p = ObjectParts::default();
        p.require(ResourceType::Secret, "s", Part::Whole);
        p.require(ResourceType::Cluster, "b", Part::Whole);
        p.require(ResourceType::Route, "rt", Part::Present);
        p.require(ResourceType::Cluster, "a", Part::Present);
        p.require(ResourceType::Cluster, "b", Part::Present);
        let listed: Vec<(ResourceType, &str)> =
            p.parts.keys().map(|(t, n)| (*t, n.as_ref())).collect();
        let mut sorted = listed.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(listed, sorted);
        assert_eq!(listed.len(), 4);
        assert_eq!(p.parts.get(ResourceType::Cluster, "b"), Some(&Part::Whole));
        assert_eq!(p.parts.get(ResourceType::Cluster, "c"), None);
    }

    #[test]
    fn an_older_version_serves_an_object_whose_fragment_it_holds() {
        let mut p = ObjectParts::default();
        p.require(ResourceType::Route, "rt", Part::Fragment("mine".into()));
        p.require(ResourceType::Cluster, "c", Part::Whole);
        let current = |ty: ResourceType, _: &str| match ty {
            ResourceType::Route => Some("v2"),
            _ => Some("c1"),
        };
        let history = |_: ResourceType, _: &str, v: &str, key: &str| match (v, key) {
            ("v1", "HTTPRoute/a/b") => Some("mine"),
            ("v0", "HTTPRoute/a/b") => Some("older"),
            _ => None,
        };
        let acked = |route: &'static str, cluster: &'static str| {
            move |ty: ResourceType, _: &str| match ty {
                ResourceType::Route => Some(route),
                _ => Some(cluster),
            }
        };
        let key = "HTTPRoute/a/b";
        assert!(p.served_by(key, acked("v2", "c1"), current, history));
        assert!(p.served_by(key, acked("v1", "c1"), current, history));
        assert!(!p.served_by(key, acked("v0", "c1"), current, history));
        assert!(!p.served_by(key, acked("v1", "c0"), current, history));
        assert!(!p.served_by(key, |_, _| None, current, history));
    }
}
