//! Route attachment: a route's status on each parentRef naming one of our Gateways.
//!
//! ```text
//!  parentRef ─ sectionName/port select listeners ── none ──► NoMatchingParent
//!            └ listener allows route kind+namespace ── none ──► NotAllowedByListeners
//!            └ hostnames intersect                  ── none ──► NoMatchingListenerHostname
//!            └ route has valid rules                ── no ────► UnsupportedValue
//!                                                       (still attached: counted
//!                                                        in attachedRoutes, serves nothing)
//!            └ Accepted: the route attaches to every listener that passed
//! ```
//!
//! Then, per listener, an HTTPRoute and a GRPCRoute sharing a hostname: the
//! younger one is not accepted there ([`reject_mixed_kinds`]).
//!
//! What attached where goes into the Gateway's [`Attachments`] table.
//!
//! Attachment does not depend on listener health (an HTTPS listener with a bad
//! certificate still counts its routes); only programmable listeners are served.

use crate::attachments::Attachments;
use crate::gateway_model::GatewayModel;
use crate::route::RouteModel;
use crate::status::{Condition, ParentReference, RouteParentStatus, condition_mut, set_condition};
use crate::store::Store;
use crate::vocabulary::route::{Reason, Type};
use crate::{grpc_route, hostname, http_route};
use aether_ir::{Kind, ObjectRef, RouteKind};
use std::collections::BTreeSet;
use std::sync::Arc;

/// What one parentRef of a route gets on a Gateway: its status there, and
/// the listeners it attaches to (counted in their `attachedRoutes`; served
/// there too when the route is accepted). A function of the route model, the
/// parentRef and the Gateway model (see `route_memo.rs`).
#[derive(Debug, Clone)]
pub struct Attached {
    /// Shared (`Arc`): the unit, the route's status and the memo's next
    /// translation hold the same one, and tell it unchanged by identity.
    pub status: Arc<RouteParentStatus>,
    hosting: Vec<usize>,
    accepted: bool,
}

impl Attached {
    /// Records route `ri` (the Gateway's own route index) on the listeners it
    /// attaches to.
    pub fn record(&self, table: &mut Attachments, ri: usize) {
        for &li in &self.hosting {
            table.count(li, ri);
            if self.accepted {
                table.serve(li, ri);
            }
        }
    }
}

/// Decides the route's status on one parentRef of `gw`, and the listeners it
/// attaches to there.
pub fn attach(
    store: &Store,
    gw: &GatewayModel,
    route: &RouteModel,
    parent_ref: &Arc<ParentReference>,
    controller_name: &str,
) -> Attached {
    let g = route.of.generation;
    // A Gateway parentRef reaches the Gateway's own listeners; a ListenerSet
    // one, that set's.
    let origin = (parent_ref.kind == Kind::ListenerSet.as_str())
        .then(|| parent_ref.gateway(&route.key().namespace));
    let hosting = hosting_listeners(store, gw, route, parent_ref, origin.as_ref());
    let (mut conditions, hosting, accepted) = match hosting {
        Err((reason, message)) => {
            let mut c = Vec::new();
            set_condition(
                &mut c,
                Condition::new(Type::Accepted, false, reason, message, g),
            );
            set_condition(&mut c, route.resolved_refs());
            (c, vec![], false)
        }
        Ok(hosting) => {
            // Attached by allowedRoutes and parentRef alone: a route that is
            // itself not Accepted (no valid rule) counts in attachedRoutes
            // too (the API says MUST), but serves nothing.
            let (c, accepted) = route.attached_conditions();
            (c, hosting, accepted)
        }
    };
    // Kept for as long as the route stands: no room for conditions to come.
    conditions.shrink_to_fit();
    Attached {
        status: Arc::new(RouteParentStatus {
            parent_ref: parent_ref.clone(),
            controller_name: controller_name.to_string(),
            conditions,
            gateway: gw.key.clone(),
        }),
        hosting,
        accepted,
    }
}

