//! Kubernetes mode, route status (issue point 2) as written by `aether-edge agent` to
//! a real kube-apiserver: every way a parentRef or a backendRef can fail gets its own
//! reason, another controller's parent entry is left alone, ours goes when the
//! parentRef does, and every condition carries the object's current generation.
//!
//! One API server for all of it: the scenarios run in order, each building on the
//! routes the one before left (the Gateway's attachedRoutes count them all).

use crate::support::*;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use std::time::Duration;

const NS: &str = "app";
const OTHER_NS: &str = "other";
const OTHER_CONTROLLER: &str = "example.com/other-controller";
const SVC: &str = "{name: b0, port: 80}";
const HTTP: &str = "{name: gw, sectionName: http}";
const HOST: &str = "[a.example.com]";
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn every_route_status_case_gets_its_reason() {
    in_netns(async {
        let w = given_routes_and_an_agent().await;
        each_failure_gets_its_reason(&w).await;
        another_controllers_entry_survives_our_rewrite(&w).await;
        grpc_routes_get_one_entry_per_parent_ref(&w).await;
        a_late_reference_grant_resolves_the_cross_namespace_backend(&w).await;
        a_namespace_label_change_re_decides_allowed_routes(&w).await;
        our_entry_goes_with_its_parent_ref(&w).await;
        gateway_and_class_conditions_carry_their_generation(&w).await;
    });
}

/// The API server, the agent and its Envoy; fields drop in order, the server last.
struct World {
    client: kube::Client,
    _agent: KubeAgent,
    _envoy: Envoy,
    _backends: [Backend; 2],
    server: aether_testkit::ApiServer,
}

/// `(namespace, name, yaml, Accepted, ResolvedRefs)`: `None` for any.
type Case = (&'static str, &'static str, String, Expect, Expect);

/// An expected `(status, reason)`, `None` for any.
type Expect = Option<(String, String)>;

fn mk_gateways() -> String {
    let gw = mk_gateway(
        NS,
        "gw",
        &[
            "{name: http, protocol: HTTP, port: 80, hostname: \"*.example.com\", allowedRoutes: {namespaces: {from: Same}}}",
            "{name: tls, protocol: TLS, port: 443, hostname: tls.example.com, tls: {mode: Passthrough}}",
        ],
    );
    let class = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: other}}\nspec: {{controllerName: {OTHER_CONTROLLER}}}\n"
    );
    let theirs = mk_gateway_of("other", NS, "other-gw", &[HTTP_80]);
    [gw, class, theirs].join("---\n")
}

/// An HTTPRoute `name` in `ns` with one parentRef (YAML flow map) and one backendRef.
fn mk_http_route(ns: &str, name: &str, parent: &str, hostnames: &str, backend: &str) -> String {
    let spec = format!(
        "  hostnames: {hostnames}\n  parentRefs: [{parent}]\n  rules:\n  - backendRefs: [{backend}]\n"
    );
    mk_route("HTTPRoute", ns, name, &spec)
}

/// A case in [`NS`] on the `http` listener, failing (or not) by its backendRef.
fn mk_backend_case(name: &'static str, backend: &str, resolved: Expect) -> Case {
    let yaml = mk_http_route(NS, name, HTTP, HOST, backend);
    (NS, name, yaml, cond("True", "Accepted"), resolved)
}

/// A case refused by its parentRef (`Accepted=False/<reason>`).
fn mk_parent_case(ns: &'static str, name: &'static str, yaml: String, reason: &str) -> Case {
    (ns, name, yaml, cond("False", reason), None)
}

