//! What one stream asked for, per resource type, and what that selects from its view of a snapshot.
//!
//! CDS and LDS are wildcard types: a first request with no names (or with `*`) asks
//! for every resource of the type. EDS, RDS and SDS name what they want; names the
//! snapshot does not hold are simply not served (Envoy waits for them).

use crate::gate::View;
use aether_xds::{Resource, ResourceType};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// The resource name that means "all of this type".
pub const WILDCARD: &str = "*";

/// Resource name → version, sorted by name: what was sent, ACKed or NACKed.
pub type Versions = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscription {
    /// Every resource of the type, plus `names`.
    pub wildcard: bool,
    pub names: BTreeSet<String>,
}

impl Subscription {
    /// The subscription a state-of-the-world request states in full.
    pub fn from_sotw(ty: ResourceType, resource_names: &[String]) -> Self {
        let names: BTreeSet<String> = resource_names
            .iter()
            .filter(|n| n.as_str() != WILDCARD)
            .cloned()
            .collect();
        let wildcard = resource_names.iter().any(|n| n == WILDCARD)
            || (resource_names.is_empty() && is_wildcard_type(ty));
        Subscription { wildcard, names }
    }

    /// The subscription a first delta request opens with: legacy wildcard when a
    /// wildcard type names nothing.
    pub fn from_delta_initial(ty: ResourceType, subscribe: &[String]) -> Self {
        let mut s = Subscription {
            wildcard: subscribe.is_empty() && is_wildcard_type(ty),
            names: BTreeSet::new(),
        };
        s.subscribe(subscribe);
        s
    }

    pub fn subscribe(&mut self, names: &[String]) {
        for n in names {
            if n == WILDCARD {
                self.wildcard = true;
            } else {
                self.names.insert(n.clone());
            }
        }
    }

    pub fn unsubscribe(&mut self, names: &[String]) {
        for n in names {
            if n == WILDCARD {
                self.wildcard = false;
            } else {
                self.names.remove(n);
            }
        }
    }

    /// Whether a resource of this name is of interest.
    pub fn covers(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }

    /// The resources of `ty` in a stream's view this subscription selects, by name.
    pub fn select_in<'s>(
        &self,
        view: &'s View,
        ty: ResourceType,
    ) -> BTreeMap<&'s str, &'s Resource> {
        if self.wildcard {
            return view.of_type(ty);
        }
        self.names
            .iter()
            .filter_map(|n| view.get(ty, n).map(|r| (r.name.as_str(), r)))
            .collect()
    }
}

/// Types Envoy subscribes to without naming resources.
pub fn is_wildcard_type(ty: ResourceType) -> bool {
    matches!(ty, ResourceType::Cluster | ResourceType::Listener)
}

/// The versions of a selection.
pub fn versions_of(selected: &BTreeMap<&str, &Resource>) -> Versions {
    selected
        .iter()
        .map(|(n, r)| (n.to_string(), r.version.clone()))
        .collect()
}

/// A version for a set of resources: sha256 over the sorted `(name, version)` pairs.
/// Used as SotW `version_info` and as the per-type version in the fleet view, so
/// the same content reads the same in both protocols.
pub fn version_info(versions: &Versions) -> String {
    let mut h = Sha256::new();
    for (name, version) in versions {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(version.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn empty_names_are_wildcard_only_for_cds_and_lds() {
        assert!(Subscription::from_sotw(ResourceType::Cluster, &[]).wildcard);
        assert!(Subscription::from_sotw(ResourceType::Listener, &[]).wildcard);
        assert!(!Subscription::from_sotw(ResourceType::Endpoint, &[]).wildcard);
        assert!(!Subscription::from_sotw(ResourceType::Route, &[]).wildcard);
        let explicit = Subscription::from_sotw(ResourceType::Cluster, &names(&["a"]));
        assert!(!explicit.wildcard);
        assert!(explicit.covers("a") && !explicit.covers("b"));
        let star = Subscription::from_sotw(ResourceType::Route, &names(&["*", "a"]));
        assert!(star.wildcard && star.names.contains("a") && !star.names.contains("*"));
    }

    #[test]
    fn delta_subscribe_and_unsubscribe() {
        let mut s = Subscription::from_delta_initial(ResourceType::Listener, &[]);
        assert!(s.wildcard);
        s.unsubscribe(&names(&["*"]));
        assert!(!s.wildcard);
        let mut e = Subscription::from_delta_initial(ResourceType::Endpoint, &names(&["a", "b"]));
        assert!(!e.wildcard);
        e.unsubscribe(&names(&["a"]));
        assert_eq!(e.names.iter().collect::<Vec<_>>(), vec!["b"]);
    }

    #[test]
    fn version_info_depends_on_names_and_versions() {
        let a: Versions = [("a".to_string(), "1".to_string())].into();
        let b: Versions = [("a".to_string(), "2".to_string())].into();
        let c: Versions = [("b".to_string(), "1".to_string())].into();
        assert_eq!(version_info(&a), version_info(&a.clone()));
        assert_ne!(version_info(&a), version_info(&b));
        assert_ne!(version_info(&a), version_info(&c));
    }
}
