//! Kubernetes mode as deployed (issue point 5): the agent authenticates as the
//! `aether-edge` ServiceAccount with exactly the RBAC of `deploy/` (a real token, a
//! real authorizer), leader election on, and its Envoy reaches ADS over a Unix
//! socket only. Everything the agent must do — watch, elect, create the Service,
//! write every kind of status (TCPRoute, UDPRoute and XBackend included), keep an
//! EndpointSelector XBackend's headless Service in the XBackend's namespace
//! (create, update, delete) — works under those rights, and nothing is refused.

use crate::support::*;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::experimental::xbackends::XBackend;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::tcproutes::TcpRoute;
use gateway_api::apis::standard::udproutes::UdpRoute;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use std::time::Duration;

const NS: &str = "app";
const WAIT: Duration = Duration::from_secs(30);
/// `/xb` to XBackend `pay`: its status is ours to write too.
const XB_ROUTE: &str = "  parentRefs: [{name: gw}]\n  rules:\n  - matches: [{path: {type: PathPrefix, value: /xb}}]\n    backendRefs: [{group: gateway.networking.x-k8s.io, kind: XBackend, name: pay}]\n";

#[test]
fn the_agent_works_with_the_deployed_rbac_and_a_unix_socket() {
    in_netns(async {
        let mut w = given_the_deployed_rbac_and_an_agent_on_a_socket().await;
        let svc = it_leads_and_writes_every_kinds_status(&w).await;
        its_envoy_serves_the_service_port(&svc);
        it_collects_a_deleted_gateways_service(&w).await;
        it_keeps_the_xbackends_service(&w).await;
        it_publishes_the_fleet_view(&w).await;
        nothing_was_refused(&mut w);
    });
}

type World = OneNode<Proc>;

fn mk_app() -> String {
    let gw = mk_gateway(
        NS,
        "gw",
        &[
            HTTP_80,
            "{name: tcp, protocol: TCP, port: 9000}",
            "{name: udp, protocol: UDP, port: 9053}",
        ],
    );
    let to_b0 = |kind, name, parent| mk_route_to(kind, NS, name, parent, "b0");
    [
        format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n"),
        gw,
        to_b0("HTTPRoute", "r1", "{name: gw}"),
        to_b0("TCPRoute", "t1", "{name: gw, sectionName: tcp}"),
        to_b0("UDPRoute", "u1", "{name: gw, sectionName: udp}"),
        mk_xbackend(NS, "pay", "{app: pay}", 8080),
        mk_route("HTTPRoute", NS, "x1", XB_ROUTE),
    ]
    .join("---\n")
}

/// As in the DaemonSet (see [`OneNode::deployed`]).
async fn given_the_deployed_rbac_and_an_agent_on_a_socket() -> World {
    let b0 = Backend::on(POD_IP, "b0");
    let app = [mk_app(), b0.yaml(NS)].join("---\n");
    OneNode::deployed("kube-rbac", &app, b0).await
}

