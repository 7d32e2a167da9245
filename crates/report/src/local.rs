//! What one agent's local Envoy serves, as a report for the leader.

use crate::pb::AckReport;
use aether_ads::{AckState, Fleet};
use aether_xds::Snapshot;
use aether_xds::parts::OWN;

/// The key of one part of a Gateway in `AckReport.acked_parts`.
pub fn part_key(gateway: &str, object: &str) -> String {
    format!("{gateway}|{object}")
}

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
    // Only this node's Envoy: another client of the local ADS server counts for nothing.
    let served = fleet.served_by(node, snapshot);
    if served.values().all(|s| s.whole) {
        report.acked_snapshot = snapshot.version.clone();
        return report;
    }
    for (gw, s) in served {
        let Some(resources) = snapshot.gateways.get(&gw) else {
            continue;
        };
        let key = gw.to_string();
        if s.whole {
            report.acked.insert(key, resources.hash.clone());
            continue;
        }
        match s.gateway {
            AckState::Acked => {
                report
                    .acked_parts
                    .insert(part_key(&key, OWN), resources.own.fingerprint.clone());
            }
            AckState::Nacked(msg) => {
                report.nacked.insert(key.clone(), msg);
            }
            AckState::Pending => {}
        }
        for (route, message) in s.refused {
            report
                .refused_routes
                .insert(part_key(&key, &route), message);
        }
        for route in s.routes {
            if let Some(parts) = resources.routes.get(&route) {
                report
                    .acked_parts
                    .insert(part_key(&key, &route), parts.fingerprint.clone());
            }
        }
    }
    report
}
