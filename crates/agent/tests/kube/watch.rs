//! Kubernetes mode, the watches (issue point 1): an object the API server accepts but
//! our types cannot read fully (an HTTPRoute whose filter type only a newer CRD
//! has: the test adds `RateLimit` to the installed CRD's enum, as upgrading the
//! CRDs before the controller does) is named in a warning and says
//! `Accepted=False/UnsupportedValue` — in the initial list (which must still
//! complete, or nothing would ever be published) and later on — while every
//! other object keeps flowing. And only `kubernetes.io/tls`
//! Secrets are read at all, and every ConfigMap but the leader's fleet view.

use crate::support::*;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use std::time::Duration;

const NS: &str = "app";
const WAIT: Duration = Duration::from_secs(30);

/// A filter type no Gateway API release has (yet).
const NEWER_FILTER: &str = "[{type: RateLimit}]";

#[test]
fn an_unreadable_object_is_skipped_and_named_and_the_watch_goes_on() {
    in_netns(async {
        let w = given_an_unreadable_route_in_the_initial_list().await;
        an_unreadable_route_arriving_later_stops_nothing(&w).await;
        only_the_readable_routes_count_and_each_unreadable_one_is_named(&w).await;
    });
}

#[test]
fn only_tls_secrets_are_read() {
    in_netns(an_opaque_secret_is_not_found_and_a_tls_one_is_read());
}

#[test]
fn the_fleet_view_s_rewrites_translate_nothing() {
    in_netns(a_fleet_view_rewrite_translates_nothing_another_config_map_does());
}

type World = OneNode;

/// An HTTPRoute with `filters` (a YAML flow list): path prefix `/<name>` to b0.
fn mk_filtered_route(name: &str, filters: &str) -> String {
    let spec = format!(
        "  parentRefs: [{{name: gw}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /{name}}}}}]\n    filters: {filters}\n    backendRefs: [{{name: b0, port: 80}}]\n"
    );
    mk_route("HTTPRoute", NS, name, &spec)
}

/// The initial list, which must still complete (or nothing would ever be
/// published), holds one: r1 is accepted despite it.
async fn given_an_unreadable_route_in_the_initial_list() -> World {
    let logs = temp_dir("kube-watch");
    let b0 = Backend::on(POD_IP, "b0");
    let yaml = [
        base_yaml(&[NS]),
        b0.yaml(NS),
        mk_gateway(NS, "gw", &[HTTP_80]),
        mk_filtered_route("r1", "[]"),
        mk_filtered_route("early-bad", NEWER_FILTER),
    ];
    let server = given_cluster(&yaml[..3]).await;
    given_a_newer_crd_with_filter_type(&server.client(), "RateLimit").await;
    // The API server validates against the new schema once it has read it.
    let rest = yaml[3..].join("\n---\n");
    eventually(WAIT, "the routes accepted by the newer CRD", || async {
        server.apply(&rest).await.map_err(|e| e.to_string())
    })
    .await;
    let w = OneNode::start(server, b0, &STATIC_AT_POD_IP, &logs);
    let c = &w.client;
    eventually(WAIT, "r1 accepted despite early-bad", || {
        route_accepted(c, NS, "r1", "gw")
    })
    .await;
    w
}

/// The installed HTTPRoute CRD, as a newer release could have it: `filter`
/// is one more value of every version's rule filter `type` enum.
async fn given_a_newer_crd_with_filter_type(c: &kube::Client, filter: &str) {
    let api: Api<CustomResourceDefinition> = Api::all(c.clone());
    let crd = api
        .get("httproutes.gateway.networking.k8s.io")
        .await
        .unwrap();
    let mut v = serde_json::to_value(&crd).unwrap();
    let versions = v["spec"]["versions"].as_array_mut().unwrap();
    for version in versions {
        let path = "/schema/openAPIV3Schema/properties/spec/properties/rules/items/properties/filters/items/properties/type/enum";
        let values = version.pointer_mut(path).and_then(|e| e.as_array_mut());
        values.expect("the filter type enum").push(filter.into());
    }
    let crd: CustomResourceDefinition = serde_json::from_value(v).unwrap();
    api.replace(
        &crd.metadata.name.clone().unwrap(),
        &PostParams::default(),
        &crd,
    )
    .await
    .unwrap();
}

async fn an_unreadable_route_arriving_later_stops_nothing(w: &World) {
    let late_bad = mk_filtered_route("late-bad", NEWER_FILTER);
    w.server.apply(&late_bad).await.unwrap();
    w.server
        .apply(&mk_filtered_route("r2", "[]"))
        .await
        .unwrap();
    let c = &w.client;
    eventually(WAIT, "r2 accepted after late-bad", || {
        route_accepted(c, NS, "r2", "gw")
    })
    .await;
    let r = http_get(&format!("{POD_IP}:80"), "example.test", "/r2", &[]).unwrap();
    assert_eq!(r.backend(), Some("b0"), "{r:?}");
}

