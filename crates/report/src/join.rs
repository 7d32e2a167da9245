//! The leader's view: the last report of every node, joined per Gateway.

use crate::local::part_key;
use crate::node_report::NodeReport;
use crate::pb::AckReport;
use crate::recent::{Prints, Recent};
use aether_ir::{AckState, ObjectRef, Pending, Rejection, Served};
use aether_xds::parts::OWN;
use aether_xds::{GatewayResources, Snapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio::time::Instant;

/// Last report per node; cheap to clone, shared by the report server and the
/// status gate.
#[derive(Clone)]
pub struct Reports {
    pub(crate) nodes: Arc<Mutex<BTreeMap<String, NodeReport>>>,
    changes: Arc<watch::Sender<u64>>,
    pub(crate) recent: Arc<Mutex<Recent>>,
    /// When a report last changed what a node serves.
    changed_at: Arc<Mutex<Option<Instant>>>,
}

impl Default for Reports {
    fn default() -> Self {
        Reports {
            nodes: Arc::default(),
            changes: Arc::new(watch::Sender::new(0)),
            recent: Arc::default(),
            changed_at: Arc::default(),
        }
    }
}

impl Reports {
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// When a report last changed (what a node serves, or who reports).
    pub fn changed_at(&self) -> Option<Instant> {
        *self.changed_at.lock().expect("reports lock")
    }

    fn notify(&self) {
        *self.changed_at.lock().expect("reports lock") = Some(Instant::now());
        self.changes.send_modify(|g| *g += 1);
    }

    /// Applies a report: a whole one replaces the node's, a delta (see the proto)
    /// changes it; no change, no notification.
    pub fn apply(&self, report: AckReport) {
        let changed = {
            let recent = self.recent.lock().expect("recent snapshots lock");
            let mut nodes = self.nodes.lock().expect("reports lock");
            let before = nodes.get(&report.node);
            let after = if report.delta {
                // A delta changes what the node reported last (nothing, if
                // its entry went with an earlier stream).
                let mut node = before.cloned().unwrap_or_else(|| {
                    let empty = AckReport {
                        node: report.node.clone(),
                        ..Default::default()
                    };
                    NodeReport::new(empty, &recent)
                });
                node.apply_delta(report, &recent);
                node
            } else {
                NodeReport::new(report, &recent)
            };
            let same = before == Some(&after);
            if !same {
                nodes.insert(after.report.node.clone(), after);
            }
            !same
        };
        if changed {
            self.notify();
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
            self.notify();
        }
    }

    /// The last report of every node (of a Gateway the leader knows the hash
    /// of, the parts listed are only those changed since).
    pub fn nodes(&self) -> BTreeMap<String, AckReport> {
        let nodes = self.nodes.lock().expect("reports lock");
        nodes
            .iter()
            .map(|(node, r)| (node.clone(), r.report.clone()))
            .collect()
    }

    /// The status gate for every Gateway of the leader's `snapshot`: per
    /// Gateway, its own listeners and each route, served or not by the nodes
    /// `members` says take its traffic. Reports relative to an older snapshot
    /// are read from what [`Reports::remember`] kept of it.
    pub fn served(&self, snapshot: &Snapshot, members: &Members) -> BTreeMap<ObjectRef, Served> {
        let recent = self.recent.lock().expect("recent snapshots lock");
        let nodes = self.nodes.lock().expect("reports lock");
        served(snapshot, &nodes, members, &recent)
    }
}

/// The status gate, pure: per Gateway of `snapshot`, [`join`] over the
/// reports of the nodes `members` says must serve it. The leader calls it
/// over the last report of every agent ([`Reports::served`]); standalone over
/// a report of each Envoy connected to it (`crate::local::fleet_served`).
pub(crate) fn served(
    snapshot: &Snapshot,
    nodes: &BTreeMap<String, NodeReport>,
    members: &Members,
    recent: &Recent,
) -> BTreeMap<ObjectRef, Served> {
    snapshot
        .gateways
        .iter()
        .map(|(gw, resources)| {
            let current = Current {
                snapshot,
                gw,
                resources,
                key: gw.to_string(),
            };
            let (reporting, unreported) = members.required(gw, nodes);
            let mut served = join(&reporting, &current, recent);
            served.unreported = unreported;
            (gw.clone(), served)
        })
        .collect()
}

impl Reports {
    /// Remembers a snapshot this agent serves, so reports relative to it can
    /// be read later. Call it for every snapshot before an Envoy can get it:
    /// one that was served only between two status passes would otherwise be
    /// unknown, and a node reporting it would serve nothing.
    pub fn remember(&self, snapshot: &Snapshot) {
        let mut recent = self.recent.lock().expect("recent snapshots lock");
        let mut nodes = self.nodes.lock().expect("reports lock");
        let gone = recent.remember(snapshot, &held(&nodes));
        if !gone.is_empty() {
            for node in nodes.values_mut() {
                node.forget(&gone);
            }
        }
    }
}

/// The snapshot versions the nodes report as ACKed.
fn held(nodes: &BTreeMap<String, NodeReport>) -> BTreeSet<&str> {
    nodes
        .values()
        .map(|r| r.report.acked_snapshot.as_str())
        .filter(|v| !v.is_empty())
        .collect()
}

/// Which nodes must serve a Gateway: those that take its traffic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Members {
    /// Per Gateway, the nodes of the Ready endpoints of its edge Service
    /// (service mode).
    pub per_gateway: BTreeMap<ObjectRef, BTreeSet<String>>,
    /// The nodes that take every Gateway's traffic: the Ready edge pods
    /// (static mode).
    pub every_gateway: BTreeSet<String>,
}

