//! What resolving backendRefs reads beyond point lookups, indexed once:
//! EndpointSlices by the Service they are labeled with, and
//! BackendTLSPolicies with their conflicts decided.

use crate::backend_tls::Policies;
use crate::store::{Store, StoreObject};
use aether_ir::ObjectRef;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What resolving needs beyond point lookups: EndpointSlices by Service, and
/// BackendTLSPolicies with their conflicts decided. It depends only on those
/// two kinds, so a translator may keep it while neither changes.
pub struct BackendIndex {
    pub(super) slices: BTreeMap<ObjectRef, Vec<Arc<EndpointSlice>>>,
    pub(super) tls: Policies,
}

impl BackendIndex {
    pub fn new(store: &Store) -> Self {
        let mut slices: BTreeMap<ObjectRef, Vec<Arc<EndpointSlice>>> = BTreeMap::new();
        for (key, slice) in store.all::<EndpointSlice>() {
            if let Some(service) = service_of(&key.namespace, slice) {
                slices.entry(service).or_default().push(slice.clone());
            }
        }
        BackendIndex {
            slices,
            tls: Policies::new(store),
        }
    }

    /// Brings the index from the EndpointSlices `before` (as they were when it
    /// was made or last updated, in store order) to those of `store`, touching
    /// only the Services whose slices changed, and returns those Services that
    /// [`BackendIndex::services_changed`] would name. A pod replaced behind one
    /// Service of 10,000 costs that Service, not a new index.
    pub fn update<'b>(
        &mut self,
        before: impl IntoIterator<Item = &'b Arc<EndpointSlice>>,
        store: &Store,
    ) -> BTreeSet<ObjectRef> {
        let mut changed = BTreeSet::new();
        let mut was = before.into_iter().peekable();
        for (key, now) in store.unread::<EndpointSlice>() {
            if was.next_if(|old| Arc::ptr_eq(old, now)).is_some() {
                continue;
            }
            let at = (key.namespace.as_str(), key.name.as_str());
            // Slices gone before this one (in store order: by key).
            while let Some(old) = was.next_if(|old| slice_key(old) < at) {
                self.remove(slice_key(old).0, old, &mut changed, true);
            }
            match was.next_if(|old| slice_key(old) == at) {
                Some(old) => {
                    // The same Service both times and nothing translation reads
                    // changed: the index takes the new object, no Service is stale.
                    let moved = service_of(&key.namespace, old) != service_of(&key.namespace, now);
                    let stands = !moved && old.same_input(now);
                    self.remove(&key.namespace, old, &mut changed, !stands);
                    self.insert(&key.namespace, now, &mut changed, !stands);
                }
                None => self.insert(&key.namespace, now, &mut changed, true),
            }
        }
        for old in was {
            self.remove(slice_key(old).0, old, &mut changed, true);
        }
        changed
    }

    fn remove(
        &mut self,
        namespace: &str,
        old: &EndpointSlice,
        changed: &mut BTreeSet<ObjectRef>,
        stale: bool,
    ) {
        let Some(service) = service_of(namespace, old) else {
            return;
        };
        if let Some(list) = self.slices.get_mut(&service) {
            list.retain(|s| s.metadata.name != old.metadata.name);
            if list.is_empty() {
                self.slices.remove(&service);
            }
        }
        if stale {
            changed.insert(service);
        }
    }

    /// Inserts `now` in its Service's list at its place in store order.
    fn insert(
        &mut self,
        namespace: &str,
        now: &Arc<EndpointSlice>,
        changed: &mut BTreeSet<ObjectRef>,
        stale: bool,
    ) {
        let Some(service) = service_of(namespace, now) else {
            return;
        };
        let list = self.slices.entry(service.clone()).or_default();
        let at = list.partition_point(|s| s.metadata.name < now.metadata.name);
        list.insert(at, now.clone());
        if stale {
            changed.insert(service);
        }
    }

    /// The Services whose EndpointSlices differ between `self` and `other`
    /// (by identity, or by anything translation reads of them).
    pub fn services_changed(&self, other: &BackendIndex) -> BTreeSet<ObjectRef> {
        let same = |a: &Vec<Arc<EndpointSlice>>, b: &Vec<Arc<EndpointSlice>>| {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(x, y)| Arc::ptr_eq(x, y) || x.same_input(y))
        };
        let mut changed: BTreeSet<ObjectRef> = BTreeSet::new();
        for (service, slices) in &self.slices {
            if other.slices.get(service).is_none_or(|o| !same(slices, o)) {
                changed.insert(service.clone());
            }
        }
        for service in other.slices.keys() {
            if !self.slices.contains_key(service) {
                changed.insert(service.clone());
            }
        }
        changed
    }
}

