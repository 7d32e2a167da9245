//! ListenerSet: listeners a Gateway takes from other objects (GEP-1713).
//!
//! ```text
//!  ListenerSet ── parentRef ──► Gateway ── spec.allowedListeners.namespaces
//!       │                                   (None by default | Same | All | Selector)
//!       └─ listeners: merged after the Gateway's own, sets by creationTimestamp
//!          then namespace/name; a listener that clashes with one before it
//!          (protocol, or port + hostname) is Conflicted and the earlier one wins
//! ```
//!
//! A set not allowed is `Accepted=False/NotAllowed` and brings no listener; one
//! whose listeners are all invalid is `Accepted=False/ListenersNotValid` and is
//! not counted in the Gateway's `attachedListenerSets`. Its listeners are its
//! own: a route reaches them through a parentRef of kind ListenerSet only, and
//! allowedRoutes `Same` means the set's namespace. The Gateway's status lists
//! only its own listeners.

use crate::allowed_routes::selects_namespace;
use crate::attachments::Attachments;
use crate::gateway_model::GatewayModel;
use crate::listener::Listener;
use crate::listener::conflicts::mark_later_conflicts;
use crate::listener::status::listener_status;
use crate::status::{Condition, GROUP, Identity};
use crate::store::Store;
use crate::vocabulary::listener_set::{Reason, Type};
use aether_ir::{Kind, ObjectRef};
use gateway_api::apis::experimental::gateways::{
    Gateway, GatewayAllowedListenersNamespacesFrom, GatewayListeners,
};
use gateway_api::apis::experimental::listenersets::ListenerSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub use crate::status::{ListenerSetCondition, ListenerSetStatus};

/// One ListenerSet naming a Gateway of ours.
#[derive(Debug, Clone)]
pub struct ListenerSetModel {
    pub key: ObjectRef,
    pub of: Identity,
    pub allowed: bool,
    /// Its listeners, as indices into the Gateway's listeners.
    pub listeners: Vec<usize>,
}

impl ListenerSetModel {
    /// Counted in the Gateway's `attachedListenerSets`.
    pub fn is_attached(&self, gw: &GatewayModel) -> bool {
        self.allowed && self.listeners.iter().any(|&i| gw.listeners[i].is_valid())
    }

    pub fn status(&self, gw: &GatewayModel, attachments: &Attachments) -> ListenerSetStatus {
        let g = self.of.generation;
        let served = gw.is_served();
        let accepted = (true, Reason::Accepted, "ListenerSet is accepted");
        let (accepted, programmed) = if !self.allowed {
            let m = "the Gateway's allowedListeners does not admit this namespace";
            (
                (false, Reason::NotAllowed, m),
                (false, Reason::NotAllowed, m),
            )
        } else if !self.is_attached(gw) {
            let m = "no listener of the set is valid";
            let invalid = (false, Reason::ListenersNotValid, m);
            (invalid, invalid)
        } else if !served {
            (
                accepted,
                (false, Reason::Invalid, "the Gateway is not served"),
            )
        } else {
            (
                accepted,
                (true, Reason::Programmed, "ListenerSet is programmed"),
            )
        };
        let conditions = [(Type::Accepted, accepted), (Type::Programmed, programmed)]
            .map(|(t, (ok, reason, message))| Condition::new(t, ok, reason, message, g))
            .into();
        ListenerSetStatus {
            conditions,
            listeners: self
                .listeners
                .iter()
                .map(|&i| listener_status(&gw.listeners[i], attachments.counted_on(i), served, g))
                .collect(),
            of: self.of.clone(),
            gateway: gw.key.clone(),
        }
    }
}

/// Does `spec.allowedListeners` admit any namespace?
pub fn allows_any(gw: &Gateway) -> bool {
    gw.spec
        .allowed_listeners
        .as_ref()
        .and_then(|a| a.namespaces.as_ref())
        .and_then(|n| n.from.as_ref())
        .is_some_and(|f| !matches!(f, GatewayAllowedListenersNamespacesFrom::None))
}

fn allowed(store: &Store, gw_key: &ObjectRef, gw: &Gateway, set_ns: &str) -> bool {
    let Some(ns) = gw
        .spec
        .allowed_listeners
        .as_ref()
        .and_then(|a| a.namespaces.as_ref())
    else {
        return false;
    };
    match ns.from {
        Some(GatewayAllowedListenersNamespacesFrom::All) => true,
        Some(GatewayAllowedListenersNamespacesFrom::Same) => set_ns == gw_key.namespace,
        Some(GatewayAllowedListenersNamespacesFrom::Selector) => {
            let selector = ns
                .selector
                .as_ref()
                .map(|s| serde_json::to_value(s).expect("a selector serializes"));
            selector.is_some_and(|s| selects_namespace(store, &s, set_ns))
        }
        Some(GatewayAllowedListenersNamespacesFrom::None) | None => false,
    }
}

/// The ListenerSets naming `gw`, in precedence order: creationTimestamp
/// (none last), then namespace/name.
fn naming<'a>(store: &'a Store, gw_key: &ObjectRef) -> Vec<(&'a ObjectRef, &'a ListenerSet)> {
    let mut sets: Vec<(&ObjectRef, &ListenerSet)> = store
        .all::<ListenerSet>()
        .iter()
        .filter(|(key, ls)| {
            let p = &ls.spec.parent_ref;
            p.group.as_deref().unwrap_or(GROUP) == GROUP
                && p.kind
                    .as_deref()
                    .is_none_or(|k| k == Kind::Gateway.as_str())
                && p.name == gw_key.name
                && p.namespace.as_deref().unwrap_or(&key.namespace) == gw_key.namespace
        })
        .map(|(key, ls)| (key, &**ls))
        .collect();
    let age = |ls: &ListenerSet| -> (bool, Option<Time>) {
        let t = ls.metadata.creation_timestamp.clone();
        (t.is_none(), t)
    };
    sets.sort_by(|a, b| (age(a.1), a.0).cmp(&(age(b.1), b.0)));
    sets
}

/// Appends the listeners of every allowed ListenerSet naming the Gateway to
/// `listeners` (made by `make`, which resolves them), marks those that clash
/// with earlier ones, and returns the sets.
pub fn attach(
    store: &Store,
    gw_key: &ObjectRef,
    gw: &Gateway,
    listeners: &mut Vec<Listener>,
    make: impl Fn(&str, &ObjectRef, &GatewayListeners) -> Listener,
) -> Vec<ListenerSetModel> {
    let mut out = Vec::new();
    for (key, ls) in naming(store, gw_key) {
        let allowed = allowed(store, gw_key, gw, &key.namespace);
        let start = listeners.len();
        if allowed {
            for l in &ls.spec.listeners {
                // The same fields as a Gateway listener's, under other type names.
                let value = serde_json::to_value(l).expect("a listener serializes");
                let Ok(spec) = serde_json::from_value::<GatewayListeners>(value) else {
                    continue;
                };
                listeners.push(make(&key.namespace, key, &spec));
            }
            mark_later_conflicts(listeners, start);
        }
        out.push(ListenerSetModel {
            key: key.clone(),
            of: Identity::of(&ls.metadata),
            allowed,
            listeners: (start..listeners.len()).collect(),
        });
    }
    out
}
