//! The ADS server over a real socket: a tonic client plays Envoy, in SotW and in
//! Delta, and the fleet view follows what it ACKs and NACKs.

use aether_ads::{AckState, AdsServer, Fleet, Protocol, bind, serve_on};
use aether_ir::ObjectRef;
use aether_xds::{ResourceType, Snapshot};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::rpc::Status;
use prost::Message;
use std::sync::Arc;
use std::time::Duration;
use support::{members_of, mk_resources};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

mod support;

const CDS: ResourceType = ResourceType::Cluster;
const EDS: ResourceType = ResourceType::Endpoint;
const LDS: ResourceType = ResourceType::Listener;
const RDS: ResourceType = ResourceType::Route;
const WAIT: Duration = Duration::from_secs(10);

/// One Gateway `edge/web` made of a cluster, its endpoints, a listener and a route
/// table; `route_rev` moves the route table to a new version.
fn snapshot(route_rev: u32) -> Arc<Snapshot> {
    let cluster = Cluster {
        name: "backend".into(),
        ..Default::default()
    };
    let endpoints = ClusterLoadAssignment {
        cluster_name: "backend".into(),
        ..Default::default()
    };
    let listener = Listener {
        name: "http".into(),
        ..Default::default()
    };
    let routes = RouteConfiguration {
        name: "routes".into(),
        request_headers_to_remove: vec![format!("x-rev-{route_rev}")],
        ..Default::default()
    };
    let resources = [
        (CDS, "backend", cluster.encode_to_vec()),
        (EDS, "backend", endpoints.encode_to_vec()),
        (LDS, "http", listener.encode_to_vec()),
        (RDS, "routes", routes.encode_to_vec()),
    ];
    let members = members_of(&resources);
    Arc::new(Snapshot::new(
        mk_resources(resources),
        [(web(), members)].into(),
    ))
}

fn web() -> ObjectRef {
    ObjectRef::new("edge", "web")
}

fn node(id: &str) -> Option<Node> {
    Some(Node {
        id: id.into(),
        ..Default::default()
    })
}

struct Running {
    address: String,
    fleet: Fleet,
    snapshots: watch::Sender<Arc<Snapshot>>,
    _shutdown: oneshot::Sender<()>,
}

async fn start() -> Running {
    let (snapshots, rx) = watch::channel(snapshot(1));
    let fleet = Fleet::new();
    let listener = bind("127.0.0.1:0").await.expect("bind");
    let address = format!("http://{}", listener.local_addr());
    let (shutdown, stop) = oneshot::channel::<()>();
    let server = AdsServer::new(rx, fleet.clone());
    tokio::spawn(async move {
        serve_on(listener, server, async {
            let _ = stop.await;
        })
        .await
        .expect("serve");
    });
    Running {
        address,
        fleet,
        snapshots,
        _shutdown: shutdown,
    }
}

/// Waits until the fleet says `want` for edge/web under `snapshot`.
async fn wait_for(
    fleet: &Fleet,
    snapshot: &Snapshot,
    want: impl Fn(&AckState) -> bool,
) -> AckState {
    let mut changes = fleet.subscribe();
    tokio::time::timeout(WAIT, async {
        loop {
            let state = fleet.gateway_state(snapshot, &web());
            if want(&state) {
                return state;
            }
            changes.changed().await.expect("fleet alive");
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "fleet never reached the wanted state: {:?}",
            fleet.gateway_state(snapshot, &web())
        )
    })
}

async fn next<T>(stream: &mut Streaming<T>) -> T {
    tokio::time::timeout(WAIT, stream.message())
        .await
        .expect("a response in time")
        .expect("stream ok")
        .expect("stream open")
}

fn sotw(ty: ResourceType, names: &[&str], nonce: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        node: node("envoy-sotw"),
        type_url: ty.type_url().into(),
        resource_names: names.iter().map(|s| s.to_string()).collect(),
        response_nonce: nonce.into(),
        ..Default::default()
    }
}

type AdsClient = AggregatedDiscoveryServiceClient<tonic::transport::Channel>;

/// A stream opened by `open` on a fresh client: its request sender and responses.
async fn stream<Req, Resp, F, Fut>(
    running: &Running,
    open: F,
) -> (mpsc::Sender<Req>, Streaming<Resp>)
where
    F: FnOnce(AdsClient, ReceiverStream<Req>) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<Streaming<Resp>>, tonic::Status>>,
{
    let client = AdsClient::connect(running.address.clone())
        .await
        .expect("connect");
    let (tx, rx) = mpsc::channel::<Req>(16);
    let responses = open(client, ReceiverStream::new(rx))
        .await
        .expect("stream")
        .into_inner();
    (tx, responses)
}

type Sotw = (mpsc::Sender<DiscoveryRequest>, Streaming<DiscoveryResponse>);