/// Elected, the Service created, and every kind's status written (TCPRoute and
/// UDPRoute watched and written under the same rights); returns the Service.
async fn it_leads_and_writes_every_kinds_status(w: &World) -> Service {
    let c = &w.client;
    until_leader(c, "agent-a", WAIT).await;
    let svc = edge_service(c).await;
    assign_load_balancer(c, &public_service(c).await, POD_IP).await;
    eventually(WAIT, "Gateway programmed, route accepted", || async move {
        let gw = get_json::<Gateway>(c, Some(NS), "gw")
            .await
            .ok_or("no gw")?;
        let r = get_json::<HttpRoute>(c, Some(NS), "r1")
            .await
            .ok_or("no route")?;
        let (programmed, accepted) = (programmed(&gw), parent_accepted(&r, "gw", None));
        let both = programmed == cond("True", "Programmed") && accepted == cond("True", "Accepted");
        both.then_some(())
            .ok_or(format!("{programmed:?} {accepted:?}"))
    })
    .await;
    eventually(WAIT, "TCPRoute and UDPRoute status", || async move {
        let t = get_json::<TcpRoute>(c, Some(NS), "t1")
            .await
            .ok_or("no t1")?;
        let u = get_json::<UdpRoute>(c, Some(NS), "u1")
            .await
            .ok_or("no u1")?;
        match (
            our_parent(&t, "gw", Some("tcp")),
            our_parent(&u, "gw", Some("udp")),
        ) {
            (Some(_), Some(_)) => Ok(()),
            _ => Err(format!("{} {}", t["status"], u["status"])),
        }
    })
    .await;
    eventually(WAIT, "our ancestor entry on XBackend pay", || async move {
        let x = get_json::<XBackend>(c, Some(NS), "pay")
            .await
            .ok_or("no pay")?;
        let ancestors = x["status"]["ancestors"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        ancestors
            .iter()
            .any(|a| a["ancestorRef"]["name"] == "gw")
            .then_some(())
            .ok_or(x["status"].to_string())
    })
    .await;
    let classes: kube::Api<GatewayClass> = kube::Api::all(c.clone());
    let class = serde_json::to_value(classes.get("aether").await.unwrap()).unwrap();
    assert_eq!(
        status_reason(&class["status"]["conditions"], "Accepted"),
        cond("True", "Accepted")
    );
    // It says so on its pod, as an Event.
    until_event(
        c,
        "aether-ingress",
        "the LeaderElected Event on agent-a",
        |e| e.reason.as_deref() == Some("LeaderElected") && regarding(e) == Some("agent-a"),
    )
    .await;
    // The deployed RBAC lets it read the CRDs' release.
    assert_eq!(
        status_reason(&class["status"]["conditions"], "SupportedVersion"),
        cond("True", "SupportedVersion"),
        "{}",
        class["status"]
    );
    // And put the GatewayClass finalizer on the class its Gateway uses.
    eventually(WAIT, "the GatewayClass finalizer", || async {
        let class = classes.get("aether").await.map_err(|e| e.to_string())?;
        let finalizers = class.metadata.finalizers.unwrap_or_default();
        if finalizers
            .iter()
            .any(|f| f == aether_k8s::finalizer::FINALIZER)
        {
            Ok(())
        } else {
            Err(format!("{finalizers:?}"))
        }
    })
    .await;
    svc
}

fn its_envoy_serves_the_service_port(svc: &Service) {
    let target = service_ports(svc)[0].3;
    let r = http_get(&format!("{POD_IP}:{target}"), "example.test", "/", &[]).unwrap();
    assert_eq!(r.backend(), Some("b0"), "{r:?}");
}

/// GC of a deleted Gateway's Service is allowed too.
async fn it_collects_a_deleted_gateways_service(w: &World) {
    let gateways: kube::Api<Gateway> = kube::Api::namespaced(w.client.clone(), NS);
    gateways.delete("gw", &Default::default()).await.unwrap();
    edge_services(&w.client, 0, WAIT).await;
    public_services(&w.client, 0, WAIT).await;
}

/// The XBackend's Service created, updated (replaced) and deleted: the
/// ClusterRole's Service verbs, in a namespace other than the edge one.
async fn it_keeps_the_xbackends_service(w: &World) {
    let c = &w.client;
    let first =
        until_xbackend_services(c, NS, "the XBackend Service", WAIT, |s| s.len() == 1).await;
    w.server
        .apply(&mk_xbackend(NS, "pay", "{app: pay}", 8081))
        .await
        .unwrap();
    until_xbackend_services(c, NS, "its port updated", WAIT, |s| {
        s.len() == 1
            && s[0].metadata.uid == first[0].metadata.uid
            && service_ports(&s[0])[0].1 == 8081
    })
    .await;
    w.server
        .apply(&mk_external_xbackend(NS, "pay", 443))
        .await
        .unwrap();
    until_xbackend_services(c, NS, "no XBackend Service", WAIT, |s| s.is_empty()).await;
}

/// The leader's fleet view for `aether-edge fleet`: created, then patched
/// (the Role names that one ConfigMap for patch).
async fn it_publishes_the_fleet_view(w: &World) {
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(w.client.clone(), "aether-ingress");
    eventually(
        WAIT,
        "the fleet ConfigMap, without the deleted Gateway",
        || {
            let api = api.clone();
            async move {
                let cm = api
                    .get_opt("aether-edge-fleet")
                    .await
                    .map_err(|e| e.to_string())?;
                let text = cm
                    .and_then(|c| c.data)
                    .and_then(|d| d.get("fleet.json").cloned())
                    .ok_or("no fleet.json yet")?;
                let doc: serde_json::Value =
                    serde_json::from_str(&text).map_err(|e| e.to_string())?;
                (doc["leader"].is_string()
                    && doc["gateways"].as_object().is_some_and(|g| g.is_empty()))
                .then_some(())
                .ok_or(text)
            }
        },
    )
    .await;
}

fn nothing_was_refused(w: &mut World) {
    let log = w.agent.log_text();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("forbidden") || l.contains("Forbidden"))
        .collect();
    assert!(
        refused.is_empty(),
        "the deployed RBAC refused: {refused:#?}"
    );
    assert!(w.agent.is_running(), "agent exited:\n{log}");
}
