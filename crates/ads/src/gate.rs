//! Make-before-break: what of the desired snapshot one Envoy may be sent now.
//!
//! ```text
//!  desired Snapshot ─┐
//!  what Envoy ACKed ─┼─► Gate::regate ─► view (a Snapshot) ─► SotwStream / DeltaStream
//!  now ──────────────┘        │
//!                             └─ remembers: the view it last gave, the references of
//!                                every version it put in one, since when a kept
//!                                resource has been named by nothing
//! ```
//!
//! Two rules, per stream, so no request fails because configuration changed:
//!
//! - **Adds before what names them.** A route table or listener goes out at a new
//!   version only once every cluster it names is warm on this Envoy: the cluster
//!   and what that cluster reads (its endpoints, its secrets) ACKed. Until then
//!   Envoy keeps the version it has (the view holds the previous one), or, for a
//!   resource it never had, waits for it (a new listener warms meanwhile). Envoy
//!   asks for endpoints and secrets only once it holds what names them, so a
//!   cluster and a listener themselves are never held back.
//! - **Removals after what named them is gone, plus a grace.** A cluster,
//!   endpoint set or secret that left the desired snapshot stays in the view
//!   while anything in the view or anything Envoy ACKed names it, and then for
//!   `grace` more, so requests already on their way finish. Listeners and route
//!   tables leave at once: nothing names a listener, and Envoy drops a route
//!   table itself when its listener stops naming it.
//!
//! The view is the desired snapshot itself (no copy) whenever neither rule holds
//! anything back. Pure: time comes in as an argument.
//!
//! A resumed Delta stream reports versions it holds that this gate never sent,
//! so it has no body to keep of them: those are *pinned* instead (the stream
//! sends no removal for them) while either rule applies. A SotW stream states
//! no names when it resumes, so there nothing is known to keep.

