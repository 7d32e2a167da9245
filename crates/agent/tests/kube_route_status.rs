//! Kubernetes mode, route status (issue point 2) as written by `aether-edge agent` to
//! a real kube-apiserver: every way a parentRef or a backendRef can fail gets its own
//! reason, another controller's parent entry is left alone, ours goes when the
//! parentRef does, and every condition carries the object's current generation.

mod support;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::httproutes::HttpRoute;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use std::time::Duration;
use support::*;

const NS: &str = "app";
const OTHER_NS: &str = "other";
const OTHER_CONTROLLER: &str = "example.com/other-controller";

fn gateway_yaml() -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  \
         - {{name: http, protocol: HTTP, port: 80, hostname: \"*.example.com\", allowedRoutes: {{namespaces: {{from: Same}}}}}}\n  \
         - {{name: tls, protocol: TLS, port: 443, hostname: tls.example.com, tls: {{mode: Passthrough}}}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: other}}\nspec: {{controllerName: {OTHER_CONTROLLER}}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: other-gw, namespace: {NS}}}\nspec:\n  gatewayClassName: other\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n"
    )
}

/// An HTTPRoute `name` in `ns` with one parentRef (YAML flow map) and one backendRef.
fn route(ns: &str, name: &str, parent: &str, hostnames: &str, backend: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  hostnames: {hostnames}\n  parentRefs: [{parent}]\n  rules:\n  - backendRefs: [{backend}]\n"
    )
}

/// The route's parent entries of our controller, as `(parentRef, Accepted, ResolvedRefs)`.
type Verdict = (Value, Option<(String, String)>, Option<(String, String)>);

