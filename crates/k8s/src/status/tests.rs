//! Patch computation as event scripts: translate a small world, compute, apply the
//! bodies the way the API server would, change something, compute again.

use super::compute::{StatusInputs, compute};
use super::patch::StatusKind;
use super::test_support::{
    OURS, THEIRS, apply_all, at, find, mk_class, mk_doc, mk_gateway, mk_inputs, mk_store, mk_world,
    web_world,
};
use aether_gateway::{AckState, Store};
use aether_testkit::parent_controllers;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// Every condition list anywhere in a JSON value.
fn conditions(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                if k == "conditions" {
                    out.extend(child.as_array().unwrap().iter().cloned());
                } else {
                    conditions(child, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|c| conditions(c, out)),
        _ => {}
    }
}

fn condition<'a>(list: &'a Value, type_: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {list}"))
}

#[test]
fn first_write_covers_every_object_with_observed_generation_everywhere() {
    let got = compute(
        &mk_inputs(mk_store(&web_world()), AckState::Acked),
        &at(100),
    );
    let kinds: Vec<(StatusKind, String)> = got
        .patches
        .iter()
        .map(|p| (p.kind, p.object.to_string()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (StatusKind::GatewayClass, "/aether".into()),
            (StatusKind::Gateway, "infra/web".into()),
            (StatusKind::HttpRoute, "apps/r".into()),
            (StatusKind::GrpcRoute, "apps/g".into()),
        ]
    );
    for p in &got.patches {
        let mut all = Vec::new();
        conditions(&p.body, &mut all);
        assert!(!all.is_empty(), "{} has conditions", p.object);
        for c in all {
            assert!(c["observedGeneration"].is_i64(), "{}: {c}", p.object);
            assert_eq!(c["lastTransitionTime"], "1970-01-01T00:01:40Z");
        }
    }
    let gw = find(&got.patches, StatusKind::Gateway, "web");
    assert_eq!(gw.body["apiVersion"], "gateway.networking.k8s.io/v1");
    assert_eq!(
        gw.body["metadata"],
        json!({"name": "web", "namespace": "infra"})
    );
    let listener = &gw.body["status"]["listeners"][0];
    assert_eq!(listener["name"], "http");
    assert_eq!(listener["attachedRoutes"], 2);
    assert_eq!(
        condition(&gw.body["status"]["conditions"], "Accepted")["observedGeneration"],
        2
    );
    // Routes carry their resourceVersion: the parents list is shared.
    let route = find(&got.patches, StatusKind::HttpRoute, "r");
    assert_eq!(route.body["metadata"]["resourceVersion"], "3");
    assert_eq!(route.based_on.as_deref(), Some("3"));
}

#[test]
fn gateway_class_lists_supported_features_sorted_by_name() {
    let mut inputs = mk_inputs(mk_store(&web_world()), AckState::Acked);
    inputs.supported_features.push("Gateway".into());
    let got = compute(&inputs, &at(100));
    let class = find(&got.patches, StatusKind::GatewayClass, "aether");
    assert_eq!(class.body["metadata"], json!({"name": "aether"}));
    assert_eq!(
        class.body["status"]["supportedFeatures"],
        json!([{"name": "GRPCRoute"}, {"name": "Gateway"}, {"name": "HTTPRoute"}])
    );
    let accepted = condition(&class.body["status"]["conditions"], "Accepted");
    assert_eq!(
        (&accepted["status"], &accepted["observedGeneration"]),
        (&json!("True"), &json!(3))
    );

    // A feature added later is a change; the same set again is not.
    let mut store = (*inputs.store).clone();
    apply_all(&mut store, &got.patches);
    let mut again = mk_inputs(store, AckState::Acked);
    again.supported_features = inputs.supported_features.clone();
    assert!(compute(&again, &at(200)).patches.is_empty());
    again
        .supported_features
        .push("HTTPRouteQueryParamMatching".into());
    let changed = compute(&again, &at(200));
    assert_eq!(changed.patches.len(), 1);
    assert_eq!(changed.patches[0].kind, StatusKind::GatewayClass);
}