/// The listeners the parentRef selects that allow the route and share a
/// hostname with it, or why there are none (the first check that fails).
fn hosting_listeners(
    store: &Store,
    gw: &GatewayModel,
    route: &RouteModel,
    parent_ref: &ParentReference,
    origin: Option<&ObjectRef>,
) -> Result<Vec<usize>, (Reason, &'static str)> {
    let candidates: Vec<usize> = gw
        .listeners
        .iter()
        .enumerate()
        .filter(|(_, l)| l.origin.as_ref() == origin)
        .filter(|(_, l)| {
            parent_ref
                .section_name
                .as_ref()
                .is_none_or(|s| *s == l.name)
        })
        .filter(|(_, l)| parent_ref.port.is_none_or(|p| p == i32::from(l.port)))
        .map(|(i, _)| i)
        .collect();
    if candidates.is_empty() {
        return Err((
            Reason::NoMatchingParent,
            "no listener matches the parentRef's sectionName/port",
        ));
    }
    let allowed: Vec<usize> = candidates
        .into_iter()
        .filter(|&i| {
            let l = &gw.listeners[i];
            l.supports_kind(route.kind())
                && l.allowed_namespaces
                    .allows(store, &l.namespace, &route.key().namespace)
        })
        .collect();
    if allowed.is_empty() {
        return Err((
            Reason::NotAllowedByListeners,
            "no matching listener allows this route's kind and namespace",
        ));
    }
    let hosting: Vec<usize> = allowed
        .into_iter()
        .filter(|&i| {
            !hostname::served_hostnames(gw.listeners[i].hostname.as_deref(), &route.hostnames)
                .is_empty()
        })
        .collect();
    if hosting.is_empty() {
        return Err((
            Reason::NoMatchingListenerHostname,
            "no hostname intersects a matching listener's hostname",
        ));
    }
    Ok(hosting)
}

/// HTTPRoute and GRPCRoute are never merged on one listener: when routes of the
/// two kinds attached to a listener share a hostname, the older route (then the
/// first by namespace/name) keeps it and the other is not accepted on that
/// Gateway. `parents[ri]` holds route `ri`'s parent statuses.
pub fn reject_mixed_kinds(
    gw: &GatewayModel,
    routes: &[Arc<RouteModel>],
    table: &mut Attachments,
    parents: &mut [Vec<Arc<RouteParentStatus>>],
) {
    let mut losers = BTreeSet::new();
    for (li, l) in gw.listeners.iter().enumerate() {
        let on: Vec<usize> = table.served_on(li).collect();
        // Each kind's routes with the hostnames they serve here, each computed
        // once: a listener with thousands of routes of one kind costs a walk.
        let of_kind = |kind: RouteKind| -> Vec<(usize, Vec<String>)> {
            on.iter()
                .filter(|&&ri| routes[ri].kind() == kind)
                .map(|&ri| {
                    let served =
                        hostname::served_hostnames(l.hostname.as_deref(), &routes[ri].hostnames);
                    (ri, served)
                })
                .collect()
        };
        let grpc = of_kind(grpc_route::KIND);
        if grpc.is_empty() {
            continue;
        }
        for (a, served_a) in of_kind(http_route::KIND) {
            for (b, served_b) in &grpc {
                let b = *b;
                if overlap(&served_a, served_b) {
                    let older = routes[a].age() <= routes[b].age();
                    losers.insert(if older { b } else { a });
                }
            }
        }
    }
    for loser in losers {
        table.detach(loser);
        let on_this_gateway = parents[loser].iter_mut().filter(|p| p.gateway == gw.key);
        for p in on_this_gateway {
            if let Some(c) = condition_mut(&mut Arc::make_mut(p).conditions, Type::Accepted) {
                c.hold(
                    Reason::Conflicted,
                    "an older route of the other kind (HTTPRoute/GRPCRoute) already serves these hostnames on this listener",
                );
            }
        }
    }
}

/// Do two sets of served hostnames (`*` meaning any) share a hostname?
fn overlap(a: &[String], b: &[String]) -> bool {
    a.iter().any(|x| {
        b.iter()
            .any(|y| x == "*" || y == "*" || hostname::intersect(Some(x), y).is_some())
    })
}
