//! The leader's view: the last report of every node, joined per Gateway.

use crate::pb::AckReport;
use aether_gateway::AckState;
use aether_ir::ObjectRef;
use aether_xds::Snapshot;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// Last report per node; cheap to clone, shared by the report server and the
/// status gate.
#[derive(Clone)]
pub struct Reports {
    nodes: Arc<Mutex<BTreeMap<String, AckReport>>>,
    changes: Arc<watch::Sender<u64>>,
}

impl Default for Reports {
    fn default() -> Self {
        Reports {
            nodes: Arc::default(),
            changes: Arc::new(watch::Sender::new(0)),
        }
    }
}

impl Reports {
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Records `report` as its node's latest; no change, no notification.
    pub fn update(&self, report: AckReport) {
        let changed = {
            let mut nodes = self.nodes.lock().expect("reports lock");
            let same = nodes.get(&report.node) == Some(&report);
            if !same {
                nodes.insert(report.node.clone(), report);
            }
            !same
        };
        if changed {
            self.changes.send_modify(|g| *g += 1);
        }
    }

    /// Applies a report: a whole one replaces the node's, a delta (see the proto)
    /// changes it.
    pub fn apply(&self, report: AckReport) {
        if !report.delta {
            return self.update(report);
        }
        let changed = {
            let mut nodes = self.nodes.lock().expect("reports lock");
            let entry = nodes
                .entry(report.node.clone())
                .or_insert_with(|| AckReport {
                    node: report.node.clone(),
                    ..Default::default()
                });
            let before = entry.clone();
            for key in &report.cleared {
                entry.acked.remove(key);
                entry.nacked.remove(key);
            }
            entry.acked.extend(report.acked);
            entry.nacked.extend(report.nacked);
            entry.envoy_connected = report.envoy_connected;
            entry.acked_snapshot = report.acked_snapshot;
            *entry != before
        };
        if changed {
            self.changes.send_modify(|g| *g += 1);
        }
    }

    /// Forgets a node (its agent's stream ended).
    pub fn remove(&self, node: &str) {
        let removed = self
            .nodes
            .lock()
            .expect("reports lock")
            .remove(node)
            .is_some();
        if removed {
            self.changes.send_modify(|g| *g += 1);
        }
    }

    pub fn nodes(&self) -> BTreeMap<String, AckReport> {
        self.nodes.lock().expect("reports lock").clone()
    }

    /// The status gate for every Gateway of the leader's `snapshot`.
    pub fn states(&self, snapshot: &Snapshot) -> BTreeMap<ObjectRef, AckState> {
        let nodes = self.nodes.lock().expect("reports lock");
        let ready: Vec<&AckReport> = nodes.values().filter(|r| r.envoy_connected).collect();
        snapshot
            .gateways
            .iter()
            .map(|(gw, resources)| (gw.clone(), join(&ready, snapshot, gw, &resources.hash)))
            .collect()
    }
}

fn join(ready: &[&AckReport], snapshot: &Snapshot, gw: &ObjectRef, hash: &str) -> AckState {
    if ready.is_empty() {
        return AckState::Pending;
    }
    let key = gw.to_string();
    let mut pending = false;
    for report in ready {
        if let Some(msg) = report.nacked.get(&key) {
            return AckState::Nacked(format!("node {}: {msg}", report.node));
        }
        let acked = report.acked_snapshot == snapshot.version
            || report.acked.get(&key).is_some_and(|h| h == hash);
        pending |= !acked;
    }
    if pending {
        AckState::Pending
    } else {
        AckState::Acked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aether_xds::{Resource, ResourceType};
    use std::collections::BTreeSet;

    fn mk_snapshot(route_body: &[u8]) -> Snapshot {
        let mut resources = BTreeMap::new();
        let route = Resource::new("rt", ResourceType::Route.type_url(), route_body.to_vec());
        resources.insert(
            ResourceType::Route,
            BTreeMap::from([("rt".to_string(), route)]),
        );
        let members = BTreeMap::from([(
            ObjectRef::new("ns", "gw"),
            BTreeSet::from([(ResourceType::Route, "rt".to_string())]),
        )]);
        Snapshot::new(resources, members)
    }

    fn mk_report(node: &str, connected: bool) -> AckReport {
        AckReport {
            node: node.into(),
            envoy_connected: connected,
            ..Default::default()
        }
    }

    fn state(reports: &Reports, snapshot: &Snapshot) -> AckState {
        reports.states(snapshot)[&ObjectRef::new("ns", "gw")].clone()
    }

    #[test]
    fn acked_only_when_every_connected_node_has_the_leaders_hash() {
        let snapshot = mk_snapshot(b"v2");
        let old = mk_snapshot(b"v1");
        let hash = snapshot.gateways[&ObjectRef::new("ns", "gw")].hash.clone();
        let reports = Reports::default();
        assert_eq!(
            state(&reports, &snapshot),
            AckState::Pending,
            "no node at all"
        );

        let mut a = mk_report("a", true);
        a.acked_snapshot = snapshot.version.clone();
        reports.update(a);
        assert_eq!(state(&reports, &snapshot), AckState::Acked);

        // Node b is caught up on an older snapshot only.
        let mut b = mk_report("b", true);
        b.acked_snapshot = old.version.clone();
        reports.update(b.clone());
        assert_eq!(state(&reports, &snapshot), AckState::Pending);

        // ...then ACKs this Gateway's current hash.
        b.acked_snapshot.clear();
        b.acked.insert("ns/gw".into(), hash);
        reports.update(b);
        assert_eq!(state(&reports, &snapshot), AckState::Acked);

        // A node without a connected Envoy does not hold the Gateway back.
        reports.update(mk_report("c", false));
        assert_eq!(state(&reports, &snapshot), AckState::Acked);
    }

    #[test]
    fn a_nack_names_the_node_and_envoys_message() {
        let snapshot = mk_snapshot(b"v1");
        let reports = Reports::default();
        let mut a = mk_report("a", true);
        a.nacked.insert("ns/gw".into(), "bad regex".into());
        reports.update(a);
        assert_eq!(
            state(&reports, &snapshot),
            AckState::Nacked("node a: bad regex".into())
        );
        reports.remove("a");
        assert_eq!(state(&reports, &snapshot), AckState::Pending);
    }

    #[test]
    fn an_unchanged_report_does_not_notify() {
        let reports = Reports::default();
        let rx = reports.subscribe();
        reports.update(mk_report("a", true));
        let seen = *rx.borrow();
        reports.update(mk_report("a", true));
        assert_eq!(*rx.borrow(), seen);
    }
}