#[test]
fn nothing_is_written_when_the_status_is_already_as_planned() {
    let mut store = mk_store(&web_world());
    let first = compute(&mk_inputs(store.clone(), AckState::Pending), &at(100));
    apply_all(&mut store, &first.patches);
    let again = compute(&mk_inputs(store.clone(), AckState::Pending), &at(500));
    assert!(again.patches.is_empty(), "{:?}", again.patches);
    assert_eq!(again.unchanged, 4);

    // Condition order on the object does not matter (a map keyed by type).
    let mut gw: Gateway = store.get::<Gateway>("infra", "web").unwrap().clone();
    gw.status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()
        .reverse();
    store.insert(gw);
    assert!(
        compute(&mk_inputs(store, AckState::Pending), &at(600))
            .patches
            .is_empty()
    );
}

#[test]
fn transition_time_is_stamped_only_when_a_status_flips() {
    let mut store = mk_store(&web_world());
    let pending = compute(&mk_inputs(store.clone(), AckState::Pending), &at(100));
    let gw = &find(&pending.patches, StatusKind::Gateway, "web").body["status"];
    assert_eq!(
        condition(&gw["conditions"], "Programmed")["status"],
        "False"
    );
    assert_eq!(
        condition(&gw["conditions"], "Programmed")["reason"],
        "Pending"
    );
    assert_eq!(gw["listeners"][0]["attachedRoutes"], 0);
    apply_all(&mut store, &pending.patches);

    let acked = compute(&mk_inputs(store, AckState::Acked), &at(200));
    let gw = &find(&acked.patches, StatusKind::Gateway, "web").body["status"];
    let programmed = condition(&gw["conditions"], "Programmed");
    assert_eq!(programmed["status"], "True");
    assert_eq!(programmed["lastTransitionTime"], "1970-01-01T00:03:20Z");
    let accepted = condition(&gw["conditions"], "Accepted");
    assert_eq!(accepted["lastTransitionTime"], "1970-01-01T00:01:40Z");
    assert_eq!(gw["listeners"][0]["attachedRoutes"], 2);
    let route = &find(&acked.patches, StatusKind::GrpcRoute, "g").body["status"];
    let accepted = condition(&route["parents"][0]["conditions"], "Accepted");
    assert_eq!(
        (&accepted["status"], &accepted["lastTransitionTime"]),
        (&json!("True"), &json!("1970-01-01T00:03:20Z"))
    );
}

fn with_their_parent(mut store: Store) -> Store {
    let mut route: HttpRoute = store.get::<HttpRoute>("apps", "r").unwrap().clone();
    route.status = Some(
        serde_json::from_value(json!({"parents": [{
            "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                          "namespace": "infra", "name": "elsewhere"},
            "controllerName": THEIRS,
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                            "message": "theirs", "observedGeneration": 4,
                            "lastTransitionTime": "2020-01-01T00:00:00Z"}],
        }]}))
        .unwrap(),
    );
    store.insert(route);
    store
}

#[test]
fn other_controllers_parent_entries_are_sent_back_untouched() {
    let store = with_their_parent(mk_store(&web_world()));
    let theirs = serde_json::to_value(&store.get::<HttpRoute>("apps", "r").unwrap().status)
        .unwrap()["parents"][0]
        .clone();
    let got = compute(&mk_inputs(store, AckState::Acked), &at(100));
    let route = find(&got.patches, StatusKind::HttpRoute, "r");
    assert_eq!(
        parent_controllers(&route.body["status"]),
        vec![
            (THEIRS.into(), "elsewhere".into()),
            (OURS.into(), "web".into())
        ],
        "their entry first and only ours added (`elsewhere` is not our Gateway)"
    );
    assert_eq!(route.body["status"]["parents"][0], theirs);
    let ours = &route.body["status"]["parents"][1];
    assert_eq!(
        ours["parentRef"],
        json!({"group": "gateway.networking.k8s.io", "kind": "Gateway",
               "namespace": "infra", "name": "web"})
    );
    let resolved = condition(&ours["conditions"], "ResolvedRefs");
    assert_eq!(resolved["reason"], "BackendNotFound");
}

