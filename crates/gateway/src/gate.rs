//! The truth gate: the status plan as far as the Envoy fleet serves it.
//!
//! ```text
//!  StatusPlan (as planned) ──gated(served per Gateway)──► StatusPlan (to write)
//!
//!  Served { gateway: its own listeners Acked | Pending | Nacked(msg),
//!           pending: the route keys whose current config is not served everywhere }
//! ```
//!
//! The gate is per object: a route whose own config every Envoy serves keeps
//! `Accepted` and its share of `attachedRoutes` while another route on the same
//! Gateway changes, and the Gateway stays `Programmed` while its listeners are
//! served. Only what is new or changed and not served yet is `Pending`.

use crate::status::{Condition, StatusPlan, condition};
pub use aether_ir::AckState;
use aether_ir::{ObjectRef, names};
use std::collections::{BTreeMap, BTreeSet};

/// What the fleet serves of one Gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// The Gateway's own config: its listeners.
    pub gateway: AckState,
    /// Routes not served at their current config by every Envoy.
    pub pending: Pending,
    /// Nodes that must serve the Gateway (they take its traffic) but have not
    /// reported what their Envoy serves: named in the `Pending` messages.
    pub unreported: BTreeSet<String>,
}

/// Which routes of a Gateway wait for the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// Every route (nothing of the Gateway is known to be served).
    All,
    /// These route keys (see [`names::route_key`]); every other route is served.
    Only(BTreeSet<String>),
}

impl Served {
    /// The whole Gateway in one state: all served when Acked, none otherwise.
    pub fn whole(state: AckState) -> Self {
        let pending = if state == AckState::Acked {
            Pending::Only(BTreeSet::new())
        } else {
            Pending::All
        };
        Served {
            gateway: state,
            pending,
            unreported: BTreeSet::new(),
        }
    }

    pub fn serves_route(&self, key: &str) -> bool {
        match &self.pending {
            Pending::All => false,
            Pending::Only(keys) => !keys.contains(key),
        }
    }
}

impl StatusPlan {
    /// The status to write, given what the fleet serves of each Gateway.
    ///
    /// - Gateway and listener `Programmed` (planned True) become
    ///   `False/Pending` until the Gateway's own config is served, or
    ///   `False/Invalid` with Envoy's message on a NACK.
    /// - `attachedRoutes` counts the attached routes the fleet serves.
    /// - A route parent planned `Accepted=True` on that Gateway becomes
    ///   `Accepted=False/Pending` until the route's own config is served.
    ///
    /// A Gateway that is not served at all (planned `Programmed=False`) is left as
    /// planned: no Envoy will ever ACK it, and its attachedRoutes must still count
    /// (e.g. routes on a listener whose certificate does not resolve).
    pub fn gated(&self, served: impl Fn(&ObjectRef) -> Served) -> StatusPlan {
        let mut out = self.clone();
        let mut gated: BTreeMap<ObjectRef, Served> = BTreeMap::new();
        for (gw, status) in &mut out.gateways {
            // A Gateway that is not served has nothing to wait for.
            if !condition(&status.conditions, "Programmed").is_some_and(Condition::is_true) {
                continue;
            }
            let s = served(gw);
            let held = match &s.gateway {
                AckState::Acked => None,
                AckState::Pending => Some((
                    "Pending",
                    format!(
                        "waiting for every ready Envoy to ACK this Gateway's configuration{}",
                        unreported(&s.unreported)
                    ),
                )),
                AckState::Nacked(msg) => Some((
                    "Invalid",
                    format!("Envoy rejected the configuration: {msg}"),
                )),
            };
            if let Some((reason, message)) = &held {
                gate_programmed(&mut status.conditions, reason, message);
            }
            for l in &mut status.listeners {
                let served_routes = l.attached.iter().filter(|k| s.serves_route(k)).count();
                l.attached_routes = i32::try_from(served_routes).unwrap_or(i32::MAX);
                if let Some((reason, message)) = &held {
                    gate_programmed(&mut l.conditions, reason, message);
                }
            }
            gated.insert(gw.clone(), s);
        }
        for (kind, routes) in out.routes_mut() {
            for (route, status) in routes.iter_mut() {
                let key = names::route_key(kind, &route.namespace, &route.name);
                for parent in &mut status.parents {
                    let Some(s) = gated.get(&parent.parent_ref.gateway(&route.namespace)) else {
                        continue;
                    };
                    if s.serves_route(&key) {
                        continue;
                    }
                    if let Some(c) = parent.conditions.iter_mut().find(|c| c.type_ == "Accepted")
                        && c.is_true()
                    {
                        c.status = "False".into();
                        c.reason = "Pending".into();
                        // The Gateway's Programmed carries a NACK's text.
                        c.message = format!(
                            "waiting for every ready Envoy to serve this route{}",
                            unreported(&s.unreported)
                        );
                    }
                }
            }
        }
        out
    }
}

/// The nodes a Pending message names, if any: " (no report from node node-b)".
fn unreported(nodes: &BTreeSet<String>) -> String {
    if nodes.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let noun = if names.len() == 1 { "node" } else { "nodes" };
    format!(" (no report from {noun} {})", names.join(", "))
}

