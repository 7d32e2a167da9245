//! Watch events applied to one [`Store`], honouring the watcher's relist contract.
//!
//! A watcher (re)lists with `Init`, `InitApply`*, `InitDone`: the objects of a relist
//! are collected aside and replace that kind's objects at `InitDone` in one step,
//! so a relist never shows a half-empty kind. Nothing is readable through
//! [`Index::store`] until every kind has completed its first list: an empty store
//! must never become an empty snapshot that wipes a running Envoy.

use aether_gateway::{Store, StoreObject};
use aether_ir::{Kind, ObjectRef};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// What a watch says about one kind.
#[derive(Debug, Clone)]
pub enum Event<T> {
    /// A (re)list begins.
    Init,
    /// An object of the current relist.
    InitApply(T),
    /// The relist is complete: its objects replace the kind's.
    InitDone,
    Apply(T),
    /// Deleted: named by key, so an object that no longer deserializes still goes.
    Delete(ObjectRef),
}

#[derive(Default)]
struct State {
    /// Shared with every reader; copied on write only while one holds it.
    store: Arc<Store>,
    /// Relists in progress, per kind: the objects seen so far (type-erased as a
    /// store holding only that kind).
    relisting: BTreeMap<Kind, Store>,
    listed: BTreeSet<Kind>,
}

/// The shared, watch-fed store. Every change bumps a generation that
/// [`Index::subscribe`] receivers see.
pub struct Index {
    state: Mutex<State>,
    required: BTreeSet<Kind>,
    generation: watch::Sender<u64>,
}

impl Index {
    /// `required`: the kinds that must finish their first list before the store
    /// is readable.
    pub fn new(required: impl IntoIterator<Item = Kind>) -> Self {
        let (generation, _) = watch::channel(0);
        Index {
            state: Mutex::default(),
            required: required.into_iter().collect(),
            generation,
        }
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Kinds that have not completed their first list yet.
    pub fn pending_kinds(&self) -> Vec<Kind> {
        let state = self.state.lock().expect("index lock");
        self.required
            .iter()
            .filter(|k| !state.listed.contains(*k))
            .copied()
            .collect()
    }

    /// A copy of the store, once every required kind has been listed.
    /// The store, once every kind has listed: shared, not copied (a write after
    /// this copies it, once, if this is still held).
    pub fn store(&self) -> Option<Arc<Store>> {
        let state = self.state.lock().expect("index lock");
        self.required
            .iter()
            .all(|k| state.listed.contains(k))
            .then(|| state.store.clone())
    }

    pub fn apply<T: StoreObject>(&self, event: Event<T>) {
        let mut state = self.state.lock().expect("index lock");
        let changed = match event {
            Event::Init => {
                state.relisting.insert(T::KIND, Store::default());
                false
            }
            Event::InitApply(obj) => {
                state.relisting.entry(T::KIND).or_default().insert(obj);
                false
            }
            Event::InitDone => {
                let fresh = state.relisting.remove(&T::KIND).unwrap_or_default();
                let objects: BTreeMap<ObjectRef, Arc<T>> = fresh.all::<T>().clone();
                state.listed.insert(T::KIND);
                let current = state.store.all::<T>().keys().cloned().collect::<Vec<_>>();
                for key in current {
                    Arc::make_mut(&mut state.store).remove::<T>(&key.namespace, &key.name);
                }
                for (_, obj) in objects {
                    Arc::make_mut(&mut state.store).insert_shared(obj);
                }
                true
            }
            Event::Apply(obj) => {
                Arc::make_mut(&mut state.store).insert(obj);
                true
            }
            Event::Delete(key) => Arc::make_mut(&mut state.store)
                .remove::<T>(&key.namespace, &key.name)
                .is_some(),
        };
        drop(state);
        if changed {
            self.generation.send_modify(|g| *g += 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Namespace, Service};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn mk_service(ns: &str, name: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn mk_namespace(name: &str) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn names(index: &Index) -> Vec<String> {
        index
            .store()
            .unwrap()
            .all::<Service>()
            .keys()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn nothing_is_readable_until_every_kind_has_listed() {
        let index = Index::new([Service::KIND, Namespace::KIND]);
        index.apply(Event::<Service>::Init);
        index.apply(Event::InitApply(mk_service("a", "one")));
        index.apply(Event::<Service>::InitDone);
        assert!(index.store().is_none());
        assert_eq!(index.pending_kinds(), vec![Kind::Namespace]);
        index.apply(Event::<Namespace>::Init);
        index.apply(Event::InitApply(mk_namespace("a")));
        index.apply(Event::<Namespace>::InitDone);
        assert_eq!(names(&index), vec!["a/one"]);
    }

    #[test]
    fn a_relist_replaces_the_kind_atomically() {
        let index = Index::new([Service::KIND]);
        index.apply(Event::<Service>::Init);
        index.apply(Event::InitApply(mk_service("a", "one")));
        index.apply(Event::InitApply(mk_service("a", "two")));
        index.apply(Event::<Service>::InitDone);
        let generation = *index.subscribe().borrow();

        // A relist in progress changes nothing visible...
        index.apply(Event::<Service>::Init);
        index.apply(Event::InitApply(mk_service("a", "two")));
        assert_eq!(names(&index), vec!["a/one", "a/two"]);
        assert_eq!(*index.subscribe().borrow(), generation);
        // ...until it is done: `one` was deleted while the watch was away.
        index.apply(Event::<Service>::InitDone);
        assert_eq!(names(&index), vec!["a/two"]);
        assert!(*index.subscribe().borrow() > generation);
    }

    #[test]
    fn apply_and_delete_update_the_store() {
        let index = Index::new([Service::KIND]);
        index.apply(Event::<Service>::Init);
        index.apply(Event::<Service>::InitDone);
        index.apply(Event::Apply(mk_service("b", "x")));
        assert_eq!(names(&index), vec!["b/x"]);
        index.apply(Event::<Service>::Delete(ObjectRef::new("b", "x")));
        assert!(names(&index).is_empty());
    }
}
