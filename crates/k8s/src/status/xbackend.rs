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
//! (`ancestors.rs`); at most 32 entries (the CRD's maxItems).

use super::ancestors::{self, Ancestored};
use super::patch::StatusKind;
use gateway_api::apis::experimental::xbackends::{
    XBackend, XBackendStatusAncestors as Entry, XBackendStatusAncestorsAncestorRef as EntryRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as Written;

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

impl Ancestored for XBackend {
    type Entry = Entry;
    const STATUS: StatusKind = StatusKind::XBackend;
    const MAX: usize = 32;
    fn entries(&self) -> Vec<Entry> {
        let status = self.status.as_ref();
        status.and_then(|s| s.ancestors.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::ancestors::{patch, patches};
    use super::super::patch::StatusPatch;
    use super::*;
    use aether_gateway::Store;
    use aether_gateway::status::{AncestorStatus, Condition, GROUP, ParentReference};
    use aether_gateway::vocabulary::policy::{Reason, Type};
    use aether_ir::ObjectRef;
    use serde_json::Value;
    use serde_json::json;
    use std::collections::BTreeMap;

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
        let planned: Vec<AncestorStatus<Type, Reason>> = accepted
            .map(|_| AncestorStatus {
                ancestor_ref: gw(),
                controller_name: OURS.into(),
                conditions,
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
        let theirs: Vec<Value> = (0..XBackend::MAX)
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
        use aether_gateway::xbackend::status::{XBackendAncestorStatus, XBackendStatus};
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
            patches::<XBackend, _, _>(&store, None, &plan(g), OURS, API, &now)
                .into_iter()
                .flatten()
                .count()
        };
        assert_eq!(count(1), 0, "older than the object");
        assert_eq!(count(2), 1);
    }
}
