//! GatewayClass and Gateway status (with its listeners, which a ListenerSet's
//! status shares): the planned status as the CRD spells it, timestamps carried
//! over, or `None` when the object already says it.

use super::condition;
use super::patch::{Precondition, StatusKind, StatusPatch, body};
use crate::discovery::ServedVersions;
use aether_gateway::status::{GatewayClassStatus as PlannedClass, GatewayStatus as Planned};
use aether_ir::ObjectRef;
use gateway_api::apis::experimental::gateways::{
    Gateway, GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gateway_api::apis::standard::gatewayclasses::{
    GatewayClass, GatewayClassStatus, GatewayClassStatusSupportedFeatures,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::collections::BTreeMap;

/// `Gateway.status.addresses` maxItems.
const ADDRESSES_MAX: usize = 16;

/// The planned class status, with `SupportedVersion` from what the CRDs say
/// their release is (only Kubernetes mode reads them).
pub(super) fn with_supported_version(
    planned: &PlannedClass,
    served: &ServedVersions,
    class: &GatewayClass,
) -> PlannedClass {
    use aether_gateway::status::{Condition, set_condition};
    use aether_gateway::vocabulary::gateway_class::{Reason, Type};
    let mut planned = planned.clone();
    if let Some((ok, message)) = served.supported_version() {
        let reason = if ok {
            Reason::SupportedVersion
        } else {
            Reason::UnsupportedVersion
        };
        let g = class.metadata.generation.unwrap_or(0);
        set_condition(
            &mut planned.conditions,
            Condition::new(Type::SupportedVersion, ok, reason, message, g),
        );
    }
    planned
}

pub(super) fn gateway_class(
    class: &GatewayClass,
    planned: &PlannedClass,
    features: &[String],
    api_version: &str,
    now: &Time,
) -> Option<StatusPatch> {
    let current = class.status.clone().unwrap_or_default();
    let current_conditions = current.conditions.unwrap_or_default();
    let conditions = condition::from_plan(&planned.conditions, &current_conditions, now);
    let mut names: Vec<&String> = features.iter().collect();
    names.sort();
    names.dedup();
    let supported: Vec<GatewayClassStatusSupportedFeatures> = names
        .into_iter()
        .map(|name| GatewayClassStatusSupportedFeatures { name: name.clone() })
        .collect();
    if condition::same(&conditions, &current_conditions)
        && supported == current.supported_features.unwrap_or_default()
    {
        return None;
    }
    let status = GatewayClassStatus {
        conditions: Some(conditions),
        supported_features: Some(supported),
    };
    let object = ObjectRef::new("", class.metadata.name.clone().unwrap_or_default());
    Some(StatusPatch {
        kind: StatusKind::GatewayClass,
        body: body(
            StatusKind::GatewayClass,
            api_version,
            &object,
            Precondition {
                resource_version: None,
                uid: class.metadata.uid.as_deref(),
            },
            serde_json::to_value(&status).expect("status serializes"),
        ),
        object,
        based_on: class.metadata.resource_version.clone(),
        only_pending: false,
    })
}

/// A planned listener status as the API's, timestamps kept from `current`.
pub(crate) fn listener(
    l: &aether_gateway::status::ListenerStatus,
    current: Option<&GatewayStatusListeners>,
    now: &Time,
) -> GatewayStatusListeners {
    let was = current.map(|c| c.conditions.as_slice()).unwrap_or_default();
    GatewayStatusListeners {
        name: l.name.clone(),
        attached_routes: l.attached_routes,
        supported_kinds: Some(
            l.supported_kinds
                .iter()
                .map(|k| GatewayStatusListenersSupportedKinds {
                    group: Some(k.group.clone()),
                    kind: k.kind.clone(),
                })
                .collect(),
        ),
        conditions: condition::from_plan(&l.conditions, was, now),
    }
}

pub(super) fn gateway(
    gw: &Gateway,
    planned: &Planned,
    api_version: &str,
    now: &Time,
) -> Option<StatusPatch> {
    let current = gw.status.clone().unwrap_or_default();
    let current_conditions = current.conditions.clone().unwrap_or_default();
    let current_listeners: BTreeMap<&str, &GatewayStatusListeners> = current
        .listeners
        .iter()
        .flatten()
        .map(|l| (l.name.as_str(), l))
        .collect();
    let addresses: Vec<GatewayStatusAddresses> = planned
        .addresses
        .iter()
        .take(ADDRESSES_MAX)
        .map(|a| GatewayStatusAddresses {
            r#type: Some(a.type_.clone()),
            value: a.value.clone(),
            // The default scope is left unset, which the spec reads the same
            // as "": a cluster on CRDs before v1.7 has no such field and
            // refuses the whole status apply over it.
            routability: a.routability.clone().filter(|r| !r.is_empty()),
        })
        .collect();
    let conditions = condition::from_plan(&planned.conditions, &current_conditions, now);
    let listeners: Vec<GatewayStatusListeners> = planned
        .listeners
        .iter()
        .map(|l| listener(l, current_listeners.get(l.name.as_str()).copied(), now))
        .collect();

    let same_listeners = listeners.len() == current_listeners.len()
        && listeners.iter().all(|l| {
            current_listeners.get(l.name.as_str()).is_some_and(|c| {
                c.attached_routes == l.attached_routes
                    && c.supported_kinds.clone().unwrap_or_default()
                        == l.supported_kinds.clone().unwrap_or_default()
                    && condition::same(&c.conditions, &l.conditions)
            })
        });
    if same_listeners
        && condition::same(&conditions, &current_conditions)
        && addresses == current.addresses.clone().unwrap_or_default()
        && planned.attached_listener_sets == current.attached_listener_sets
    {
        return None;
    }
    let status = GatewayStatus {
        addresses: Some(addresses),
        attached_listener_sets: planned.attached_listener_sets,
        conditions: Some(conditions),
        listeners: Some(listeners),
    };
    let object = ObjectRef::new(
        gw.metadata.namespace.clone().unwrap_or_default(),
        gw.metadata.name.clone().unwrap_or_default(),
    );
    Some(StatusPatch {
        kind: StatusKind::Gateway,
        body: body(
            StatusKind::Gateway,
            api_version,
            &object,
            Precondition {
                resource_version: None,
                uid: gw.metadata.uid.as_deref(),
            },
            serde_json::to_value(&status).expect("status serializes"),
        ),
        object,
        based_on: gw.metadata.resource_version.clone(),
        only_pending: false,
    })
}