fn ours(route: &Value) -> Vec<Verdict> {
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

/// An expected `(status, reason)`, `None` for any.
type Expect = Option<(String, String)>;

fn pair(s: &str, r: &str) -> Expect {
    Some((s.to_string(), r.to_string()))
}

/// Every condition in `status` (and in listeners / parents) observed `generation`.
fn assert_generation(what: &str, obj: &Value) {
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

#[test]
fn every_route_status_case_gets_its_reason() {
    if !isolated() {
        return;
    }
    runtime().block_on(route_status());
}

async fn route_status() {
    let logs = temp_dir("kube-route-status");
    let server = aether_testkit::ApiServer::start().await;
    let client = server.client();
    let c = &client;
    let b0 = Backend::on(POD_IP, "b0");
    let b_other = Backend::on(POD_IP, "b-other");
    let svc = "{name: b0, port: 80}";
    let http = "{name: gw, sectionName: http}";
    let host = "[a.example.com]";
    let cases: Vec<(&str, &str, String, Expect, Expect)> = vec![
        // (namespace, name, yaml, Accepted, ResolvedRefs)
        (
            NS,
            "good",
            route(NS, "good", http, host, svc),
            pair("True", "Accepted"),
            pair("True", "ResolvedRefs"),
        ),
        (
            NS,
            "no-section",
            route(NS, "no-section", "{name: gw, sectionName: nope}", host, svc),
            pair("False", "NoMatchingParent"),
            None,
        ),
        (
            NS,
            "no-port",
            route(NS, "no-port", "{name: gw, port: 9999}", host, svc),
            pair("False", "NoMatchingParent"),
            None,
        ),
        (
            NS,
            "no-host",
            route(NS, "no-host", http, "[a.example.org]", svc),
            pair("False", "NoMatchingListenerHostname"),
            None,
        ),
        (
            OTHER_NS,
            "other-ns",
            route(
                OTHER_NS,
                "other-ns",
                &format!("{{name: gw, namespace: {NS}, sectionName: http}}"),
                host,
                "{name: b-other, port: 80}",
            ),
            pair("False", "NotAllowedByListeners"),
            None,
        ),
        (
            NS,
            "on-tls",
            route(
                NS,
                "on-tls",
                "{name: gw, sectionName: tls}",
                "[tls.example.com]",
                svc,
            ),
            pair("False", "NotAllowedByListeners"),
            None,
        ),
        (
            NS,
            "missing-backend",
            route(NS, "missing-backend", http, host, "{name: nope, port: 80}"),
            pair("True", "Accepted"),
            pair("False", "BackendNotFound"),
        ),
        (
            NS,
            "wrong-kind",
            route(
                NS,
                "wrong-kind",
                http,
                host,
                "{group: \"\", kind: ConfigMap, name: b0}",
            ),
            pair("True", "Accepted"),
            pair("False", "InvalidKind"),
        ),
        (
            NS,
            "cross-ns",
            route(
                NS,
                "cross-ns",
                http,
                host,
                &format!("{{name: b-other, namespace: {OTHER_NS}, port: 80}}"),
            ),
            pair("True", "Accepted"),
            pair("False", "RefNotPermitted"),
        ),
    ];
    let mut yaml = vec![
        base_yaml(&[NS, OTHER_NS]),
        b0.yaml(NS),
        b_other.yaml(OTHER_NS),
        gateway_yaml(),
    ];
    yaml.extend(cases.iter().map(|c| c.2.clone()));
    yaml.push(route(NS, "shared", http, host, svc));
    let yaml = yaml.join("---\n");
    if let Err(e) = server.apply(&yaml).await {
        panic!("{e}\n{yaml}");
    }

    let agent = kube_agent(
        server.kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--address-mode",
            "static",
            "--default-address",
            POD_IP,
        ],
        &logs,
    );
    // SotW ADS here (the other tests use Delta): the ACK gate works with both.
    let _envoy = envoy("node-a", &agent.xds, false, &logs);

    for (ns, name, _, accepted, resolved) in &cases {
        let what = format!("HTTPRoute {ns}/{name}");
        let route = eventually(Duration::from_secs(30), &what, || async move {
            let r = get_json::<HttpRoute>(c, Some(*ns), name)
                .await
                .ok_or("none")?;
            let v = ours(&r);
            let [(_, a, rr)] = v.as_slice() else {
                return Err(format!("parents: {}", r["status"]));
            };
            let ok =
                (accepted.is_none() || a == accepted) && (resolved.is_none() || rr == resolved);
            if ok {
                Ok(r)
            } else {
                Err(format!("{a:?} {rr:?}"))
            }
        })
        .await;
        // The parentRef is echoed with group and kind set.
        let parent_ref = &ours(&route)[0].0;
        assert_eq!(parent_ref["group"], "gateway.networking.k8s.io", "{what}");
        assert_eq!(parent_ref["kind"], "Gateway", "{what}");
        assert_generation(&what, &route);
        let (_, a, rr) = &ours(&route)[0];
        println!("{what}: Accepted {a:?}, ResolvedRefs {rr:?}");
    }

    // Another controller's entry stays exactly as written; ours go with the parentRef.
    let routes: kube::Api<HttpRoute> = kube::Api::namespaced(client.clone(), NS);
    eventually(
        Duration::from_secs(30),
        "our entry on shared",
        || async move {
            let r = get_json::<HttpRoute>(c, Some(NS), "shared")
                .await
                .ok_or("none")?;
            if ours(&r).len() == 1 {
                Ok(())
            } else {
                Err(r["status"].to_string())
            }
        },
    )
    .await;
    let theirs = json!({
        "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "other-gw"},
        "controllerName": OTHER_CONTROLLER,
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "theirs",
                        "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    });
    routes
        .patch_status(
            "shared",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(
                    json!([{"op": "add", "path": "/status/parents/-", "value": theirs}]),
                )
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    // A spec change (new generation) makes us rewrite our entry.
    let shared2 = route(NS, "shared", http, "[b.example.com]", svc)
        .replace("parentRefs: [", "parentRefs: [{name: other-gw}, ");
    server.apply(&shared2).await.unwrap();
    let r = eventually(
        Duration::from_secs(30),
        "shared rewritten at generation 2",
        || async move {
            let r = get_json::<HttpRoute>(c, Some(NS), "shared")
                .await
                .ok_or("none")?;
            let current = ours(&r).len() == 1
                && our_parent(&r, "gw", Some("http")).is_some_and(|p| {
                    p["conditions"]
                        .as_array()
                        .is_some_and(|cs| cs.iter().all(|c| c["observedGeneration"] == 2))
                });
            if current {
                Ok(r)
            } else {
                Err(r["status"].to_string())
            }
        },
    )
    .await;
    assert_generation("HTTPRoute shared (generation 2)", &r);
    let kept = r["status"]["parents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["controllerName"] == OTHER_CONTROLLER)
        .cloned();
    assert_eq!(
        kept,
        Some(theirs.clone()),
        "the other controller's entry: {}",
        r["status"]
    );

    // GRPCRoutes get the same per-parentRef status; a wrong section is refused too.
    let grpc = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {{name: grpc, namespace: {NS}}}\nspec:\n  hostnames: [g.example.com]\n  parentRefs: [{http}, {{name: gw, sectionName: nope}}]\n  rules:\n  - matches: [{{method: {{service: echo.Echo, method: Hi}}}}]\n    backendRefs: [{svc}]\n"
    );
    server.apply(&grpc).await.unwrap();
    let r = eventually(Duration::from_secs(30), "GRPCRoute status", || async move {
        let r = get_json::<GrpcRoute>(c, Some(NS), "grpc")
            .await
            .ok_or("none")?;
        let http = our_parent(&r, "gw", Some("http"))
            .and_then(|p| status_reason(&p["conditions"], "Accepted"));
        let nope = our_parent(&r, "gw", Some("nope"))
            .and_then(|p| status_reason(&p["conditions"], "Accepted"));
        if http == pair("True", "Accepted") && nope == pair("False", "NoMatchingParent") {
            Ok(r)
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
    assert_generation("GRPCRoute app/grpc", &r);

    // A ReferenceGrant arriving later resolves the cross-namespace backend.
    let grant = format!(
        "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: from-app, namespace: {OTHER_NS}}}\nspec:\n  from: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: {NS}}}]\n  to: [{{group: \"\", kind: Service}}]\n"
    );
    server.apply(&grant).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "cross-ns resolved by the grant",
        || async move {
            let r = get_json::<HttpRoute>(c, Some(NS), "cross-ns")
                .await
                .ok_or("none")?;
            let v = ours(&r);
            match v.as_slice() {
                [(_, _, rr)] if *rr == pair("True", "ResolvedRefs") => Ok(()),
                _ => Err(r["status"].to_string()),
            }
        },
    )
    .await;
    // A Namespace label change re-decides allowedRoutes (the Namespace watch).
    let sel_gw = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: sel-gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: 8081, allowedRoutes: {{namespaces: {{from: Selector, selector: {{matchLabels: {{edge: \"yes\"}}}}}}}}}}\n"
    );
    server.apply(&sel_gw).await.unwrap();
    let sel_route = route(
        OTHER_NS,
        "by-label",
        &format!("{{name: sel-gw, namespace: {NS}}}"),
        host,
        "{name: b-other, port: 80}",
    );
    server.apply(&sel_route).await.unwrap();
    let by_label = |want: Expect| async move {
        eventually(
            Duration::from_secs(30),
            &format!("by-label {want:?}"),
            || {
                let want = want.clone();
                async move {
                    let r = get_json::<HttpRoute>(c, Some(OTHER_NS), "by-label")
                        .await
                        .ok_or("none")?;
                    let a = our_parent(&r, "sel-gw", None)
                        .and_then(|p| status_reason(&p["conditions"], "Accepted"));
                    if a == want {
                        Ok(())
                    } else {
                        Err(format!("{a:?}"))
                    }
                }
            },
        )
        .await
    };
    by_label(pair("False", "NotAllowedByListeners")).await;
    server
        .apply(&format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {OTHER_NS}, labels: {{edge: \"yes\"}}}}\n"))
        .await
        .unwrap();
    by_label(pair("True", "Accepted")).await;

    let shared3 = route(NS, "shared", "{name: other-gw}", "[b.example.com]", svc);
    server.apply(&shared3).await.unwrap();
    let r = eventually(
        Duration::from_secs(30),
        "our entry removed",
        || async move {
            let r = get_json::<HttpRoute>(c, Some(NS), "shared")
                .await
                .ok_or("none")?;
            if ours(&r).is_empty() {
                Ok(r)
            } else {
                Err(r["status"].to_string())
            }
        },
    )
    .await;
    assert_eq!(
        r["status"]["parents"],
        json!([theirs]),
        "only theirs is left"
    );

    // Gateway and GatewayClass conditions carry their generation too. The
    // Gateway's status is its own write (after the route's, and gated on the ACK
    // of the move): wait for attachedRoutes to count the routes left.
    let gw = eventually(
        Duration::from_secs(30),
        "attachedRoutes http/tls [5, 0]",
        || async move {
            let gw = get_json::<Gateway>(c, Some(NS), "gw").await.ok_or("none")?;
            let listeners = &gw["status"]["listeners"];
            if listeners[0]["attachedRoutes"] == 5 && listeners[1]["attachedRoutes"] == 0 {
                Ok(gw)
            } else {
                Err(listeners.to_string())
            }
        },
    )
    .await;
    assert_generation("Gateway app/gw", &gw);
    assert_eq!(
        gw["status"]["listeners"].as_array().map(Vec::len),
        Some(2),
        "{}",
        gw["status"]
    );
    let classes: kube::Api<GatewayClass> = kube::Api::all(client.clone());
    let class = serde_json::to_value(classes.get("aether").await.unwrap()).unwrap();
    assert_generation("GatewayClass aether", &class);
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
    // Each listener names the kinds it takes.
    let kinds = |i: usize| -> Vec<String> {
        gw["status"]["listeners"][i]["supportedKinds"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|k| k["kind"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let names: Vec<&str> = (0..2)
        .map(|i| gw["status"]["listeners"][i]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["http", "tls"]);
    assert!(
        kinds(0).contains(&"HTTPRoute".to_string()),
        "{:?}",
        kinds(0)
    );
    // TLS listeners are not served yet (translation): then they must say so.
    match status_reason(&gw["status"]["listeners"][1]["conditions"], "Accepted") {
        Some((s, _)) if s == "True" => assert_eq!(kinds(1), ["TLSRoute"]),
        other => assert_eq!(other, pair("False", "UnsupportedProtocol")),
    }
    // attachedRoutes counts only the routes accepted on that listener.
    let attached: Vec<&Value> = (0..2)
        .map(|i| &gw["status"]["listeners"][i]["attachedRoutes"])
        .collect();
    // good, missing-backend, wrong-kind, cross-ns and the GRPCRoute (shared moved away;
    // the rest refused).
    assert_eq!(attached, [5, 0], "attachedRoutes http/tls");
    assert_eq!(
        status_reason(&class["status"]["conditions"], "Accepted"),
        pair("True", "Accepted")
    );
    drop(agent);
}