#[tokio::test]
async fn sotw_handshake_ack_nack_and_disconnect() {
    let running = start().await;
    let mut envoy: Sotw = stream(&running, |mut c, rx| async move {
        c.stream_aggregated_resources(rx).await
    })
    .await;
    let rds_version = every_type_is_sent_once_and_acked(&running, &mut envoy).await;
    let rejected =
        a_nack_is_reported_with_the_node_and_envoys_text(&running, &mut envoy, rds_version).await;
    let s3 = republishing_sends_nothing_and_the_fix_is_acked(&running, &mut envoy, rejected).await;
    let metrics = running.fleet.metrics();
    assert_eq!(metrics.nacks(ResourceType::Route), 1, "{metrics:?}");
    assert_eq!(metrics.connected(Protocol::Sotw), 1, "{metrics:?}");
    drop(envoy);
    wait_for(&running.fleet, &s3, |s| *s == AckState::Pending).await;
    assert!(running.fleet.debug_view().nodes.is_empty());
}

/// Returns the route table's version as sent.
async fn every_type_is_sent_once_and_acked(
    running: &Running,
    (tx, responses): &mut Sotw,
) -> String {
    let mut rds_version = String::new();
    for (ty, names) in [
        (CDS, vec![]),
        (EDS, vec!["backend"]),
        (LDS, vec![]),
        (RDS, vec!["routes"]),
    ] {
        tx.send(sotw(ty, &names, "")).await.unwrap();
        let r = next(responses).await;
        assert_eq!(r.type_url, ty.type_url());
        assert_eq!(r.resources.len(), 1);
        tx.send(sotw(ty, &names, &r.nonce)).await.unwrap();
        rds_version = r.version_info;
    }
    let s1 = snapshot(1);
    assert_eq!(
        wait_for(&running.fleet, &s1, |s| *s == AckState::Acked).await,
        AckState::Acked
    );
    assert!(running.fleet.debug_view().nodes.contains_key("envoy-sotw"));
    rds_version
}

/// A new route table is pushed alone; Envoy rejects it. Returns the rejected push.
async fn a_nack_is_reported_with_the_node_and_envoys_text(
    running: &Running,
    (tx, responses): &mut Sotw,
    acked_rds_version: String,
) -> DiscoveryResponse {
    let s2 = snapshot(2);
    running.snapshots.send(s2.clone()).unwrap();
    let pushed = next(responses).await;
    assert_eq!(pushed.type_url, RDS.type_url());
    let nack = DiscoveryRequest {
        error_detail: Some(Status {
            code: 13,
            message: "route: bad regex".into(),
            ..Default::default()
        }),
        version_info: acked_rds_version,
        ..sotw(RDS, &["routes"], &pushed.nonce)
    };
    tx.send(nack).await.unwrap();
    let state = wait_for(&running.fleet, &s2, |s| matches!(s, AckState::Nacked(_))).await;
    let AckState::Nacked(rejection) = state else {
        unreachable!()
    };
    assert!(
        rejection.node == "envoy-sotw" && rejection.message.contains("route: bad regex"),
        "{rejection:?}"
    );
    pushed
}

/// Republishing the same content resends nothing: the stream stays quiet (a
/// resend would arrive here), and only then is the fix published, so the two
/// snapshots are not merged into one. The fix is sent and ACKed. Returns its
/// snapshot.
async fn republishing_sends_nothing_and_the_fix_is_acked(
    running: &Running,
    (tx, responses): &mut Sotw,
    rejected: DiscoveryResponse,
) -> Arc<Snapshot> {
    running.snapshots.send(snapshot(2)).unwrap();
    let quiet = tokio::time::timeout(Duration::from_millis(300), responses.message()).await;
    assert!(
        quiet.is_err(),
        "republishing the rejected content sent something: {quiet:?}"
    );
    let s3 = snapshot(3);
    running.snapshots.send(s3.clone()).unwrap();
    let fixed = next(responses).await;
    assert_eq!(fixed.type_url, RDS.type_url());
    assert_ne!(
        fixed.version_info, rejected.version_info,
        "not the rejected version again"
    );
    tx.send(sotw(RDS, &["routes"], &fixed.nonce)).await.unwrap();
    wait_for(&running.fleet, &s3, |s| *s == AckState::Acked).await;
    s3
}

/// [`sotw`]'s request in Delta's terms, from node envoy-delta.
fn delta(ty: ResourceType, subscribe: &[&str], nonce: &str) -> DeltaDiscoveryRequest {
    let request = sotw(ty, subscribe, nonce);
    DeltaDiscoveryRequest {
        node: node("envoy-delta"),
        type_url: request.type_url,
        resource_names_subscribe: request.resource_names,
        response_nonce: request.response_nonce,
        ..Default::default()
    }
}

