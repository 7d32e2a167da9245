//! What a warm [`Translator`] reuses. (That it gives what a fresh one gives,
//! over random edits, is `crates/xds/tests/incremental.rs`, end to end.)

use super::*;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;

fn one(doc: &str) -> Store {
    let mut s = Store::default();
    s.add_yaml("doc.yaml", doc)
        .expect("the test's documents load");
    s
}

/// 20 routes over two Gateways, each route on one of them.
fn two_gateways() -> Store {
    let mut y = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n",
    );
    for g in 0..2 {
        y.push_str(&format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw-{g}, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: {}}}\n",
            8000 + g
        ));
    }
    y.push_str("---\napiVersion: v1\nkind: Service\nmetadata: {name: svc, namespace: default}\nspec:\n  ports: [{name: http, port: 80}]\n");
    let mut store = Store::default();
    store.add_yaml("base.yaml", &y).unwrap();
    for r in 0..20 {
        store.merge(&one(&route(r, r % 2, "/")));
    }
    store
}

fn route(r: usize, g: usize, prefix: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: route-{r}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw-{g}}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: {prefix}r{r}}}}}]\n    backendRefs: [{{name: svc, port: 80}}]\n"
    )
}

#[test]
fn one_route_changed_retranslates_its_gateway_and_models_that_route_alone() {
    let config = Config::default();
    let mut store = two_gateways();
    let mut t = Translator::new(config.clone());
    t.translate(&store);
    assert_eq!(t.last.routes_modeled, 20);
    assert_eq!(t.last.gateways_translated, 2);

    store.merge(&one(&route(3, 1, "/moved/")));
    let out = t.translate(&store);
    assert_eq!(
        t.last,
        Reuse {
            routes_reused: 19,
            routes_modeled: 1,
            gateways_reused: 1,
            gateways_translated: 1,
            // The 9 other routes of gw-1: each one's table entries and attachment.
            route_parts_kept: 18,
            // Its one cluster is the same: its endpoints are kept.
            clusters_filled: 0,
        }
    );
    assert_eq!(out, crate::translate(&store, &config));

    // Nothing changed: everything reused.
    t.translate(&store);
    assert_eq!((t.last.routes_modeled, t.last.gateways_translated), (0, 0));

    // A route moved to the other Gateway: both retranslate.
    store.merge(&one(&route(3, 0, "/moved/")));
    t.translate(&store);
    assert_eq!((t.last.routes_modeled, t.last.gateways_translated), (1, 2));

    // A shared object (the Service) changed: everything is recomputed.
    store.merge(&one(
        "apiVersion: v1\nkind: Service\nmetadata: {name: svc, namespace: default}\nspec:\n  ports: [{name: http, port: 80, appProtocol: kubernetes.io/h2c}]\n",
    ));
    let out = t.translate(&store);
    assert_eq!((t.last.routes_modeled, t.last.gateways_translated), (20, 2));
    assert_eq!(out, crate::translate(&store, &config));
}

#[test]
fn a_route_whose_parents_did_not_change_keeps_its_status_shared() {
    let mut store = two_gateways();
    let mut t = Translator::new(Config::default());
    let before = t.translate(&store).status;
    // Route 3 changes; route 5 is on the same Gateway, route 4 on the other.
    store.merge(&one(&route(3, 1, "/moved/")));
    let after = t.translate(&store).status;
    let shared = |r: &str| {
        let key = ObjectRef::new("default", r);
        Arc::ptr_eq(&before.http_routes[&key], &after.http_routes[&key])
    };
    assert!(shared("route-4"), "the other Gateway's route");
    assert!(!shared("route-3"), "the changed route");
    // Its Gateway was translated again, and its other routes' parent
    // statuses came out equal: their statuses are kept, not assembled again.
    assert!(shared("route-5"), "a route beside the changed one");
}

/// The object `key` of kind `T` in `store`, as a status write brings it back
/// from the API server: a new object, with a new resourceVersion and a status.
fn status_written<T: StoreObject>(
    store: &Store,
    key: &ObjectRef,
    with_status: impl FnOnce(&mut T),
) -> T {
    let mut obj = (*store.all::<T>()[key]).clone();
    obj.metadata_mut().resource_version = Some("42".into());
    with_status(&mut obj);
    obj
}

