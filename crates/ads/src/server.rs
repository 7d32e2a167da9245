//! The tonic edge: one task per ADS stream drives that stream's state machine from
//! two inputs, Envoy's requests and snapshot changes, and sends what it answers.
//!
//! ```text
//!   requests (tonic::Streaming) ─┐
//!                                ├─ select! ─► SotwStream / DeltaStream ─► mpsc ─► Envoy
//!   watch<Arc<Snapshot>> ────────┘                    │
//!                                                     └─ events ─► FleetStream (+ logs)
//! ```
//!
//! Snapshots arrive through a `watch`, so a burst of changes coalesces into the
//! latest one. Everything protocol-related lives in the state machines; this file
//! only moves messages and logs.
//!
//! A peer is held to [`Limits`]: beyond `max_streams` open streams a new one is
//! refused with `RESOURCE_EXHAUSTED`, and a stream takes the next snapshot only
//! once Envoy has read everything sent before, so a peer that never reads holds
//! at most one snapshot's responses. One that has not read for `stall_timeout`
//! is disconnected. Both are counted in the fleet's metrics.

use crate::delta::DeltaStream;
use crate::event::{Event, Output};
use crate::fleet::{Fleet, FleetStream, Protocol};
use crate::sotw::SotwStream;
use aether_xds::{ResourceType, Snapshot};
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant as StdInstant};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

/// Responses queued per stream: one snapshot's worth (a response per type) and
/// the answers to a few requests. A new snapshot is taken only when it is empty.
const STREAM_BUFFER: usize = 8;

/// What one ADS server grants its peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Streams open at once; more are refused with `RESOURCE_EXHAUSTED`.
    pub max_streams: usize,
    /// How long a stream may leave responses unread before it is disconnected.
    pub stall_timeout: Duration,
}

impl Default for Limits {
    /// A node runs one Envoy; thousands of streams mean something is wrong. An
    /// Envoy reads a snapshot in milliseconds; half a minute unread is a stuck
    /// or hostile peer.
    fn default() -> Self {
        Limits {
            max_streams: 1024,
            stall_timeout: Duration::from_secs(30),
        }
    }
}

/// How long a cluster, endpoint set or secret stays on an Envoy after the
/// config that named it was replaced and ACKed: twice Envoy's default route
/// timeout (15 s), so a request routed to it before the change finishes.
pub const DEFAULT_REMOVAL_GRACE: Duration = Duration::from_secs(30);

/// Largest DiscoveryRequest accepted.
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

/// The ADS service: serves the latest snapshot to every stream and reports what
/// each Envoy ACKed to the [`Fleet`].
///
/// Clones share one set of streams: [`AdsServer::close_streams`] on any clone ends
/// them all.
#[derive(Debug, Clone)]
pub struct AdsServer {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    fleet: Fleet,
    closing: Arc<watch::Sender<bool>>,
    limits: Limits,
    removal_grace: Duration,
    open: Arc<AtomicUsize>,
}