fn mk_cases() -> Vec<Case> {
    let other = format!("{{name: gw, namespace: {NS}, sectionName: http}}");
    let other_backend = "{name: b-other, port: 80}";
    let cross = format!("{{name: b-other, namespace: {OTHER_NS}, port: 80}}");
    let tls = mk_http_route(
        NS,
        "on-tls",
        "{name: gw, sectionName: tls}",
        "[tls.example.com]",
        SVC,
    );
    vec![
        mk_backend_case("good", SVC, cond("True", "ResolvedRefs")),
        mk_parent_case(
            NS,
            "no-section",
            mk_http_route(NS, "no-section", "{name: gw, sectionName: nope}", HOST, SVC),
            "NoMatchingParent",
        ),
        mk_parent_case(
            NS,
            "no-port",
            mk_http_route(NS, "no-port", "{name: gw, port: 9999}", HOST, SVC),
            "NoMatchingParent",
        ),
        mk_parent_case(
            NS,
            "no-host",
            mk_http_route(NS, "no-host", HTTP, "[a.example.org]", SVC),
            "NoMatchingListenerHostname",
        ),
        mk_parent_case(
            OTHER_NS,
            "other-ns",
            mk_http_route(OTHER_NS, "other-ns", &other, HOST, other_backend),
            "NotAllowedByListeners",
        ),
        mk_parent_case(NS, "on-tls", tls, "NotAllowedByListeners"),
        mk_backend_case(
            "missing-backend",
            "{name: nope, port: 80}",
            cond("False", "BackendNotFound"),
        ),
        mk_backend_case(
            "wrong-kind",
            "{group: \"\", kind: ConfigMap, name: b0}",
            cond("False", "InvalidKind"),
        ),
        mk_backend_case("cross-ns", &cross, cond("False", "RefNotPermitted")),
    ]
}

