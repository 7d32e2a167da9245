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

mod machine;

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
use machine::Machine;
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

impl<Resp: Send> Stream<Resp> {
    /// Registers the stream with the fleet under the node its first request names.
    fn connect(&self, node: &str, protocol: Protocol) -> (FleetStream, String) {
        let (peer, protocol_name) = (&self.peer, protocol.as_str());
        tracing::info!(%node, %peer, protocol = protocol_name, "Envoy connected");
        (self.fleet.connect(node, protocol), node.to_string())
    }

    /// Queues the responses in order; a response Envoy does not take within
    /// `stall_timeout` ends the stream.
    async fn send(&self, responses: Vec<Resp>) -> Result<(), End> {
        for response in responses {
            match tokio::time::timeout(self.stall_timeout, self.tx.send(Ok(response))).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(End::Gone),
                Err(_) => return Err(End::Stalled),
            }
        }
        Ok(())
    }
}

/// Runs one stream until Envoy goes away, stops reading, or the server closes it.
async fn drive<M: Machine>(machine: M, inputs: Inputs<M::Request>, stream: Stream<M::Response>) {
    let mut driver = Driver {
        machine,
        inputs,
        stream,
        registration: None,
        watching: true,
        unread_since: None,
    };
    let end = loop {
        let out = match driver.next().await {
            Next::Answer(out) => out,
            Next::Nothing => continue,
            Next::End(end) => break end,
        };
        driver.report(&out);
        if let Err(end) = driver.stream.send(out.responses).await {
            break end;
        }
    };
    driver.finish(end).await;
}

/// Why a stream ended.
enum End {
    /// Envoy closed it, or it failed.
    Gone,
    /// Envoy stopped reading for `stall_timeout`.
    Stalled,
    /// The server is shutting down.
    Closing,
}

/// What one wake-up of a stream gave.
enum Next<Resp> {
    /// The machine's answer to a request, a snapshot or a tick.
    Answer(Output<Resp>),
    /// Nothing to answer (Envoy read what was queued; the publisher left).
    Nothing,
    End(End),
}

/// One stream's machine, its inputs and outputs, and what the loop keeps
/// between wake-ups.
struct Driver<M: Machine> {
    machine: M,
    inputs: Inputs<M::Request>,
    stream: Stream<M::Response>,
    /// The fleet's record of the stream, and the node, once the first
    /// request names it.
    registration: Option<(FleetStream, String)>,
    /// Whether snapshots still arrive (the publisher is not gone).
    watching: bool,
    /// Since when responses have sat unread (the queue not empty).
    unread_since: Option<Instant>,
}

impl<M: Machine> Driver<M> {
    /// Waits for whichever comes first: a request, a snapshot (once Envoy has
    /// read the last one), a removal's grace ending, Envoy reading, a stall,
    /// the end.
    async fn next(&mut self) -> Next<M::Response> {
        let tx = &self.stream.tx;
        let drained = tx.capacity() == tx.max_capacity();
        self.unread_since = if drained {
            None
        } else {
            self.unread_since.or_else(|| Some(Instant::now()))
        };
        let stalled_at = self.unread_since.map(|t| t + self.stream.stall_timeout);
        let wake_at = self.machine.wake_at().map(Instant::from_std);
        tokio::select! {
            request = self.inputs.requests.message() => match request {
                Ok(Some(request)) => {
                    let out = self.machine.on_request(request, StdInstant::now());
                    // The first request names the node.
                    if self.registration.is_none() {
                        let node = self.machine.node_id().unwrap_or("");
                        self.registration = Some(self.stream.connect(node, M::PROTOCOL));
                    }
                    Next::Answer(out)
                }
                Ok(None) => Next::End(End::Gone),
                Err(status) => {
                    let (peer, protocol) = (&self.stream.peer, M::PROTOCOL.as_str());
                    tracing::debug!(%peer, protocol, error = %status, "ADS stream failed");
                    Next::End(End::Gone)
                }
            },
            // The next snapshot waits until Envoy has read the last one.
            changed = self.inputs.snapshots.changed(), if self.watching && drained => {
                if changed.is_err() {
                    // The publisher is gone: keep serving the last snapshot.
                    self.watching = false;
                    return Next::Nothing;
                }
                let snapshot = self.inputs.snapshots.borrow_and_update().clone();
                Next::Answer(self.machine.on_snapshot(snapshot, StdInstant::now()))
            }
            // A removal's grace ended.
            () = tokio::time::sleep_until(wake_at.unwrap_or_else(Instant::now)), if wake_at.is_some() && drained => {
                Next::Answer(self.machine.on_tick(StdInstant::now()))
            }
            // Wakes when Envoy has read everything queued.
            permits = tx.reserve_many(STREAM_BUFFER), if !drained => {
                drop(permits);
                Next::Nothing
            }
            () = tokio::time::sleep_until(stalled_at.unwrap_or_else(Instant::now)), if stalled_at.is_some() => {
                Next::End(End::Stalled)
            }
            () = tx.closed() => Next::End(End::Gone),
            Ok(_) = self.inputs.closing.wait_for(|closing| *closing) => Next::End(End::Closing),
        }
    }

    /// Logs and counts an answer's events and pushes. Nothing is reported
    /// before the first request names the node.
    fn report(&self, out: &Output<M::Response>) {
        let Some((stream, node)) = &self.registration else {
            return;
        };
        report(stream, node, &out.events);
        for response in &out.responses {
            if let Some(ty) = ResourceType::from_type_url(M::type_url(response)) {
                tracing::debug!(%node, r#type = ty.short_name(), nonce = M::nonce(response), "push");
                stream.record_push(ty, M::PROTOCOL);
            }
        }
    }

    /// Says why the stream ended: to the log and the fleet for a stall, to
    /// Envoy for a shutdown.
    async fn finish(self, end: End) {
        let Stream {
            fleet,
            tx,
            peer,
            stall_timeout,
            ..
        } = &self.stream;
        let protocol = M::PROTOCOL.as_str();
        let node = self.registration.as_ref().map(|(_, n)| n.as_str());
        match end {
            End::Stalled => {
                let node = node.unwrap_or("");
                tracing::warn!(%node, %peer, protocol, timeout = ?stall_timeout, "disconnecting an ADS peer that stopped reading");
                fleet.slow_reader_disconnected();
            }
            End::Closing => {
                let _ = tx
                    .send(Err(Status::unavailable("xDS server shutting down")))
                    .await;
            }
            End::Gone => {}
        }
        if let Some(node) = node {
            tracing::info!(%node, %peer, protocol, "Envoy disconnected");
        }
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