fn gate_programmed(conditions: &mut [Condition], reason: &str, message: &str) {
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == "Programmed")
        && c.is_true()
    {
        c.status = "False".into();
        c.reason = reason.into();
        c.message = message.into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::set_condition;
    use crate::status::tests::plan;

    fn web() -> ObjectRef {
        ObjectRef::new("infra", "web")
    }

    fn only(keys: &[&str]) -> Pending {
        Pending::Only(keys.iter().map(|k| k.to_string()).collect())
    }

    #[test]
    fn acked_is_as_planned() {
        let p = plan();
        assert_eq!(p.gated(|_| Served::whole(AckState::Acked)), p);
    }

    #[test]
    fn pending_holds_programmed_counts_and_route_acceptance() {
        let g = plan().gated(|gw| {
            if *gw == web() {
                Served::whole(AckState::Pending)
            } else {
                Served::whole(AckState::Acked)
            }
        });
        let gw = &g.gateways[&web()];
        let programmed = condition(&gw.conditions, "Programmed").unwrap();
        assert_eq!(
            (programmed.status.as_str(), programmed.reason.as_str()),
            ("False", "Pending")
        );
        assert!(condition(&gw.conditions, "Accepted").unwrap().is_true());
        assert_eq!(gw.listeners[0].attached_routes, 0);
        let route = &g.http_routes[&ObjectRef::new("apps", "r")];
        assert_eq!(route.parents[0].conditions[0].reason, "Pending");
        assert!(
            route.parents[1].conditions[0].is_true(),
            "other Gateway untouched"
        );
    }

    #[test]
    fn a_route_being_served_is_not_held_back_by_another_one_changing() {
        let g = plan().gated(|_| Served {
            gateway: AckState::Acked,
            pending: only(&["HTTPRoute/apps/s"]),
            unreported: BTreeSet::new(),
        });
        let gw = &g.gateways[&web()];
        assert!(condition(&gw.conditions, "Programmed").unwrap().is_true());
        assert_eq!(
            gw.listeners[0].attached_routes, 2,
            "r and t served, s pending"
        );
        let route = &g.http_routes[&ObjectRef::new("apps", "r")];
        assert!(route.parents[0].conditions[0].is_true());

        let g = plan().gated(|_| Served {
            gateway: AckState::Acked,
            pending: only(&["HTTPRoute/apps/r"]),
            unreported: BTreeSet::new(),
        });
        let route = &g.http_routes[&ObjectRef::new("apps", "r")];
        assert_eq!(route.parents[0].conditions[0].reason, "Pending");
        // The same name of another kind is another route.
        let g = plan().gated(|_| Served {
            gateway: AckState::Acked,
            pending: only(&["GRPCRoute/apps/r"]),
            unreported: BTreeSet::new(),
        });
        assert!(g.http_routes[&ObjectRef::new("apps", "r")].parents[0].conditions[0].is_true());
    }

    #[test]
    fn routes_keep_their_acceptance_while_the_gateways_listeners_change() {
        let g = plan().gated(|_| Served {
            gateway: AckState::Pending,
            pending: only(&[]),
            unreported: BTreeSet::new(),
        });
        let gw = &g.gateways[&web()];
        assert_eq!(
            condition(&gw.conditions, "Programmed").unwrap().reason,
            "Pending"
        );
        assert_eq!(gw.listeners[0].attached_routes, 3);
        assert!(g.http_routes[&ObjectRef::new("apps", "r")].parents[0].conditions[0].is_true());
    }

    #[test]
    fn unserved_gateways_are_not_gated() {
        let mut p = plan();
        let gw = p.gateways.get_mut(&web()).unwrap();
        set_condition(
            &mut gw.conditions,
            Condition::new("Programmed", false, "Invalid", "no listener", 2),
        );
        assert_eq!(p.gated(|_| Served::whole(AckState::Pending)), p);
    }

    #[test]
    fn nacked_carries_envoys_message() {
        let g = plan().gated(|_| Served::whole(AckState::Nacked("duplicate domain".into())));
        let gw = &g.gateways[&web()];
        let programmed = condition(&gw.conditions, "Programmed").unwrap();
        assert_eq!(programmed.reason, "Invalid");
        assert!(programmed.message.contains("duplicate domain"));
        let l = condition(&gw.listeners[0].conditions, "Programmed").unwrap();
        assert_eq!(l.reason, "Invalid");
        let route = &g.http_routes[&ObjectRef::new("apps", "r")];
        assert_eq!(route.parents[0].conditions[0].reason, "Pending");
    }

    #[test]
    fn a_node_that_takes_traffic_without_reporting_is_named() {
        let g = plan().gated(|_| Served {
            unreported: BTreeSet::from(["node-b".to_string()]),
            ..Served::whole(AckState::Pending)
        });
        let gw = &g.gateways[&web()];
        let programmed = condition(&gw.conditions, "Programmed").unwrap();
        assert_eq!(programmed.reason, "Pending");
        assert!(
            programmed.message.ends_with("(no report from node node-b)"),
            "{}",
            programmed.message
        );
        let route = &g.http_routes[&ObjectRef::new("apps", "r")];
        assert!(
            route.parents[0].conditions[0]
                .message
                .ends_with("(no report from node node-b)")
        );
    }
}
