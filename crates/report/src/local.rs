//! What an Envoy connected to this ADS server serves, as an [`AckReport`]:
//! an agent's report for the leader, and in standalone each connected
//! Envoy's report for the same join ([`fleet_served`]).

use crate::join::{Members, served};
use crate::node_report::NodeReport;
use crate::pb::AckReport;
use crate::recent::Recent;
use aether_ads::{AckState, Fleet};
use aether_ir::{ObjectRef, Served};
use aether_xds::parts::OWN;
use aether_xds::{GatewayResources, Snapshot};
use std::collections::BTreeMap;

/// The key of one part of a Gateway in `AckReport.acked_parts`.
pub fn part_key(gateway: &str, object: &str) -> String {
    format!("{gateway}|{object}")
}

/// The report an agent sends the leader for `node`, given its local ADS fleet
/// and the snapshot it serves: with every part its Envoy serves
/// (`every_part`), of the Gateways it serves whole too. The leader may never
/// have made the snapshot this agent translated (it saw a route sooner or
/// later, or coalesced other changes together); it then still reads each route
/// by its own fingerprint. The stream carries only the parts that changed.
pub fn local_report(node: &str, fleet: &Fleet, snapshot: &Snapshot) -> AckReport {
    report_of(node, fleet, snapshot, true)
}

/// The report of `node`'s Envoy; `every_part`: list the parts of a Gateway it
/// serves whole too.
fn report_of(node: &str, fleet: &Fleet, snapshot: &Snapshot, every_part: bool) -> AckReport {
    let envoy_connected = fleet.nodes().contains(node);
    let mut report = AckReport {
        node: node.to_string(),
        envoy_connected,
        every_part,
        ..Default::default()
    };
    if !envoy_connected {
        return report;
    }
    // Only this node's Envoy: another client of the local ADS server counts for nothing.
    let served = fleet.served_by(node, snapshot);
    if served.values().all(|s| s.whole) {
        report.acked_snapshot = snapshot.version.clone();
    }
    for (gw, s) in served {
        let Some(resources) = snapshot.gateways.get(&gw) else {
            continue;
        };
        let key = gw.to_string();
        if s.whole {
            // Each Gateway's hash, beside the snapshot's version: the leader
            // translates on its own watch and may never have made this very
            // snapshot (pod events coalesced the other way); the hash, which
            // endpoints do not move, still tells it which of its pictures this
            // Envoy serves.
            report.acked.insert(key.clone(), resources.hash.clone());
            if every_part {
                every_part_of(&mut report, &key, resources);
            }
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

/// Every part of a Gateway served whole, into `report.acked_parts`: its own
/// (when it has one) and each route's.
pub(crate) fn every_part_of(report: &mut AckReport, key: &str, resources: &GatewayResources) {
    if !resources.own.parts.is_empty() {
        report
            .acked_parts
            .insert(part_key(key, OWN), resources.own.fingerprint.clone());
    }
    for (route, parts) in resources.routes.iter() {
        report
            .acked_parts
            .insert(part_key(key, route), parts.fingerprint.clone());
    }
}

/// The status gate of a fleet that is every Envoy connected to `fleet`'s ADS
/// server (standalone: one node, or a few): each one's [`local_report`], joined
/// with the connected nodes as the members of every Gateway. The same join the
/// leader runs over its agents' reports; every report is relative to
/// `snapshot` itself, so no older snapshot needs remembering.
pub fn fleet_served(fleet: &Fleet, snapshot: &Snapshot) -> BTreeMap<ObjectRef, Served> {
    let none = Recent::default();
    let reports: BTreeMap<String, NodeReport> = fleet
        .nodes()
        .into_iter()
        .map(|node| {
            // Every report is read against this very snapshot: no part needs listing.
            let report = report_of(&node, fleet, snapshot, false);
            (node, NodeReport::new(report, &none))
        })
        .collect();
    let members = Members {
        every_gateway: reports.keys().cloned().collect(),
        ..Members::default()
    };
    served(snapshot, &reports, &members, &none)
}

#[cfg(test)]
#[path = "local_tests.rs"]
mod tests;
