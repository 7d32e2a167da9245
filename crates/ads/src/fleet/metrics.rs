//! ADS counters: typed handles, registered in the binary's one registry.
//!
//! ```text
//!  streams ──connect/ack/nack/push──► AdsMetrics (atomic handles) ──register──► Registry
//!                                          └── read back by tests (acks(ty), pushes(ty, p), ...)
//! ```
//!
//! Every labelled series exists from the start (at zero), so dashboards and
//! `rate()` see a series before its first event.

use aether_xds::ResourceType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
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
    connected: Family<[Label; 1], Gauge>,
    streams: Family<[Label; 1], Counter>,
    acks: Family<[Label; 1], Counter>,
    nacks: Family<[Label; 1], Counter>,
    pushes: Family<[Label; 2], Counter>,
    refused: Counter,
    stalled: Counter,
}

impl Default for AdsMetrics {
    fn default() -> Self {
        let m = AdsMetrics {
            connected: Family::default(),
            streams: Family::default(),
            acks: Family::default(),
            nacks: Family::default(),
            pushes: Family::default(),
            refused: Counter::default(),
            stalled: Counter::default(),
        };
        for p in Protocol::ALL {
            let _ = m.connected.get_or_create(&protocol(p));
            let _ = m.streams.get_or_create(&protocol(p));
        }
        for ty in ResourceType::ALL {
            let _ = m.acks.get_or_create(&of_type(ty));
            let _ = m.nacks.get_or_create(&of_type(ty));
            for p in Protocol::ALL {
                let _ = m.pushes.get_or_create(&type_protocol(ty, p));
            }
        }
        m
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
        self.connected.get_or_create(&protocol(p)).inc();
        self.streams.get_or_create(&protocol(p)).inc();
    }

    pub(super) fn disconnect(&self, p: Protocol) {
        self.connected.get_or_create(&protocol(p)).dec();
    }

    pub(super) fn ack(&self, ty: ResourceType) {
        self.acks.get_or_create(&of_type(ty)).inc();
    }

    pub(super) fn nack(&self, ty: ResourceType) {
        self.nacks.get_or_create(&of_type(ty)).inc();
    }

    pub(super) fn refuse(&self) {
        self.refused.inc();
    }

    pub(super) fn stall(&self) {
        self.stalled.inc();
    }

    pub(super) fn push(&self, ty: ResourceType, p: Protocol) {
        self.pushes.get_or_create(&type_protocol(ty, p)).inc();
    }

    /// Streams of protocol `p` open now.
    pub fn connected(&self, p: Protocol) -> i64 {
        self.connected.get_or_create(&protocol(p)).get()
    }

    /// Streams of protocol `p` opened since start.
    pub fn streams(&self, p: Protocol) -> u64 {
        self.streams.get_or_create(&protocol(p)).get()
    }

    pub fn acks(&self, ty: ResourceType) -> u64 {
        self.acks.get_or_create(&of_type(ty)).get()
    }

    pub fn nacks(&self, ty: ResourceType) -> u64 {
        self.nacks.get_or_create(&of_type(ty)).get()
    }

    pub fn pushes(&self, ty: ResourceType, p: Protocol) -> u64 {
        self.pushes.get_or_create(&type_protocol(ty, p)).get()
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
