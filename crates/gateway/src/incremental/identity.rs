//! Telling inputs apart: pointer identity of the store's `Arc`s first, then
//! [`StoreObject::same_input`] (an object translation cannot tell from the one
//! cached), for single objects and for the shared kinds walked in store order.

use super::Shared;
use crate::store::reads::Reads;
use crate::store::{Store, StoreObject};
use aether_ir::{Kind, ObjectRef};
use gateway_api::apis::experimental::listenersets::ListenerSet;
use gateway_api::apis::experimental::xbackends::XBackend;
use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle;
use std::collections::BTreeMap;
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
    for o in store.unread::<T>().values() {
        f(o.clone(), same_as::<T>);
    }
}

/// Every object of the kinds more than one Gateway or route may read, but
/// EndpointSlices (the backend index follows them, see
/// `BackendIndex::update`) and the kinds read by reference ([`ReadObjects`]).
pub(super) fn for_each_shared(store: &Store, f: &mut dyn FnMut(Shared, SameAs)) {
    kind::<GatewayClass>(store, f);
    kind::<ReferenceGrant>(store, f);
    kind::<BackendTlsPolicy>(store, f);
    kind::<ListenerSet>(store, f);
    kind::<ClusterTrustBundle>(store, f);
    kind::<XBackend>(store, f);
}

pub(super) fn objects(store: &Store, each: ForEach) -> Vec<Shared> {
    let mut out = Vec::new();
    each(store, &mut |o, _| out.push(o));
    out
}

/// The objects of the kinds read by reference (Services, Secrets, ConfigMaps,
/// Namespaces: [`crate::store::reads`]) that translations read since the
/// cache was filled, as they were then. The cache stands while they do: a
/// change to any other object of those kinds changes no translation.
#[derive(Default)]
pub(super) struct ReadObjects {
    /// By kind, each key looked up, and its object then (`None`: absent).
    keys: BTreeMap<Kind, BTreeMap<ObjectRef, Option<Shared>>>,
    /// The kinds walked whole, and their objects then, in store order.
    whole: BTreeMap<Kind, Vec<Shared>>,
}

fn lookup<T: StoreObject + Send + Sync + 'static>(
    store: &Store,
    key: &ObjectRef,
) -> Option<Shared> {
    store.unread::<T>().get(key).map(|o| o.clone() as Shared)
}

fn every<T: StoreObject + Send + Sync + 'static>(store: &Store) -> Vec<Shared> {
    objects(store, |store, f| kind::<T>(store, f))
}

fn same_by_kind(kind: Kind, was: &Shared, now: &Shared) -> bool {
    crate::with_store_type!(kind, same_as(was, now))
}

impl ReadObjects {
    /// Whether every object read is in `store` as it was (or as an object
    /// translation cannot tell from it), and every key read and absent still is.
    pub(super) fn stand(&self, store: &Store) -> bool {
        let keys = self.keys.iter().all(|(&kind, keys)| {
            keys.iter().all(|(key, was)| {
                let now = crate::with_store_type!(kind, lookup(store, key));
                match (was, &now) {
                    (None, None) => true,
                    (Some(was), Some(now)) => same_by_kind(kind, was, now),
                    _ => false,
                }
            })
        });
        keys && self.whole.iter().all(|(&kind, was)| {
            let now = crate::with_store_type!(kind, every(store));
            was.len() == now.len() && was.iter().zip(&now).all(|(a, b)| same_by_kind(kind, a, b))
        })
    }

    /// Adds what one translation of `store` read (keys already held were
    /// found standing before it).
    pub(super) fn add(&mut self, store: &Store, reads: Reads) {
        for (kind, keys) in reads.keys {
            let held = self.keys.entry(kind).or_default();
            for key in keys {
                if let std::collections::btree_map::Entry::Vacant(e) = held.entry(key) {
                    let now = crate::with_store_type!(kind, lookup(store, e.key()));
                    e.insert(now);
                }
            }
        }
        for kind in reads.whole {
            self.whole
                .entry(kind)
                .or_insert_with(|| crate::with_store_type!(kind, every(store)));
        }
    }
}
