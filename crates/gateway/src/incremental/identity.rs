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
use std::collections::{BTreeMap, BTreeSet};
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
    /// By kind, the store's map of it (see `store.rs`: shared between copies
    /// of a store until the kind changes) in which all of the above was last
    /// found as it was: while the store has that same map, it still is, and
    /// nothing of the kind is looked up. Held, so its address is not reused.
    checked: BTreeMap<Kind, KindMap>,
}

/// A store's map of one kind, type-erased.
type KindMap = Arc<dyn std::any::Any + Send + Sync>;

fn kind_map<T: StoreObject + Send + Sync + 'static>(store: &Store) -> KindMap {
    T::shared(store).clone()
}

/// Whether `store` has the map `was` of its kind.
fn same_map(was: Option<&KindMap>, now: &KindMap) -> bool {
    was.is_some_and(|was| std::ptr::addr_eq(Arc::as_ptr(was), Arc::as_ptr(now)))
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
    pub(super) fn stand(&mut self, store: &Store) -> bool {
        let kinds: BTreeSet<Kind> = self.keys.keys().chain(self.whole.keys()).copied().collect();
        for kind in kinds {
            let now = crate::with_store_type!(kind, kind_map(store));
            if same_map(self.checked.get(&kind), &now) {
                continue;
            }
            if !self.kind_stands(kind, store) {
                return false;
            }
            self.checked.insert(kind, now);
        }
        true
    }

    /// Whether every object of `kind` read is in `store` as it was, and every
    /// key of it read and absent still is.
    fn kind_stands(&self, kind: Kind, store: &Store) -> bool {
        let mut read = self.keys.get(&kind).into_iter().flatten();
        let keys_stand = read.all(|(key, was)| {
            let now = crate::with_store_type!(kind, lookup(store, key));
            match (was, &now) {
                (None, None) => true,
                (Some(was), Some(now)) => same_by_kind(kind, was, now),
                _ => false,
            }
        });
        keys_stand
            && self.whole.get(&kind).is_none_or(|was| {
                let now = crate::with_store_type!(kind, every(store));
                was.len() == now.len()
                    && was.iter().zip(&now).all(|(a, b)| same_by_kind(kind, a, b))
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
        // What was held stood in `store` (see `stand`), and what was added
        // was read from it.
        let kinds: BTreeSet<Kind> = self.keys.keys().chain(self.whole.keys()).copied().collect();
        for kind in kinds {
            let now = crate::with_store_type!(kind, kind_map(store));
            self.checked.insert(kind, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(name: &str, port: u16) -> String {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  ports: [{{name: http, port: {port}}}]\n"
        )
    }

    fn store(docs: &[String]) -> Store {
        let mut s = Store::default();
        s.add_yaml("in.yaml", &docs.join("---\n")).unwrap();
        s
    }

    /// Reads of `svc-a` stand in a copy of the store (the same map), in one
    /// where only `svc-b` changed (a new map, the same `svc-a`), and not in
    /// one where `svc-a` changed: the shared map is a shortcut, never an
    /// answer of its own.
    #[test]
    fn reads_stand_while_what_was_read_is_the_same_whichever_map_holds_it() {
        let before = store(&[service("svc-a", 80), service("svc-b", 80)]);
        let mut read = ReadObjects::default();
        let reads = Reads {
            keys: BTreeMap::from([(
                Kind::Service,
                BTreeSet::from([ObjectRef::new("default", "svc-a")]),
            )]),
            whole: BTreeSet::new(),
        };
        read.add(&before, reads);
        assert!(read.stand(&before.clone()));

        let mut other_changed = before.clone();
        other_changed.merge(&store(&[service("svc-b", 81)]));
        assert!(read.stand(&other_changed));

        let mut read_changed = other_changed.clone();
        read_changed.merge(&store(&[service("svc-a", 81)]));
        assert!(!read.stand(&read_changed));
        assert!(
            read.stand(&other_changed),
            "a failed check remembers nothing"
        );
    }
}
