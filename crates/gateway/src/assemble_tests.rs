//! [`assemble`]: the override order, row by row, and the per-object gate.

use super::*;
use crate::status::tests::plan;
use crate::status::{Condition, set_condition};

fn web() -> ObjectRef {
    ObjectRef::new("infra", "web")
}

fn route_r() -> ObjectRef {
    ObjectRef::new("apps", "r")
}

fn only(keys: &[&str]) -> Pending {
    Pending::Only(keys.iter().map(|k| k.to_string()).collect())
}

fn nacked() -> AckState {
    AckState::Nacked(Rejection::new(
        "node-b",
        "RDS version 0123456789ab: duplicate domain",
    ))
}

fn given_addresses(missing: Option<&str>) -> Addresses {
    let a = Assignment {
        addresses: vec![GatewayStatusAddress {
            type_: "IPAddress".into(),
            value: "10.0.0.7".into(),
            routability: Some(String::new()),
        }],
        missing: missing.map(str::to_string),
        unusable: false,
        assigned: None,
    };
    Addresses::LoadBalancer(BTreeMap::from([(web(), a)]))
}

/// The load balancer gave 10.0.0.7, not the requested address.
fn given_unusable_address() -> Addresses {
    let Addresses::LoadBalancer(mut by_gateway) = given_addresses(Some("not 10.9.9.9")) else {
        unreachable!()
    };
    by_gateway.get_mut(&web()).unwrap().unusable = true;
    Addresses::LoadBalancer(by_gateway)
}

/// (Gateway Programmed reason, listener Programmed reason, route Accepted reason)
/// on web, after assembling with the whole Gateway in `ack`.
fn reasons(
    plan: &StatusPlan,
    ack: &AckState,
    addresses: &Addresses,
) -> (gateway::Reason, listener::Reason, route::Reason) {
    let out = assemble(plan, |_| Served::whole(ack.clone()), addresses);
    let gw = &out.gateways[&web()];
    let g = condition(&gw.conditions, gateway::Type::Programmed).unwrap();
    let l = condition(&gw.listeners[0].conditions, listener::Type::Programmed).unwrap();
    let r = &out.http_routes[&route_r()].parents[0].conditions[0];
    assert_eq!(g.ok, g.reason == gateway::Reason::Programmed, "{g:?}");
    assert_eq!(l.ok, l.reason == listener::Reason::Programmed, "{l:?}");
    assert_eq!(r.ok, r.reason == route::Reason::Accepted, "{r:?}");
    (g.reason, l.reason, r.reason)
}

#[test]
fn the_override_order_for_a_served_gateway() {
    use gateway::Reason as G;
    use listener::Reason as L;
    use route::Reason as R;
    let none = Addresses::Planned;
    let assigned = given_addresses(None);
    let missing = given_addresses(Some("waiting for a load balancer"));
    let unusable = given_unusable_address();
    let table = [
        (
            AckState::Acked,
            &none,
            (G::Programmed, L::Programmed, R::Accepted),
        ),
        (
            AckState::Acked,
            &assigned,
            (G::Programmed, L::Programmed, R::Accepted),
        ),
        (
            AckState::Acked,
            &missing,
            (G::AddressNotAssigned, L::Programmed, R::Accepted),
        ),
        (
            AckState::Pending,
            &none,
            (G::Pending, L::Pending, R::Pending),
        ),
        (
            AckState::Pending,
            &assigned,
            (G::Pending, L::Pending, R::Pending),
        ),
        (
            AckState::Pending,
            &missing,
            (G::AddressNotAssigned, L::Pending, R::Pending),
        ),
        (nacked(), &none, (G::Invalid, L::Invalid, R::Pending)),
        (nacked(), &assigned, (G::Invalid, L::Invalid, R::Pending)),
        (nacked(), &missing, (G::Invalid, L::Invalid, R::Pending)),
        (
            AckState::Acked,
            &unusable,
            (G::AddressNotUsable, L::Programmed, R::Accepted),
        ),
        (
            AckState::Pending,
            &unusable,
            (G::AddressNotUsable, L::Pending, R::Pending),
        ),
        (nacked(), &unusable, (G::Invalid, L::Invalid, R::Pending)),
    ];
    for (ack, addresses, want) in table {
        assert_eq!(
            reasons(&plan(), &ack, addresses),
            want,
            "{ack:?} {addresses:?}"
        );
    }
}

