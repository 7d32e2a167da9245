//! Kubernetes mode as deployed (issue point 5, and least privilege): the edge
//! agent authenticates as the `aether-edge` ServiceAccount and the controller as
//! `aether-edge-controller`, each with exactly the RBAC of `deploy/` (real
//! tokens, a real authorizer); the controller elects itself and takes the
//! agent's reports over TLS; the Envoy reaches ADS over a Unix socket only.
//! Everything the controller must do — elect, create the Service, write every
//! kind of status (TCPRoute, UDPRoute and XBackend included), keep an
//! EndpointSelector XBackend's headless Service in the XBackend's namespace
//! (create, update, delete) — works under its rights, and nothing either
//! process does is refused. Every write the edge identity tries, the API server
//! refuses (403), while the writer identity's same request passes.

use crate::support::*;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::experimental::xbackends::XBackend;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::tcproutes::TcpRoute;
use gateway_api::apis::standard::udproutes::UdpRoute;
use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
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
        only_the_writer_identity_may_write(&w).await;
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
    until_leader(c, "controller-a", WAIT).await;
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
        "the LeaderElected Event on controller-a",
        |e| e.reason.as_deref() == Some("LeaderElected") && regarding(e) == Some("controller-a"),
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
    let controller = w.controller.as_mut().expect("deployed with a controller");
    for (who, p) in [
        ("agent", &mut w.agent),
        ("controller", &mut controller.proc),
    ] {
        let log = p.log_text();
        let refused: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("forbidden") || l.contains("Forbidden"))
            .collect();
        assert!(
            refused.is_empty(),
            "the deployed RBAC refused the {who}: {refused:#?}"
        );
        assert!(p.is_running(), "{who} exited:\n{log}");
    }
}

/// Whether a request passed, whatever it returned.
fn ok<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    r.map(|_| ())
}

/// 403 Forbidden, from the API server's authorizer.
fn forbidden<T: std::fmt::Debug>(what: &str, result: Result<T, kube::Error>) {
    match result {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{what}: {status:?}"),
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

/// Each write the leader makes, as one request by `c`. Dry runs where the
/// request would change what the running controller owns: the API server
/// authorizes (and admits and validates) a dry run as the real thing, and
/// stores nothing.
async fn writes(c: &kube::Client) -> Vec<(&'static str, Result<(), kube::Error>)> {
    let dry_post = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let dry_patch = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let empty = Patch::Merge(json!({}));
    let gateways = kube::Api::<Gateway>::namespaced(c.clone(), NS);
    let classes = kube::Api::<GatewayClass>::all(c.clone());
    let services = kube::Api::<Service>::namespaced(c.clone(), NS);
    let slices = kube::Api::<EndpointSlice>::namespaced(c.clone(), NS);
    let leases = kube::Api::<Lease>::namespaced(c.clone(), "aether-ingress");
    let events = kube::Api::<Event>::namespaced(c.clone(), NS);
    let fleet = kube::Api::<ConfigMap>::namespaced(c.clone(), "aether-ingress");
    let reviews = kube::Api::<TokenReview>::all(c.clone());
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "probe"},
        "spec": {"ports": [{"port": 80}]},
    }))
    .unwrap();
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "probe"}, "addressType": "IPv4", "endpoints": [],
    }))
    .unwrap();
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "probe"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "gateway.aether.io/edge", "reportingInstance": "probe",
        "action": "Probe", "reason": "Probe", "type": "Normal",
        "regarding": {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "namespace": NS, "name": "gw"},
    }))
    .unwrap();
    let review: TokenReview = serde_json::from_value(json!({"spec": {"token": "x.y.z"}})).unwrap();
    vec![
        (
            "Gateway status",
            ok(gateways.patch_status("gw", &dry_patch, &empty).await),
        ),
        (
            "GatewayClass finalizer",
            ok(classes.patch("aether", &dry_patch, &empty).await),
        ),
        (
            "Service create",
            ok(services.create(&dry_post, &service).await),
        ),
        (
            "EndpointSlice create",
            ok(slices.create(&dry_post, &slice).await),
        ),
        (
            "Lease update",
            ok(leases.patch("aether-edge", &dry_patch, &empty).await),
        ),
        ("Event create", ok(events.create(&dry_post, &event).await)),
        (
            "fleet ConfigMap",
            ok(fleet.patch("aether-edge-fleet", &dry_patch, &empty).await),
        ),
        (
            "TokenReview",
            ok(reviews.create(&PostParams::default(), &review).await),
        ),
    ]
}

/// RBAC cannot condition a right on holding the Lease, so the rights are split
/// by identity: every edge node holds the edge identity, and the API server
/// refuses it each write; the writer identity's same request passes. Secrets
/// stay readable by the edge identity (what its Envoy serves; see
/// deploy/README.md, "Least privilege"), never writable by either.
async fn only_the_writer_identity_may_write(w: &World) {
    let client = |account: &'static str| w.server.service_account_client("aether-ingress", account);
    let edge = client("aether-edge").await.unwrap();
    let writer = client("aether-edge-controller").await.unwrap();
    let fleet = kube::Api::<ConfigMap>::namespaced(w.client.clone(), "aether-ingress");
    eventually(WAIT, "the fleet ConfigMap", || {
        let fleet = fleet.clone();
        async move {
            let cm = fleet.get_opt("aether-edge-fleet").await;
            cm.map_err(|e| e.to_string())?
                .map(|_| ())
                .ok_or("not yet".to_string())
        }
    })
    .await;
    for (what, result) in writes(&edge).await {
        forbidden(&format!("the edge identity: {what}"), result);
    }
    for (what, result) in writes(&writer).await {
        assert!(result.is_ok(), "the writer identity: {what}: {result:?}");
    }
    // The one Lease by name, nothing else of the edge namespace's.
    let leases = kube::Api::<Lease>::namespaced(edge.clone(), "aether-ingress");
    leases.get("aether-edge").await.unwrap();
    forbidden("list Leases", leases.list(&ListParams::default()).await);
    // TLS Secrets, as the agent asks for them; no Secret is written by either.
    let tls = ListParams::default().fields(aether_k8s::watch::SECRET_TYPES);
    kube::Api::<Secret>::all(edge.clone())
        .list(&tls)
        .await
        .unwrap();
    let secret: Secret = serde_json::from_value(json!({"metadata": {"name": "probe"}})).unwrap();
    let dry_post = PostParams {
        dry_run: true,
        ..Default::default()
    };
    for (who, c) in [("edge", &edge), ("writer", &writer)] {
        let secrets = kube::Api::<Secret>::namespaced(c.clone(), NS);
        forbidden(
            &format!("{who}: Secret create"),
            secrets.create(&dry_post, &secret).await,
        );
    }
}
