//! Status keyed by object identity: a plan is written only to the object, at the
//! generation, it was computed for; bodies carry the uid read.

use super::compute::compute;
use super::patch::StatusKind;
use super::test_support::{at, mk_doc, mk_inputs, mk_store, mk_web_world};
use aether_gateway::{AckState, Store};
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;

/// [`mk_web_world`] with HTTPRoute `apps/r` on `web`, each object with a uid.
fn uid_world() -> String {
    mk_web_world(
        r#"{name: aether, generation: 1, uid: c-1, resourceVersion: "1"}"#,
        r#"{name: web, namespace: infra, generation: 2, uid: gw-1, resourceVersion: "2"}"#,
        &[mk_doc(
            "HTTPRoute",
            r#"{name: r, namespace: apps, generation: 3, uid: r-1, resourceVersion: "3"}"#,
            "{parentRefs: [{name: web, namespace: infra}]}",
        )],
    )
}

fn written(store_now: Store, store_planned: Store) -> Vec<(StatusKind, String)> {
    let mut inputs = mk_inputs(store_planned, AckState::Acked);
    inputs.store = store_now.into();
    compute(&inputs, &at(100))
        .patches
        .iter()
        .map(|p| (p.kind, p.object.to_string()))
        .collect()
}

#[test]
fn bodies_carry_the_uid_they_were_computed_against() {
    let inputs = mk_inputs(mk_store(&uid_world()), AckState::Acked);
    let got = compute(&inputs, &at(100)).patches;
    let uid = |kind| {
        got.iter().find(|p| p.kind == kind).unwrap().body["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(uid(StatusKind::GatewayClass), "c-1");
    assert_eq!(uid(StatusKind::Gateway), "gw-1");
    assert_eq!(uid(StatusKind::HttpRoute), "r-1");
}

#[test]
fn a_recreated_route_never_gets_the_deleted_ones_status() {
    let planned = mk_store(&uid_world());
    // Deleted and re-created under the same name: a new uid, generation 1.
    let mut now = planned.clone();
    let mut route = now.get::<HttpRoute>("apps", "r").unwrap().clone();
    route.metadata.uid = Some("r-2".into());
    route.metadata.generation = Some(1);
    route.metadata.resource_version = Some("9".into());
    now.insert(route);
    let got = written(now, planned);
    assert!(
        !got.contains(&(StatusKind::HttpRoute, "apps/r".into())),
        "the plan describes uid r-1: {got:?}"
    );
    assert!(got.contains(&(StatusKind::Gateway, "infra/web".into())));
}

#[test]
fn a_plan_older_than_the_object_waits_for_the_next() {
    let planned = mk_store(&uid_world());
    let mut now = planned.clone();
    let mut route = now.get::<HttpRoute>("apps", "r").unwrap().clone();
    route.metadata.generation = Some(4);
    now.insert(route);
    let mut gw = now.get::<Gateway>("infra", "web").unwrap().clone();
    gw.metadata.uid = Some("gw-2".into());
    now.insert(gw);
    let got = written(now, planned);
    assert_eq!(got, vec![(StatusKind::GatewayClass, "/aether".into())]);
}
