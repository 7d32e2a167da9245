//! The status to write: [`assemble`], the one place that says what overrides what.
//!
//! ```text
//!  StatusPlan (as translated, as if every Envoy served it)
//!     + Served per Gateway (the fleet's ACKs)      ──assemble──► StatusPlan (to write)
//!     + Addresses (the load balancer's, or as planned)
//!
//!  Gateway Programmed, strongest reason first:
//!    1. planned False (Invalid, AddressNotUsable): as planned, nothing gated
//!    2. an Envoy NACKed its config               False/Invalid, Envoy's message
//!    3. no load-balancer address (service mode)  False/AddressNotAssigned, or
//!       AddressNotUsable when a requested address was not given
//!    4. not every Envoy has ACKed it yet         False/Pending
//!    5. otherwise                                True/Programmed
//!  Listener Programmed: 1, 2, 4, 5 (an address is the Gateway's).
//!  Route Accepted on a gated Gateway: planned True and its own config not
//!    served everywhere → False/Pending, or False/UnsupportedValue with
//!    Envoy's message when an Envoy refused the route (it is served as it
//!    was: `aether_ads::holdback`); attachedRoutes counts the served ones.
//! ```
//!
//! The gate is per object: a route whose own config every Envoy serves keeps
//! `Accepted` and its share of `attachedRoutes` while another route on the same
//! Gateway changes, and the Gateway stays `Programmed` while its listeners are
//! served. Only what is new or changed and not served yet is `Pending`.

use crate::status::{
    GatewayStatus, GatewayStatusAddress, ListenerStatus, StatusPlan, condition, condition_mut,
};
use crate::vocabulary::{gateway, listener, listener_set, route};
pub use aether_ir::{AckState, Pending, Rejection, Served};
use aether_ir::{ObjectRef, names};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Where Gateways' `status.addresses` come from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Addresses {
    /// As translated: the listeners' own addresses (standalone, static mode).
    #[default]
    Planned,
    /// A load balancer's, per Gateway (service mode). A Gateway not in the map
    /// has none.
    LoadBalancer(BTreeMap<ObjectRef, Assignment>),
}

/// What the load balancer gave one Gateway.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    pub addresses: Vec<GatewayStatusAddress>,
    /// Why the Gateway cannot be reached yet (no Service, no address, a failed
    /// write); `None` when it can.
    pub missing: Option<String>,
    /// `missing` is about addresses the Gateway asked for and did not get
    /// (AddressNotUsable), rather than about no address at all (AddressNotAssigned).
    pub unusable: bool,
    /// Each `spec.addresses` entry matched ([`crate::routability`]), once the
    /// Service's addresses are known: `AddressesAssigned`. `None`: not yet.
    pub assigned: Option<crate::routability::Assigned>,
}

/// Why a Gateway planned `Programmed=True` is not, for its Gateway condition
/// and for its listeners'.
struct Held {
    gateway: Option<(gateway::Reason, String)>,
    listeners: Option<(listener::Reason, String)>,
}

impl Held {
    /// The override order (see the module docs), for one Gateway.
    fn of(served: &Served, no_address: Option<(gateway::Reason, &str)>) -> Held {
        let fleet = match &served.gateway {
            AckState::Acked => None,
            AckState::Nacked(rejection) => Some((
                gateway::Reason::Invalid,
                listener::Reason::Invalid,
                rejected(rejection),
            )),
            AckState::Pending => Some((
                gateway::Reason::Pending,
                listener::Reason::Pending,
                format!(
                    "waiting for every ready Envoy to ACK this Gateway's configuration{}",
                    unreported(&served.unreported)
                ),
            )),
        };
        let gateway = match (&fleet, no_address) {
            (Some((gateway::Reason::Invalid, _, m)), _) => {
                Some((gateway::Reason::Invalid, m.clone()))
            }
            (_, Some((reason, why))) => Some((reason, why.to_string())),
            (Some((r, _, m)), None) => Some((*r, m.clone())),
            (None, None) => None,
        };
        Held {
            gateway,
            listeners: fleet.map(|(_, r, m)| (r, m)),
        }
    }
}

/// The sentence status (and a log line) says of an Envoy's NACK: the one
/// place it is worded.
pub fn rejected(r: &Rejection) -> String {
    format!(
        "Envoy on node {} rejected the configuration: {}",
        r.node, r.message
    )
}

/// The sentence a route's status (and `explain`) says of a route an Envoy
/// refused alone, which it serves as it was (`aether_ads::holdback`).
pub fn served_as_it_was(r: &Rejection) -> String {
    format!(
        "Envoy on node {} refused this route's configuration, so the route is served as it was: {}",
        r.node, r.message
    )
}

