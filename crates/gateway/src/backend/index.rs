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
            let service = slice
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL));
            if let Some(service) = service {
                slices
                    .entry(ObjectRef::new(&key.namespace, service))
                    .or_default()
                    .push(slice.clone());
            }
        }
        BackendIndex {
            slices,
            tls: Policies::new(store),
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
