//! What an Envoy connected to this ADS server serves, as an [`AckReport`]:
//! an agent's report for the leader, and in standalone each connected
//! Envoy's report for the same join ([`fleet_served`]).

use crate::join::{Members, served};
use crate::pb::AckReport;
use crate::recent::Recent;
use aether_ads::{AckState, Fleet};
use aether_ir::{ObjectRef, Served};
use aether_xds::Snapshot;
use aether_xds::parts::OWN;
use std::collections::BTreeMap;

/// The key of one part of a Gateway in `AckReport.acked_parts`.
pub fn part_key(gateway: &str, object: &str) -> String {
    format!("{gateway}|{object}")
}

/// The report for `node` given its local ADS fleet and the snapshot it serves.
pub fn local_report(node: &str, fleet: &Fleet, snapshot: &Snapshot) -> AckReport {
    let envoy_connected = fleet.nodes().contains(node);
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
        // Each Gateway's hash too. The leader translates on its own watch and
        // may never have made this very snapshot (pod events coalesced the
        // other way); the hash, which endpoints do not move, still tells it
        // which of its pictures this Envoy serves.
        for (gw, resources) in &snapshot.gateways {
            report.acked.insert(gw.to_string(), resources.hash.clone());
        }
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
            AckState::Nacked(rejection) => {
                report.nacked.insert(key.clone(), rejection.message);
            }
            AckState::Pending => {}
        }
        for (route, refusal) in s.refused {
            report
                .refused_routes
                .insert(part_key(&key, &route), refusal.message);
        }
        for route in s.routes {
            if let Some(parts) = resources.routes.get(route) {
                report
                    .acked_parts
                    .insert(part_key(&key, route), parts.fingerprint.clone());
            }
        }
    }
    report
}

/// The status gate of a fleet that is every Envoy connected to `fleet`'s ADS
/// server (standalone: one node, or a few): each one's [`local_report`], joined
/// with the connected nodes as the members of every Gateway. The same join the
/// leader runs over its agents' reports; every report is relative to
/// `snapshot` itself, so no older snapshot needs remembering.
pub fn fleet_served(fleet: &Fleet, snapshot: &Snapshot) -> BTreeMap<ObjectRef, Served> {
    let reports: BTreeMap<String, AckReport> = fleet
        .nodes()
        .into_iter()
        .map(|node| {
            let report = local_report(&node, fleet, snapshot);
            (node, report)
        })
        .collect();
    let members = Members {
        every_gateway: reports.keys().cloned().collect(),
        ..Members::default()
    };
    served(snapshot, &reports, &members, &Recent::default())
}

#[cfg(test)]
#[path = "local_tests.rs"]
mod tests;
