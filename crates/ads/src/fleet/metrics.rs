//! ADS counters: typed handles, registered in the binary's one registry.
//!
//! ```text
//!  streams ──connect/ack/nack/push──► AdsMetrics (atomic handles) ──register──► Registry
//!                                          └── read back by tests (acks(ty), pushes(ty, p), ...)
//! ```
//!
//! Every labelled series exists from the start (at zero), in a fixed order
//! ([`Series`]), so dashboards and `rate()` see a series before its first event.

use aether_metrics::Series;
use aether_xds::ResourceType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The ADS flavour a stream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Sotw,
    Delta,
}

impl Protocol {
    pub const ALL: [Protocol; 2] = [Protocol::Sotw, Protocol::Delta];

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Sotw => "sotw",
            Protocol::Delta => "delta",
        }
    }
}

type Label = (&'static str, &'static str);

fn protocol(p: Protocol) -> [Label; 1] {
    [("protocol", p.as_str())]
}

fn of_type(ty: ResourceType) -> [Label; 1] {
    [("type", ty.short_name())]
}

fn type_protocol(ty: ResourceType, p: Protocol) -> [Label; 2] {
    [("type", ty.short_name()), ("protocol", p.as_str())]
}

/// The ADS server's counters (cheap to clone: every handle is shared).
#[derive(Debug, Clone)]
pub struct AdsMetrics {
    connected: Series<[Label; 1], Gauge>,
    streams: Series<[Label; 1], Counter>,
    acks: Series<[Label; 1], Counter>,
    nacks: Series<[Label; 1], Counter>,
    pushes: Series<[Label; 2], Counter>,
    refused: Counter,
    stalled: Counter,
}

impl Default for AdsMetrics {
    fn default() -> Self {
        let types = || ResourceType::ALL.map(of_type);
        let pushes = ResourceType::ALL
            .into_iter()
            .flat_map(|ty| Protocol::ALL.map(|p| type_protocol(ty, p)));
        AdsMetrics {
            connected: Series::new(Protocol::ALL.map(protocol)),
            streams: Series::new(Protocol::ALL.map(protocol)),
            acks: Series::new(types()),
            nacks: Series::new(types()),
            pushes: Series::new(pushes),
            refused: Counter::default(),
            stalled: Counter::default(),
        }
    }
}

impl AdsMetrics {
    /// Registers every series under `registry` (the binary gives it the
    /// `aether_ads` prefix); counters get their `_total` from the encoder.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "connected_streams",
            "ADS streams currently open",
            self.connected.clone(),
        );
        registry.register(
            "streams",
            "ADS streams opened since start",
            self.streams.clone(),
        );
        registry.register("acks", "Responses Envoy accepted", self.acks.clone());
        registry.register("nacks", "Responses Envoy rejected", self.nacks.clone());
        registry.register(
            "streams_refused",
            "ADS streams refused because the server had its maximum open",
            self.refused.clone(),
        );
        registry.register(
            "stalled_streams_disconnected",
            "ADS streams ended because the peer stopped reading responses",
            self.stalled.clone(),
        );
        registry.register("pushes", "Discovery responses sent", self.pushes.clone());
    }

    pub(super) fn connect(&self, p: Protocol) {
        self.connected.get(&protocol(p)).inc();
        self.streams.get(&protocol(p)).inc();
    }

    pub(super) fn disconnect(&self, p: Protocol) {
        self.connected.get(&protocol(p)).dec();
    }

    pub(super) fn ack(&self, ty: ResourceType) {
        self.acks.get(&of_type(ty)).inc();
    }

    pub(super) fn nack(&self, ty: ResourceType) {
        self.nacks.get(&of_type(ty)).inc();
    }

    pub(super) fn refuse(&self) {
        self.refused.inc();
    }

    pub(super) fn stall(&self) {
        self.stalled.inc();
    }

    pub(super) fn push(&self, ty: ResourceType, p: Protocol) {
        self.pushes.get(&type_protocol(ty, p)).inc();
    }

    /// Streams of protocol `p` open now.
    pub fn connected(&self, p: Protocol) -> i64 {
        self.connected.get(&protocol(p)).get()
    }

    /// Streams of protocol `p` opened since start.
    pub fn streams(&self, p: Protocol) -> u64 {
        self.streams.get(&protocol(p)).get()
    }

    pub fn acks(&self, ty: ResourceType) -> u64 {
        self.acks.get(&of_type(ty)).get()
    }

    pub fn nacks(&self, ty: ResourceType) -> u64 {
        self.nacks.get(&of_type(ty)).get()
    }

    pub fn pushes(&self, ty: ResourceType, p: Protocol) -> u64 {
        self.pushes.get(&type_protocol(ty, p)).get()
    }

    /// Streams refused for want of room.
    pub fn refused(&self) -> u64 {
        self.refused.get()
    }

    /// Streams ended because their peer stopped reading.
    pub fn stalled(&self) -> u64 {
        self.stalled.get()
    }
}
