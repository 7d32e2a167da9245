//! ListenerSet status: conditions and listeners, ours field by field (maps
//! keyed by type and name under server-side apply), as a Gateway's are.

use super::condition;
use super::patch::{Precondition, StatusKind, StatusPatch, body, listener};
use aether_gateway::listener_set::ListenerSetStatus as Planned;
use aether_ir::ObjectRef;
use gateway_api::apis::standard::gateways::GatewayStatusListeners;
use gateway_api::apis::standard::listenersets::{ListenerSet, ListenerSetStatusListeners};
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
    })
}