async fn only_the_readable_routes_count_and_each_unreadable_one_is_named(w: &World) {
    let gw = get_json::<Gateway>(&w.client, Some(NS), "gw")
        .await
        .unwrap();
    // The API counts every route attached by allowedRoutes and parentRef, the
    // ones that are themselves not Accepted too.
    assert_eq!(
        gw["status"]["listeners"][0]["attachedRoutes"], 4,
        "r1, r2 and the two with the newer filter: {}",
        gw["status"]
    );
    // Read untyped: our typed client cannot decode the newer filter type.
    let resource = kube::api::ApiResource::erase::<HttpRoute>(&());
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(w.client.clone(), NS, &resource);
    for bad in ["early-bad", "late-bad"] {
        let r = serde_json::to_value(api.get(bad).await.unwrap()).unwrap();
        assert_eq!(
            parent_accepted(&r, "gw", None),
            cond("False", "UnsupportedValue"),
            "{bad} serves nothing and says why: {}",
            r["status"]
        );
    }
    let log = w.agent.proc.log_text();
    for bad in ["early-bad", "late-bad"] {
        assert!(
            log.lines()
                .any(|l| l.contains(&format!("{NS}/{bad}")) && l.contains("WARN")),
            "a warning names {bad}:\n{log}"
        );
    }
}

/// A Gateway whose listeners name an Opaque Secret and a (garbled) TLS one:
/// the TLS one is read (and refused for what it holds); the Opaque one is not
/// even in the agent's memory, so it is "not found". Were every Secret watched,
/// it would be "Secret type is not kubernetes.io/tls".
async fn an_opaque_secret_is_not_found_and_a_tls_one_is_read() {
    let logs = temp_dir("kube-secrets");
    let secret = |name: &str, type_: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {NS}}}\ntype: {type_}\nstringData: {{tls.crt: not-a-cert, tls.key: not-a-key}}\n"
        )
    };
    let https = |l: &str| {
        format!(
            "{{name: {l}, protocol: HTTPS, port: 443, hostname: {l}.example.com, tls: {{certificateRefs: [{{name: {l}}}]}}}}"
        )
    };
    let yaml = [
        base_yaml(&[NS]),
        secret("opaque", "Opaque"),
        secret("garbled", "kubernetes.io/tls"),
        mk_gateway(NS, "gw", &[&https("opaque"), &https("garbled")]),
    ];
    let server = given_cluster(&yaml).await;
    let flags = ["--leader-elect=false", "--address-mode", "static"];
    let _agent = kube_agent(server.kubeconfig_path(), &flags, &logs);
    let c = &server.client();
    let messages = until_object::<Gateway, _>(c, NS, "gw", WAIT, "listener status", |gw| {
        let listeners = gw["status"]["listeners"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let message = |name: &str| {
            listeners
                .iter()
                .find(|l| l["name"] == name)
                .and_then(|l| condition(&l["conditions"], "ResolvedRefs"))
                .and_then(|c| c["message"].as_str().map(str::to_string))
        };
        match (message("opaque"), message("garbled")) {
            (Some(o), Some(g)) => Ok((o, g)),
            _ => Err(gw["status"].to_string()),
        }
    })
    .await;
    assert!(messages.0.contains("Secret not found"), "{messages:?}");
    assert!(
        messages.1.contains("holds no PEM certificate"),
        "{messages:?}"
    );
}

/// Translations the agent ran (each one a configuration load).
fn translations(agent: &KubeAgent) -> u64 {
    let metrics = http_get(&agent.admin, "localhost", "/metrics", &[])
        .map(|r| r.body)
        .unwrap_or_default();
    metric_sum(
        &metrics,
        "aether_edge_config_loads_total",
        &["result=\"ok\""],
    )
}

/// The leader rewrites `aether-ingress/aether-edge-fleet` whenever the fleet's
/// state moves: those rewrites must cost no translation (at 10,000 routes each
/// one was a full translation on every agent). Any other ConfigMap is read (a
/// BackendTLSPolicy may name it for a CA): writing one translates again, which
/// shows the count sees a translation.
async fn a_fleet_view_rewrite_translates_nothing_another_config_map_does() {
    let logs = temp_dir("kube-fleet-view");
    let yaml = [base_yaml(&[NS]), mk_gateway(NS, "gw", &[HTTP_80])];
    let server = given_cluster(&yaml).await;
    let flags = ["--leader-elect=false", "--address-mode", "static"];
    let agent = kube_agent(server.kubeconfig_path(), &flags, &logs);
    // Translated at least once, then quiet for 2 s.
    let mut before = 0;
    eventually(WAIT, "the agent translated, then quiet", || {
        let now = translations(&agent);
        let quiet = now > 0 && now == before;
        before = now;
        async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            quiet
                .then_some(())
                .ok_or(format!("{now} translations so far"))
        }
    })
    .await;
    let settled = translations(&agent);
    let config_map = |ns: &str, name: &str, n: u32| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\ndata: {{fleet.json: \"{{\\\"rewrite\\\": {n}}}\"}}\n"
        )
    };
    for n in 0..3 {
        server
            .apply(&config_map("aether-ingress", "aether-edge-fleet", n))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        translations(&agent),
        settled,
        "the fleet view's rewrites translated"
    );
    server.apply(&config_map(NS, "other", 0)).await.unwrap();
    eventually(WAIT, "another ConfigMap translated", || {
        let now = translations(&agent);
        async move {
            (now > settled)
                .then_some(())
                .ok_or(format!("{now} translations"))
        }
    })
    .await;
}
