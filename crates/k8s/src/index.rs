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
    /// Kinds with a change translation reads, since [`Index::take_changed_kinds`].
    changed_kinds: BTreeSet<Kind>,
}

/// The shared, watch-fed store. Every change bumps a generation that
/// [`Index::subscribe`] receivers see; a change translation can see (not only a
/// status, a resourceVersion or managedFields: [`StoreObject::same_input`]) also
/// bumps the one [`Index::subscribe_inputs`] receivers see. A status write comes
/// back through its watch: the status join must see it (a Service's load-balancer
/// address), translation need not.
pub struct Index {
    state: Mutex<State>,
    required: BTreeSet<Kind>,
    generation: watch::Sender<u64>,
    inputs: watch::Sender<u64>,
}

impl Index {
    /// `required`: the kinds that must finish their first list before the store
    /// is readable.
    pub fn new(required: impl IntoIterator<Item = Kind>) -> Self {
        Index {
            state: Mutex::default(),
            required: required.into_iter().collect(),
            generation: watch::channel(0).0,
            inputs: watch::channel(0).0,
        }
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Bumped by the changes translation can see (see [`Index`]).
    pub fn subscribe_inputs(&self) -> watch::Receiver<u64> {
        self.inputs.subscribe()
    }

    /// The kinds whose changes (of what translation reads) came in since the
    /// last call: what a publication answers, for its log line.
    pub fn take_changed_kinds(&self) -> BTreeSet<Kind> {
        std::mem::take(&mut self.state.lock().expect("index lock").changed_kinds)
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
        // (changed, changed what translation reads)
        let (changed, input) = match event {
            Event::Init => {
                state.relisting.insert(T::KIND, Store::default());
                (false, false)
            }
            Event::InitApply(obj) => {
                state.relisting.entry(T::KIND).or_default().insert(obj);
                (false, false)
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
                (true, true)
            }
            Event::Apply(obj) => {
                let key = aether_gateway::store::key_of(&obj);
                let same = (state.store.get::<T>(&key.namespace, &key.name))
                    .is_some_and(|before| before.same_input(&obj));
                Arc::make_mut(&mut state.store).insert(obj);
                (true, !same)
            }
            Event::Delete(key) => {
                let removed = Arc::make_mut(&mut state.store)
                    .remove::<T>(&key.namespace, &key.name)
                    .is_some();
                (removed, removed)
            }
        };
        if input {
            state.changed_kinds.insert(T::KIND);
        }
        drop(state);
        if changed {
            self.generation.send_modify(|g| *g += 1);
        }
        if input {
            self.inputs.send_modify(|g| *g += 1);
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
    fn a_status_change_is_a_change_but_not_one_translation_reads() {
        let index = Index::new([Service::KIND]);
        index.apply(Event::<Service>::Init);
        index.apply(Event::<Service>::InitDone);
        index.apply(Event::Apply(mk_service("a", "lb")));
        let (all, inputs) = (index.subscribe(), index.subscribe_inputs());
        let (g, i) = (*all.borrow(), *inputs.borrow());

        let mut with_address = mk_service("a", "lb");
        with_address.metadata.resource_version = Some("7".into());
        with_address.status = Some(Default::default());
        index.apply(Event::Apply(with_address.clone()));
        assert_eq!((*all.borrow(), *inputs.borrow()), (g + 1, i));
        let stored = index.store().unwrap();
        let stored = stored.get::<Service>("a", "lb").unwrap();
        assert_eq!(
            stored, &with_address,
            "the store has the status all the same"
        );

        with_address.metadata.labels = Some([("tier".into(), "edge".into())].into());
        index.apply(Event::Apply(with_address));
        assert_eq!((*all.borrow(), *inputs.borrow()), (g + 2, i + 1));
        index.apply(Event::<Service>::Delete(ObjectRef::new("a", "lb")));
        assert_eq!((*all.borrow(), *inputs.borrow()), (g + 3, i + 2));
        assert_eq!(index.take_changed_kinds(), [Kind::Service].into());
        assert!(index.take_changed_kinds().is_empty());
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