use crate::subscription::Versions;
use aether_xds::{Resource, ResourceType, Snapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A resource's identity in a snapshot.
type Key = (ResourceType, String);

/// What one Envoy ACKed, per type (see the stream machines' `acked`).
pub type Acked<'a> = BTreeMap<ResourceType, &'a Versions>;

/// One stream's make-before-break state.
#[derive(Debug)]
pub struct Gate {
    grace: Duration,
    view: Arc<Snapshot>,
    /// The references of each version of a listener or route table put in a
    /// view, while the view or Envoy may hold that version.
    named_by: BTreeMap<(Key, String), Arc<[Key]>>,
    /// Resources kept past their removal that nothing names any more: since when.
    unnamed_since: BTreeMap<Key, Instant>,
    /// What Envoy holds, at a version this gate has no body of (a resumed Delta
    /// stream reports what it holds), that must stay: not removed, not replaced.
    pinned: BTreeSet<Key>,
}

/// Types whose versions wait for what they name.
fn waits_for_references(ty: ResourceType) -> bool {
    matches!(ty, ResourceType::Listener | ResourceType::Route)
}

/// Types kept past their removal while something names them.
fn kept_while_named(ty: ResourceType) -> bool {
    matches!(
        ty,
        ResourceType::Cluster | ResourceType::Endpoint | ResourceType::Secret
    )
}

impl Gate {
    /// A gate for a new stream: nothing sent yet, nothing ACKed.
    pub fn new(desired: &Arc<Snapshot>, grace: Duration, now: Instant) -> Self {
        let mut gate = Gate {
            grace,
            view: Arc::new(Snapshot::default()),
            named_by: BTreeMap::new(),
            unnamed_since: BTreeMap::new(),
            pinned: BTreeSet::new(),
        };
        gate.regate(desired, &Acked::new(), now);
        gate
    }

    /// Whether Envoy must keep what it holds of `name`, though the view lacks it.
    pub fn pinned(&self, ty: ResourceType, name: &str) -> bool {
        self.pinned.contains(&(ty, name.to_string()))
    }

    /// What this stream's Envoy may be sent now.
    pub fn view(&self) -> &Arc<Snapshot> {
        &self.view
    }

    /// When a kept resource's grace ends, if one is kept unnamed.
    pub fn wake_at(&self) -> Option<Instant> {
        self.unnamed_since.values().min().map(|t| *t + self.grace)
    }

    /// Recomputes the view for `desired`, given what Envoy `acked`, at `now`.
    /// Returns whether the view changed.
    pub fn regate(&mut self, desired: &Arc<Snapshot>, acked: &Acked<'_>, now: Instant) -> bool {
        let warm = |key: &Key| is_warm(key, desired, &self.view, acked);
        let mut resources = desired.resources.clone_lazily();
        let mut held_back = false;
        let mut pinned = BTreeSet::new();
        for ty in ResourceType::ALL
            .into_iter()
            .filter(|t| waits_for_references(*t))
        {
            for (name, r) in desired.resources.get(&ty).into_iter().flatten() {
                let before = self.view.resources.get(&ty).and_then(|m| m.get(name));
                if before.is_some_and(|b| b.version == r.version) || r.references.iter().all(&warm)
                {
                    continue;
                }
                held_back = true;
                let by_name = resources.entry(ty);
                match before {
                    Some(previous) => by_name.insert(name.clone(), previous.clone()),
                    None => {
                        if acked.get(&ty).is_some_and(|v| v.contains_key(name)) {
                            pinned.insert((ty, name.clone()));
                        }
                        by_name.remove(name)
                    }
                };
            }
        }
        let kept = self.keep_removed(desired, &mut resources, &mut pinned, acked, now);
        let pins_moved = pinned != self.pinned;
        self.pinned = pinned;
        let view = if held_back || kept {
            Arc::new(Snapshot {
                resources: resources.into_owned(desired),
                version: desired.version.clone(),
                ..Default::default()
            })
        } else {
            desired.clone()
        };
        self.remember_references(&view, acked);
        let changed = pins_moved
            || (!Arc::ptr_eq(&view, &self.view) && view.resources != self.view.resources);
        self.view = view;
        changed
    }

    /// Puts back into `resources` what left `desired` but is still named (or
    /// in its grace). Returns whether anything was put back.
    fn keep_removed(
        &mut self,
        desired: &Snapshot,
        resources: &mut LazyResources<'_>,
        pinned: &mut BTreeSet<Key>,
        acked: &Acked<'_>,
        now: Instant,
    ) -> bool {
        let old_view = self.view.clone();
        let in_view = old_view.resources.iter().flat_map(|(ty, by_name)| {
            by_name
                .iter()
                .map(move |(n, r)| ((*ty, n.clone()), Some(r)))
        });
        // What Envoy holds that was never in a view: no body to keep.
        let only_acked = acked
            .iter()
            .flat_map(|(ty, v)| v.keys().map(move |n| ((*ty, n.clone()), None)))
            .filter(|((ty, n), _)| old_view.version_of(*ty, n).is_none());
        let gone: Vec<(Key, Option<&Resource>)> = in_view
            .chain(only_acked)
            .filter(|((ty, n), _)| kept_while_named(*ty) && desired.version_of(*ty, n).is_none())
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .collect();
        self.unnamed_since
            .retain(|key, _| gone.iter().any(|(k, _)| k == key));
        if gone.is_empty() {
            return false;
        }
        let named = self.named(resources, acked);
        let mut kept = false;
        // Clusters first: a cluster kept keeps naming its endpoints and secrets,
        // and those of a cluster that leaves now leave with it.
        let mut kept_names: BTreeSet<Key> = BTreeSet::new();
        let mut dropped: Vec<Key> = Vec::new();
        for ((ty, name), r) in gone {
            let key = (ty, name);
            let still_named = match named.as_ref() {
                None => true,
                Some(n) => n.contains(&key) || kept_names.iter().any(|k| names(self, k, &key)),
            };
            if still_named {
                self.unnamed_since.remove(&key);
            } else {
                let since = *self.unnamed_since.entry(key.clone()).or_insert(now);
                let with_its_cluster = dropped.iter().any(|k| names(self, k, &key));
                if now >= since + self.grace || with_its_cluster {
                    self.unnamed_since.remove(&key);
                    dropped.push(key);
                    continue;
                }
            }
            match r {
                Some(r) => {
                    resources.entry(key.0).insert(key.1.clone(), r.clone());
                    kept = true;
                }
                None => {
                    pinned.insert(key.clone());
                }
            }
            kept_names.insert(key);
        }
        kept
    }

    /// Everything a listener or route table in `resources` or ACKed by Envoy
    /// names, and what those clusters name in turn. `None` when that is not
    /// known: Envoy holds a version this gate never served (a stream that
    /// resumed), or has not said yet what it holds; then everything is kept.
    fn named(&self, resources: &LazyResources<'_>, acked: &Acked<'_>) -> Option<BTreeSet<Key>> {
        // Until Envoy has asked for listeners (and, if there are any, route
        // tables), what it holds of them on a resumed stream is not known.
        let tables = resources.desired.contains_key(&ResourceType::Route);
        if !acked.contains_key(&ResourceType::Listener)
            || (tables && !acked.contains_key(&ResourceType::Route))
        {
            return None;
        }
        let mut named: BTreeSet<Key> = BTreeSet::new();
        for ty in ResourceType::ALL
            .into_iter()
            .filter(|t| waits_for_references(*t))
        {
            for r in resources.of_type(ty) {
                named.extend(r.references.iter().cloned());
            }
            for (name, version) in acked.get(&ty).into_iter().flat_map(|v| v.iter()) {
                let refs = self.named_by.get(&((ty, name.clone()), version.clone()))?;
                named.extend(refs.iter().cloned());
            }
        }
        let clusters: Vec<Key> = named
            .iter()
            .filter(|(ty, _)| *ty == ResourceType::Cluster)
            .cloned()
            .collect();
        for (ty, name) in clusters {
            if let Some(r) = resources.get(ty, &name) {
                named.extend(r.references.iter().cloned());
            }
        }
        Some(named)
    }

    /// Keeps the references of every listener and route table version in `view`,
    /// and drops those of versions neither the view nor Envoy holds.
    fn remember_references(&mut self, view: &Snapshot, acked: &Acked<'_>) {
        for ty in ResourceType::ALL
            .into_iter()
            .filter(|t| waits_for_references(*t))
        {
            for (name, r) in view.resources.get(&ty).into_iter().flatten() {
                self.named_by
                    .entry(((ty, name.clone()), r.version.clone()))
                    .or_insert_with(|| r.references.clone());
            }
        }
        self.named_by.retain(|((ty, name), version), _| {
            view.version_of(*ty, name) == Some(version.as_str())
                || acked.get(ty).and_then(|v| v.get(name)) == Some(version)
        });
    }
}

/// Whether the kept resource `by` names `key` (a kept cluster its endpoints).
fn names(gate: &Gate, by: &Key, key: &Key) -> bool {
    gate.view
        .resources
        .get(&by.0)
        .and_then(|m| m.get(&by.1))
        .is_some_and(|r| r.references.contains(key))
}

/// Whether Envoy holds `key` ready to take traffic: ACKed, and for a cluster,
/// everything it names ACKed too. A name no snapshot defines is not waited for
/// (it never will be warm; translation answers such a backend itself).
fn is_warm(key: &Key, desired: &Snapshot, view: &Snapshot, acked: &Acked<'_>) -> bool {
    let holds = |(ty, name): &Key| acked.get(ty).is_some_and(|v| v.contains_key(name));
    let resource = |(ty, name): &Key| {
        desired
            .resources
            .get(ty)
            .and_then(|m| m.get(name))
            .or_else(|| view.resources.get(ty).and_then(|m| m.get(name)))
    };
    let Some(r) = resource(key) else {
        return true;
    };
    holds(key)
        && r.references
            .iter()
            .filter(|k| resource(k).is_some())
            .all(holds)
}

/// The desired resources, copied only once something differs from them.
struct LazyResources<'a> {
    desired: &'a BTreeMap<ResourceType, BTreeMap<String, Resource>>,
    changed: BTreeMap<ResourceType, BTreeMap<String, Resource>>,
}