/// The Service a slice is labeled with, in its namespace.
fn service_of(namespace: &str, slice: &EndpointSlice) -> Option<ObjectRef> {
    let labels = slice.metadata.labels.as_ref()?;
    Some(ObjectRef::new(namespace, labels.get(SERVICE_NAME_LABEL)?))
}

/// A slice's store key ([`crate::store::key_of`]) as borrowed strings: its
/// place in store order.
fn slice_key(slice: &EndpointSlice) -> (&str, &str) {
    let m = &slice.metadata;
    let ns = m.namespace.as_deref().filter(|ns| !ns.is_empty());
    (
        ns.unwrap_or(crate::store::DEFAULT_NAMESPACE),
        m.name.as_deref().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(name: &str, service: Option<&str>, address: &str, rv: &str) -> EndpointSlice {
        let labels = service.map(|s| format!("\n  labels: {{kubernetes.io/service-name: {s}}}"));
        let yaml = format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}\n  namespace: shop\n  resourceVersion: \"{rv}\"{}\naddressType: IPv4\nendpoints:\n- addresses: [\"{address}\"]\n",
            labels.unwrap_or_default()
        );
        serde_norway::from_str(&yaml).expect("a slice")
    }

    fn names(index: &BackendIndex) -> Vec<(String, Vec<String>)> {
        (index.slices.iter())
            .map(|(svc, list)| {
                let names = list
                    .iter()
                    .map(|s| s.metadata.name.clone().unwrap())
                    .collect();
                (svc.name.clone(), names)
            })
            .collect()
    }

    #[test]
    fn an_update_touches_only_the_services_whose_slices_changed() {
        let mut before = Store::default();
        before.insert(slice("a-2", Some("a"), "10.0.0.2", "1"));
        before.insert(slice("a-1", Some("a"), "10.0.0.1", "1"));
        before.insert(slice("b-1", Some("b"), "10.0.1.1", "1"));
        before.insert(slice("d-1", Some("d"), "10.0.3.1", "1"));
        before.insert(slice("m-1", Some("m"), "10.0.4.1", "1"));
        before.insert(slice("orphan", None, "10.0.9.1", "1"));
        let mut index = BackendIndex::new(&before);
        let was: Vec<_> = before.unread::<EndpointSlice>().values().cloned().collect();

        let mut after = before.clone();
        after.insert(slice("a-1", Some("a"), "10.0.0.9", "2")); // a pod replaced
        after.insert(slice("b-1", Some("b"), "10.0.1.1", "7")); // only its resourceVersion
        after.insert(slice("c-1", Some("c"), "10.0.2.1", "1")); // a new Service's slice
        after.remove::<EndpointSlice>("shop", "d-1"); // a Service's last slice gone
        after.insert(slice("m-1", Some("n"), "10.0.4.1", "2")); // moved to another Service
        after.insert(slice("orphan", None, "10.0.9.2", "2")); // no Service: nobody reads it

        let fresh = BackendIndex::new(&after);
        let expected = BackendIndex::new(&before).services_changed(&fresh);
        let changed = index.update(&was, &after);
        assert_eq!(changed, expected, "the Services services_changed names");
        let changed: Vec<&str> = changed.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(changed, ["a", "c", "d", "m", "n"]);
        assert_eq!(
            names(&index),
            names(&fresh),
            "the same index as one made anew"
        );
        // It holds the store's objects, the new ones too.
        for (service, list) in &index.slices {
            for (s, f) in list.iter().zip(&fresh.slices[service]) {
                assert!(Arc::ptr_eq(s, f), "{service:?}: the store's object");
            }
        }
    }
}
