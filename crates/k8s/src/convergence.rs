//! Per-Gateway convergence, for alerts: how long the fleet takes to serve a
//! change, and how long a Gateway has been waiting for it.
//!
//! ```text
//!  FleetJoin (the status gate's join, node by node) ──observe──► per Gateway:
//!    a new content hash: the change begins ("since")
//!    every node that must serve it serves it: converged, since → now observed
//!  render: aether_edge_gateway_convergence_seconds (histogram of those)
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
use crate::histogram::Histogram;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Instant;

const BUCKETS: [f64; 12] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Debug)]
struct Gateway {
    hash: String,
    since: Instant,
    converged: bool,
    behind: usize,
}

#[derive(Debug)]
pub struct Convergence {
    inner: Mutex<(BTreeMap<String, Gateway>, Histogram)>,
}

impl Default for Convergence {
    fn default() -> Self {
        Convergence {
            inner: Mutex::new((BTreeMap::new(), Histogram::new(&BUCKETS))),
        }
    }
}

impl Convergence {
    /// One join of the fleet, at `now`.
    pub fn observe(&self, join: &FleetJoin, now: Instant) {
        let mut inner = self.inner.lock().expect("convergence lock");
        let (gateways, histogram) = &mut *inner;
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
                histogram.observe(now - g.since);
            }
            next.insert(key, g);
        }
        *gateways = next;
    }

    /// Prometheus text exposition, as of `now`.
    pub fn render(&self, now: Instant) -> String {
        let inner = self.inner.lock().expect("convergence lock");
        let (gateways, histogram) = &*inner;
        let mut out = String::new();
        histogram.render(
            "aether_edge_gateway_convergence_seconds",
            "From a Gateway's new content hash (or a node no longer serving it) to every node that takes its traffic serving it (leader).",
            &mut out,
        );
        out.push_str(
            "# HELP aether_edge_gateway_convergence_lag_seconds How long the Gateway's current content hash has waited for a node to serve it; 0 once every node does (leader).\n\
             # TYPE aether_edge_gateway_convergence_lag_seconds gauge\n",
        );
        for (gw, g) in gateways {
            let lag = if g.converged {
                0.0
            } else {
                (now - g.since).as_secs_f64()
            };
            let _ = writeln!(
                out,
                "aether_edge_gateway_convergence_lag_seconds{{gateway=\"{gw}\"}} {lag:.3}"
            );
        }
        out.push_str(
            "# HELP aether_edge_gateway_nodes_behind Nodes that take the Gateway's traffic and do not serve its current config (behind, NACKed or not reporting) (leader).\n\
             # TYPE aether_edge_gateway_nodes_behind gauge\n",
        );
        for (gw, g) in gateways {
            let _ = writeln!(
                out,
                "aether_edge_gateway_nodes_behind{{gateway=\"{gw}\"}} {}",
                g.behind
            );
        }
        out
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

    fn series(text: &str, name: &str) -> String {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
    }

    #[test]
    fn a_change_lags_until_every_node_serves_it_and_is_observed_once() {
        let c = Convergence::default();
        let t0 = Instant::now();
        let behind = NodeState::Behind { pending: vec![] };
        c.observe(&join("h1", &[NodeState::Served, behind.clone()]), t0);
        let text = c.render(t0 + Duration::from_secs(3));
        assert_eq!(
            series(
                &text,
                "aether_edge_gateway_convergence_lag_seconds{gateway=\"apps/web\"}"
            ),
            "3.000"
        );
        assert_eq!(series(&text, "aether_edge_gateway_nodes_behind{"), "1");
        assert_eq!(
            series(&text, "aether_edge_gateway_convergence_seconds_count"),
            "0"
        );

        let served = [NodeState::Served, NodeState::Served];
        c.observe(&join("h1", &served), t0 + Duration::from_millis(4_200));
        c.observe(&join("h1", &served), t0 + Duration::from_secs(9));
        let text = c.render(t0 + Duration::from_secs(10));
        assert_eq!(
            series(&text, "aether_edge_gateway_convergence_lag_seconds{"),
            "0.000"
        );
        assert_eq!(series(&text, "aether_edge_gateway_nodes_behind{"), "0");
        assert_eq!(
            series(&text, "aether_edge_gateway_convergence_seconds_count"),
            "1"
        );
        assert_eq!(
            series(&text, "aether_edge_gateway_convergence_seconds_sum"),
            "4.2"
        );
        assert_eq!(
            series(
                &text,
                "aether_edge_gateway_convergence_seconds_bucket{le=\"5\"}"
            ),
            "1"
        );
        assert_eq!(
            series(
                &text,
                "aether_edge_gateway_convergence_seconds_bucket{le=\"2.5\"}"
            ),
            "0"
        );

        // A node falling behind on the same hash starts a wait of its own.
        c.observe(
            &join("h1", &[NodeState::Served, NodeState::Unreported]),
            t0 + Duration::from_secs(11),
        );
        let text = c.render(t0 + Duration::from_secs(13));
        assert_eq!(
            series(&text, "aether_edge_gateway_convergence_lag_seconds{"),
            "2.000"
        );
        c.observe(&join("h1", &served), t0 + Duration::from_secs(14));
        let text = c.render(t0 + Duration::from_secs(14));
        assert_eq!(
            series(&text, "aether_edge_gateway_convergence_seconds_count"),
            "2"
        );

        // A new hash starts a new change; a Gateway that is gone leaves no series.
        c.observe(
            &join("h2", &[NodeState::Served, NodeState::Unreported]),
            t0 + Duration::from_secs(20),
        );
        let text = c.render(t0 + Duration::from_secs(21));
        assert_eq!(
            series(&text, "aether_edge_gateway_convergence_lag_seconds{"),
            "1.000"
        );
        c.observe(&FleetJoin::default(), t0 + Duration::from_secs(22));
        assert!(
            !c.render(t0 + Duration::from_secs(22))
                .contains("gateway=\"apps/web\"")
        );
    }
}