#[test]
fn a_status_write_coming_back_is_not_a_change() {
    let config = Config::default();
    let mut store = two_gateways();
    let mut t = Translator::new(config.clone());
    let before = t.translate(&store);
    let gw = ObjectRef::new("default", "gw-0");
    let r = ObjectRef::new("default", "route-4");
    let class = ObjectRef::new("", "aether");
    store.insert(status_written::<Gateway>(&store, &gw, |g| {
        g.status = Some(Default::default())
    }));
    store.insert(status_written::<HttpRoute>(&store, &r, |r| {
        r.status = Some(Default::default())
    }));
    // A shared kind: its status written does not clear the cache either.
    store.insert(status_written::<GatewayClass>(&store, &class, |c| {
        c.status = Some(Default::default())
    }));
    let after = t.translate(&store);
    assert_eq!((t.last.routes_modeled, t.last.gateways_translated), (0, 0));
    assert!(Arc::ptr_eq(
        &before.status.http_routes[&r],
        &after.status.http_routes[&r]
    ));
    assert_eq!(after, crate::translate(&store, &config));

    // A spec change, or a new generation, is a change.
    store.insert(status_written::<HttpRoute>(&store, &r, |r| {
        r.metadata.generation = Some(2)
    }));
    t.translate(&store);
    assert_eq!((t.last.routes_modeled, t.last.gateways_translated), (1, 1));
    store.insert(status_written::<Gateway>(&store, &gw, |g| {
        g.spec.listeners[0].port = 9000
    }));
    t.translate(&store);
    assert_eq!((t.last.routes_modeled, t.last.gateways_translated), (0, 1));
}

