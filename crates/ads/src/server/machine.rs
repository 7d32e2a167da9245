//! The two stream state machines, SotW and Delta, behind the one interface
//! the driver runs.

use crate::delta::DeltaStream;
use crate::event::Output;
use crate::fleet::Protocol;
use crate::sotw::SotwStream;
use aether_xds::Snapshot;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

/// What the driver needs from a stream state machine, SotW or Delta.
pub(super) trait Machine: Send + 'static {
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