#[test]
fn a_gateway_planned_not_programmed_stays_as_planned_whatever_else_holds() {
    for planned in [gateway::Reason::Invalid, gateway::Reason::AddressNotUsable] {
        let mut p = plan();
        let gw = p.gateways.get_mut(&web()).unwrap();
        let c = Condition::new(gateway::Type::Programmed, false, planned, "planned", 2);
        set_condition(&mut gw.conditions, c);
        for ack in [AckState::Acked, AckState::Pending, nacked()] {
            assert_eq!(
                assemble(&p, |_| Served::whole(ack.clone()), &Addresses::Planned),
                p
            );
            let missing = given_addresses(Some("no Service"));
            let out = assemble(&p, |_| Served::whole(ack.clone()), &missing);
            let gw = &out.gateways[&web()];
            assert_eq!(gw.addresses.len(), 1, "addresses all the same");
            assert_eq!(
                (gw.conditions.clone(), gw.listeners.clone()),
                (
                    p.gateways[&web()].conditions.clone(),
                    p.gateways[&web()].listeners.clone()
                ),
                "{planned:?} {ack:?}"
            );
            assert_eq!(out.http_routes, p.http_routes, "routes as planned");
        }
    }
}

#[test]
fn messages_say_why() {
    let out = assemble(
        &plan(),
        |_| Served::whole(nacked()),
        &given_addresses(Some("x")),
    );
    let g = condition(&out.gateways[&web()].conditions, gateway::Type::Programmed).unwrap();
    assert_eq!(
        g.message,
        "Envoy on node node-b rejected the configuration: RDS version 0123456789ab: duplicate domain"
    );
    let out = assemble(
        &plan(),
        |_| Served::whole(AckState::Acked),
        &given_addresses(Some("no LB")),
    );
    let gw = &out.gateways[&web()];
    let g = condition(&gw.conditions, gateway::Type::Programmed).unwrap();
    assert_eq!((g.message.as_str(), g.observed_generation), ("no LB", 2));
    assert_eq!(gw.addresses[0].value, "10.0.0.7");
}

#[test]
fn a_gateway_the_load_balancer_does_not_know_has_no_address() {
    let lb = Addresses::LoadBalancer(BTreeMap::new());
    let out = assemble(&plan(), |_| Served::whole(AckState::Acked), &lb);
    let gw = &out.gateways[&web()];
    let g = condition(&gw.conditions, gateway::Type::Programmed).unwrap();
    assert_eq!(g.reason, gateway::Reason::AddressNotAssigned);
    assert!(gw.addresses.is_empty());
}

#[test]
fn acked_is_as_planned() {
    let p = plan();
    assert_eq!(
        assemble(&p, |_| Served::whole(AckState::Acked), &Addresses::Planned),
        p
    );
}

#[test]
fn pending_holds_programmed_counts_and_route_acceptance_on_that_gateway_only() {
    let g = assemble(
        &plan(),
        |gw| {
            if *gw == web() {
                Served::whole(AckState::Pending)
            } else {
                Served::whole(AckState::Acked)
            }
        },
        &Addresses::Planned,
    );
    let gw = &g.gateways[&web()];
    assert!(
        condition(&gw.conditions, gateway::Type::Accepted)
            .unwrap()
            .ok
    );
    assert_eq!(gw.listeners[0].attached_routes, 0);
    let route = &g.http_routes[&route_r()];
    assert_eq!(
        route.parents[0].conditions[0].reason,
        route::Reason::Pending
    );
    assert!(route.parents[1].conditions[0].ok, "other Gateway untouched");
}

fn served_but(pending: &[&str]) -> StatusPlan {
    let served = Served {
        gateway: AckState::Acked,
        pending: only(pending),
        unreported: BTreeSet::new(),
        refused: Default::default(),
    };
    assemble(&plan(), |_| served.clone(), &Addresses::Planned)
}