#[test]
fn a_parent_that_goes_away_loses_our_entry_and_keeps_theirs() {
    let mut store = with_their_parent(mk_store(&web_world()));
    let first = compute(&mk_inputs(store.clone(), AckState::Acked), &at(100));
    apply_all(&mut store, &first.patches);

    // The route stops naming our Gateway.
    let mut route: HttpRoute = store.get::<HttpRoute>("apps", "r").unwrap().clone();
    route.spec.parent_refs.as_mut().unwrap().remove(0);
    route.metadata.generation = Some(6);
    store.insert(route);
    let inputs = mk_inputs(store.clone(), AckState::Acked);
    assert!(
        !inputs
            .plan
            .http_routes
            .contains_key(&aether_ir::ObjectRef::new("apps", "r"))
    );
    let got = compute(&inputs, &at(200));
    let route = find(&got.patches, StatusKind::HttpRoute, "r");
    assert_eq!(
        parent_controllers(&route.body["status"]),
        vec![(THEIRS.into(), "elsewhere".into())]
    );
    assert_eq!(route.body["metadata"]["resourceVersion"], "30");

    // Once removed, a route with none of our entries is left alone.
    apply_all(&mut store, &got.patches);
    let after = compute(&mk_inputs(store, AckState::Acked), &at(300));
    assert!(
        after
            .patches
            .iter()
            .all(|p| p.kind != StatusKind::HttpRoute),
        "{:?}",
        after.patches
    );
}

#[test]
fn a_removed_listener_and_a_changed_generation_are_changes() {
    let mut store = mk_store(&web_world());
    let first = compute(&mk_inputs(store.clone(), AckState::Acked), &at(100));
    apply_all(&mut store, &first.patches);
    let mut gw: Gateway = store.get::<Gateway>("infra", "web").unwrap().clone();
    gw.metadata.generation = Some(7);
    store.insert(gw);
    let got = compute(&mk_inputs(store, AckState::Acked), &at(200));
    let gw = find(&got.patches, StatusKind::Gateway, "web");
    let mut all = Vec::new();
    conditions(&gw.body["status"], &mut all);
    assert!(all.iter().all(|c| c["observedGeneration"] == 7));
    // The flip of observedGeneration is not a transition: times are kept.
    assert!(
        all.iter()
            .all(|c| c["lastTransitionTime"] == "1970-01-01T00:01:40Z")
    );
}

/// A write that says only that a route waits for its Envoys, where no entry
/// of ours speaks of its current generation, is marked for the status loop
/// to hold back; one that replaces `Accepted` at the route's generation, or
/// carries other news (a missing backend), is not.
#[test]
fn only_a_pending_write_over_nothing_of_this_generation_may_wait() {
    let mut store = mk_store(&web_world());
    let fresh = compute(&mk_inputs(store.clone(), AckState::Pending), &at(100));
    assert!(
        find(&fresh.patches, StatusKind::GrpcRoute, "g").only_pending,
        "a new route, waiting: nothing of ours says anything of it yet"
    );
    assert!(
        !find(&fresh.patches, StatusKind::HttpRoute, "r").only_pending,
        "its backend is missing (ResolvedRefs=False): news to write at once"
    );
    assert!(!find(&fresh.patches, StatusKind::Gateway, "web").only_pending);

    let acked = compute(&mk_inputs(store.clone(), AckState::Acked), &at(200));
    assert!(!find(&acked.patches, StatusKind::GrpcRoute, "g").only_pending);
    apply_all(&mut store, &acked.patches);
    let behind = compute(&mk_inputs(store.clone(), AckState::Pending), &at(300));
    assert!(
        !find(&behind.patches, StatusKind::GrpcRoute, "g").only_pending,
        "Accepted at this generation, no longer served: at once"
    );

    let mut g: GrpcRoute = store.get::<GrpcRoute>("apps", "g").unwrap().clone();
    g.metadata.generation = Some(2);
    store.insert(g);
    let edited = compute(&mk_inputs(store, AckState::Pending), &at(400));
    assert!(
        find(&edited.patches, StatusKind::GrpcRoute, "g").only_pending,
        "edited: our entry speaks of generation 1 only"
    );
}

#[test]
fn objects_not_in_the_store_and_routes_not_ours_get_no_patch() {
    let mut inputs = mk_inputs(mk_store(&web_world()), AckState::Acked);
    std::sync::Arc::make_mut(&mut inputs.store).remove::<Gateway>("infra", "web");
    let mut route: HttpRoute = inputs.store.get::<HttpRoute>("apps", "r").unwrap().clone();
    route.metadata.name = Some("unrelated".into());
    route.spec.parent_refs = Some(vec![]);
    std::sync::Arc::make_mut(&mut inputs.store).insert(route);
    let got = compute(&inputs, &at(100));
    let names: Vec<String> = got.patches.iter().map(|p| p.object.name.clone()).collect();
    assert_eq!(names, vec!["aether", "r", "g"]);
}

