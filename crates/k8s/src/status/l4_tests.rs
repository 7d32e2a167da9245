//! TLSRoute, TCPRoute and UDPRoute status: written like HTTPRoute's, from the
//! plan's maps of those kinds, at the version each kind is served at.
//!
//! The plan entries are given here rather than translated, so these scripts test
//! the writer alone.

use super::compute::{Computed, StatusInputs, compute};
use super::patch::{StatusKind, StatusPatch};
use super::test_support::{
    OURS, THEIRS, apply_all, at, find, mk_class, mk_doc, mk_gateway, mk_inputs, mk_listener,
    mk_store, mk_world, over_store,
};
use crate::ServedVersions;
use aether_gateway::status::{
    Condition, Identity, ParentReference, RouteParentStatus, RouteStatus,
};
use aether_gateway::vocabulary::route::{Reason, Type};
use aether_gateway::{AckState, Store};
use aether_ir::ObjectRef;
use serde_json::{Value, json};

/// Our class, Gateway `infra/l4` with a TCP, a UDP and a TLS passthrough listener,
/// and a route in `apps` on each.
fn l4_world() -> String {
    mk_world(&[
        mk_class(r#"{name: aether, generation: 1, resourceVersion: "1"}"#),
        mk_gateway(
            r#"{name: l4, namespace: infra, generation: 1, resourceVersion: "2"}"#,
            &[
                mk_listener("tcp", 53, "TCP", ""),
                mk_listener("udp", 53, "UDP", ""),
                mk_listener("tls", 443, "TLS", "tls: {mode: Passthrough}, "),
            ],
        ),
        mk_dns_route("TCPRoute", "tcp", 2, "3"),
        mk_dns_route("UDPRoute", "udp", 3, "4"),
        mk_doc(
            "TLSRoute",
            r#"{name: pass, namespace: apps, generation: 4, resourceVersion: "5"}"#,
            "{parentRefs: [{name: l4, namespace: infra, sectionName: tls}], \
             hostnames: [tls.example.com], rules: [{backendRefs: [{name: tls, port: 443}]}]}",
        ),
    ])
}

/// Route `apps/dns-<section>` of `kind`, on listener `section` of Gateway l4, to
/// Service `dns` port 53.
fn mk_dns_route(kind: &str, section: &str, generation: i64, resource_version: &str) -> String {
    mk_doc(
        kind,
        &format!(
            r#"{{name: dns-{section}, namespace: apps, generation: {generation}, resourceVersion: "{resource_version}"}}"#
        ),
        &format!(
            "{{parentRefs: [{{name: l4, namespace: infra, sectionName: {section}}}], \
             rules: [{{backendRefs: [{{name: dns, port: 53}}]}}]}}"
        ),
    )
}

/// One parent entry of ours on Gateway infra/l4, Accepted.
fn mk_planned(section: &str, generation: i64) -> std::sync::Arc<RouteStatus> {
    std::sync::Arc::new(RouteStatus {
        parents: vec![std::sync::Arc::new(RouteParentStatus {
            gateway: ObjectRef::new("infra", "l4"),
            parent_ref: ParentReference {
                group: "gateway.networking.k8s.io".into(),
                kind: "Gateway".into(),
                namespace: Some("infra".into()),
                name: "l4".into(),
                section_name: Some(section.into()),
                port: None,
            }
            .into(),
            controller_name: OURS.into(),
            conditions: vec![
                Condition::new(Type::Accepted, true, Reason::Accepted, "", generation),
                Condition::new(
                    Type::ResolvedRefs,
                    true,
                    Reason::ResolvedRefs,
                    "",
                    generation,
                ),
            ],
        })],
        of: Identity {
            uid: None,
            generation,
        },
    })
}

fn parents(body: &Value) -> Vec<(String, String)> {
    body["status"]["parents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let controller = p["controllerName"].as_str().unwrap().to_string();
            let section = p["parentRef"]["sectionName"]
                .as_str()
                .unwrap_or("")
                .to_string();
            (controller, section)
        })
        .collect()
}