fn slice(service: &str, address: &str) -> String {
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {service}-1\n  namespace: default\n  labels: {{kubernetes.io/service-name: {service}}}\naddressType: IPv4\nports: [{{name: http, port: 8080}}]\nendpoints: [{{addresses: [\"{address}\"]}}]\n"
    )
}

#[test]
fn an_endpoint_slice_change_fills_its_services_clusters_and_translates_nothing() {
    let config = Config::default();
    let mut store = two_gateways();
    store.merge(&one(
        "apiVersion: v1\nkind: Service\nmetadata: {name: other, namespace: default}\nspec:\n  ports: [{name: http, port: 80}]\n",
    ));
    store.merge(&one(&slice("svc", "10.0.0.1")));
    store.merge(&one(&slice("other", "10.0.1.1")));
    // Route 3 (on gw-1) alone goes to `other`.
    store.merge(&one(&route(3, 1, "/").replace("name: svc", "name: other")));
    let mut t = Translator::new(config.clone());
    let before = t.translate(&store);

    store.merge(&one(&slice("other", "10.0.1.2")));
    let out = t.translate(&store);
    let redone = |t: &Translator| {
        let l = t.last;
        (l.routes_modeled, l.gateways_translated, l.clusters_filled)
    };
    assert_eq!(redone(&t), (0, 0, 1));
    // Only slices changed: no phase but the last ran, not even the walk
    // that finds every route the same.
    assert_eq!(t.last.routes_reused, 0);
    assert_eq!(out, crate::translate(&store, &config));
    // Every Gateway's IR is the one before: the builder re-encodes none of it.
    for (a, b) in before.ir.gateways.iter().zip(&out.ir.gateways) {
        assert!(Arc::ptr_eq(a, b));
    }
    let endpoints: Vec<&str> = out
        .ir
        .clusters
        .iter()
        .filter(|c| c.service.name == "other")
        .flat_map(|c| c.endpoints.iter().map(|e| e.address.as_str()))
        .collect();
    assert_eq!(endpoints, ["10.0.1.2"]);

    // The other Service's slice: the one cluster the 19 routes to it share.
    store.merge(&one(&slice("svc", "10.0.0.2")));
    let out = t.translate(&store);
    assert_eq!(redone(&t), (0, 0, 1));
    assert_eq!(out, crate::translate(&store, &config));
    // A slice of a Service no route reads: nothing.
    store.merge(&one(&slice("nobody", "10.0.2.1")));
    t.translate(&store);
    assert_eq!(redone(&t), (0, 0, 0));
}

#[test]
fn a_slice_of_a_listener_filters_auth_service_fills_its_cluster_alone() {
    let config = Config::default();
    let mut store = two_gateways();
    let filtered = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw-0, namespace: default}\nspec:\n  gatewayClassName: aether\n  listeners:\n  \
                    - {name: http, protocol: HTTP, port: 8000, filters: {requests: [{type: ExternalAuth, externalAuth: {protocol: HTTP, backendRef: {name: authz, port: 80}}}]}}\n---\n\
                    apiVersion: v1\nkind: Service\nmetadata: {name: authz, namespace: default}\nspec:\n  ports: [{name: http, port: 80}]\n";
    store.merge(&one(filtered));
    let slice = |ip: &str| {
        format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: authz-1\n  namespace: default\n  labels: {{kubernetes.io/service-name: authz}}\naddressType: IPv4\nports: [{{name: http, port: 9000}}]\nendpoints: [{{addresses: [\"{ip}\"]}}]\n"
        )
    };
    store.merge(&one(&slice("10.0.0.1")));
    let mut t = Translator::new(config.clone());
    t.translate(&store);
    store.merge(&one(&slice("10.0.0.2")));
    let out = t.translate(&store);
    assert_eq!(t.last.gateways_translated, 0, "{:?}", t.last);
    assert_eq!(t.last.clusters_filled, 1, "{:?}", t.last);
    assert_eq!(out, crate::translate(&store, &config));
    let served = format!("{:?}", out.ir.clusters);
    assert!(served.contains("10.0.0.2"), "{served}");
}

/// Of the Services, Secrets, ConfigMaps and Namespaces only those a
/// translation read are its inputs: another application's objects of those
/// kinds come and go, and change every few seconds (a leader lock, a token),
/// and translate nothing again. One it looked up and did not find is an
/// input too: when it comes, the cache goes.
#[test]
fn objects_of_the_kinds_read_by_reference_that_nobody_reads_translate_nothing() {
    let config = Config::default();
    let mut store = two_gateways();
    let mut t = Translator::new(config.clone());
    t.translate(&store);
    let unread = [
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lock, namespace: other}\ndata: {holder: a}\n",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: token, namespace: other}\ntype: Opaque\ndata: {t: YQ==}\n",
        "apiVersion: v1\nkind: Service\nmetadata: {name: elsewhere, namespace: other}\nspec:\n  ports: [{name: http, port: 80}]\n",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: other, labels: {team: a}}\n",
    ];
    for doc in unread {
        store.merge(&one(doc));
        let out = t.translate(&store);
        assert_eq!(
            (t.last.routes_modeled, t.last.gateways_translated),
            (0, 0),
            "{doc}"
        );
        assert_eq!(out, crate::translate(&store, &config));
        // ... and changed again.
        store.merge(&one(&doc.replace(": a", ": b")));
        t.translate(&store);
        assert_eq!(
            (t.last.routes_modeled, t.last.gateways_translated),
            (0, 0),
            "{doc}"
        );
    }

    // A Service every route names, missing, then created: everything again.
    let mut store = two_gateways();
    store.remove::<k8s_openapi::api::core::v1::Service>("default", "svc");
    t.translate(&store);
    store.merge(&one(
        "apiVersion: v1\nkind: Service\nmetadata: {name: svc, namespace: default}\nspec:\n  ports: [{name: http, port: 80}]\n",
    ));
    let out = t.translate(&store);
    assert_eq!((t.last.routes_modeled, t.last.gateways_translated), (20, 2));
    assert_eq!(out, crate::translate(&store, &config));

    // A Gateway's certificate Secret, rotated: read, so translated again.
    let tls = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw-0, namespace: default}\nspec:\n  gatewayClassName: aether\n  listeners:\n  \
               - {name: https, protocol: HTTPS, port: 8443, tls: {certificateRefs: [{name: cert}]}}\n";
    store.merge(&one(tls));
    t.translate(&store);
    let secret = |key: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: cert, namespace: default}}\ntype: kubernetes.io/tls\ndata: {{tls.crt: {key}, tls.key: {key}}}\n"
        )
    };
    store.merge(&one(&secret("YQ==")));
    let out = t.translate(&store);
    assert!(t.last.gateways_translated > 0, "{:?}", t.last);
    assert_eq!(out, crate::translate(&store, &config));
    store.merge(&one(&secret("Yg==")));
    let out = t.translate(&store);
    assert!(t.last.gateways_translated > 0, "{:?}", t.last);
    assert_eq!(out, crate::translate(&store, &config));
}

