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
//! ours fill what room is left under the CRD's maxItems.

use super::condition;
use super::route::FromParentRef;
use aether_gateway::status::{Condition, ParentReference};
use aether_gateway::vocabulary::Word;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as Written, Time};
use serde::Serialize;
use serde_json::Value;

/// One planned ancestor entry of ours, whatever the plan's condition words.
pub(super) struct Ancestor<'a, T, R> {
    pub ancestor_ref: &'a ParentReference,
    pub conditions: &'a [Condition<T, R>],
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
pub(super) fn merged<E: Entry, T: Word, R: Word>(
    current: Vec<E>,
    planned: &[Ancestor<'_, T, R>],
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
            let ancestor_ref = E::Ref::from_parent_ref(a.ancestor_ref);
            let was = ours
                .iter()
                .find(|o| *o.ancestor_ref() == ancestor_ref)
                .map(E::conditions)
                .unwrap_or_default();
            let conditions = condition::from_plan(a.conditions, was, now);
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
