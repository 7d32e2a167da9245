//! ListenerSet status: conditions and listeners, ours field by field (maps
//! keyed by type and name under server-side apply), as a Gateway's are.

use super::condition;
use super::gateway::listener;
use super::patch::{Precondition, StatusKind, StatusPatch, body};
use aether_gateway::listener_set::ListenerSetStatus as Planned;
use aether_ir::ObjectRef;
use gateway_api::apis::experimental::gateways::GatewayStatusListeners;
use gateway_api::apis::experimental::listenersets::{ListenerSet, ListenerSetStatusListeners};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

/// The patch bringing one ListenerSet's status to the plan, or `None`.
pub(crate) fn patch(
    set: &ListenerSet,
    planned: &Planned,
    api_version: &str,
    now: &Time,
) -> Option<StatusPatch> {
    let current = set.status.clone().unwrap_or_default();
    let current_conditions = current.conditions.clone().unwrap_or_default();
    let current_listeners = current.listeners.clone().unwrap_or_default();
    let conditions = condition::from_plan(&planned.conditions, &current_conditions, now);
    // The listener entries have the Gateway's shape under another type name.
    let as_gateway = |l: &ListenerSetStatusListeners| -> Option<GatewayStatusListeners> {
        serde_json::from_value(serde_json::to_value(l).ok()?).ok()
    };
    let listeners: Vec<GatewayStatusListeners> = planned
        .listeners
        .iter()
        .map(|l| {
            let was = current_listeners
                .iter()
                .find(|c| c.name == l.name)
                .and_then(as_gateway);
            listener(l, was.as_ref(), now)
        })
        .collect();
    let same_listeners = listeners.len() == current_listeners.len()
        && listeners.iter().all(|l| {
            current_listeners.iter().any(|c| {
                c.name == l.name
                    && c.attached_routes == l.attached_routes
                    && condition::same(&c.conditions, &l.conditions)
            })
        });
    if same_listeners && condition::same(&conditions, &current_conditions) {
        return None;
    }
    let object = ObjectRef::new(
        set.metadata.namespace.clone().unwrap_or_default(),
        set.metadata.name.clone().unwrap_or_default(),
    );
    Some(StatusPatch {
        kind: StatusKind::ListenerSet,
        body: body(
            StatusKind::ListenerSet,
            api_version,
            &object,
            Precondition {
                resource_version: None,
                uid: set.metadata.uid.as_deref(),
            },
            json!({ "conditions": conditions, "listeners": listeners }),
        ),
        object,
        based_on: set.metadata.resource_version.clone(),
        only_pending: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aether_gateway::status::{Condition, Identity, ListenerStatus};
    use aether_gateway::vocabulary::{listener, listener_set};

    fn mk_set(status: serde_json::Value) -> ListenerSet {
        serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "ListenerSet",
            "metadata": {"name": "ls", "namespace": "apps", "uid": "u", "generation": 3},
            "spec": {"parentRef": {"name": "gw"},
                     "listeners": [{"name": "l", "port": 80, "protocol": "HTTP"}]},
            "status": status,
        }))
        .unwrap()
    }

    fn mk_planned(programmed: bool) -> Planned {
        let reason = if programmed {
            listener_set::Reason::Programmed
        } else {
            listener_set::Reason::Pending
        };
        Planned {
            conditions: vec![
                Condition::new(
                    listener_set::Type::Accepted,
                    true,
                    listener_set::Reason::Accepted,
                    "ok",
                    3,
                ),
                Condition::new(listener_set::Type::Programmed, programmed, reason, "m", 3),
            ],
            listeners: vec![ListenerStatus {
                name: "l".into(),
                supported_kinds: vec![],
                attached_routes: 2,
                conditions: vec![Condition::new(
                    listener::Type::Accepted,
                    true,
                    listener::Reason::Accepted,
                    "ok",
                    3,
                )],
                attached: Default::default(),
            }],
            of: Identity {
                uid: Some("u".into()),
                generation: 3,
            },
            gateway: ObjectRef::new("apps", "gw"),
        }
    }

    #[test]
    fn the_plan_is_written_once_and_a_change_again() {
        let now = super::super::test_support::at(5);
        let v1 = "gateway.networking.k8s.io/v1";
        // The CRD's default status (Pending, no observedGeneration) is replaced.
        let fresh = mk_set(json!({"conditions": [
            {"type": "Accepted", "status": "Unknown", "reason": "Pending", "message": "Waiting for controller",
             "lastTransitionTime": "1970-01-01T00:00:00Z"}]}));
        let p = patch(&fresh, &mk_planned(true), v1, &now).expect("a first write");
        let status = &p.body["status"];
        assert_eq!(status["conditions"][0]["observedGeneration"], 3);
        assert_eq!(status["listeners"][0]["attachedRoutes"], 2);
        assert_eq!(p.body["kind"], "ListenerSet");
        let written = mk_set(status.clone());
        assert_eq!(
            patch(&written, &mk_planned(true), v1, &now),
            None,
            "as planned"
        );
        assert!(patch(&written, &mk_planned(false), v1, &now).is_some());
    }
}
