//! Kubernetes mode, an HTTPRoute to an EndpointSelector XBackend: the leader
//! makes the XBackend's headless Service; the test, playing the EndpointSlice
//! controller (there is no controller-manager here), writes that Service's
//! slice pointing at a real backend; traffic then flows through the real
//! Envoy, the route is Accepted with ResolvedRefs, and the XBackend carries our
//! ancestor entry for the Gateway. Another controller's ancestor entry, written
//! under its own field manager, survives our rewrite exactly as it was.

use crate::support::*;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::experimental::xbackends::XBackend;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use std::time::Duration;

const NS: &str = "app";
const WAIT: Duration = Duration::from_secs(30);
const OURS: &str = "gateway.aether.io/edge";
const XB_REF: &str = "{group: gateway.networking.x-k8s.io, kind: XBackend, name: pay}";

#[test]
fn a_route_to_an_xbackend_is_served_through_its_service() {
    in_netns(async {
        let w = given_a_route_to_an_xbackend_and_an_agent().await;
        its_service_gets_a_slice_and_traffic_reaches_the_backend(&w).await;
        the_route_and_the_xbackend_say_so(&w).await;
        another_controllers_entry_survives_our_rewrite(&w).await;
    });
}

type World = OneNode;

fn mk_app(b0: &Backend, selector: &str) -> String {
    let spec = format!("  parentRefs: [{{name: gw}}]\n  rules:\n  - backendRefs: [{XB_REF}]\n");
    [
        base_yaml(&[NS]),
        mk_gateway(NS, "gw", &[HTTP_80]),
        mk_route("HTTPRoute", NS, "r1", &spec),
        mk_xbackend(NS, "pay", selector, b0.port),
    ]
    .join("---\n")
}

async fn given_a_route_to_an_xbackend_and_an_agent() -> World {
    let logs = temp_dir("kube-xbackend-route");
    let b0 = Backend::on(POD_IP, "b0");
    let server = given_cluster(&[mk_app(&b0, "{app: pay}")]).await;
    OneNode::start(server, b0, &STATIC_AT_POD_IP, &logs)
}

async fn its_service_gets_a_slice_and_traffic_reaches_the_backend(w: &World) {
    let svc = until_xbackend_services(&w.client, NS, "the XBackend Service", WAIT, |s| {
        s.len() == 1
    })
    .await;
    w.server
        .apply(&mk_slice_for(&svc[0], &w.b0.ip, w.b0.port))
        .await
        .unwrap();
    let to = format!("{POD_IP}:80");
    eventually(WAIT, "b0 answers through the XBackend", || async {
        let r = http_get(&to, "example.test", "/", &[]).map_err(|e| e.to_string())?;
        (r.backend() == Some("b0"))
            .then_some(())
            .ok_or(format!("{r:?}"))
    })
    .await;
}

/// Our ancestor entry on the XBackend (JSON), once it is there.
fn our_ancestor(x: &Value) -> Option<&Value> {
    x["status"]["ancestors"].as_array()?.iter().find(|a| {
        a["controllerName"] == OURS
            && a["ancestorRef"]["name"] == "gw"
            && a["ancestorRef"]["kind"] == "Gateway"
    })
}

async fn the_route_and_the_xbackend_say_so(w: &World) {
    let c = &w.client;
    until_object::<HttpRoute, _>(c, NS, "r1", WAIT, "r1 Accepted and ResolvedRefs", |r| {
        let p = our_parent(r, "gw", None).ok_or(r["status"].to_string())?;
        let got = (
            status_reason(&p["conditions"], "Accepted"),
            status_reason(&p["conditions"], "ResolvedRefs"),
        );
        (got == (cond("True", "Accepted"), cond("True", "ResolvedRefs")))
            .then_some(())
            .ok_or(format!("{got:?}"))
    })
    .await;
    until_object::<XBackend, _>(c, NS, "pay", WAIT, "our ancestor entry", |x| {
        let a = our_ancestor(x).ok_or(x["status"].to_string())?;
        (status_reason(&a["conditions"], "Accepted") == cond("True", "Accepted"))
            .then_some(())
            .ok_or(a.to_string())
    })
    .await;
}

fn mk_their_entry() -> Value {
    json!({
        "ancestorRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                        "namespace": NS, "name": "their-gw"},
        "controllerName": "example.com/other-controller",
        "conditions": [{"type": "Accepted", "status": "False", "reason": "Theirs",
                        "message": "kept as is", "observedGeneration": 1,
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    })
}

/// Their entry added under their field manager; a selector change (generation
/// 2) makes us write ours again; theirs is still there, unchanged.
async fn another_controllers_entry_survives_our_rewrite(w: &World) {
    let api: kube::Api<XBackend> = kube::Api::namespaced(w.client.clone(), NS);
    let add = json!([{"op": "add", "path": "/status/ancestors/-", "value": mk_their_entry()}]);
    let theirs = PatchParams {
        field_manager: Some("other-controller".into()),
        ..Default::default()
    };
    api.patch_status(
        "pay",
        &theirs,
        &Patch::Json::<()>(serde_json::from_value(add).unwrap()),
    )
    .await
    .unwrap();
    w.server
        .apply(&mk_app(&w.b0, "{app: pay, tier: web}"))
        .await
        .unwrap();
    let x = until_object::<XBackend, _>(&w.client, NS, "pay", WAIT, "ours at generation 2", |x| {
        let a = our_ancestor(x).ok_or(x["status"].to_string())?;
        let current = a["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().all(|c| c["observedGeneration"] == 2));
        current.then(|| x.clone()).ok_or(a.to_string())
    })
    .await;
    let kept: Vec<&Value> = x["status"]["ancestors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["controllerName"] != OURS)
        .collect();
    assert_eq!(kept, [&mk_their_entry()], "{}", x["status"]);
}
