//! The server's [`Limits`] over a real socket: a stream beyond `max_streams` is
//! refused, and a peer that stops reading is disconnected instead of piling up
//! responses. Both show in the fleet's metrics.

use crate::fixtures::{LDS, RDS, mk_request, mk_snapshot};
use crate::{AdsMetrics, AdsServer, Fleet, Limits, bind, serve_on};
use aether_xds::{Resource, Snapshot};
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

const WAIT: Duration = Duration::from_secs(10);

struct Running {
    client: AggregatedDiscoveryServiceClient<Channel>,
    fleet: Fleet,
    snapshots: watch::Sender<Arc<Snapshot>>,
    _shutdown: oneshot::Sender<()>,
}

async fn start(limits: Limits, first: Arc<Snapshot>) -> Running {
    let (snapshots, rx) = watch::channel(first);
    let fleet = Fleet::new();
    let listener = bind("127.0.0.1:0").await.expect("bind");
    let address = format!("http://{}", listener.local_addr());
    let (shutdown, stop) = oneshot::channel::<()>();
    let server = AdsServer::new(rx, fleet.clone()).with_limits(limits);
    tokio::spawn(async move {
        let _ = serve_on(listener, server, async {
            let _ = stop.await;
        })
        .await;
    });
    let client = AggregatedDiscoveryServiceClient::connect(address)
        .await
        .expect("connect");
    Running {
        client,
        fleet,
        snapshots,
        _shutdown: shutdown,
    }
}

/// A SotW stream: its requests sender, which keeps it open, and its responses.
type Stream = (
    mpsc::Sender<DiscoveryRequest>,
    tonic::Streaming<DiscoveryResponse>,
);

/// Opens a SotW stream and sends `first`.
async fn open(running: &Running, first: DiscoveryRequest) -> Result<Stream, tonic::Status> {
    let (tx, rx) = mpsc::channel(4);
    tx.send(first).await.expect("queue the request");
    let mut client = running.client.clone();
    let responses = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await?
        .into_inner();
    Ok((tx, responses))
}

/// Polls one of the fleet's counters until it reads `value`.
async fn metric_reaches(fleet: &Fleet, counter: fn(&AdsMetrics) -> u64, value: u64) {
    tokio::time::timeout(WAIT, async {
        while counter(fleet.metrics()) != value {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the counter never read {value}: {:?}", fleet.metrics()));
}

#[tokio::test]
async fn a_stream_beyond_the_maximum_is_refused_and_counted() {
    let limits = Limits {
        max_streams: 2,
        ..Limits::default()
    };
    let running = start(limits, mk_snapshot(&[(LDS, "http", 1)], &[])).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let (tx, mut responses) = open(&running, mk_request(LDS, &[], ""))
            .await
            .expect("a stream within the limit");
        let first = tokio::time::timeout(WAIT, responses.message())
            .await
            .expect("in time");
        assert!(matches!(first, Ok(Some(_))), "{first:?}");
        held.push((tx, responses));
    }
    let refused = open(&running, mk_request(LDS, &[], "")).await;
    let Err(status) = refused else {
        panic!("the third stream is accepted");
    };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    metric_reaches(&running.fleet, AdsMetrics::refused, 1).await;

    // A closed stream gives its place back.
    drop(held.pop());
    tokio::time::timeout(WAIT, async {
        loop {
            if let Ok((_tx, mut r)) = open(&running, mk_request(LDS, &[], "")).await
                && matches!(r.message().await, Ok(Some(_)))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a place frees up once a stream ends");
}

/// One route table of `size` bytes (never decoded: the peer does not read it).
fn big_routes(rev: u8, size: usize) -> Arc<Snapshot> {
    let mut by_type = BTreeMap::new();
    let mut routes = BTreeMap::new();
    routes.insert(
        "routes".to_string(),
        Resource::new("routes", RDS.type_url(), vec![rev; size]),
    );
    by_type.insert(RDS, routes);
    Arc::new(Snapshot::new(by_type, Default::default()))
}

/// A server with `stall_timeout` serving [`big_routes`] at rev 1 (each response
/// far bigger than an HTTP/2 window, so unread ones back up), and a stream
/// subscribed to them.
async fn given_a_stream_of_big_route_tables(stall_timeout: Duration) -> (Running, Stream) {
    let limits = Limits {
        stall_timeout,
        ..Limits::default()
    };
    let running = start(limits, big_routes(1, 1 << 20)).await;
    let stream = open(&running, mk_request(RDS, &["routes"], ""))
        .await
        .expect("stream");
    (running, stream)
}

#[tokio::test]
async fn a_peer_that_stops_reading_is_disconnected_not_buffered() {
    let (running, (_tx, mut responses)) =
        given_a_stream_of_big_route_tables(Duration::from_millis(300)).await;
    for rev in 2..40 {
        running.snapshots.send_replace(big_routes(rev, 1 << 20));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    metric_reaches(&running.fleet, AdsMetrics::stalled, 1).await;
    // What was sent before the disconnect can still be read; then the stream ends.
    tokio::time::timeout(WAIT, async {
        while let Ok(Some(_)) = responses.message().await {}
    })
    .await
    .expect("the stream ends");
}

#[tokio::test]
async fn a_peer_that_reads_slowly_but_keeps_up_is_not_disconnected() {
    let (running, (_tx, mut responses)) =
        given_a_stream_of_big_route_tables(Duration::from_millis(500)).await;
    let mut last = 0u8;
    for rev in 2..12u8 {
        running.snapshots.send_replace(big_routes(rev, 1 << 20));
        // Read whatever arrived, pausing well under the stall timeout.
        tokio::time::sleep(Duration::from_millis(100)).await;
        while let Ok(Ok(Some(r))) =
            tokio::time::timeout(Duration::from_millis(50), responses.message()).await
        {
            last = r.resources[0].value[0];
        }
    }
    let latest = tokio::time::timeout(WAIT, async {
        while last != 11 {
            let r = responses
                .message()
                .await
                .expect("open")
                .expect("a response");
            last = r.resources[0].value[0];
        }
    })
    .await;
    assert!(latest.is_ok(), "the newest snapshot arrives (last {last})");
    assert_eq!(running.fleet.metrics().stalled(), 0);
}
