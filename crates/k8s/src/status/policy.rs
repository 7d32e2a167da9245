//! BackendTLSPolicy status: our `PolicyAncestorStatus` entries merged into the
//! `status.ancestors` list every controller shares (`ancestors.rs`: theirs as
//! read, ours in plan order, the policy's `resourceVersion` and `uid` as
//! preconditions). A policy's conditions are
//! about the policy (its refs, its conflicts), not about what Envoy serves, so
//! they are written at once, ungated. At most 16 entries (the CRD's maxItems).

use super::ancestors::{self, Ancestored};
use super::patch::StatusKind;
use gateway_api::apis::standard::backendtlspolicies::{
    BackendTlsPolicy, BackendTlsPolicyStatusAncestors as Entry,
    BackendTlsPolicyStatusAncestorsAncestorRef as EntryRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as Written;

impl ancestors::Entry for Entry {
    type Ref = EntryRef;
    fn new(ancestor_ref: EntryRef, conditions: Vec<Written>, controller_name: &str) -> Self {
        Entry {
            ancestor_ref,
            conditions,
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
        &self.conditions
    }
}

impl Ancestored for BackendTlsPolicy {
    type Entry = Entry;
    const STATUS: StatusKind = StatusKind::BackendTlsPolicy;
    const MAX: usize = 16;
    fn entries(&self) -> Vec<Entry> {
        let status = self.status.as_ref();
        status.map(|s| s.ancestors.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::ancestors::patches;
    use super::super::patch::StatusPatch;
    use super::*;
    use aether_gateway::Store;
    use aether_gateway::backend_tls::{PolicyAncestorStatus, PolicyStatus};
    use aether_gateway::status::{Condition, GROUP, Identity, ParentReference};
    use aether_gateway::vocabulary::policy::{Reason, Type};
    use aether_ir::ObjectRef;
    use serde_json::json;
    use std::collections::BTreeMap;

    const OURS: &str = "gateway.aether.io/edge";

    fn mk_policy(ancestors: serde_json::Value) -> BackendTlsPolicy {
        serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "BackendTLSPolicy",
            "metadata": {"name": "p", "namespace": "apps", "uid": "u1", "generation": 2,
                         "resourceVersion": "7"},
            "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "s"}],
                     "validation": {"hostname": "abc.example.com",
                                    "wellKnownCACertificates": "System"}},
            "status": {"ancestors": ancestors},
        }))
        .unwrap()
    }

    fn mk_plan(accepted: bool) -> BTreeMap<ObjectRef, PolicyStatus> {
        let reason = if accepted {
            Reason::Accepted
        } else {
            Reason::Conflicted
        };
        let status = PolicyStatus {
            ancestors: vec![PolicyAncestorStatus {
                ancestor_ref: ParentReference::defaulted(
                    Some(GROUP),
                    Some("Gateway"),
                    Some("infra"),
                    "web",
                    None,
                    None,
                ),
                controller_name: OURS.into(),
                conditions: vec![Condition::new(Type::Accepted, accepted, reason, "m", 2)],
            }],
            of: Identity {
                uid: Some("u1".into()),
                generation: 2,
            },
        };
        BTreeMap::from([(ObjectRef::new("apps", "p"), status)])
    }

    fn computed(store: &Store, plan: &BTreeMap<ObjectRef, PolicyStatus>) -> Vec<StatusPatch> {
        let now = super::super::test_support::at(1);
        patches::<BackendTlsPolicy, _, _>(
            store,
            None,
            plan,
            OURS,
            "gateway.networking.k8s.io/v1",
            &now,
        )
        .into_iter()
        .flatten()
        .collect()
    }

    #[test]
    fn ours_join_the_others_entries_and_a_written_plan_needs_no_patch() {
        let theirs = json!({"ancestorRef": {"name": "other", "group": GROUP, "kind": "Gateway"},
                            "controllerName": "example.com/other", "conditions": []});
        let mut store = Store::default();
        store.insert(mk_policy(json!([theirs])));
        let plan = mk_plan(true);
        let got = computed(&store, &plan);
        assert_eq!(got.len(), 1);
        let list = got[0].body["status"]["ancestors"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(
            list[0]["controllerName"], "example.com/other",
            "theirs first, as read"
        );
        assert_eq!(list[1]["controllerName"], OURS);
        assert_eq!(list[1]["ancestorRef"]["name"], "web");
        assert_eq!(list[1]["conditions"][0]["observedGeneration"], 2);
        assert_eq!(got[0].body["metadata"]["resourceVersion"], "7");
        super::super::test_support::apply_all(&mut store, &got);
        assert!(
            computed(&store, &plan).is_empty(),
            "as planned: nothing to write"
        );
        // A changed condition is written again; a policy left out of the plan
        // loses our entry and keeps theirs.
        assert_eq!(computed(&store, &mk_plan(false)).len(), 1);
        let got = computed(&store, &BTreeMap::new());
        let list = got[0].body["status"]["ancestors"].as_array().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0]["controllerName"], "example.com/other");
    }

    #[test]
    fn a_plan_about_another_generation_or_object_is_not_written() {
        let mut store = Store::default();
        store.insert(mk_policy(json!([])));
        let mut plan = mk_plan(true);
        plan.values_mut().next().unwrap().of.generation = 1;
        assert!(computed(&store, &plan).is_empty());
    }
}
