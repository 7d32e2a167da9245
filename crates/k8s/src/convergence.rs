//! Per-Gateway convergence, for alerts: how long the fleet takes to serve a
//! change, and how long a Gateway has been waiting for it.
//!
//! ```text
//!  FleetJoin (the status gate's join, node by node) ──observe──► per Gateway:
//!    a new content hash: the change begins ("since")
//!    every node that must serve it serves it: converged, since → now observed
//!  scrape (a Collector): aether_edge_gateway_convergence_seconds (histogram of those)
//!          aether_edge_gateway_convergence_lag_seconds{gateway} (now − since while
//!            not converged, else 0), aether_edge_gateway_nodes_behind{gateway}
//! ```
//!
//! A change begins when the leader's join first sees the Gateway's new hash
//! (right after its snapshot is published), or sees a Gateway every node
//! served no longer served by one (a node joined, or fell behind); a Gateway
//! that is never served by every node keeps a growing lag, which is what an
//! alert wants to see.

use crate::fleet_doc::FleetJoin;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Upper bounds of `aether_edge_gateway_convergence_seconds`, in seconds.
pub const BUCKETS: [f64; 12] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Debug)]
struct Gateway {
    hash: String,
    since: Instant,
    converged: bool,
    behind: usize,
}

/// One Gateway's gauges as of a moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lag {
    /// Since its current config began waiting; zero once every node serves it.
    pub waiting: Duration,
    pub nodes_behind: usize,
}

#[derive(Debug)]
pub struct Convergence {
    gateways: Mutex<BTreeMap<String, Gateway>>,
    /// Each change's wait, observed once when every node serves it.
    histogram: Histogram,
}

impl Default for Convergence {
    fn default() -> Self {
        Convergence {
            gateways: Mutex::default(),
            histogram: Histogram::new(BUCKETS),
        }
    }
}

impl Convergence {
    /// One join of the fleet, at `now`.
    pub fn observe(&self, join: &FleetJoin, now: Instant) {
        let mut gateways = self.gateways.lock().expect("convergence lock");
        let mut next = BTreeMap::new();
        for (gw, nodes) in &join.per_node {
            let key = gw.to_string();
            let behind = nodes.others.len();
            let mut g = match gateways.remove(&key) {
                Some(g) if g.hash == nodes.hash => g,
                _ => Gateway {
                    hash: nodes.hash.clone(),
                    since: now,
                    converged: false,
                    behind,
                },
            };
            g.behind = behind;
            // Served by every node, then not (a node joins, or falls behind):
            // a change of the fleet, waiting from now.
            if g.converged && behind > 0 {
                g.converged = false;
                g.since = now;
            }
            if !g.converged && behind == 0 && nodes.total() > 0 {
                g.converged = true;
                self.histogram.observe((now - g.since).as_secs_f64());
            }
            next.insert(key, g);
        }
        *gateways = next;
    }

    /// Per Gateway (`namespace/name`), its gauges as of `now`.
    pub fn lags(&self, now: Instant) -> BTreeMap<String, Lag> {
        let gateways = self.gateways.lock().expect("convergence lock");
        gateways
            .iter()
            .map(|(gw, g)| {
                let waiting = if g.converged {
                    Duration::ZERO
                } else {
                    now - g.since
                };
                let lag = Lag {
                    waiting,
                    nodes_behind: g.behind,
                };
                (gw.clone(), lag)
            })
            .collect()
    }
}

/// Read at each scrape (under a registry prefixed `aether_edge`): the lag
/// grows while nobody observes, so it is computed as of the scrape.
impl Collector for Convergence {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let histogram = encoder.encode_descriptor(
            "gateway_convergence_seconds",
            "From a Gateway's new content hash (or a node no longer serving it) to every node that takes its traffic serving it (leader).",
            None,
            MetricType::Histogram,
        )?;
        self.histogram.encode(histogram)?;
        let lags = self.lags(Instant::now());
        let mut family = encoder.encode_descriptor(
            "gateway_convergence_lag_seconds",
            "How long the Gateway's current content hash has waited for a node to serve it; 0 once every node does (leader).",
            None,
            MetricType::Gauge,
        )?;
        for (gw, lag) in &lags {
            let gauge = ConstGauge::new(lag.waiting.as_secs_f64());
            gauge.encode(family.encode_family(&[("gateway", gw.as_str())])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "gateway_nodes_behind",
            "Nodes that take the Gateway's traffic and do not serve its current config (behind, NACKed or not reporting) (leader).",
            None,
            MetricType::Gauge,
        )?;
        for (gw, lag) in &lags {
            let gauge = ConstGauge::new(lag.nodes_behind as i64);
            gauge.encode(family.encode_family(&[("gateway", gw.as_str())])?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aether_ir::ObjectRef;
    use aether_report::{GatewayNodes, NodeState};
    use std::time::Duration;

    fn join(hash: &str, states: &[NodeState]) -> FleetJoin {
        let states = states
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("node-{i}"), s.clone()));
        FleetJoin {
            version: hash.into(),
            per_node: BTreeMap::from([(
                ObjectRef::new("apps", "web"),
                GatewayNodes::from_states(hash, states),
            )]),
        }
    }

    fn lag(c: &Convergence, now: Instant) -> Lag {
        c.lags(now)["apps/web"]
    }

    fn secs(n: f64) -> Duration {
        Duration::from_secs_f64(n)
    }

    #[test]
    fn a_change_lags_until_every_node_serves_it_and_is_observed_once() {
        let c = Convergence::default();
        let t0 = Instant::now();
        let behind = NodeState::Behind { pending: vec![] };
        c.observe(&join("h1", &[NodeState::Served, behind.clone()]), t0);
        let at = lag(&c, t0 + Duration::from_secs(3));
        assert_eq!((at.waiting, at.nodes_behind), (secs(3.0), 1));
        assert_eq!(c.histogram.count(), 0);

        let served = [NodeState::Served, NodeState::Served];
        c.observe(&join("h1", &served), t0 + Duration::from_millis(4_200));
        c.observe(&join("h1", &served), t0 + Duration::from_secs(9));
        let at = lag(&c, t0 + Duration::from_secs(10));
        assert_eq!((at.waiting, at.nodes_behind), (Duration::ZERO, 0));
        assert_eq!(c.histogram.count(), 1, "observed once");
        assert!((c.histogram.sum() - 4.2).abs() < 1e-9);

        // A node falling behind on the same hash starts a wait of its own.
        c.observe(
            &join("h1", &[NodeState::Served, NodeState::Unreported]),
            t0 + Duration::from_secs(11),
        );
        assert_eq!(lag(&c, t0 + Duration::from_secs(13)).waiting, secs(2.0));
        c.observe(&join("h1", &served), t0 + Duration::from_secs(14));
        assert_eq!(c.histogram.count(), 2);

        // A new hash starts a new change; a Gateway that is gone leaves no series.
        c.observe(
            &join("h2", &[NodeState::Served, NodeState::Unreported]),
            t0 + Duration::from_secs(20),
        );
        assert_eq!(lag(&c, t0 + Duration::from_secs(21)).waiting, secs(1.0));
        c.observe(&FleetJoin::default(), t0 + Duration::from_secs(22));
        assert!(c.lags(t0 + Duration::from_secs(22)).is_empty());
    }
}
