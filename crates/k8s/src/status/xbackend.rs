//! XBackend status: our `BackendAncestorStatus` entries merged into the
//! `status.ancestors` list every controller shares (Gateway API v1.7.0,
//! `gateway.networking.x-k8s.io/v1alpha1`).
//!
//! ```text
//!  store: XBackend, status.ancestors ──► theirs (as read, first) + ours (plan order)
//!  plan: ancestors of ours ────────────┘        │ ours as planned already? ─► no patch
//!                                               ▼
//!                           apply (resourceVersion + uid preconditions)
//! ```
//!
//! As for BackendTLSPolicy (`policy.rs`): the list is shared and atomic
//! (`ancestors.rs`); at most [`ANCESTORS_MAX`] entries.

use super::ancestors::{self, Ancestor};
use super::patch::{Precondition, StatusKind, StatusPatch, body};
use aether_gateway::vocabulary::Word;
use aether_gateway::xbackend::status::XBackendStatus;
use aether_gateway::{Store, StoreObject};
use aether_ir::ObjectRef;
use gateway_api::apis::experimental::xbackends::{
    XBackend, XBackendStatusAncestors as Entry, XBackendStatusAncestorsAncestorRef as EntryRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as Written, Time};
use serde_json::json;
use std::collections::BTreeMap;

/// `status.ancestors` maxItems.
const ANCESTORS_MAX: usize = 32;

impl ancestors::Entry for Entry {
    type Ref = EntryRef;
    fn new(ancestor_ref: EntryRef, conditions: Vec<Written>, controller_name: &str) -> Self {
        Entry {
            ancestor_ref,
            conditions: Some(conditions),
            controller_name: controller_name.to_string(),
        }
    }
    fn controller_name(&self) -> &str {
        &self.controller_name
    }
    fn ancestor_ref(&self) -> &EntryRef {
        &self.ancestor_ref
    }
    fn conditions(&self) -> &[Written] {
        self.conditions.as_deref().unwrap_or_default()
    }
}

/// The patches that bring every XBackend's entries of ours to `plan` (one the
/// plan lacks, or whose plan is about another uid or generation: no entries
/// of ours; a route no longer reaching it takes ours away).
pub(crate) fn patches(
    store: &Store,
    top: Option<&Store>,
    plan: &BTreeMap<ObjectRef, XBackendStatus>,
    controller_name: &str,
    api_version: &str,
    now: &Time,
) -> Vec<Option<StatusPatch>> {
    store
        .all::<XBackend>()
        .iter()
        .map(|(key, x)| {
            let x = top
                .and_then(|t| t.get::<XBackend>(&key.namespace, &key.name))
                .unwrap_or(x);
            let planned = plan.get(key);
            if planned.is_some_and(|s| !s.of.describes(x.metadata())) {
                // About a deleted namesake or an older generation: the next
                // plan will be about this one.
                return None;
            }
            let ancestors: Vec<Ancestor<'_, _, _>> = planned
                .map(|s| s.ancestors.as_slice())
                .unwrap_or_default()
                .iter()
                .map(|a| Ancestor {
                    ancestor_ref: &a.ancestor_ref,
                    conditions: &a.conditions,
                })
                .collect();
            patch(key, x, &ancestors, controller_name, api_version, now)
        })
        .collect()
}