#[test]
fn one_route_changed_on_a_shared_gateway_assembles_its_virtual_host_alone() {
    let config = Config::default();
    let mut store = two_gateways();
    // Routes 0..20 on their own hostnames; route 40 shares route-2's (gw-0).
    let on_host = |r: usize, host: usize, prefix: &str| {
        route(r, 0, prefix).replace(
            "  rules:",
            &format!("  hostnames: [\"h{host}.example\"]\n  rules:"),
        )
    };
    for r in 0..20 {
        store.merge(&one(&on_host(r, r, "/")));
    }
    store.merge(&one(&on_host(40, 2, "/")));
    let hosts = |out: &Translation| -> BTreeMap<String, Arc<aether_ir::VirtualHost>> {
        let table = out.ir.gateways[0].ports[0].route_table.as_ref().unwrap();
        let hosts = table.virtual_hosts.iter();
        hosts.map(|v| (v.name.clone(), v.clone())).collect()
    };
    let mut t = Translator::new(config.clone());
    let before = hosts(&t.translate(&store));
    assert_eq!(before.len(), 21, "20 hostnames and the catch-all");

    // Route 5 moves to another path; route 40 leaves route-2's host.
    store.merge(&one(&on_host(5, 5, "/moved/")));
    store.merge(&one(&on_host(40, 7, "/")));
    let out = t.translate(&store);
    assert_eq!(out, crate::translate(&store, &config));
    let after = hosts(&out);
    let changed: Vec<&str> = after
        .iter()
        .filter(|(name, vh)| !Arc::ptr_eq(vh, &before[*name]))
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(changed, ["h2.example", "h5.example", "h7.example"]);
}

#[test]
fn a_shared_virtual_host_keeps_precedence_order_through_edits() {
    let config = Config::default();
    let mut store = two_gateways();
    // 20 routes on one host of gw-0, prefixes of every length from 2 to 21.
    let on_shared = |r: usize, prefix: &str| {
        route(r, 0, prefix).replace("  rules:", "  hostnames: [\"shared.example\"]\n  rules:")
    };
    let prefix = |n: usize| format!("/{}", "p".repeat(n));
    for r in 0..20 {
        store.merge(&one(&on_shared(r, &prefix((r * 7) % 20))));
    }
    let mut t = Translator::new(config.clone());
    t.translate(&store);
    // Each edit moves one route to another rank, or adds one, or takes one
    // away; after each, the warm order is the fresh one.
    let edits = [
        (3, Some(19)),
        (15, Some(0)),
        (30, Some(9)),
        (7, None),
        (30, None),
    ];
    for (r, to) in edits {
        match to {
            Some(n) => store.merge(&one(&on_shared(r, &prefix(n)))),
            None => {
                let key = ObjectRef::new("default", format!("route-{r}"));
                assert!(store.remove_kind(Kind::HttpRoute, &key));
            }
        }
        let out = t.translate(&store);
        assert_eq!(out, crate::translate(&store, &config), "after {r} → {to:?}");
    }
}

#[test]
fn a_ca_configmap_created_after_its_policy_is_read_by_a_warm_translator() {
    // The conformance suite's BackendTLSPolicy test points a policy at a
    // ConfigMap that does not exist yet, creates it, empties its CA, and
    // puts the CA back. Each step is read as a fresh translator reads it.
    let config = Config::default();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/backend-tls-policy/in.yaml"
    ))
    .unwrap();
    let mut store = Store::default();
    store.add_yaml("in.yaml", &text).unwrap();
    let mut warm = Translator::new(config.clone());
    warm.translate(&store);
    let ca = text
        .split("\n---\n")
        .find(|d| d.contains("kind: ConfigMap") && d.contains("name: ca\n"))
        .unwrap()
        .replace("name: ca\n", "name: nowhere\n");
    let emptied = format!("{}  ca.crt: \"\"\n", &ca[..ca.find("  ca.crt: |").unwrap()]);
    let missing = ObjectRef::new("apps", "missing");
    for (step, doc, ok) in [
        ("created", &ca, true),
        ("emptied", &emptied, false),
        ("restored", &ca, true),
    ] {
        store.merge(&one(doc));
        let fresh = Translator::new(config.clone()).translate(&store);
        let out = warm.translate(&store);
        assert_eq!(out.status, fresh.status, "{step}");
        assert_eq!(out.ir, fresh.ir, "{step}");
        let accepted = &out.status.backend_tls_policies[&missing].ancestors[0].conditions[0];
        assert_eq!(accepted.ok, ok, "{step}: {accepted:?}");
    }
}