trait CloneLazily {
    fn clone_lazily(&self) -> LazyResources<'_>;
}

impl CloneLazily for BTreeMap<ResourceType, BTreeMap<String, Resource>> {
    fn clone_lazily(&self) -> LazyResources<'_> {
        LazyResources {
            desired: self,
            changed: BTreeMap::new(),
        }
    }
}

impl<'a> LazyResources<'a> {
    /// The resources of `ty`, copied from the desired ones on first write.
    fn entry(&mut self, ty: ResourceType) -> &mut BTreeMap<String, Resource> {
        let desired = self.desired;
        self.changed
            .entry(ty)
            .or_insert_with(|| desired.get(&ty).cloned().unwrap_or_default())
    }

    fn of_type(&self, ty: ResourceType) -> impl Iterator<Item = &Resource> {
        self.changed
            .get(&ty)
            .or_else(|| self.desired.get(&ty))
            .into_iter()
            .flat_map(|m| m.values())
    }

    fn get(&self, ty: ResourceType, name: &str) -> Option<&Resource> {
        self.changed
            .get(&ty)
            .or_else(|| self.desired.get(&ty))
            .and_then(|m| m.get(name))
    }

    fn into_owned(self, desired: &Snapshot) -> BTreeMap<ResourceType, BTreeMap<String, Resource>> {
        let mut all = desired.resources.clone();
        for (ty, by_name) in self.changed {
            all.insert(ty, by_name);
        }
        all
    }
}

#[cfg(test)]
mod tests;