/// The patch that brings our entries on `x` to `planned` (empty: ours go), or
/// `None` when they already say it.
fn patch<T: Word, R: Word>(
    key: &ObjectRef,
    x: &XBackend,
    planned: &[Ancestor<'_, T, R>],
    controller_name: &str,
    api_version: &str,
    now: &Time,
) -> Option<StatusPatch> {
    let current: Vec<Entry> = x
        .status
        .as_ref()
        .and_then(|s| s.ancestors.clone())
        .unwrap_or_default();
    let list = ancestors::merged(current, planned, ANCESTORS_MAX, controller_name, now)?;
    let meta = &x.metadata;
    Some(StatusPatch {
        kind: StatusKind::XBackend,
        object: key.clone(),
        based_on: meta.resource_version.clone(),
        body: body(
            StatusKind::XBackend,
            api_version,
            key,
            Precondition {
                resource_version: meta.resource_version.as_deref(),
                uid: meta.uid.as_deref(),
            },
            json!({ "ancestors": list }),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aether_gateway::status::GROUP;
    use aether_gateway::status::{Condition, ParentReference};
    use aether_gateway::vocabulary::policy::{Reason, Type};
    use serde_json::Value;

    const OURS: &str = "gateway.aether.io/edge";
    const API: &str = "gateway.networking.x-k8s.io/v1alpha1";

    fn mk_xbackend(ancestors: Value) -> XBackend {
        serde_json::from_value(json!({
            "apiVersion": API,
            "kind": "XBackend",
            "metadata": {"name": "pay", "namespace": "app", "uid": "u1", "generation": 2,
                         "resourceVersion": "7"},
            "spec": {"type": "EndpointSelector", "port": {"number": 8080},
                     "endpointSelector": {"matchLabels": {"app": "pay"}}},
            "status": {"ancestors": ancestors},
        }))
        .unwrap()
    }

    fn gw() -> ParentReference {
        ParentReference::defaulted(Some(GROUP), Some("Gateway"), Some("app"), "gw", None, None)
    }

    fn computed(x: &XBackend, accepted: Option<bool>) -> Option<StatusPatch> {
        let now = super::super::test_support::at(1);
        let conditions: Vec<Condition<Type, Reason>> = accepted
            .map(|ok| {
                let reason = if ok {
                    Reason::Accepted
                } else {
                    Reason::Invalid
                };
                vec![Condition::new(Type::Accepted, ok, reason, "m", 2)]
            })
            .unwrap_or_default();
        let parent = gw();
        let planned: Vec<Ancestor<'_, Type, Reason>> = accepted
            .map(|_| Ancestor {
                ancestor_ref: &parent,
                conditions: &conditions,
            })
            .into_iter()
            .collect();
        patch(&ObjectRef::new("app", "pay"), x, &planned, OURS, API, &now)
    }

    #[test]
    fn ours_join_the_others_entries_which_are_never_altered() {
        let theirs = json!({"ancestorRef": {"name": "other", "group": GROUP, "kind": "Gateway"},
                            "controllerName": "example.com/other",
                            "conditions": [{"type": "Accepted", "status": "False", "reason": "Theirs",
                                            "message": "kept", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        let x = mk_xbackend(json!([theirs]));
        let got = computed(&x, Some(true)).expect("a patch");
        assert_eq!(got.kind, StatusKind::XBackend);
        assert_eq!(got.body["apiVersion"], API);
        assert_eq!(got.body["metadata"]["resourceVersion"], "7");
        assert_eq!(got.body["metadata"]["uid"], "u1");
        let list = got.body["status"]["ancestors"].as_array().unwrap();
        assert_eq!(list[0], theirs, "theirs first, exactly as read");
        assert_eq!(list[1]["controllerName"], OURS);
        assert_eq!(list[1]["ancestorRef"]["name"], "gw");
        assert_eq!(list[1]["conditions"][0]["observedGeneration"], 2);
        // Written: nothing more to write; a flip is written; none planned
        // removes ours and keeps theirs.
        let written = mk_xbackend(got.body["status"]["ancestors"].clone());
        assert_eq!(computed(&written, Some(true)), None);
        assert!(computed(&written, Some(false)).is_some());
        let gone = computed(&written, None).expect("ours removed");
        assert_eq!(gone.body["status"]["ancestors"], json!([theirs]));
        assert_eq!(computed(&x, None), None, "none of ours, none planned");
    }

    #[test]
    fn theirs_are_kept_whole_and_ours_fill_the_room_left() {
        let theirs: Vec<Value> = (0..ANCESTORS_MAX)
            .map(|i| json!({"ancestorRef": {"name": format!("g{i}")}, "controllerName": "example.com/other"}))
            .collect();
        let x = mk_xbackend(Value::Array(theirs));
        assert_eq!(
            computed(&x, Some(true)),
            None,
            "no room: nothing of ours to add"
        );
    }

    #[test]
    fn a_plan_about_another_generation_is_not_written() {
        use aether_gateway::status::Identity;
        use aether_gateway::xbackend::status::XBackendAncestorStatus;
        let mut store = Store::default();
        store.insert(mk_xbackend(json!([])));
        let status = |generation| XBackendStatus {
            ancestors: vec![XBackendAncestorStatus {
                ancestor_ref: gw(),
                controller_name: OURS.into(),
                conditions: vec![],
            }],
            of: Identity {
                uid: Some("u1".into()),
                generation,
            },
        };
        let now = super::super::test_support::at(1);
        let key = ObjectRef::new("app", "pay");
        let plan = |g| BTreeMap::from([(key.clone(), status(g))]);
        let count = |g| {
            patches(&store, None, &plan(g), OURS, API, &now)
                .into_iter()
                .flatten()
                .count()
        };
        assert_eq!(count(1), 0, "older than the object");
        assert_eq!(count(2), 1);
    }
}
