//! TLSRoute, TCPRoute and UDPRoute status: written like HTTPRoute's, from the
//! plan's maps of those kinds, at the version each kind is served at.
//!
//! The plan entries are given here rather than translated, so these scripts test
//! the writer alone.

use super::patch::{StatusKind, compute};
use super::tests::{OURS, THEIRS, apply_all, at, find, mk_inputs, mk_store};
use crate::ServedVersions;
use aether_gateway::AckState;
use aether_gateway::status::{
    Condition, Identity, ParentReference, RouteParentStatus, RouteStatus,
};
use aether_gateway::vocabulary::route::{Reason, Type};
use aether_ir::ObjectRef;
use serde_json::{Value, json};

const L4_WORLD: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: aether, generation: 1, resourceVersion: "1"}
spec: {controllerName: gateway.aether.io/edge}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: l4, namespace: infra, generation: 1, resourceVersion: "2"}
spec:
  gatewayClassName: aether
  listeners:
  - {name: tcp, port: 53, protocol: TCP, allowedRoutes: {namespaces: {from: All}}}
  - {name: udp, port: 53, protocol: UDP, allowedRoutes: {namespaces: {from: All}}}
  - {name: tls, port: 443, protocol: TLS, tls: {mode: Passthrough}, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: dns-tcp, namespace: apps, generation: 2, resourceVersion: "3"}
spec:
  parentRefs: [{name: l4, namespace: infra, sectionName: tcp}]
  rules: [{backendRefs: [{name: dns, port: 53}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {name: dns-udp, namespace: apps, generation: 3, resourceVersion: "4"}
spec:
  parentRefs: [{name: l4, namespace: infra, sectionName: udp}]
  rules: [{backendRefs: [{name: dns, port: 53}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: pass, namespace: apps, generation: 4, resourceVersion: "5"}
spec:
  parentRefs: [{name: l4, namespace: infra, sectionName: tls}]
  hostnames: [tls.example.com]
  rules: [{backendRefs: [{name: tls, port: 443}]}]
"#;

/// One parent entry of ours on Gateway infra/l4, Accepted.
fn mk_planned(section: &str, generation: i64) -> RouteStatus {
    RouteStatus {
        parents: vec![RouteParentStatus {
            parent_ref: ParentReference {
                group: "gateway.networking.k8s.io".into(),
                kind: "Gateway".into(),
                namespace: Some("infra".into()),
                name: "l4".into(),
                section_name: Some(section.into()),
                port: None,
            },
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
        }],
        of: Identity {
            uid: None,
            generation,
        },
    }
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
    let mut store = mk_store(L4_WORLD);
    let mut inputs = mk_inputs(store.clone(), AckState::Acked);
    let key = |name: &str| ObjectRef::new("apps", name);
    inputs
        .plan
        .tcp_routes
        .insert(key("dns-tcp"), mk_planned("tcp", 2));
    inputs
        .plan
        .udp_routes
        .insert(key("dns-udp"), mk_planned("udp", 3));
    inputs
        .plan
        .tls_routes
        .insert(key("pass"), mk_planned("tls", 4));
    // An older cluster: TCPRoute served at v1alpha2 only, TLSRoute at v1alpha3.
    inputs.served = ServedVersions::choose([
        ("v1", "GatewayClass"),
        ("v1", "Gateway"),
        ("v1alpha2", "TCPRoute"),
        ("v1", "UDPRoute"),
        ("v1alpha3", "TLSRoute"),
        ("v1alpha2", "TLSRoute"),
    ]);

    let got = compute(&inputs, &at(100));
    for (kind, name, version, section, generation) in [
        (StatusKind::TcpRoute, "dns-tcp", "v1alpha2", "tcp", 2),
        (StatusKind::UdpRoute, "dns-udp", "v1", "udp", 3),
        (StatusKind::TlsRoute, "pass", "v1alpha3", "tls", 4),
    ] {
        let p = find(&got.patches, kind, name);
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
        assert_eq!(
            parents(&p.body),
            vec![(OURS.to_string(), section.to_string())]
        );
        let accepted = &p.body["status"]["parents"][0]["conditions"][0];
        assert_eq!(accepted["type"], "Accepted");
        assert_eq!(accepted["observedGeneration"], generation);
    }

    // Written: nothing more to write for any of them.
    apply_all(&mut store, &got.patches);
    let again = compute(
        &super::patch::StatusInputs {
            store: store.into(),
            ..inputs.clone()
        },
        &at(200),
    );
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
    let mut store = mk_store(L4_WORLD);
    let mut inputs = mk_inputs(store.clone(), AckState::Acked);
    let key = ObjectRef::new("apps", "dns-udp");
    inputs
        .plan
        .udp_routes
        .insert(key.clone(), mk_planned("udp", 3));
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
    inputs.plan.udp_routes.remove(&key);

    let got = compute(
        &super::patch::StatusInputs {
            store: store.into(),
            ..inputs.clone()
        },
        &at(200),
    );
    let p = find(&got.patches, StatusKind::UdpRoute, "dns-udp");
    assert_eq!(
        parents(&p.body),
        vec![(THEIRS.to_string(), "udp".to_string())]
    );
}