impl Members {
    /// Whether the picture is complete enough to write status from, after a
    /// (re)start: every member has reported what its Envoy serves (with no
    /// member known, some node has). Until then a restarted leader would write
    /// `Pending` over what every Envoy still serves, and `Programmed` again a
    /// moment later.
    pub fn have_answered(&self, nodes: &BTreeMap<String, AckReport>) -> bool {
        let answered = |r: &AckReport| {
            r.envoy_connected
                && (!r.acked_snapshot.is_empty()
                    || !r.acked.is_empty()
                    || !r.nacked.is_empty()
                    || !r.acked_parts.is_empty())
        };
        let mut members = self
            .per_gateway
            .values()
            .flatten()
            .chain(&self.every_gateway)
            .peekable();
        if members.peek().is_none() {
            return nodes.values().any(answered);
        }
        members.all(|n| nodes.get(n).is_some_and(answered))
    }

    /// The reports of the nodes that must serve `gw`, and the nodes among them
    /// that have not reported. With no member known (a Service with no Ready
    /// endpoint yet, no Ready edge pod, or a cluster that tells neither), every
    /// node whose agent reports must serve it, its Envoy connected or not: one
    /// whose Envoy has not connected yet (or went away) serves nothing, and a
    /// Gateway claimed programmed before it connects would be a lie the moment
    /// it takes traffic.
    pub(crate) fn required<'a>(
        &self,
        gw: &ObjectRef,
        nodes: &'a BTreeMap<String, NodeReport>,
    ) -> (Vec<Option<&'a NodeReport>>, BTreeSet<String>) {
        let members = self
            .per_gateway
            .get(gw)
            .filter(|m| !m.is_empty())
            .unwrap_or(&self.every_gateway);
        if members.is_empty() {
            return (nodes.values().map(Some).collect(), BTreeSet::new());
        }
        let reports = members.iter().map(|n| nodes.get(n)).collect();
        let unreported = members
            .iter()
            .filter(|n| !nodes.contains_key(*n))
            .cloned()
            .collect();
        (reports, unreported)
    }
}

/// One Gateway of the leader's current snapshot.
pub(crate) struct Current<'a> {
    pub(crate) snapshot: &'a Snapshot,
    pub(crate) gw: &'a ObjectRef,
    pub(crate) resources: &'a GatewayResources,
    pub(crate) key: String,
}

/// What one node's report says it serves of the current Gateway.
struct NodeServes<'a> {
    report: &'a AckReport,
    /// The report covers the current Gateway whole.
    whole: bool,
    /// The parts it lists of this Gateway, by object key (`OWN` or a route
    /// key), sorted: read by a search, not a key formatted per route.
    listed: Vec<(&'a str, &'a str)>,
    /// The Gateway as of the snapshot the report is relative to, if known.
    base: Option<&'a Prints>,
    /// Else the Gateway as of the last hash of this node the leader knew; the
    /// report's parts are those changed since (see `node_report`).
    anchor: Option<&'a Prints>,
}

impl NodeServes<'_> {
    /// `object` (`OWN` or a route key) at `fingerprint`, its current one.
    fn serves(&self, object: &str, fingerprint: &str) -> bool {
        if self.whole {
            return true;
        }
        let in_prints = |b: &Prints| {
            if object == OWN {
                !b.own.is_empty() && b.own == fingerprint
            } else {
                b.routes
                    .get(object)
                    .is_some_and(|p| p.fingerprint == fingerprint)
            }
        };
        if self.base.is_some_and(in_prints) {
            return true;
        }
        match self.listed.binary_search_by(|(key, _)| (*key).cmp(object)) {
            Ok(i) => self.listed[i].1 == fingerprint,
            Err(_) => self.base.is_none() && self.anchor.is_some_and(in_prints),
        }
    }
}

