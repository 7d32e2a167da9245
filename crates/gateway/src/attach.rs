//! Route attachment: a route's status on each parentRef naming one of our Gateways.
//!
//! ```text
//!  parentRef ─ sectionName/port select listeners ── none ──► NoMatchingParent
//!            └ listener allows route kind+namespace ── none ──► NotAllowedByListeners
//!            └ hostnames intersect                  ── none ──► NoMatchingListenerHostname
//!            └ route has valid rules                ── no ────► UnsupportedValue
//!            └ Accepted: the route attaches to every listener that passed
//! ```
//!
//! Attachment does not depend on listener health (an HTTPS listener with a bad
//! certificate still counts its routes); only programmable listeners are served.

use crate::hostname;
use crate::listener::GatewayModel;
use crate::route::RouteModel;
use crate::status::{Condition, ParentReference, RouteParentStatus, set_condition};
use crate::store::Store;

/// Decides the route's status on one parentRef of `gw`, and records the route on
/// the listeners it attaches to. Returns the status and those listener indices.
pub fn attach(
    store: &Store,
    gw: &mut GatewayModel,
    route: &RouteModel,
    parent_ref: &ParentReference,
    controller_name: &str,
) -> (RouteParentStatus, Vec<usize>) {
    let g = route.generation;
    let candidates: Vec<usize> = gw
        .listeners
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            parent_ref
                .section_name
                .as_ref()
                .is_none_or(|s| *s == l.name)
        })
        .filter(|(_, l)| parent_ref.port.is_none_or(|p| p == i32::from(l.port)))
        .map(|(i, _)| i)
        .collect();
    let allowed: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&i| {
            let l = &gw.listeners[i];
            l.supports_kind(route.kind)
                && l.allowed_namespaces
                    .allows(store, &gw.key.namespace, &route.key.namespace)
        })
        .collect();
    let hosting: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|&i| {
            !hostname::served_hostnames(gw.listeners[i].hostname.as_deref(), &route.hostnames)
                .is_empty()
        })
        .collect();
    let refused = if candidates.is_empty() {
        Some((
            "NoMatchingParent",
            "no listener matches the parentRef's sectionName/port",
        ))
    } else if allowed.is_empty() {
        Some((
            "NotAllowedByListeners",
            "no matching listener allows this route's kind and namespace",
        ))
    } else if hosting.is_empty() {
        Some((
            "NoMatchingListenerHostname",
            "no hostname intersects a matching listener's hostname",
        ))
    } else {
        None
    };
    let (conditions, attached) = match refused {
        Some((reason, message)) => {
            let mut c = Vec::new();
            set_condition(
                &mut c,
                Condition::new("Accepted", false, reason, message, g),
            );
            set_condition(&mut c, route.resolved_refs());
            (c, vec![])
        }
        None => {
            let (c, accepted) = route.attached_conditions();
            if accepted {
                for &i in &hosting {
                    gw.listeners[i]
                        .attached
                        .insert((route.kind, route.key.clone()));
                }
                (c, hosting)
            } else {
                (c, vec![])
            }
        }
    };
    (
        RouteParentStatus {
            parent_ref: parent_ref.clone(),
            controller_name: controller_name.to_string(),
            conditions,
        },
        attached,
    )
}
