//! Telling inputs apart: pointer identity of the store's `Arc`s first, then
//! [`StoreObject::same_input`] (an object translation cannot tell from the one
//! cached), for single objects and for the shared kinds walked in store order.

use super::Shared;
use crate::store::{Store, StoreObject};
use gateway_api::apis::experimental::listenersets::ListenerSet;
use gateway_api::apis::experimental::xbackends::XBackend;
use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::sync::Arc;

/// Whether the objects `each` walks in `store` are the `cached` ones, or ones
/// translation cannot tell from them (then `cached` takes the new ones from
/// here on, and lets the old ones go).
pub(super) fn same_objects(cached: &mut Vec<Shared>, store: &Store, each: ForEach) -> bool {
    let mut was = cached.iter();
    let (mut same, mut identical) = (true, true);
    each(store, &mut |o, same_as| {
        let c = was.next();
        identical = identical && c.is_some_and(|c| Arc::ptr_eq(c, &o));
        same = same && c.is_some_and(|c| same_as(c, &o));
    });
    let same = same && was.next().is_none();
    if same && !identical {
        *cached = objects(store, each);
    }
    same
}

/// The same object, or one translation cannot tell from it.
pub(super) fn same_input<T: StoreObject>(cached: &Arc<T>, now: &Arc<T>) -> bool {
    Arc::ptr_eq(cached, now) || cached.same_input(now)
}

/// [`same_input`] for objects of kind `T`, type-erased.
pub(super) fn same_as<T: StoreObject + Send + Sync + 'static>(
    cached: &Shared,
    now: &Shared,
) -> bool {
    Arc::ptr_eq(cached, now)
        || matches!(
            (cached.downcast_ref::<T>(), now.downcast_ref::<T>()),
            (Some(a), Some(b)) if a.same_input(b)
        )
}

/// Compares two objects of one kind: [`same_as`] for that kind.
pub(super) type SameAs = fn(&Shared, &Shared) -> bool;

/// Walks some objects of a store, in store order, each with how to compare it.
pub(super) type ForEach = fn(&Store, &mut dyn FnMut(Shared, SameAs));

fn kind<T: StoreObject + Send + Sync + 'static>(store: &Store, f: &mut dyn FnMut(Shared, SameAs)) {
    for o in store.all::<T>().values() {
        f(o.clone(), same_as::<T>);
    }
}

/// Every object of the kinds more than one Gateway or route may read, but
/// EndpointSlices ([`for_each_slice`]).
pub(super) fn for_each_shared(store: &Store, f: &mut dyn FnMut(Shared, SameAs)) {
    kind::<GatewayClass>(store, f);
    kind::<ReferenceGrant>(store, f);
    kind::<Service>(store, f);
    kind::<Secret>(store, f);
    kind::<ConfigMap>(store, f);
    kind::<Namespace>(store, f);
    kind::<BackendTlsPolicy>(store, f);
    kind::<ListenerSet>(store, f);
    kind::<ClusterTrustBundle>(store, f);
    kind::<XBackend>(store, f);
}

/// Every EndpointSlice: routes read them only through the Services they name.
pub(super) fn for_each_slice(store: &Store, f: &mut dyn FnMut(Shared, SameAs)) {
    kind::<EndpointSlice>(store, f);
}

pub(super) fn objects(store: &Store, each: ForEach) -> Vec<Shared> {
    let mut out = Vec::new();
    each(store, &mut |o, _| out.push(o));
    out
}