impl AdsServer {
    pub fn new(snapshots: watch::Receiver<Arc<Snapshot>>, fleet: Fleet) -> Self {
        AdsServer {
            snapshots,
            fleet,
            closing: Arc::new(watch::Sender::new(false)),
            limits: Limits::default(),
            removal_grace: DEFAULT_REMOVAL_GRACE,
            open: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The same server keeping what its Envoys no longer need for `grace`
    /// (see [`crate::gate`]; [`DEFAULT_REMOVAL_GRACE`] otherwise).
    pub fn with_removal_grace(mut self, grace: Duration) -> Self {
        self.removal_grace = grace;
        self
    }

    /// The same server with other [`Limits`].
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Ends every open stream (and any opened later) with `UNAVAILABLE`, so Envoy
    /// reconnects elsewhere. A graceful gRPC shutdown waits for open streams, and
    /// an ADS stream never finishes by itself, so shutdown calls this first.
    pub fn close_streams(&self) {
        self.closing.send_replace(true);
    }

    /// The tonic service, to mount beside others. Whoever runs it must call
    /// [`AdsServer::close_streams`] (on a clone kept for that) when shutting down,
    /// as [`crate::serve`] does.
    pub fn into_service(self) -> AggregatedDiscoveryServiceServer<AdsServer> {
        // Snapshots of many Gateways make big responses, and an EDS request names
        // every cluster: lift tonic's 4 MiB default on what Envoy sends too.
        AggregatedDiscoveryServiceServer::new(self)
            .max_encoding_message_size(usize::MAX)
            .max_decoding_message_size(MAX_REQUEST_BYTES)
    }

    fn start<M: Machine>(
        &self,
        requests: Streaming<M::Request>,
        peer: String,
    ) -> Result<ReceiverStream<Result<M::Response, Status>>, Status> {
        let Some(slot) = StreamSlot::take(&self.open, self.limits.max_streams) else {
            self.fleet.stream_refused();
            tracing::warn!(%peer, max = self.limits.max_streams, "ADS stream refused: too many open streams");
            return Err(Status::resource_exhausted(format!(
                "this xDS server serves at most {} streams at once",
                self.limits.max_streams
            )));
        };
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let mut snapshots = self.snapshots.clone();
        let machine = M::new(snapshots.borrow_and_update().clone(), self.removal_grace);
        let inputs = Inputs {
            requests,
            snapshots,
            closing: self.closing.subscribe(),
        };
        let stream = Stream {
            fleet: self.fleet.clone(),
            tx,
            peer,
            stall_timeout: self.limits.stall_timeout,
            _slot: slot,
        };
        tokio::spawn(drive(machine, inputs, stream));
        Ok(ReceiverStream::new(rx))
    }
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for AdsServer {
    type StreamAggregatedResourcesStream = ReceiverStream<Result<DiscoveryResponse, Status>>;
    type DeltaAggregatedResourcesStream = ReceiverStream<Result<DeltaDiscoveryResponse, Status>>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let peer = peer_of(&request);
        self.start::<SotwStream>(request.into_inner(), peer)
            .map(Response::new)
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        let peer = peer_of(&request);
        self.start::<DeltaStream>(request.into_inner(), peer)
            .map(Response::new)
    }
}

fn peer_of<T>(request: &Request<T>) -> String {
    request
        .remote_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "local".to_string())
}

/// What the driver needs from a stream state machine, SotW or Delta.
trait Machine: Send + 'static {
    type Request: Send + 'static;
    type Response: Send + 'static;
    const PROTOCOL: Protocol;
    fn new(snapshot: Arc<Snapshot>, removal_grace: Duration) -> Self;
    fn node_id(&self) -> Option<&str>;
    fn on_request(&mut self, req: Self::Request, now: StdInstant) -> Output<Self::Response>;
    fn on_snapshot(&mut self, snapshot: Arc<Snapshot>, now: StdInstant) -> Output<Self::Response>;
    fn on_tick(&mut self, now: StdInstant) -> Output<Self::Response>;
    fn wake_at(&self) -> Option<StdInstant>;
    fn type_url(response: &Self::Response) -> &str;
    fn nonce(response: &Self::Response) -> &str;
}

impl Machine for SotwStream {
    type Request = DiscoveryRequest;
    type Response = DiscoveryResponse;
    const PROTOCOL: Protocol = Protocol::Sotw;
    fn new(snapshot: Arc<Snapshot>, removal_grace: Duration) -> Self {
        SotwStream::with_removal_grace(snapshot, removal_grace)
    }
    fn node_id(&self) -> Option<&str> {
        SotwStream::node_id(self)
    }
    fn on_request(&mut self, req: DiscoveryRequest, now: StdInstant) -> Output<DiscoveryResponse> {
        SotwStream::on_request_at(self, req, now)
    }
    fn on_snapshot(
        &mut self,
        snapshot: Arc<Snapshot>,
        now: StdInstant,
    ) -> Output<DiscoveryResponse> {
        SotwStream::on_snapshot_at(self, snapshot, now)
    }
    fn on_tick(&mut self, now: StdInstant) -> Output<DiscoveryResponse> {
        SotwStream::on_tick(self, now)
    }
    fn wake_at(&self) -> Option<StdInstant> {
        SotwStream::wake_at(self)
    }
    fn type_url(response: &DiscoveryResponse) -> &str {
        &response.type_url
    }
    fn nonce(response: &DiscoveryResponse) -> &str {
        &response.nonce
    }
}

impl Machine for DeltaStream {
    type Request = DeltaDiscoveryRequest;
    type Response = DeltaDiscoveryResponse;
    const PROTOCOL: Protocol = Protocol::Delta;
    fn new(snapshot: Arc<Snapshot>, removal_grace: Duration) -> Self {
        DeltaStream::with_removal_grace(snapshot, removal_grace)
    }
    fn node_id(&self) -> Option<&str> {
        DeltaStream::node_id(self)
    }
    fn on_request(
        &mut self,
        req: DeltaDiscoveryRequest,
        now: StdInstant,
    ) -> Output<DeltaDiscoveryResponse> {
        DeltaStream::on_request_at(self, req, now)
    }
    fn on_snapshot(
        &mut self,
        snapshot: Arc<Snapshot>,
        now: StdInstant,
    ) -> Output<DeltaDiscoveryResponse> {
        DeltaStream::on_snapshot_at(self, snapshot, now)
    }
    fn on_tick(&mut self, now: StdInstant) -> Output<DeltaDiscoveryResponse> {
        DeltaStream::on_tick(self, now)
    }
    fn wake_at(&self) -> Option<StdInstant> {
        DeltaStream::wake_at(self)
    }
    fn type_url(response: &DeltaDiscoveryResponse) -> &str {
        &response.type_url
    }
    fn nonce(response: &DeltaDiscoveryResponse) -> &str {
        &response.nonce
    }
}

/// One place among the server's `max_streams`, given back when dropped.
struct StreamSlot(Arc<AtomicUsize>);