#[test]
fn l4_routes_get_status_at_their_served_version_once() {
    let mut store = mk_store(&l4_world());
    let inputs = given_an_older_cluster_and_our_entry_planned_on_each(&store);

    let got = compute(&inputs, &at(100));
    for (kind, name, version, section, generation) in [
        (StatusKind::TcpRoute, "dns-tcp", "v1alpha2", "tcp", 2),
        (StatusKind::UdpRoute, "dns-udp", "v1", "udp", 3),
        (StatusKind::TlsRoute, "pass", "v1alpha3", "tls", 4),
    ] {
        let p = find(&got.patches, kind, name);
        then_written_at(p, version);
        then_ours_alone_accepted(p, section, generation);
    }

    // Written: nothing more to write for any of them.
    apply_all(&mut store, &got.patches);
    then_no_route_is_written(&compute(&over_store(store, &inputs), &at(200)));
}

fn key(name: &str) -> ObjectRef {
    ObjectRef::new("apps", name)
}

/// Our entry planned on each of the three routes, on an older cluster: TCPRoute
/// served at v1alpha2 only, TLSRoute at v1alpha3.
fn given_an_older_cluster_and_our_entry_planned_on_each(store: &Store) -> StatusInputs {
    let mut inputs = mk_inputs(store.clone(), AckState::Acked);
    let plan = &mut inputs.plan;
    std::sync::Arc::make_mut(&mut plan.tcp_routes).insert(key("dns-tcp"), mk_planned("tcp", 2));
    std::sync::Arc::make_mut(&mut plan.udp_routes).insert(key("dns-udp"), mk_planned("udp", 3));
    std::sync::Arc::make_mut(&mut plan.tls_routes).insert(key("pass"), mk_planned("tls", 4));
    inputs.served = ServedVersions::choose([
        ("v1", "GatewayClass"),
        ("v1", "Gateway"),
        ("v1alpha2", "TCPRoute"),
        ("v1", "UDPRoute"),
        ("v1alpha3", "TLSRoute"),
        ("v1alpha2", "TLSRoute"),
    ]);
    inputs
}

/// An apply of `version`, with the resourceVersion precondition.
fn then_written_at(p: &StatusPatch, version: &str) {
    let kind = p.kind;
    assert_eq!(p.version(), version, "{kind}");
    assert_eq!(
        p.body["apiVersion"],
        json!(format!("gateway.networking.k8s.io/{version}"))
    );
    assert_eq!(p.body["kind"], json!(kind.as_str()));
    assert!(
        p.body["metadata"]["resourceVersion"].is_string(),
        "precondition"
    );
}

/// Our entry alone, on `section`, Accepted at `generation`.
fn then_ours_alone_accepted(p: &StatusPatch, section: &str, generation: i64) {
    assert_eq!(
        parents(&p.body),
        vec![(OURS.to_string(), section.to_string())]
    );
    let accepted = &p.body["status"]["parents"][0]["conditions"][0];
    assert_eq!(accepted["type"], "Accepted");
    assert_eq!(accepted["observedGeneration"], generation);
}

fn then_no_route_is_written(again: &Computed) {
    let routes: Vec<_> = again
        .patches
        .iter()
        .filter(|p| StatusKind::ROUTES.contains(&p.kind))
        .map(|p| (p.kind, p.object.name.clone()))
        .collect();
    assert!(routes.is_empty(), "{routes:?}");
}

#[test]
fn an_l4_route_the_plan_drops_loses_our_entry_and_keeps_theirs() {
    let mut store = mk_store(&l4_world());
    let mut inputs = mk_inputs(store.clone(), AckState::Acked);
    std::sync::Arc::make_mut(&mut inputs.plan.udp_routes)
        .insert(key("dns-udp"), mk_planned("udp", 3));
    apply_all(&mut store, &compute(&inputs, &at(100)).patches);
    // Another controller's entry beside ours, then the route leaves Gateway l4.
    let mut route = store
        .get::<gateway_api::apis::standard::udproutes::UdpRoute>("apps", "dns-udp")
        .unwrap()
        .clone();
    let mut theirs = route.status.as_ref().unwrap().parents[0].clone();
    theirs.controller_name = THEIRS.into();
    theirs.parent_ref.name = "other".into();
    route.status.as_mut().unwrap().parents.insert(0, theirs);
    route.spec.parent_refs = Some(vec![]);
    store.insert(route);
    std::sync::Arc::make_mut(&mut inputs.plan.udp_routes).remove(&key("dns-udp"));

    let got = compute(&over_store(store, &inputs), &at(200));
    let p = find(&got.patches, StatusKind::UdpRoute, "dns-udp");
    assert_eq!(
        parents(&p.body),
        vec![(THEIRS.to_string(), "udp".to_string())]
    );
}
