//! ADS counters, rendered in the Prometheus text exposition format.
//!
//! Kept beside the fleet state (same lock) so a scrape sees one consistent moment.

use aether_xds::ResourceType;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The ADS flavour a stream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Sotw,
    Delta,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Sotw => "sotw",
            Protocol::Delta => "delta",
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Metrics {
    connected: BTreeMap<Protocol, u64>,
    streams_total: BTreeMap<Protocol, u64>,
    acks: BTreeMap<ResourceType, u64>,
    nacks: BTreeMap<ResourceType, u64>,
    pushes: BTreeMap<(ResourceType, Protocol), u64>,
    refused: u64,
    stalled: u64,
}

impl Metrics {
    pub(super) fn connected(&mut self, p: Protocol) {
        *self.connected.entry(p).or_default() += 1;
        *self.streams_total.entry(p).or_default() += 1;
    }

    pub(super) fn disconnected(&mut self, p: Protocol) {
        let n = self.connected.entry(p).or_default();
        *n = n.saturating_sub(1);
    }

    pub(super) fn acked(&mut self, ty: ResourceType) {
        *self.acks.entry(ty).or_default() += 1;
    }

    pub(super) fn nacked(&mut self, ty: ResourceType) {
        *self.nacks.entry(ty).or_default() += 1;
    }

    pub(super) fn refused(&mut self) {
        self.refused += 1;
    }

    pub(super) fn stalled(&mut self) {
        self.stalled += 1;
    }

    pub(super) fn pushed(&mut self, ty: ResourceType, p: Protocol) {
        *self.pushes.entry((ty, p)).or_default() += 1;
    }

    /// Every series is present from the start (at zero), so dashboards and rate()
    /// see a series before its first event.
    pub(super) fn render(&self) -> String {
        let protocols = [Protocol::Sotw, Protocol::Delta];
        let mut out = String::new();
        header(
            &mut out,
            "aether_ads_connected_streams",
            "gauge",
            "ADS streams currently open.",
        );
        for p in protocols {
            let n = self.connected.get(&p).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "aether_ads_connected_streams{{protocol=\"{}\"}} {n}",
                p.as_str()
            );
        }
        header(
            &mut out,
            "aether_ads_streams_total",
            "counter",
            "ADS streams opened since start.",
        );
        for p in protocols {
            let n = self.streams_total.get(&p).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "aether_ads_streams_total{{protocol=\"{}\"}} {n}",
                p.as_str()
            );
        }
        for (name, help, counts) in [
            (
                "aether_ads_acks_total",
                "Responses Envoy accepted.",
                &self.acks,
            ),
            (
                "aether_ads_nacks_total",
                "Responses Envoy rejected.",
                &self.nacks,
            ),
        ] {
            header(&mut out, name, "counter", help);
            for ty in ResourceType::ALL {
                let n = counts.get(&ty).copied().unwrap_or(0);
                let _ = writeln!(out, "{name}{{type=\"{}\"}} {n}", ty.short_name());
            }
        }
        for (name, help, n) in [
            (
                "aether_ads_streams_refused_total",
                "ADS streams refused because the server had its maximum open.",
                self.refused,
            ),
            (
                "aether_ads_stalled_streams_disconnected_total",
                "ADS streams ended because the peer stopped reading responses.",
                self.stalled,
            ),
        ] {
            header(&mut out, name, "counter", help);
            let _ = writeln!(out, "{name} {n}");
        }
        header(
            &mut out,
            "aether_ads_pushes_total",
            "counter",
            "Discovery responses sent.",
        );
        for ty in ResourceType::ALL {
            for p in protocols {
                let n = self.pushes.get(&(ty, p)).copied().unwrap_or(0);
                let _ = writeln!(
                    out,
                    "aether_ads_pushes_total{{type=\"{}\",protocol=\"{}\"}} {n}",
                    ty.short_name(),
                    p.as_str()
                );
            }
        }
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}
