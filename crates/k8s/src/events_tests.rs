use super::*;
use aether_gateway::status::{GatewayStatus, ParentReference, RouteParentStatus, RouteStatus};
use aether_gateway::vocabulary::{gateway, route};

fn gw_with(programmed: (bool, gateway::Reason, &str)) -> StatusPlan {
    let mut plan = StatusPlan::default();
    plan.gateways.insert(
        ObjectRef::new("app", "gw"),
        GatewayStatus {
            conditions: vec![Condition::new(
                gateway::Type::Programmed,
                programmed.0,
                programmed.1,
                programmed.2,
                1,
            )],
            ..Default::default()
        },
    );
    plan
}

#[test]
fn a_condition_that_turns_false_is_one_warning_and_pending_is_none() {
    let ok = gw_with((true, gateway::Reason::Programmed, "programmed"));
    let pending = gw_with((false, gateway::Reason::Pending, "waiting"));
    let nack = gw_with((false, gateway::Reason::Invalid, "Envoy rejected it"));
    assert!(
        notices(Some(&ok), &pending).is_empty(),
        "Pending is no event"
    );
    let n = notices(Some(&pending), &nack);
    assert_eq!(n.len(), 1);
    assert_eq!((n[0].kind, n[0].reason.as_str()), ("Gateway", "Invalid"));
    assert_eq!(n[0].note, "Programmed: Envoy rejected it");
    assert!(
        notices(Some(&nack), &nack).is_empty(),
        "no repeat while it stays"
    );
    let other = gw_with((false, gateway::Reason::Invalid, "Envoy rejected another"));
    assert_eq!(
        notices(Some(&nack), &other).len(),
        1,
        "a new message is news"
    );
}

#[test]
fn a_refused_route_parent_is_a_warning_on_the_route() {
    let mut plan = StatusPlan::default();
    let parent = |ok, reason, message: &str| RouteParentStatus {
        parent_ref: ParentReference {
            group: "gateway.networking.k8s.io".into(),
            kind: "Gateway".into(),
            namespace: None,
            name: "gw".into(),
            section_name: None,
            port: None,
        }
        .into(),
        controller_name: CONTROLLER.into(),
        conditions: vec![Condition::new(
            route::Type::Accepted,
            ok,
            reason,
            message,
            2,
        )],
        gateway: ObjectRef::new("app", "gw"),
    };
    std::sync::Arc::make_mut(&mut plan.http_routes).insert(
        ObjectRef::new("app", "bad"),
        Arc::new(RouteStatus {
            parents: vec![std::sync::Arc::new(parent(
                false,
                route::Reason::UnsupportedValue,
                "Envoy refused it",
            ))],
            ..Default::default()
        }),
    );
    let n = notices(None, &plan);
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].kind, "HTTPRoute");
    assert_eq!(n[0].object, ObjectRef::new("app", "bad"));
    assert_eq!(n[0].reason, "UnsupportedValue");
}

#[test]
fn event_names_fit_whatever_the_object_name() {
    let long = [
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61),
    ]
    .join(".");
    let (mut r, n) = leader_elected("ns", "pod");
    r.name = Some(long);
    let name = event_name(&r, &n, 1);
    assert!(name.len() <= 253, "{}", name.len());
    assert_ne!(name, event_name(&r, &n, 2));
}
