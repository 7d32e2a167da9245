//! Kubernetes mode as deployed (the deploy/ RBAC, leader election on, service
//! address mode), v1.7.0's new core behaviour on a real kube-apiserver:
//!
//! - a Gateway whose name is the API's longest (253 characters) gets its
//!   Services (names hashed within 63 characters), is programmed, and serves;
//! - another controller's conditions on our Gateway (its own field manager)
//!   stay as they are while we rewrite ours at a new generation, and every one
//!   of ours carries that generation.

use crate::support::*;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use std::time::Duration;

const NS: &str = "app";
const WAIT: Duration = Duration::from_secs(30);
const THEIRS: &str = "example.com/other-controller";

/// The longest name the API allows: 253 characters, labels of at most 63.
fn longest_name() -> String {
    let name = [
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61),
    ]
    .join(".");
    assert_eq!(name.len(), 253);
    name
}

#[test]
fn a_253_character_gateway_is_served_and_foreign_conditions_stay() {
    in_netns(async {
        let w = given_a_gateway_with_the_longest_name().await;
        it_gets_its_services_is_programmed_and_serves(&w).await;
        another_controllers_conditions_stay_through_our_rewrite(&w).await;
    });
}

type World = OneNode<Proc>;

async fn given_a_gateway_with_the_longest_name() -> World {
    let b0 = Backend::on(POD_IP, "b0");
    let name = longest_name();
    let app = [
        format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n"),
        mk_gateway(NS, &name, &[HTTP_80]),
        mk_route_to("HTTPRoute", NS, "r1", &format!("{{name: {name}}}"), "b0"),
        b0.yaml(NS),
    ];
    OneNode::deployed("kube-long-name", &app.join("---\n"), b0).await
}

async fn gateway(w: &World) -> Value {
    get_json::<Gateway>(&w.client, Some(NS), &longest_name())
        .await
        .expect("the Gateway")
}

async fn it_gets_its_services_is_programmed_and_serves(w: &World) {
    let c = &w.client;
    until_leader(c, "controller-a", WAIT).await;
    let record = edge_service(c).await;
    let public = public_service(c).await;
    for svc in [&record, &public] {
        let name = svc.metadata.name.clone().unwrap();
        assert!(name.len() <= 63, "{name}");
    }
    assign_load_balancer(c, &public, POD_IP).await;
    eventually(WAIT, "Gateway programmed, route accepted", || async move {
        let gw = gateway(w).await;
        let r = get_json::<HttpRoute>(c, Some(NS), "r1")
            .await
            .ok_or("no route")?;
        let (p, a) = (programmed(&gw), parent_accepted(&r, &longest_name(), None));
        (p == cond("True", "Programmed") && a == cond("True", "Accepted"))
            .then_some(())
            .ok_or(format!("{p:?} {a:?}"))
    })
    .await;
    let target = service_ports(&record)[0].3;
    let r = http_get(&format!("{POD_IP}:{target}"), "example.test", "/", &[]).unwrap();
    assert_eq!(r.backend(), Some("b0"), "{r:?}");
}

/// Another controller applies a condition of its own to the Gateway (its own
/// field manager); the Gateway's spec then changes, so we rewrite every
/// condition of ours at the new generation. Theirs is left as they wrote it.
async fn another_controllers_conditions_stay_through_our_rewrite(w: &World) {
    let name = longest_name();
    let api: kube::Api<Gateway> = kube::Api::namespaced(w.client.clone(), NS);
    let theirs = json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": NS},
        "status": {"conditions": [{
            "type": "example.com/Audited",
            "status": "True",
            "reason": "Audited",
            "message": "written by another controller",
            "observedGeneration": 1,
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]},
    });
    api.patch_status(&name, &PatchParams::apply(THEIRS), &Patch::Apply(&theirs))
        .await
        .unwrap();
    let listeners = json!({"spec": {"listeners": [
        {"name": "http", "protocol": "HTTP", "port": 80},
        {"name": "alt", "protocol": "HTTP", "port": 8080},
    ]}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&listeners))
        .await
        .unwrap();
    let gw = eventually(WAIT, "our conditions at generation 2", || async move {
        let gw = gateway(w).await;
        let ours_current = ["Accepted", "Programmed"].iter().all(|t| {
            condition(&gw["status"]["conditions"], t).is_some_and(|c| c["observedGeneration"] == 2)
        }) && gw["status"]["listeners"]
            .as_array()
            .is_some_and(|l| l.len() == 2);
        ours_current
            .then_some(gw.clone())
            .ok_or(gw["status"].to_string())
    })
    .await;
    assert_eq!(gw["metadata"]["generation"], 2);
    let audited = condition(&gw["status"]["conditions"], "example.com/Audited")
        .unwrap_or_else(|| panic!("their condition is gone: {}", gw["status"]));
    assert_eq!(audited["observedGeneration"], 1, "theirs as they wrote it");
    assert_eq!(audited["message"], "written by another controller");
    for l in gw["status"]["listeners"].as_array().unwrap() {
        for c in l["conditions"].as_array().unwrap() {
            assert_eq!(c["observedGeneration"], 2, "listener {}: {c}", l["name"]);
        }
    }
    for c in gw["status"]["conditions"].as_array().unwrap() {
        if c["type"] != "example.com/Audited" {
            assert_eq!(c["observedGeneration"], 2, "{c}");
        }
    }
}
