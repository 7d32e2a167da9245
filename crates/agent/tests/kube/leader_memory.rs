//! Kubernetes mode, the controller as deployed (`--role controller`: no Envoy
//! of its own) joining an edge agent's reports while the two are a change
//! apart. An edge agent translates the cluster on its own and, once its Envoy
//! ACKed all of it, reports just "snapshot V". When the controller has moved on
//! (a route added) and the node has not yet, that report still says which
//! routes the node serves: every route unchanged since V. Only the new route
//! is `Pending`; the others keep `Accepted=True`, and no write says otherwise.
//!
//! The test plays the edge agent on the report port (TLS, a pod-bound token,
//! as deployed), so it decides when the node is behind: an edge agent is
//! behind the controller for as long as it translates and its Envoy applies,
//! ~0.3 s at 10,000 routes.

use crate::support::*;
use aether_report::pb::AckReport;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use std::time::Duration;

const NS: &str = "app";
const EDGE: &str = "aether-ingress";
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn a_node_one_change_behind_keeps_the_unchanged_routes_accepted() {
    in_netns(async {
        let mut w = given_a_controller_and_a_node_serving_route_a().await;
        a_new_route_is_pending_while_route_a_stays_accepted(&mut w).await;
        the_node_catching_up_accepts_the_new_route(&mut w).await;
    });
}

/// Fields drop in order: the API server last.
struct World {
    client: kube::Client,
    controller: Controller,
    /// The report stream of node `node-b`, open for the whole test.
    node: tokio::sync::mpsc::Sender<AckReport>,
    server: aether_testkit::ApiServer,
}

/// The controller's current snapshot version (its admin's `/debug/snapshot`).
fn controller_version(c: &Controller) -> Result<String, String> {
    let r = http_get(&c.admin, "localhost", "/debug/snapshot", &[]).map_err(|e| e.to_string())?;
    let body: serde_json::Value = serde_json::from_str(&r.body).map_err(|e| e.to_string())?;
    body["version"]
        .as_str()
        .map(str::to_string)
        .ok_or(format!("no version in {}", r.body))
}

/// What a caught-up edge agent reports: its Envoy ACKed all of `version`.
fn caught_up(version: &str) -> AckReport {
    AckReport {
        node: "node-b".into(),
        envoy_connected: true,
        acked_snapshot: version.into(),
        ..Default::default()
    }
}

fn route(name: &str, host: &str) -> String {
    mk_route(
        "HTTPRoute",
        NS,
        name,
        &format!(
            "  hostnames: [{host}]\n  parentRefs: [{{name: gw}}]\n  rules:\n  - backendRefs: [{{name: b0, port: 80}}]\n"
        ),
    )
}

async fn accepted(client: &kube::Client, name: &str) -> Option<(String, String)> {
    let r = get_json::<HttpRoute>(client, Some(NS), name).await?;
    parent_accepted(&r, "gw", None)
}

/// Waits until route `name`'s `Accepted` is `(status, reason)`.
async fn until_route_accepted_is(client: &kube::Client, name: &str, want: (&str, &str)) {
    let what = format!("route {name} Accepted={}/{}", want.0, want.1);
    eventually(WAIT, &what, || async {
        let got = accepted(client, name).await;
        (got == cond(want.0, want.1))
            .then_some(())
            .ok_or(format!("route {name}: {got:?}"))
    })
    .await;
}

/// The controller under deploy/'s RBAC; a Gateway with route `a`; node `node-b`
/// reporting the controller's snapshot as ACKed until `a` is Accepted.
async fn given_a_controller_and_a_node_serving_route_a() -> World {
    let logs = temp_dir("kube-leader-memory");
    let server = aether_testkit::ApiServer::start().await;
    for file in ["00-namespace.yaml", "10-rbac.yaml", "20-gatewayclass.yaml"] {
        server.apply(&deploy_file(file)).await.unwrap();
    }
    let app = [
        format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n"),
        mk_gateway(NS, "gw", &[HTTP_80]),
        mk_service(NS, "b0", 80, &[("10.0.0.1", 8080)]),
        route("a", "a.example.com"),
    ];
    server.apply(&app.join("---\n")).await.unwrap();
    let controller = deployed_controller(&server, "leader-memory", &logs).await;
    let client = server.client();
    let leader = leader_endpoint(&client).await;
    let token = server
        .pod_token(
            EDGE,
            "aether-edge",
            "edge-b",
            "node-b",
            aether_report::auth::AUDIENCE,
        )
        .await
        .unwrap();
    let channel = aether_report::client::connect(&leader).await.unwrap();
    let mut reports = aether_report::client::with_token(channel, Some(&token)).unwrap();
    let (node, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        let _ = reports
            .report(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await;
    });
    // The controller's snapshot settles (its edge Service, the port allocated);
    // the node reports each version it sees, as its agent would.
    let mut reported = String::new();
    eventually(WAIT, "route a Accepted", || {
        let version = controller_version(&controller);
        let (client, node) = (client.clone(), node.clone());
        let send = match &version {
            Ok(v) if *v != reported => {
                reported = v.clone();
                Some(v.clone())
            }
            _ => None,
        };
        async move {
            if let Some(v) = send {
                node.send(caught_up(&v)).await.map_err(|e| e.to_string())?;
            }
            version?;
            let a = accepted(&client, "a").await;
            (a == cond("True", "Accepted"))
                .then_some(())
                .ok_or(format!("route a: {a:?}"))
        }
    })
    .await;
    World {
        client,
        controller,
        node,
        server,
    }
}

/// Route `b` added: the controller publishes a new snapshot, the node still
/// reports the one before. `b` is written `Pending`; `a`, unchanged since the
/// node's snapshot, keeps `Accepted=True` (before the controller remembered
/// its own snapshots, this pass wrote `a` `Pending` too).
async fn a_new_route_is_pending_while_route_a_stays_accepted(w: &mut World) {
    let before = controller_version(&w.controller).unwrap();
    w.server.apply(&route("b", "b.example.com")).await.unwrap();
    until_route_accepted_is(&w.client, "b", ("False", "Pending")).await;
    let after = controller_version(&w.controller).unwrap();
    assert_ne!(before, after, "the controller published route b");
    // A status pass that read `a` as not served writes it with `b` or in the
    // next batch (the status loop waits at most 0.5 s).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        accepted(&w.client, "a").await,
        cond("True", "Accepted"),
        "route a is served as of the node's snapshot and unchanged since"
    );
}

/// The node reports the controller's new snapshot: `b` is Accepted.
async fn the_node_catching_up_accepts_the_new_route(w: &mut World) {
    let version = controller_version(&w.controller).unwrap();
    w.node.send(caught_up(&version)).await.unwrap();
    until_route_accepted_is(&w.client, "b", ("True", "Accepted")).await;
    assert_eq!(accepted(&w.client, "a").await, cond("True", "Accepted"));
}