/// The other controller's entry on route `shared`, exactly as it writes it.
fn mk_their_entry() -> Value {
    json!({
        "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "other-gw"},
        "controllerName": OTHER_CONTROLLER,
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "theirs",
                        "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    })
}

/// The route's parent entries of our controller, as `(parentRef, Accepted, ResolvedRefs)`.
fn ours(route: &Value) -> Vec<(Value, Expect, Expect)> {
    route["status"]["parents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["controllerName"] == "gateway.aether.io/edge")
        .map(|p| {
            (
                p["parentRef"].clone(),
                status_reason(&p["conditions"], "Accepted"),
                status_reason(&p["conditions"], "ResolvedRefs"),
            )
        })
        .collect()
}

/// Every condition in `status` (and in listeners / our parents) observed `generation`.
fn then_generation_is_current(what: &str, obj: &Value) {
    let generation = &obj["metadata"]["generation"];
    let mut lists = vec![&obj["status"]["conditions"]];
    for key in ["listeners", "parents"] {
        for item in obj["status"][key].as_array().into_iter().flatten() {
            if key == "parents" && item["controllerName"] != "gateway.aether.io/edge" {
                continue;
            }
            lists.push(&item["conditions"]);
        }
    }
    let mut n = 0;
    for c in lists.into_iter().filter_map(Value::as_array).flatten() {
        n += 1;
        assert_eq!(
            &c["observedGeneration"], generation,
            "{what}: condition {} observedGeneration",
            c["type"]
        );
    }
    assert!(n > 0, "{what} has conditions: {}", obj["status"]);
}

/// Waits until HTTPRoute `ns/name` passes `check`, and returns what it made of it.
async fn then_route<T>(
    w: &World,
    (ns, name): (&str, &str),
    what: &str,
    check: impl Fn(&Value) -> Result<T, String>,
) -> T {
    until_object::<HttpRoute, _>(&w.client, ns, name, WAIT, what, check).await
}

async fn given_routes_and_an_agent() -> World {
    let logs = temp_dir("kube-route-status");
    let backends = [Backend::on(POD_IP, "b0"), Backend::on(POD_IP, "b-other")];
    let mut yaml = vec![
        base_yaml(&[NS, OTHER_NS]),
        backends[0].yaml(NS),
        backends[1].yaml(OTHER_NS),
        mk_gateways(),
    ];
    yaml.extend(mk_cases().into_iter().map(|c| c.2));
    yaml.push(mk_http_route(NS, "shared", HTTP, HOST, SVC));
    let server = given_cluster(&yaml).await;
    let agent = kube_agent(server.kubeconfig_path(), &STATIC_AT_POD_IP, &logs);
    // SotW ADS here (the other tests use Delta): the ACK gate works with both.
    let envoy = envoy("node-a", &agent.xds, false, &logs);
    World {
        client: server.client(),
        _agent: agent,
        _envoy: envoy,
        _backends: backends,
        server,
    }
}

async fn each_failure_gets_its_reason(w: &World) {
    for (ns, name, _, accepted, resolved) in &mk_cases() {
        let what = format!("HTTPRoute {ns}/{name}");
        let route = then_route(w, (ns, name), &what, |r| {
            let v = ours(r);
            let [(_, a, rr)] = v.as_slice() else {
                return Err(format!("parents: {}", r["status"]));
            };
            let ok =
                (accepted.is_none() || a == accepted) && (resolved.is_none() || rr == resolved);
            ok.then(|| r.clone()).ok_or(format!("{a:?} {rr:?}"))
        })
        .await;
        // The parentRef is echoed with group and kind set.
        let (parent_ref, a, rr) = &ours(&route)[0];
        assert_eq!(parent_ref["group"], "gateway.networking.k8s.io", "{what}");
        assert_eq!(parent_ref["kind"], "Gateway", "{what}");
        then_generation_is_current(&what, &route);
        println!("{what}: Accepted {a:?}, ResolvedRefs {rr:?}");
    }
}

/// Another controller's entry stays exactly as written when a spec change (a new
/// generation) makes us rewrite ours.
async fn another_controllers_entry_survives_our_rewrite(w: &World) {
    then_route(w, (NS, "shared"), "our entry on shared", |r| {
        (ours(r).len() == 1)
            .then_some(())
            .ok_or(r["status"].to_string())
    })
    .await;
    let add = json!([{"op": "add", "path": "/status/parents/-", "value": mk_their_entry()}]);
    kube::Api::<HttpRoute>::namespaced(w.client.clone(), NS)
        .patch_status(
            "shared",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(add).unwrap()),
        )
        .await
        .unwrap();
    let shared2 = mk_http_route(NS, "shared", HTTP, "[b.example.com]", SVC)
        .replace("parentRefs: [", "parentRefs: [{name: other-gw}, ");
    w.server.apply(&shared2).await.unwrap();
    let r = then_route(w, (NS, "shared"), "shared rewritten at generation 2", |r| {
        let current = ours(r).len() == 1
            && our_parent(r, "gw", Some("http")).is_some_and(|p| {
                p["conditions"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().all(|c| c["observedGeneration"] == 2))
            });
        current.then(|| r.clone()).ok_or(r["status"].to_string())
    })
    .await;
    then_generation_is_current("HTTPRoute shared (generation 2)", &r);
    let kept = r["status"]["parents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["controllerName"] == OTHER_CONTROLLER)
        .cloned();
    assert_eq!(
        kept,
        Some(mk_their_entry()),
        "the other controller's entry: {}",
        r["status"]
    );
}

/// GRPCRoutes get the same per-parentRef status; a wrong section is refused too.
async fn grpc_routes_get_one_entry_per_parent_ref(w: &World) {
    let spec = format!(
        "  hostnames: [g.example.com]\n  parentRefs: [{HTTP}, {{name: gw, sectionName: nope}}]\n  rules:\n  - matches: [{{method: {{service: echo.Echo, method: Hi}}}}]\n    backendRefs: [{SVC}]\n"
    );
    w.server
        .apply(&mk_route("GRPCRoute", NS, "grpc", &spec))
        .await
        .unwrap();
    let r = until_object::<GrpcRoute, _>(&w.client, NS, "grpc", WAIT, "GRPCRoute status", |r| {
        let http = parent_accepted(r, "gw", Some("http"));
        let nope = parent_accepted(r, "gw", Some("nope"));
        if http == cond("True", "Accepted") && nope == cond("False", "NoMatchingParent") {
            Ok(r.clone())
        } else {
            Err(format!("{http:?} {nope:?}"))
        }
    })
    .await;
    assert_eq!(
        ours(&r).len(),
        2,
        "one entry per parentRef: {}",
        r["status"]
    );
    assert_eq!(ours(&r)[0].0["kind"], "Gateway");
    then_generation_is_current("GRPCRoute app/grpc", &r);
}

async fn a_late_reference_grant_resolves_the_cross_namespace_backend(w: &World) {
    let grant = format!(
        "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: from-app, namespace: {OTHER_NS}}}\nspec:\n  from: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: {NS}}}]\n  to: [{{group: \"\", kind: Service}}]\n"
    );
    w.server.apply(&grant).await.unwrap();
    then_route(
        w,
        (NS, "cross-ns"),
        "cross-ns resolved by the grant",
        |r| match ours(r).as_slice() {
            [(_, _, rr)] if *rr == cond("True", "ResolvedRefs") => Ok(()),
            _ => Err(r["status"].to_string()),
        },
    )
    .await;
}

/// A Namespace label change re-decides allowedRoutes (the Namespace watch).
async fn a_namespace_label_change_re_decides_allowed_routes(w: &World) {
    let selector = "{namespaces: {from: Selector, selector: {matchLabels: {edge: \"yes\"}}}}";
    let listener = format!("{{name: http, protocol: HTTP, port: 8081, allowedRoutes: {selector}}}");
    w.server
        .apply(&mk_gateway(NS, "sel-gw", &[&listener]))
        .await
        .unwrap();
    let parent = format!("{{name: sel-gw, namespace: {NS}}}");
    let by_label = mk_http_route(
        OTHER_NS,
        "by-label",
        &parent,
        HOST,
        "{name: b-other, port: 80}",
    );
    w.server.apply(&by_label).await.unwrap();
    let then_by_label = |want: Expect| async move {
        let what = format!("by-label {want:?}");
        then_route(w, (OTHER_NS, "by-label"), &what, |r| {
            let a = parent_accepted(r, "sel-gw", None);
            (a == want).then_some(()).ok_or(format!("{a:?}"))
        })
        .await
    };
    then_by_label(cond("False", "NotAllowedByListeners")).await;
    let labelled = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {OTHER_NS}, labels: {{edge: \"yes\"}}}}\n"
    );
    w.server.apply(&labelled).await.unwrap();
    then_by_label(cond("True", "Accepted")).await;
}

async fn our_entry_goes_with_its_parent_ref(w: &World) {
    let shared3 = mk_http_route(NS, "shared", "{name: other-gw}", "[b.example.com]", SVC);
    w.server.apply(&shared3).await.unwrap();
    let r = then_route(w, (NS, "shared"), "our entry removed", |r| {
        ours(r)
            .is_empty()
            .then(|| r.clone())
            .ok_or(r["status"].to_string())
    })
    .await;
    assert_eq!(
        r["status"]["parents"],
        json!([mk_their_entry()]),
        "only theirs is left"
    );
}

/// Gateway and GatewayClass conditions carry their generation too; listeners name
/// their kinds and count only the routes accepted on them.
async fn gateway_and_class_conditions_carry_their_generation(w: &World) {
    // The Gateway's status is its own write (after the route's, and gated on the
    // ACK of the move): wait for attachedRoutes to count the routes left: good,
    // missing-backend, wrong-kind, cross-ns and the GRPCRoute (shared moved away;
    // the rest refused).
    let what = "attachedRoutes http/tls [5, 0]";
    let gw = until_object::<Gateway, _>(&w.client, NS, "gw", WAIT, what, |gw| {
        let listeners = &gw["status"]["listeners"];
        let counted = listeners[0]["attachedRoutes"] == 5 && listeners[1]["attachedRoutes"] == 0;
        counted.then(|| gw.clone()).ok_or(listeners.to_string())
    })
    .await;
    then_generation_is_current("Gateway app/gw", &gw);
    let listeners = gw["status"]["listeners"].as_array().unwrap();
    assert_eq!(listeners.len(), 2, "{}", gw["status"]);
    then_listeners_name_their_kinds(listeners);
    let attached: Vec<&Value> = listeners.iter().map(|l| &l["attachedRoutes"]).collect();
    assert_eq!(attached, [5, 0], "attachedRoutes http/tls");

    let classes: kube::Api<GatewayClass> = kube::Api::all(w.client.clone());
    let class = serde_json::to_value(classes.get("aether").await.unwrap()).unwrap();
    then_generation_is_current("GatewayClass aether", &class);
    let features: Vec<&str> = class["status"]["supportedFeatures"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert!(
        features.contains(&"Gateway") && features.contains(&"HTTPRoute"),
        "supportedFeatures: {}",
        class["status"]
    );
    assert!(features.is_sorted(), "sorted: {features:?}");
    assert_eq!(
        status_reason(&class["status"]["conditions"], "Accepted"),
        cond("True", "Accepted")
    );
}

fn then_listeners_name_their_kinds(listeners: &[Value]) {
    let kinds = |i: usize| -> Vec<String> {
        listeners[i]["supportedKinds"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|k| k["kind"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let names: Vec<&str> = listeners
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["http", "tls"]);
    assert!(
        kinds(0).contains(&"HTTPRoute".to_string()),
        "{:?}",
        kinds(0)
    );
    // TLS listeners are not served yet (translation): then they must say so.
    match status_reason(&listeners[1]["conditions"], "Accepted") {
        Some((s, _)) if s == "True" => assert_eq!(kinds(1), ["TLSRoute"]),
        other => assert_eq!(other, cond("False", "UnsupportedProtocol")),
    }
}
