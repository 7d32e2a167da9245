//! What one agent's local Envoy serves, as a report for the leader.

use crate::pb::AckReport;
use aether_ads::{Fleet, GatewayAck};
use aether_xds::Snapshot;

/// The report for `node` given its local ADS fleet and the snapshot it serves.
pub fn local_report(node: &str, fleet: &Fleet, snapshot: &Snapshot) -> AckReport {
    let envoy_connected = fleet.gateway_acks(snapshot).contains_key(node);
    let mut report = AckReport {
        node: node.to_string(),
        envoy_connected,
        ..Default::default()
    };
    if !envoy_connected {
        return report;
    }
    let states = fleet.gateway_states(snapshot);
    if states.values().all(|s| *s == GatewayAck::Acked) {
        report.acked_snapshot = snapshot.version.clone();
        return report;
    }
    for (gw, state) in states {
        match state {
            GatewayAck::Acked => {
                if let Some(g) = snapshot.gateways.get(&gw) {
                    report.acked.insert(gw.to_string(), g.hash.clone());
                }
            }
            GatewayAck::Nacked(msg) => {
                report.nacked.insert(gw.to_string(), msg);
            }
            GatewayAck::Pending => {}
        }
    }
    report
}