/// The status to write: `plan` as far as the fleet serves it (`served`, per
/// Gateway) and with the Gateways' `addresses`. Pure; the override order is in
/// the module docs and in [`Held::of`], nowhere else.
pub fn assemble(
    plan: &StatusPlan,
    served: impl Fn(&ObjectRef) -> Served,
    addresses: &Addresses,
) -> StatusPlan {
    let mut out = plan.clone();
    let mut gated: BTreeMap<ObjectRef, Served> = BTreeMap::new();
    let mut held_sets: BTreeMap<ObjectRef, Held> = BTreeMap::new();
    for (gw, status) in &mut out.gateways {
        // `None`: as planned; `Some(None)`: the load balancer knows no address.
        let assignment = match addresses {
            Addresses::Planned => None,
            Addresses::LoadBalancer(by_gateway) => Some(by_gateway.get(gw)),
        };
        if let Some(a) = assignment {
            status.addresses = a.map(|a| a.addresses.clone()).unwrap_or_default();
            // The plan matched the planned addresses; the Service's decide.
            status
                .conditions
                .retain(|c| c.type_ != gateway::Type::AddressesAssigned);
            let generation = condition(&status.conditions, gateway::Type::Accepted)
                .map_or(0, |c| c.observed_generation);
            if let Some(assigned) = a.and_then(|a| a.assigned.as_ref()) {
                status
                    .conditions
                    .push(crate::routability::condition(assigned, generation));
            }
        }
        // 1. A Gateway that is not served has nothing to wait for.
        if !condition(&status.conditions, gateway::Type::Programmed).is_some_and(|c| c.ok) {
            continue;
        }
        let s = served(gw);
        let no_address = match assignment {
            None => None,
            Some(None) => Some((
                gateway::Reason::AddressNotAssigned,
                "no load balancer address is known",
            )),
            Some(Some(a)) => a.missing.as_deref().map(|m| {
                let reason = if a.unusable {
                    gateway::Reason::AddressNotUsable
                } else {
                    gateway::Reason::AddressNotAssigned
                };
                (reason, m)
            }),
        };
        let held = Held::of(&s, no_address);
        hold_gateway(status, &s, &held);
        held_sets.insert(gw.clone(), held);
        gated.insert(gw.clone(), s);
    }
    hold_listener_sets(&mut out, &gated, &held_sets);
    hold_routes(&mut out, &gated);
    out
}

/// A ListenerSet's listeners are its Gateway's config: they are held as the
/// Gateway's are, and the set is Programmed only when its Gateway is.
fn hold_listener_sets(
    out: &mut StatusPlan,
    gated: &BTreeMap<ObjectRef, Served>,
    held: &BTreeMap<ObjectRef, Held>,
) {
    for set in out.listener_sets.values_mut() {
        let (Some(s), Some(h)) = (gated.get(&set.gateway), held.get(&set.gateway)) else {
            continue;
        };
        for l in &mut set.listeners {
            hold_listener(l, s, h);
        }
        if let Some((_, message)) = &h.gateway
            && let Some(c) = condition_mut(&mut set.conditions, listener_set::Type::Programmed)
        {
            c.hold(listener_set::Reason::Pending, message);
        }
    }
}

/// A served Gateway's conditions and listener counts, given what holds it.
fn hold_gateway(status: &mut GatewayStatus, served: &Served, held: &Held) {
    if let Some((reason, message)) = &held.gateway
        && let Some(c) = condition_mut(&mut status.conditions, gateway::Type::Programmed)
    {
        c.hold(*reason, message);
    }
    for l in &mut status.listeners {
        hold_listener(l, served, held);
    }
}

/// A listener counts only the routes the fleet serves, and is Programmed
/// only as far as its Gateway's config is served.
fn hold_listener(l: &mut ListenerStatus, served: &Served, held: &Held) {
    let served_routes = l.attached.iter().filter(|k| served.serves_route(k)).count();
    l.attached_routes = i32::try_from(served_routes).unwrap_or(i32::MAX);
    if let Some((reason, message)) = &held.listeners
        && let Some(c) = condition_mut(&mut l.conditions, listener::Type::Programmed)
    {
        c.hold(*reason, message);
    }
}

/// Route parents on a gated Gateway: `Accepted` only once their own config is
/// served everywhere. (The Gateway's `Programmed` carries a NACK's text.)
fn hold_routes(out: &mut StatusPlan, gated: &BTreeMap<ObjectRef, Served>) {
    for (kind, routes) in out.routes_mut() {
        for (r, status) in routes.iter_mut() {
            let key = names::route_key(kind, &r.namespace, &r.name);
            let waiting =
                |gateway: &ObjectRef| gated.get(gateway).filter(|s| !s.serves_route(&key));
            // A route every fleet serves stays shared with the plan.
            if !status.parents.iter().any(|p| waiting(&p.gateway).is_some()) {
                continue;
            }
            for parent in &mut Arc::make_mut(status).parents {
                let Some(s) = waiting(&parent.gateway) else {
                    continue;
                };
                let parent = Arc::make_mut(parent);
                let Some(c) = condition_mut(&mut parent.conditions, route::Type::Accepted) else {
                    continue;
                };
                match s.refused.get(&key) {
                    Some(refusal) => {
                        c.hold(route::Reason::UnsupportedValue, &served_as_it_was(refusal));
                    }
                    None => {
                        let message = format!(
                            "waiting for every ready Envoy to serve this route{}",
                            unreported(&s.unreported)
                        );
                        c.hold(route::Reason::Pending, &message);
                    }
                }
            }
        }
    }
}

/// At most this many unreported nodes are named in a Pending message; more are
/// counted as "more than" this. The message is status: if it named every
/// missing node, each of a joining fleet's reports would change it on every
/// Gateway, one status write per Gateway per report (100,000 writes for 1,000
/// Gateways as 100 nodes come up). Past this many, it stays the same text until
/// only this many are left: writes per Gateway stay bounded whatever the size
/// of the fleet. `aether-edge fleet` names every node.
pub const UNREPORTED_NAMED: usize = 3;

/// The nodes a Pending message names, if any: " (no report from node node-b)",
/// or past [`UNREPORTED_NAMED`] " (no report from more than 3 nodes; `aether-edge
/// fleet` lists them)".
fn unreported(nodes: &BTreeSet<String>) -> String {
    if nodes.is_empty() {
        return String::new();
    }
    if nodes.len() > UNREPORTED_NAMED {
        return format!(
            " (no report from more than {UNREPORTED_NAMED} nodes; `aether-edge fleet` lists them)"
        );
    }
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let noun = if names.len() == 1 { "node" } else { "nodes" };
    format!(" (no report from {noun} {})", names.join(", "))
}

#[cfg(test)]
#[path = "assemble_tests.rs"]
mod tests;