impl StreamSlot {
    fn take(open: &Arc<AtomicUsize>, max: usize) -> Option<StreamSlot> {
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()
        .map(|_| StreamSlot(open.clone()))
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a stream reacts to.
struct Inputs<Req> {
    requests: Streaming<Req>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    closing: watch::Receiver<bool>,
}

/// Where a stream's responses go, and what it may cost.
struct Stream<Resp> {
    fleet: Fleet,
    tx: mpsc::Sender<Result<Resp, Status>>,
    peer: String,
    stall_timeout: Duration,
    _slot: StreamSlot,
}

/// Runs one stream until Envoy goes away, stops reading, or the server closes it.
async fn drive<M: Machine>(
    mut machine: M,
    inputs: Inputs<M::Request>,
    stream: Stream<M::Response>,
) {
    let Inputs {
        mut requests,
        mut snapshots,
        mut closing,
    } = inputs;
    let Stream {
        fleet,
        tx,
        peer,
        stall_timeout,
        _slot,
    } = stream;
    let protocol = M::PROTOCOL.as_str();
    let mut registration: Option<(FleetStream, String)> = None;
    let mut watching = true;
    let mut closed = false;
    // Since when responses have sat unread (the queue not empty).
    let mut unread_since: Option<Instant> = None;
    let stalled = |node: &str| {
        tracing::warn!(%node, %peer, protocol, timeout = ?stall_timeout, "disconnecting an ADS peer that stopped reading");
        fleet.slow_reader_disconnected();
    };
    'stream: loop {
        let drained = tx.capacity() == tx.max_capacity();
        unread_since = if drained {
            None
        } else {
            unread_since.or_else(|| Some(Instant::now()))
        };
        let stalled_at = unread_since.map(|t| t + stall_timeout);
        let wake_at = machine.wake_at().map(Instant::from_std);
        let out = tokio::select! {
            request = requests.message() => match request {
                Ok(Some(request)) => {
                    let out = machine.on_request(request, StdInstant::now());
                    if registration.is_none() {
                        let node = machine.node_id().unwrap_or("").to_string();
                        tracing::info!(%node, %peer, protocol, "Envoy connected");
                        registration = Some((fleet.connect(&node, M::PROTOCOL), node));
                    }
                    out
                }
                Ok(None) => break,
                Err(status) => {
                    tracing::debug!(%peer, protocol, error = %status, "ADS stream failed");
                    break;
                }
            },
            // The next snapshot waits until Envoy has read the last one.
            changed = snapshots.changed(), if watching && drained => {
                if changed.is_err() {
                    // The publisher is gone: keep serving the last snapshot.
                    watching = false;
                    continue;
                }
                let snapshot = snapshots.borrow_and_update().clone();
                machine.on_snapshot(snapshot, StdInstant::now())
            }
            // A removal's grace ended.
            () = tokio::time::sleep_until(wake_at.unwrap_or_else(Instant::now)), if wake_at.is_some() && drained => {
                machine.on_tick(StdInstant::now())
            }
            // Wakes when Envoy has read everything queued.
            permits = tx.reserve_many(STREAM_BUFFER), if !drained => {
                drop(permits);
                continue;
            }
            () = tokio::time::sleep_until(stalled_at.unwrap_or_else(Instant::now)), if stalled_at.is_some() => {
                stalled(registration.as_ref().map_or("", |(_, n)| n.as_str()));
                break;
            }
            () = tx.closed() => break,
            Ok(_) = closing.wait_for(|closing| *closing) => {
                closed = true;
                break;
            }
        };
        // Nothing is reported before the first request names the node.
        if let Some((stream, node)) = &registration {
            report(stream, node, &out.events);
            for response in &out.responses {
                if let Some(ty) = ResourceType::from_type_url(M::type_url(response)) {
                    tracing::debug!(%node, r#type = ty.short_name(), nonce = M::nonce(response), "push");
                    stream.record_push(ty, M::PROTOCOL);
                }
            }
        }
        for response in out.responses {
            match tokio::time::timeout(stall_timeout, tx.send(Ok(response))).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => break 'stream,
                Err(_) => {
                    stalled(registration.as_ref().map_or("", |(_, n)| n.as_str()));
                    break 'stream;
                }
            }
        }
    }
    if closed {
        let _ = tx
            .send(Err(Status::unavailable("xDS server shutting down")))
            .await;
    }
    if let Some((_, node)) = &registration {
        tracing::info!(%node, %peer, protocol, "Envoy disconnected");
    }
}

fn report(stream: &FleetStream, node: &str, events: &[Event]) {
    for event in events {
        match event {
            Event::Acked { ty, versions } => tracing::debug!(
                %node,
                r#type = ty.short_name(),
                resources = versions.len(),
                "ACK"
            ),
            Event::Nacked { ty, nack } => tracing::warn!(
                %node,
                r#type = ty.short_name(),
                version = %nack.version,
                rejected = ?nack.rejected.keys().collect::<Vec<_>>(),
                message = %nack.message,
                "Envoy rejected a response (NACK)"
            ),
        }
        stream.record(event);
    }
}
