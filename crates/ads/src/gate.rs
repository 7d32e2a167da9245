//! Make-before-break: what of the desired snapshot one Envoy may be sent now.
//!
//! ```text
//!  desired Snapshot ─┐
//!  what Envoy ACKed ─┼─► Gate::regate ─► View = desired + overlay ─► SotwStream / DeltaStream
//!  now ──────────────┘        │             (held-back versions, kept removals)
//!                             └─ remembers: the references of every listener and
//!                                route table version it put in a view, the removed
//!                                resources it may still keep, since when each has
//!                                been named by nothing
//! ```
//!
//! Two rules, per stream, so no request fails because configuration changed:
//!
//! - **Adds before what names them.** A route table or listener goes out at a new
//!   version only once every cluster it names is warm on this Envoy: the cluster
//!   and what that cluster reads (its endpoints, its secrets) ACKed. What this
//!   Envoy refused (a NACKed cluster) is not waited for: it never will be warm,
//!   and one bad backend must not freeze every other route of the table. Until then
//!   Envoy keeps the version it has (the view holds the previous one), or, for a
//!   resource it never had, waits for it (a new listener warms meanwhile). Envoy
//!   asks for endpoints and secrets only once it holds what names them, so a
//!   cluster and a listener themselves are never held back.
//! - **Removals after what named them is gone, plus a grace.** A cluster,
//!   endpoint set or secret that left the desired snapshot stays in the view
//!   while anything in the view or anything Envoy ACKed names it, and then for
//!   `grace` more, so requests already on their way finish. Endpoints and
//!   secrets named only by a cluster that leaves leave with it. Listeners and
//!   route tables leave at once: nothing names a listener, and Envoy drops a
//!   route table itself when its listener stops naming it.
//!
//! The view is the desired snapshot plus a small overlay, so holding something
//! back or keeping a removed cluster copies nothing of the rest; in the steady
//! state the overlay is empty and a regate looks at nothing but the overlay.
//!
//! A resumed Delta stream reports versions it holds that this gate never sent
//! ([`Gate::reported`]), so it has no body to keep of them: those are *pinned*
//! instead (the stream sends no removal for them) while either rule applies. A
//! SotW stream states no names when it resumes, so there nothing is known to keep.