#[test]
fn our_parents_fit_in_what_the_others_leave_of_the_32_entries() {
    let mut store = mk_store(&web_world());
    let mut route: HttpRoute = store.get::<HttpRoute>("apps", "r").unwrap().clone();
    let theirs: Vec<Value> = (0..32)
        .map(|i| {
            json!({
                "parentRef": {"name": format!("gw{i}")},
                "controllerName": THEIRS,
                "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                                "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"}],
            })
        })
        .collect();
    route.status = Some(serde_json::from_value(json!({"parents": theirs})).unwrap());
    store.insert(route);
    let got = compute(&mk_inputs(store, AckState::Acked), &at(100));
    // No room for ours: nothing to change, and never a 33-entry list.
    assert!(got.patches.iter().all(|p| p.kind != StatusKind::HttpRoute));
}

#[test]
fn a_thousand_gateways_converge_in_one_round() {
    let mut docs = vec![mk_class("{name: aether}")];
    for i in 0..1000 {
        let metadata = |name: &str| {
            format!(r#"{{name: {name}{i}, namespace: infra, resourceVersion: "{i}"}}"#)
        };
        docs.push(mk_gateway(
            &metadata("gw"),
            &["{name: http, port: 80, protocol: HTTP}".into()],
        ));
        docs.push(mk_doc(
            "HTTPRoute",
            &metadata("r"),
            &format!("{{parentRefs: [{{name: gw{i}}}]}}"),
        ));
    }
    let yaml = mk_world(&docs);
    let mut store = mk_store(&yaml);
    let begin = std::time::Instant::now();
    let first = compute(&mk_inputs(store.clone(), AckState::Acked), &at(100));
    let took = begin.elapsed();
    assert_eq!(first.patches.len(), 2001);
    apply_all(&mut store, &first.patches);
    let begin = std::time::Instant::now();
    let again = compute(&mk_inputs(store, AckState::Acked), &at(200));
    eprintln!(
        "1,000 Gateways + 1,000 routes: first compute {took:?}, no-op compute {:?} (with translate)",
        begin.elapsed()
    );
    assert!(again.patches.is_empty());
    assert_eq!(again.unchanged, 2001);
}

#[test]
fn a_plan_older_than_the_route_keeps_our_entry_and_a_deleted_gateway_loses_it() {
    // Our entry on `r` exists (written from a newer view, e.g. by the previous
    // leader), but this plan was translated before `r` existed.
    let mut store = mk_store(&web_world());
    let written = compute(&mk_inputs(store.clone(), AckState::Acked), &at(100));
    apply_all(&mut store, &written.patches);
    let mut older = store.clone();
    older.remove::<HttpRoute>("apps", "r");
    let lagging = StatusInputs {
        store: store.clone().into(),
        ..mk_inputs(older, AckState::Acked)
    };
    let got = compute(&lagging, &at(200));
    assert!(
        got.patches.iter().all(|p| p.kind != StatusKind::HttpRoute),
        "{:?}",
        got.patches
    );

    // The Gateway is deleted: no longer ours, so our entries go.
    store.remove::<Gateway>("infra", "web");
    let got = compute(&mk_inputs(store, AckState::Acked), &at(300));
    let route = find(&got.patches, StatusKind::HttpRoute, "r");
    assert!(parent_controllers(&route.body["status"]).is_empty());
}

#[test]
fn the_kinds_we_write_status_for_are_the_tables() {
    let ours: BTreeSet<aether_ir::Kind> = StatusKind::ALL.iter().map(|k| k.kind()).collect();
    let table: BTreeSet<aether_ir::Kind> = aether_ir::Kind::with_status().collect();
    assert_eq!(ours, table);
    let routes: Vec<_> = StatusKind::ROUTES
        .iter()
        .filter_map(|k| k.kind().route())
        .collect();
    assert_eq!(routes.len(), aether_ir::RouteKind::ALL.len());
}
