//! The `status.ancestors` list a policy-like object (BackendTLSPolicy,
//! XBackend) shares with every controller: our entries merged in, theirs
//! untouched.
//!
//! ```text
//!  current ──partition──► theirs (as read) ─────────────────────┐
//!                         ours ──┐                               ├─► theirs + ours, or None
//!  planned (plan order, the room theirs leave) ─► desired ──────┘   when ours say it already
//! ```
//!
//! The list is atomic: the apply sends every other controller's entry exactly
//! as read, then ours, with the object's `resourceVersion` and `uid` as
//! preconditions, so another controller's entry is never removed or altered (a
//! write racing theirs fails and is computed again). Theirs are kept whole;
//! ours fill what room is left under the CRD's maxItems. A plan about another
//! uid or an older generation than the object's is not written: the next plan
//! will be about this one.

use super::condition;
use super::patch::{Precondition, StatusKind, StatusPatch, body};
use super::route::FromParentRef;
use aether_gateway::status::{AncestorStatus, AncestorsStatus};
use aether_gateway::vocabulary::Word;
use aether_gateway::{Store, StoreObject};
use aether_ir::ObjectRef;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as Written, Time};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// A kind whose status is a shared `status.ancestors` list.
pub(super) trait Ancestored: StoreObject {
    type Entry: Entry;
    const STATUS: StatusKind;
    /// The CRD's maxItems for `status.ancestors`.
    const MAX: usize;
    /// Its `status.ancestors` as read.
    fn entries(&self) -> Vec<Self::Entry>;
}

/// The patches that bring every `K`'s entries of ours to `plan` (one the plan
/// lacks: no entries of ours, so a route no longer reaching it takes ours away).
pub(super) fn patches<K: Ancestored, T: Word, R: Word>(
    store: &Store,
    top: Option<&Store>,
    plan: &BTreeMap<ObjectRef, AncestorsStatus<T, R>>,
    controller_name: &str,
    api_version: &str,
    now: &Time,
) -> Vec<Option<StatusPatch>> {
    store
        .all::<K>()
        .iter()
        .map(|(key, object)| {
            let object = top
                .and_then(|t| t.get::<K>(&key.namespace, &key.name))
                .unwrap_or(object);
            let planned = plan.get(key);
            if planned.is_some_and(|s| !s.of.describes(object.metadata())) {
                return None;
            }
            let planned = planned.map(|s| s.ancestors.as_slice());
            let planned = planned.unwrap_or_default();
            patch(key, object, planned, controller_name, api_version, now)
        })
        .collect()
}

/// The patch that brings our entries on `object` to `planned` (empty: ours
/// go), or `None` when they already say it.
pub(super) fn patch<K: Ancestored, T: Word, R: Word>(
    key: &ObjectRef,
    object: &K,
    planned: &[AncestorStatus<T, R>],
    controller_name: &str,
    api_version: &str,
    now: &Time,
) -> Option<StatusPatch> {
    let list = merged(object.entries(), planned, K::MAX, controller_name, now)?;
    let meta = object.metadata();
    let precondition = Precondition {
        resource_version: meta.resource_version.as_deref(),
        uid: meta.uid.as_deref(),
    };
    Some(StatusPatch {
        kind: K::STATUS,
        object: key.clone(),
        based_on: meta.resource_version.clone(),
        body: body(
            K::STATUS,
            api_version,
            key,
            precondition,
            json!({ "ancestors": list }),
        ),
        only_pending: false,
    })
}

/// An ancestor status entry as a kind's generated type spells it.
pub(super) trait Entry: Serialize + Sized {
    type Ref: PartialEq + FromParentRef;
    fn new(ancestor_ref: Self::Ref, conditions: Vec<Written>, controller_name: &str) -> Self;
    fn controller_name(&self) -> &str;
    fn ancestor_ref(&self) -> &Self::Ref;
    fn conditions(&self) -> &[Written];
}

/// The whole `status.ancestors` list that brings our entries of `current` to
/// `planned` (none planned: ours go), at most `max` entries; `None` when ours
/// already say it.
fn merged<E: Entry, T: Word, R: Word>(
    current: Vec<E>,
    planned: &[AncestorStatus<T, R>],
    max: usize,
    controller_name: &str,
    now: &Time,
) -> Option<Vec<Value>> {
    let (ours, others): (Vec<E>, Vec<E>) = current
        .into_iter()
        .partition(|e| e.controller_name() == controller_name);
    let room = max.saturating_sub(others.len());
    let desired: Vec<E> = planned
        .iter()
        .take(room)
        .map(|a| {
            let ancestor_ref = E::Ref::from_parent_ref(&a.ancestor_ref);
            let was = ours
                .iter()
                .find(|o| *o.ancestor_ref() == ancestor_ref)
                .map(E::conditions)
                .unwrap_or_default();
            let conditions = condition::from_plan(&a.conditions, was, now);
            E::new(ancestor_ref, conditions, controller_name)
        })
        .collect();
    let unchanged = ours.len() == desired.len()
        && ours.iter().zip(&desired).all(|(o, d)| {
            o.ancestor_ref() == d.ancestor_ref() && condition::same(o.conditions(), d.conditions())
        });
    if unchanged {
        return None;
    }
    let list = others.iter().chain(&desired);
    let list = list.map(|e| serde_json::to_value(e).expect("an ancestor status serializes"));
    Some(list.collect())
}