use crate::subscription::Versions;
use aether_xds::{Resource, ResourceType, Snapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[cfg(test)]
mod tests;

/// A resource's identity in a snapshot.
type Key = (ResourceType, String);

/// What one Envoy ACKed, per type (see the stream machines' `acked`); also
/// used for what it refused (NACKed, parked) per type.
pub type Acked<'a> = BTreeMap<ResourceType, &'a Versions>;

/// What a stream serves: the desired snapshot, with some resources replaced
/// (`Some`: an older version held back, or a removed one kept) or hidden
/// (`None`: a new one not sent yet).
#[derive(Debug, Clone)]
pub struct View {
    desired: Arc<Snapshot>,
    overlay: BTreeMap<Key, Option<Resource>>,
}

impl View {
    pub fn get(&self, ty: ResourceType, name: &str) -> Option<&Resource> {
        let desired = || self.desired.resources.get(&ty).and_then(|m| m.get(name));
        // The steady state: nothing overlaid, no key to build.
        if self.overlay.is_empty() {
            return desired();
        }
        match self.overlay.get(&(ty, name.to_string())) {
            Some(over) => over.as_ref(),
            None => desired(),
        }
    }

    pub fn version_of(&self, ty: ResourceType, name: &str) -> Option<&str> {
        self.get(ty, name).map(|r| r.version.as_str())
    }

    /// Every resource of `ty`, by name.
    pub fn of_type(&self, ty: ResourceType) -> BTreeMap<&str, &Resource> {
        let mut all: BTreeMap<&str, &Resource> = self
            .desired
            .resources
            .get(&ty)
            .into_iter()
            .flat_map(|m| m.iter())
            .map(|(n, r)| (n.as_str(), r))
            .collect();
        for ((t, name), over) in &self.overlay {
            if *t != ty {
                continue;
            }
            match over {
                Some(r) => all.insert(name.as_str(), r),
                None => all.remove(name.as_str()),
            };
        }
        all
    }
}

/// One stream's make-before-break state.
#[derive(Debug)]
pub struct Gate {
    grace: Duration,
    view: View,
    /// The references of each version of a listener or route table put in a
    /// view, while the view or Envoy may hold that version.
    named_by: BTreeMap<(Key, String), Arc<[Key]>>,
    /// Resources that left the desired snapshot and may still be kept, with
    /// their body when this gate sent them (not when Envoy only reported them).
    removed: BTreeMap<Key, Option<Resource>>,
    /// Of `removed`, those nothing names any more: since when.
    unnamed_since: BTreeMap<Key, Instant>,
    /// Of `removed`, those kept without a body: Envoy must not be told to drop them.
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
            view: View {
                desired: Arc::new(Snapshot::default()),
                overlay: BTreeMap::new(),
            },
            named_by: BTreeMap::new(),
            removed: BTreeMap::new(),
            unnamed_since: BTreeMap::new(),
            pinned: BTreeSet::new(),
        };
        gate.regate(desired, &Acked::new(), &Acked::new(), now);
        gate
    }

    /// What this stream's Envoy may be sent now.
    pub fn view(&self) -> &View {
        &self.view
    }

    /// Whether Envoy must keep what it holds of `name`, though the view lacks it.
    pub fn pinned(&self, ty: ResourceType, name: &str) -> bool {
        self.pinned.contains(&(ty, name.to_string()))
    }

    /// When a kept resource's grace ends, if one is kept unnamed.
    pub fn wake_at(&self) -> Option<Instant> {
        self.unnamed_since.values().min().map(|t| *t + self.grace)
    }

    /// Envoy says it holds these resources of `ty` (a resumed Delta stream):
    /// those the desired snapshot lacks may still be named by what it holds.
    pub fn reported<'n>(&mut self, ty: ResourceType, names: impl IntoIterator<Item = &'n String>) {
        if !kept_while_named(ty) {
            return;
        }
        for name in names {
            if self.view.desired.version_of(ty, name).is_none() {
                self.removed.entry((ty, name.clone())).or_insert(None);
            }
        }
    }

    /// Recomputes the view for `desired`, given what Envoy `acked` and
    /// `refused`, at `now`. Returns whether what the stream may send changed.
    pub fn regate(
        &mut self,
        desired: &Arc<Snapshot>,
        acked: &Acked<'_>,
        refused: &Acked<'_>,
        now: Instant,
    ) -> bool {
        if !Arc::ptr_eq(desired, &self.view.desired) {
            self.note_removals(desired);
        }
        let mut overlay = self.hold_back(desired, acked, refused);
        let mut pinned = BTreeSet::new();
        self.keep_removed(desired, &mut overlay, &mut pinned, acked, now);
        let changed = !Arc::ptr_eq(desired, &self.view.desired)
            || overlay != self.view.overlay
            || pinned != self.pinned;
        self.view = View {
            desired: desired.clone(),
            overlay,
        };
        self.pinned = pinned;
        // A view that did not move adds no version to remember; what Envoy
        // stops holding is forgotten at the next one that does.
        if changed {
            self.remember_references(acked);
        }
        changed
    }

    /// The listeners and route tables whose new version names a cluster that is
    /// not warm yet: the version the view had instead, or nothing.
    fn hold_back(
        &self,
        desired: &Snapshot,
        acked: &Acked<'_>,
        refused: &Acked<'_>,
    ) -> BTreeMap<Key, Option<Resource>> {
        let mut overlay = BTreeMap::new();
        for ty in ResourceType::ALL
            .into_iter()
            .filter(|t| waits_for_references(*t))
        {
            for (name, r) in desired
                .resources
                .get(&ty)
                .into_iter()
                .flat_map(|m| m.iter())
            {
                let before = self.view.get(ty, name);
                if before.is_some_and(|b| b.version == r.version)
                    || r.references
                        .iter()
                        .all(|k| is_warm(k, desired, &self.view, acked, refused))
                {
                    continue;
                }
                overlay.insert((ty, name.clone()), before.cloned());
            }
        }
        overlay
    }

    /// What the view held that `desired` no longer has becomes a removal
    /// candidate; what `desired` has again is one no more.
    fn note_removals(&mut self, desired: &Snapshot) {
        let old = &self.view;
        let empty = BTreeMap::new();
        for ty in ResourceType::ALL
            .into_iter()
            .filter(|t| kept_while_named(*t))
        {
            let next = desired.resources.get(&ty).map_or(&empty, |m| &**m);
            let before = old.desired.resources.get(&ty).map_or(&empty, |m| &**m);
            // The same map (no resource of the type moved): the same names.
            let same = std::ptr::eq(next, before);
            // Both sorted by name: one walk, no lookups (thousands of clusters).
            let mut next_names = next.keys().peekable();
            for (name, r) in before.iter().filter(|_| !same) {
                while next_names.next_if(|n| *n < name).is_some() {}
                if next_names.peek() != Some(&name)
                    && !old.overlay.contains_key(&(ty, name.clone()))
                {
                    self.removed.insert((ty, name.clone()), Some(r.clone()));
                }
            }
            for ((t, name), over) in &old.overlay {
                if let (true, Some(r), false) = (*t == ty, over, next.contains_key(name)) {
                    self.removed.insert((ty, name.clone()), Some(r.clone()));
                }
            }
        }
        self.removed
            .retain(|(ty, name), _| desired.version_of(*ty, name).is_none());
        let removed = &self.removed;
        self.unnamed_since
            .retain(|key, _| removed.contains_key(key));
    }

    /// Puts into `overlay` the removed resources still named (or in their
    /// grace); drops the others for good.
    fn keep_removed(
        &mut self,
        desired: &Snapshot,
        overlay: &mut BTreeMap<Key, Option<Resource>>,
        pinned: &mut BTreeSet<Key>,
        acked: &Acked<'_>,
        now: Instant,
    ) {
        if self.removed.is_empty() {
            return;
        }
        let named = self.named(desired, overlay, acked);
        // Clusters first (the type order): a kept cluster keeps naming its
        // endpoints and secrets, and those of a cluster that leaves leave with it.
        let mut kept: Vec<Key> = Vec::new();
        let mut dropped: Vec<Key> = Vec::new();
        let names = |gate: &Gate, by: &Key, key: &Key| {
            gate.removed
                .get(by)
                .and_then(Option::as_ref)
                .is_some_and(|r| r.references.contains(key))
        };
        for key in self.removed.keys().cloned().collect::<Vec<_>>() {
            let still_named = match named.as_ref() {
                None => true,
                Some(n) => n.contains(&key) || kept.iter().any(|k| names(self, k, &key)),
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
            match &self.removed[&key] {
                Some(r) => {
                    overlay.insert(key.clone(), Some(r.clone()));
                }
                None => {
                    pinned.insert(key.clone());
                }
            }
            kept.push(key);
        }
        for key in &dropped {
            self.removed.remove(key);
        }
    }

    /// Everything a listener or route table in the view or ACKed by Envoy
    /// names, and what those clusters name in turn. `None` when that is not
    /// known: Envoy holds a version this gate never served (a stream that
    /// resumed), or has not said yet what it holds; then everything is kept.
    fn named(
        &self,
        desired: &Snapshot,
        overlay: &BTreeMap<Key, Option<Resource>>,
        acked: &Acked<'_>,
    ) -> Option<BTreeSet<Key>> {
        // Until Envoy has asked for listeners (and, if there are any, route
        // tables), what it holds of them on a resumed stream is not known.
        let tables = desired.resources.contains_key(&ResourceType::Route);
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
            let in_view = desired
                .resources
                .get(&ty)
                .into_iter()
                .flat_map(|m| m.iter())
                .filter_map(|(name, r)| match overlay.get(&(ty, name.clone())) {
                    Some(over) => over.as_ref(),
                    None => Some(r),
                });
            for r in in_view {
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
            if let Some(r) = desired.resources.get(&ty).and_then(|m| m.get(&name)) {
                named.extend(r.references.iter().cloned());
            }
        }
        Some(named)
    }

    /// Keeps the references of every listener and route table version in the
    /// view, and drops those of versions neither the view nor Envoy holds.
    fn remember_references(&mut self, acked: &Acked<'_>) {
        for ty in ResourceType::ALL
            .into_iter()
            .filter(|t| waits_for_references(*t))
        {
            for (name, r) in self.view.of_type(ty) {
                self.named_by
                    .entry(((ty, name.to_string()), r.version.clone()))
                    .or_insert_with(|| r.references.clone());
            }
        }
        let view = &self.view;
        self.named_by.retain(|((ty, name), version), _| {
            view.version_of(*ty, name) == Some(version.as_str())
                || acked.get(ty).and_then(|v| v.get(name)) == Some(version)
        });
    }
}

/// Whether Envoy holds `key` ready to take traffic: ACKed, and for a cluster,
/// everything it names ACKed too. A name no snapshot defines, or one this
/// Envoy refused at the version it would get, is not waited for (it never will
/// be warm; translation answers a missing backend itself, status the NACK).
fn is_warm(
    key: &Key,
    desired: &Snapshot,
    view: &View,
    acked: &Acked<'_>,
    refused: &Acked<'_>,
) -> bool {
    let resource = |(ty, name): &Key| {
        desired
            .resources
            .get(ty)
            .and_then(|m| m.get(name))
            .or_else(|| view.get(*ty, name))
    };
    let holds = |(ty, name): &Key| acked.get(ty).is_some_and(|v| v.contains_key(name));
    let refused_now = |k: &Key| {
        let refused_version = refused.get(&k.0).and_then(|v| v.get(&k.1));
        refused_version.is_some_and(|v| resource(k).is_some_and(|r| r.version == *v))
    };
    if refused_now(key) {
        return true;
    }
    let Some(r) = resource(key) else {
        return true;
    };
    holds(key)
        && r.references
            .iter()
            .filter(|k| resource(k).is_some())
            .all(|k| holds(k) || refused_now(k))
}