/// One Gateway over the reports of the nodes that must serve it (`None`: a
/// node that has not reported, which serves nothing). A node serves a part
/// when it reports the whole snapshot or the Gateway's hash, when the part is
/// unchanged since the snapshot (or Gateway hash) it reports, or when it
/// reports the part's fingerprint; of a hash the leader does not know, when
/// the part is unchanged since the node's anchor and not listed otherwise.
pub(crate) fn join(
    required: &[Option<&NodeReport>],
    current: &Current<'_>,
    recent: &Recent,
) -> Served {
    let nodes: Vec<NodeServes<'_>> = required
        .iter()
        .flatten()
        .map(|r| node_serves(r, current, recent))
        .collect();
    let ready: Vec<&AckReport> = nodes.iter().map(|n| n.report).collect();
    if ready.is_empty() {
        return Served::whole(AckState::Pending);
    }
    let all_reported = ready.len() == required.len();
    let gateway = gateway_state(&ready, &nodes, current, all_reported);
    if !all_reported {
        return Served {
            pending: Pending::All,
            ..Served::whole(gateway)
        };
    }
    let resources = current.resources;
    let pending = resources
        .routes
        .iter()
        .filter(|(route, parts)| !nodes.iter().all(|n| n.serves(route, &parts.fingerprint)))
        .map(|(route, _)| route.to_string())
        .collect();
    Served {
        gateway,
        pending: Pending::Only(pending),
        unreported: BTreeSet::new(),
        refused: refused_routes(&ready, current),
    }
}

/// What one node's report says it serves of the Gateway: the whole of its
/// current config, or which earlier build its ACK is of.
fn node_serves<'a>(
    node: &'a NodeReport,
    current: &Current<'_>,
    recent: &'a Recent,
) -> NodeServes<'a> {
    let r = &node.report;
    let (snapshot, resources, key) = (current.snapshot, current.resources, &current.key);
    let whole = r.acked_snapshot == snapshot.version || r.acked.get(key) == Some(&resources.hash);
    // The snapshot it names, if the leader made it too; else the picture
    // with the Gateway's hash it names.
    let in_snapshot = (!r.acked_snapshot.is_empty())
        .then(|| recent.in_snapshot(&r.acked_snapshot, current.gw))
        .flatten();
    let base = in_snapshot.or_else(|| {
        r.acked
            .get(key)
            .and_then(|h| recent.with_hash(current.gw, h))
    });
    NodeServes {
        report: r,
        whole,
        listed: if whole { Vec::new() } else { listed_of(r, key) },
        base,
        anchor: node.anchor_of(key),
    }
}

/// The parts `report` lists of Gateway `key`, by object key: its keys are
/// `part_key(key, object)`, so this Gateway's sort together, in object order.
fn listed_of<'a>(report: &'a AckReport, key: &str) -> Vec<(&'a str, &'a str)> {
    let from = part_key(key, "");
    report
        .acked_parts
        .range(from.clone()..)
        .map_while(|(part, fingerprint)| {
            let object = part.strip_prefix(from.as_str())?;
            Some((object, fingerprint.as_str()))
        })
        .collect()
}

/// The Gateway's own state: a node's NACK first, then `Pending` until every
/// node reported and serves its own part (listeners, secrets).
fn gateway_state(
    ready: &[&AckReport],
    nodes: &[NodeServes<'_>],
    current: &Current<'_>,
    all_reported: bool,
) -> AckState {
    let (key, resources) = (&current.key, current.resources);
    if let Some(rejection) = ready
        .iter()
        .find_map(|r| r.nacked.get(key).map(|m| Rejection::new(&r.node, m)))
    {
        AckState::Nacked(rejection)
    } else if !all_reported {
        AckState::Pending
    } else if nodes.iter().all(|n| {
        n.whole || (!resources.own.parts.is_empty() && n.serves(OWN, &resources.own.fingerprint))
    }) {
        AckState::Acked
    } else {
        AckState::Pending
    }
}

/// A route some node refused: that node's message (the first reporting one).
fn refused_routes(ready: &[&AckReport], current: &Current<'_>) -> BTreeMap<String, Rejection> {
    // The usual case, no node refusing anything, costs no walk over the
    // Gateway's routes (a key formatted per route, every status pass).
    if ready.iter().all(|r| r.refused_routes.is_empty()) {
        return BTreeMap::new();
    }
    let key = &current.key;
    current
        .resources
        .routes
        .keys()
        .filter_map(|route| {
            let part = crate::local::part_key(key, route);
            ready
                .iter()
                .find_map(|r| {
                    r.refused_routes
                        .get(&part)
                        .map(|m| Rejection::new(&r.node, m))
                })
                .map(|refusal| (route.to_string(), refusal))
        })
        .collect()
}

#[cfg(test)]
#[path = "join_tests.rs"]
mod tests;