#[test]
fn a_route_being_served_is_not_held_back_by_another_one_changing() {
    let g = served_but(&["HTTPRoute/apps/s"]);
    let gw = &g.gateways[&web()];
    assert!(
        condition(&gw.conditions, gateway::Type::Programmed)
            .unwrap()
            .ok
    );
    assert_eq!(
        gw.listeners[0].attached_routes, 2,
        "r and t served, s pending"
    );
    assert!(g.http_routes[&route_r()].parents[0].conditions[0].ok);

    let g = served_but(&["HTTPRoute/apps/r"]);
    let r = &g.http_routes[&route_r()].parents[0].conditions[0];
    assert_eq!(r.reason, route::Reason::Pending);
    // The same name of another kind is another route.
    let g = served_but(&["GRPCRoute/apps/r"]);
    assert!(g.http_routes[&route_r()].parents[0].conditions[0].ok);
}

#[test]
fn a_route_an_envoy_refused_says_who_and_envoys_words() {
    let served = Served {
        gateway: AckState::Acked,
        pending: only(&["HTTPRoute/apps/r"]),
        unreported: BTreeSet::new(),
        refused: [(
            "HTTPRoute/apps/r".to_string(),
            Rejection::new("node-b", "regex too big"),
        )]
        .into(),
    };
    let g = assemble(&plan(), |_| served.clone(), &Addresses::Planned);
    let r = &g.http_routes[&route_r()].parents[0].conditions[0];
    assert_eq!(r.reason, route::Reason::UnsupportedValue);
    assert_eq!(
        r.message,
        "Envoy on node node-b refused this route's configuration, so the route is served as it was: regex too big"
    );
}

#[test]
fn routes_keep_their_acceptance_while_the_gateways_listeners_change() {
    let served = Served {
        gateway: AckState::Pending,
        pending: only(&[]),
        unreported: BTreeSet::new(),
        refused: Default::default(),
    };
    let g = assemble(&plan(), |_| served.clone(), &Addresses::Planned);
    let gw = &g.gateways[&web()];
    let programmed = condition(&gw.conditions, gateway::Type::Programmed).unwrap();
    assert_eq!(programmed.reason, gateway::Reason::Pending);
    assert_eq!(gw.listeners[0].attached_routes, 3);
    assert!(g.http_routes[&route_r()].parents[0].conditions[0].ok);
}

#[test]
fn a_node_that_takes_traffic_without_reporting_is_named() {
    let served = Served {
        unreported: BTreeSet::from(["node-b".to_string()]),
        ..Served::whole(AckState::Pending)
    };
    let g = assemble(&plan(), |_| served.clone(), &Addresses::Planned);
    let gw = &g.gateways[&web()];
    let programmed = condition(&gw.conditions, gateway::Type::Programmed).unwrap();
    assert_eq!(programmed.reason, gateway::Reason::Pending);
    let named = "(no report from node node-b)";
    assert!(
        programmed.message.ends_with(named),
        "{}",
        programmed.message
    );
    let r = &g.http_routes[&route_r()].parents[0].conditions[0];
    assert!(r.message.ends_with(named), "{}", r.message);
}

/// A joining fleet's reports do not each change every Gateway's status: past
/// a few, the missing nodes are counted, not named, so the message (and the
/// status) stays the same while the rest report.
#[test]
fn many_unreported_nodes_are_counted_not_named() {
    let message = |missing: usize| {
        let served = Served {
            unreported: (0..missing).map(|n| format!("node-{n:03}")).collect(),
            ..Served::whole(AckState::Pending)
        };
        let g = assemble(&plan(), |_| served.clone(), &Addresses::Planned);
        let gw = &g.gateways[&web()];
        let programmed = condition(&gw.conditions, gateway::Type::Programmed).unwrap();
        assert_eq!(programmed.reason, gateway::Reason::Pending);
        let route = &g.http_routes[&route_r()].parents[0].conditions[0];
        (programmed.message.clone(), route.message.clone())
    };
    let many = message(99);
    for m in [&many.0, &many.1] {
        assert!(!m.contains("node-0"), "{m}");
        assert!(m.contains("more than 3 nodes"), "{m}");
    }
    assert_eq!(message(4), many, "4 and 99 missing read the same");
    let few = message(3);
    for m in [&few.0, &few.1] {
        assert!(
            m.ends_with("(no report from nodes node-000, node-001, node-002)"),
            "{m}"
        );
    }
}
