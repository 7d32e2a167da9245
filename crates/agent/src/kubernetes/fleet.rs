//! Fleet reports: what the local Envoy serves goes to whoever leads, in process
//! when that is us, over gRPC (crates/report) otherwise.

use super::{LEADER_LOOKUP, REPORT_INTERVAL};
use crate::pipeline::Published;
use aether_ads::Fleet;
use aether_k8s::leader;
use aether_report::pb::AckReport;
use aether_report::{Reports, local_report};
use std::sync::Arc;
use tokio::sync::watch;

/// The latest local report, reported to the leader at most once per interval.
pub(super) fn report_to_leader(
    client: kube::Client,
    local: watch::Receiver<Arc<AckReport>>,
    namespace: String,
    lease: String,
    identity: String,
    elect: bool,
) {
    let leader = leader_address(client, namespace, lease, identity, elect);
    tokio::spawn(aether_report::client::run(leader, local, REPORT_INTERVAL));
}

/// What the local Envoy serves, as the latest report for the leader.
pub(super) fn local_reports(
    node: &str,
    mut published: watch::Receiver<Option<Arc<Published>>>,
    fleet: Fleet,
) -> watch::Receiver<Arc<AckReport>> {
    let empty = AckReport {
        node: node.to_string(),
        ..Default::default()
    };
    let (tx, rx) = watch::channel(Arc::new(empty));
    let node = node.to_string();
    tokio::spawn(async move {
        let mut changes = fleet.subscribe();
        loop {
            let snapshot = published
                .borrow_and_update()
                .as_ref()
                .map(|p| p.snapshot.clone());
            if let Some(snapshot) = snapshot {
                let report = local_report(&node, &fleet, &snapshot);
                tx.send_if_modified(|current| {
                    let changed = **current != report;
                    if changed {
                        *current = Arc::new(report);
                    }
                    changed
                });
            }
            tokio::select! {
                r = published.changed() => if r.is_err() { return },
                r = changes.changed() => if r.is_err() { return },
            }
        }
    });
    rx
}

/// The leader's own node reports in process.
pub(super) async fn self_report(
    mut local: watch::Receiver<Arc<AckReport>>,
    mut is_leader: watch::Receiver<bool>,
    reports: Reports,
) {
    loop {
        let report = local.borrow_and_update().clone();
        if *is_leader.borrow_and_update() {
            reports.update((*report).clone());
        } else {
            reports.remove(&report.node);
        }
        tokio::select! {
            r = local.changed() => if r.is_err() { return },
            r = is_leader.changed() => if r.is_err() { return },
        }
    }
}

/// Where the current leader takes reports, `None` while that is us (or unknown).
fn leader_address(
    client: kube::Client,
    namespace: String,
    lease: String,
    identity: String,
    elect: bool,
) -> watch::Receiver<Option<String>> {
    let (tx, rx) = watch::channel(None);
    if !elect {
        return rx;
    }
    tokio::spawn(async move {
        loop {
            let address = match leader::current_leader(&client, &namespace, &lease).await {
                Some((holder, address)) if holder != identity => address,
                _ => None,
            };
            tx.send_if_modified(|current| {
                let changed = *current != address;
                if changed {
                    *current = address.clone();
                }
                changed
            });
            tokio::time::sleep(LEADER_LOOKUP).await;
        }
    });
    rx
}
