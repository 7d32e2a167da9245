//! Served versions against a real kube-apiserver, as the watches discover them:
//! a kind whose CRD is not installed holds up nothing and is watched once it is
//! installed; a kind served only at an older version (TCPRoute v1alpha2, from the
//! v1.5.1 CRDs) is read at that version and its status written there.

use aether_gateway::Kind;
use aether_gateway::status::{
    Condition, Identity, ParentReference, RouteParentStatus, RouteStatus,
};
use aether_gateway::vocabulary::route::{Reason, Type};
use aether_ir::ObjectRef;
use aether_k8s::status::{StatusInputs, StatusKind, StatusWriter};
use aether_k8s::{Index, ServedVersions, watch};
use aether_testkit::{ApiServer, gateway_api_crd_dir, gateway_api_crd_dir_at};
use gateway_api::apis::standard::tcproutes::TcpRoute;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TCP_ROUTES: &str = "tcproutes.gateway.networking.k8s.io";
const UDP_ROUTES: &str = "udproutes.gateway.networking.k8s.io";
const OURS: &str = "gateway.aether.io/edge";

fn tcp_route(version: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: app}}\n---\n\
         apiVersion: gateway.networking.k8s.io/{version}\nkind: TCPRoute\n\
         metadata: {{name: db, namespace: app}}\n\
         spec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - backendRefs: [{{name: db, port: 5432}}]\n"
    )
}

async fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < timeout, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

type Served = tokio::sync::watch::Receiver<Option<ServedVersions>>;

/// The watches, rediscovering every second.
fn start_watches(server: &ApiServer) -> (Arc<Index>, Served, tokio::task::JoinHandle<()>) {
    let index = Arc::new(Index::new(watch::KINDS));
    let (tx, served) = tokio::sync::watch::channel(None);
    let task = tokio::spawn(watch::run(
        server.client(),
        index.clone(),
        tx,
        Duration::from_secs(1),
    ));
    (index, served, task)
}

fn has_db(index: &Index) -> bool {
    index
        .store()
        .is_some_and(|s| s.get::<TcpRoute>("app", "db").is_some())
}

#[tokio::test]
async fn a_missing_crd_is_listed_empty_and_watched_once_installed() {
    let server = ApiServer::start_without(&[TCP_ROUTES, UDP_ROUTES]).await;
    let (index, served, task) = start_watches(&server);

    // The first publish does not wait for kinds nobody serves.
    wait_until("the store readable", Duration::from_secs(30), || {
        index.store().is_some()
    })
    .await;
    let now = served.borrow().clone().expect("discovered");
    assert_eq!(now.missing(), vec![Kind::TcpRoute, Kind::UdpRoute]);
    assert_eq!(now.version(Kind::HttpRoute), Some("v1"));

    // Installed later: watched from the next discovery pass, objects and all.
    let crds = gateway_api_crd_dir().await.unwrap();
    server.install_crds(&crds, &[TCP_ROUTES]).await.unwrap();
    server.apply(&tcp_route("v1")).await.unwrap();
    wait_until("the TCPRoute in the store", Duration::from_secs(20), || {
        has_db(&index)
    })
    .await;
    let now = served.borrow().clone().unwrap();
    assert_eq!(now.version(Kind::TcpRoute), Some("v1"));
    assert_eq!(now.missing(), vec![Kind::UdpRoute]);
    task.abort();
}

fn planned_on_gw() -> RouteStatus {
    RouteStatus {
        parents: vec![std::sync::Arc::new(RouteParentStatus {
            gateway: aether_ir::ObjectRef::new("app", "gw"),
            parent_ref: ParentReference {
                group: "gateway.networking.k8s.io".into(),
                kind: "Gateway".into(),
                namespace: None,
                name: "gw".into(),
                section_name: None,
                port: None,
            }
            .into(),
            controller_name: OURS.into(),
            conditions: vec![Condition::new(
                Type::Accepted,
                false,
                Reason::Pending,
                "waiting",
                1,
            )],
        })],
        of: Identity {
            uid: None,
            generation: 1,
        },
    }
}

#[tokio::test]
async fn an_older_served_version_is_read_and_written_at_that_version() {
    let server = ApiServer::start().await;
    // The v1.5.1 experimental TCPRoute CRD serves v1alpha2 only.
    server.delete_crds(&[TCP_ROUTES]).await.unwrap();
    let old = gateway_api_crd_dir_at("v1.5.1", "experimental")
        .await
        .unwrap();
    server.install_crds(&old, &[TCP_ROUTES]).await.unwrap();
    server.apply(&tcp_route("v1alpha2")).await.unwrap();
    let (index, served, task) = start_watches(&server);
    wait_until(
        "the v1alpha2 TCPRoute in the store",
        Duration::from_secs(30),
        || has_db(&index),
    )
    .await;
    let served = served.borrow().clone().unwrap();
    assert_eq!(served.version(Kind::TcpRoute), Some("v1alpha2"));

    // Our parent entry, written at v1alpha2 with the route's resourceVersion.
    let mut inputs = StatusInputs {
        store: index.store().unwrap(),
        controller_name: OURS.into(),
        served,
        ..Default::default()
    };
    std::sync::Arc::make_mut(&mut inputs.plan.tcp_routes).insert(
        ObjectRef::new("app", "db"),
        std::sync::Arc::new(planned_on_gw()),
    );
    let writer = StatusWriter::default();
    let now = Time(Timestamp::from_second(Timestamp::now().as_second()).unwrap());
    let patches = writer.patches(&inputs, &now);
    assert_eq!(patches.len(), 1, "{patches:?}");
    assert_eq!(patches[0].version(), "v1alpha2");
    let report = writer.write(&server.client(), patches).await.unwrap();
    assert_eq!(
        report.written,
        vec![(StatusKind::TcpRoute, ObjectRef::new("app", "db"))]
    );
    let resource = ApiResource {
        group: "gateway.networking.k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "gateway.networking.k8s.io/v1alpha2".into(),
        kind: "TCPRoute".into(),
        plural: "tcproutes".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "app", &resource);
    let route = api.get_status("db").await.unwrap();
    let parents = &route.data["status"]["parents"];
    assert_eq!(parents[0]["controllerName"], OURS, "{parents}");
    assert_eq!(parents[0]["conditions"][0]["reason"], "Pending");

    // What the write returned is laid over the store: no second write.
    assert!(writer.patches(&inputs, &now).is_empty());
    task.abort();
}