#[tokio::test]
async fn delta_handshake_and_incremental_update() {
    let running = start().await;
    let (tx, mut responses) = stream(&running, |mut c, rx| async move {
        c.delta_aggregated_resources(rx).await
    })
    .await;

    let s1 = snapshot(1);
    // Envoy reconnecting: it already holds the listener at the current version.
    let mut lds = delta(LDS, &[], "");
    lds.initial_resource_versions = [(
        "http".to_string(),
        s1.version_of(LDS, "http").unwrap().to_string(),
    )]
    .into();
    for (ty, names) in [(CDS, vec![]), (EDS, vec!["backend"])] {
        tx.send(delta(ty, &names, "")).await.unwrap();
        let r: DeltaDiscoveryResponse = next(&mut responses).await;
        assert_eq!(r.type_url, ty.type_url());
        assert_eq!(r.resources.len(), 1);
        tx.send(delta(ty, &[], &r.nonce)).await.unwrap();
    }
    tx.send(lds).await.unwrap();
    let r = next(&mut responses).await;
    assert_eq!(r.type_url, LDS.type_url());
    assert!(r.resources.is_empty(), "the held listener is not resent");
    tx.send(delta(LDS, &[], &r.nonce)).await.unwrap();
    tx.send(delta(RDS, &["routes"], "")).await.unwrap();
    let r = next(&mut responses).await;
    assert_eq!(r.resources[0].name, "routes");
    tx.send(delta(RDS, &[], &r.nonce)).await.unwrap();
    wait_for(&running.fleet, &s1, |s| *s == AckState::Acked).await;

    let s2 = snapshot(2);
    running.snapshots.send(s2.clone()).unwrap();
    let r = next(&mut responses).await;
    assert_eq!(r.type_url, RDS.type_url());
    assert_eq!(r.resources.len(), 1);
    assert_eq!(
        r.resources[0].version,
        s2.version_of(RDS, "routes").unwrap()
    );
    assert_eq!(running.fleet.gateway_state(&s2, &web()), AckState::Pending);
    tx.send(delta(RDS, &[], &r.nonce)).await.unwrap();
    wait_for(&running.fleet, &s2, |s| *s == AckState::Acked).await;
    let view = running.fleet.debug_view();
    assert_eq!(
        view.nodes["envoy-delta"].acked["RDS"].resources["routes"],
        s2.version_of(RDS, "routes").unwrap()
    );
}

#[tokio::test]
async fn unix_socket_binds_and_bad_addresses_are_errors() {
    let dir = std::env::temp_dir().join(format!("aether-ads-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("xds.sock");
    let listen = format!("unix:{}", path.display());
    let listener = bind(&listen).await.expect("bind unix socket");
    assert_eq!(listener.local_addr(), listen);
    // Only its owner may connect: ADS carries private keys.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode {mode:o}");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("xds.sock")],
        "no staging file left"
    );
    drop(listener);
    // The socket file left behind is replaced on the next bind.
    bind(&listen).await.expect("rebind over a stale socket");
    let _ = std::fs::remove_dir_all(&dir);

    let err = bind("not an address").await.unwrap_err();
    assert!(
        matches!(err, aether_ads::ServeError::InvalidAddress { .. }),
        "{err}"
    );
    // Private keys travel in clear: never on an address others can reach.
    for public in ["0.0.0.0:0", "[::]:0"] {
        let err = bind(public).await.unwrap_err();
        assert!(
            matches!(err, aether_ads::ServeError::NotPrivate { .. }),
            "{public}: {err}"
        );
    }
    bind("localhost:0").await.expect("loopback by name");
    bind("[::1]:0").await.ok();
}

#[tokio::test]
async fn shutdown_ends_open_streams() {
    let (_publish, rx) = watch::channel(snapshot(1));
    let fleet = Fleet::new();
    let listener = bind("127.0.0.1:0").await.expect("bind");
    let address = format!("http://{}", listener.local_addr());
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve_on(
        listener,
        AdsServer::new(rx, fleet.clone()),
        async {
            let _ = stopped.await;
        },
    ));
    let mut client = AggregatedDiscoveryServiceClient::connect(address)
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel::<DiscoveryRequest>(16);
    let mut responses = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    tx.send(sotw(CDS, &[], "")).await.unwrap();
    next(&mut responses).await;

    // Envoy never ends an ADS stream: shutdown must, or it waits forever.
    stop.send(()).unwrap();
    let ended = tokio::time::timeout(WAIT, responses.message())
        .await
        .expect("stream ended");
    let status = ended.expect_err("ended with a status");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    tokio::time::timeout(WAIT, server)
        .await
        .expect("serve returned")
        .unwrap()
        .expect("clean shutdown");
    assert!(fleet.debug_view().nodes.is_empty());
    drop(tx);
}
