//! Fleet reports: what the local Envoy serves goes to whoever leads, in process
//! when that is us, over gRPC and TLS (crates/report) otherwise, trusting the
//! certificate the leader's Lease names.

use super::{LEADER_LOOKUP, REPORT_INTERVAL};
use crate::pipeline::Published;
use aether_ads::Fleet;
use aether_k8s::agent_token::TokenError;
use aether_k8s::leader;
use aether_report::auth::{Authenticator, Refusal, Verdict};
use aether_report::client::LeaderEndpoint;
use aether_report::pb::AckReport;
use aether_report::{Reports, local_report};
use aether_xds::Snapshot;
use std::sync::Arc;
use tokio::sync::watch;
use tracing::{info, warn};

/// The latest local report, reported to the leader at most once per interval
/// with the token in `token_file`.
pub(super) fn report_to_leader(
    client: kube::Client,
    local: watch::Receiver<Arc<AckReport>>,
    namespace: String,
    lease: String,
    identity: String,
    elect: bool,
    token_file: std::path::PathBuf,
) {
    let leader = leader_address(client, namespace, lease, identity, elect);
    tokio::spawn(aether_report::client::run(
        leader,
        local,
        REPORT_INTERVAL,
        token_file,
    ));
}

/// The report port's authenticator: the API server says whose token it is.
pub(super) struct ApiServerTokens(pub aether_k8s::agent_token::AgentTokens);

impl Authenticator for ApiServerTokens {
    fn node_of<'a>(&'a self, token: &'a str) -> Verdict<'a> {
        Box::pin(async move {
            self.0.node_of(token).await.map_err(|e| match e {
                TokenError::Refused(why) => Refusal::NotAnAgent(why),
                TokenError::Unverified(why) => Refusal::Unverified(why),
            })
        })
    }
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

/// Whether the local Envoy has caught up: true from the first report in which
/// it has answered every Gateway of the current snapshot (ACKed it whole, or
/// NACKed it: status tells a NACK, and Envoy keeps serving what it had), false
/// again only while it is not connected. The readiness probe waits for it, so a
/// joining node takes traffic (becomes a Ready endpoint, and a member the
/// status gate waits for) only once it serves what status says; after that,
/// churn does not make it flap.
pub(super) fn envoy_ready(
    mut local: watch::Receiver<Arc<AckReport>>,
    mut published: watch::Receiver<Option<Arc<Published>>>,
) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        loop {
            let report = local.borrow_and_update().clone();
            let snapshot = published
                .borrow_and_update()
                .as_ref()
                .map(|p| p.snapshot.clone());
            let was = *tx.borrow();
            let now = match snapshot {
                Some(s) => next_readiness(was, &report, &s),
                None => false,
            };
            if now != was {
                info!(ready = now, "local Envoy readiness");
                tx.send_replace(now);
            }
            tokio::select! {
                r = local.changed() => if r.is_err() { return },
                r = published.changed() => if r.is_err() { return },
            }
        }
    });
    rx
}

/// Readiness after `report` of the local Envoy against `snapshot`.
fn next_readiness(was: bool, report: &AckReport, snapshot: &Snapshot) -> bool {
    if !report.envoy_connected {
        return false;
    }
    was || report.acked_snapshot == snapshot.version
        || snapshot.gateways.iter().all(|(gw, resources)| {
            let key = gw.to_string();
            report.acked.get(&key) == Some(&resources.hash) || report.nacked.contains_key(&key)
        })
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
            reports.apply((*report).clone());
        } else {
            reports.remove(&report.node);
        }
        tokio::select! {
            r = local.changed() => if r.is_err() { return },
            r = is_leader.changed() => if r.is_err() { return },
        }
    }
}

/// Where the current leader takes reports and the certificate it serves
/// there, `None` while that is us (or unknown). A leader whose Lease names no
/// certificate is not reported to: reports travel over TLS only.
fn leader_address(
    client: kube::Client,
    namespace: String,
    lease: String,
    identity: String,
    elect: bool,
) -> watch::Receiver<Option<LeaderEndpoint>> {
    let (tx, rx) = watch::channel(None);
    if !elect {
        return rx;
    }
    tokio::spawn(async move {
        let mut warned = false;
        loop {
            let address = match leader::current_leader(&client, &namespace, &lease).await {
                Some(holder) if holder.identity != identity => {
                    match (holder.report_address, holder.report_certificate) {
                        (Some(address), Some(certificate)) => Some(LeaderEndpoint {
                            address,
                            certificate,
                        }),
                        (address, _) => {
                            if !std::mem::replace(&mut warned, true) {
                                warn!(leader = %holder.identity, ?address, "the leader's Lease names no report certificate; not reporting (TLS only)");
                            }
                            None
                        }
                    }
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use aether_ir::ObjectRef;
    use aether_xds::{Resource, ResourceType};
    use std::collections::{BTreeMap, BTreeSet};

    fn snapshot(body: &[u8]) -> Snapshot {
        let route = Resource::new("rt", ResourceType::Route.type_url(), body.to_vec());
        Snapshot::new(
            BTreeMap::from([(
                ResourceType::Route,
                BTreeMap::from([("rt".to_string(), route)]),
            )]),
            BTreeMap::from([(
                ObjectRef::new("ns", "gw"),
                BTreeSet::from([(ResourceType::Route, "rt".to_string())]),
            )]),
        )
    }

    fn report(connected: bool) -> AckReport {
        AckReport {
            node: "n".into(),
            envoy_connected: connected,
            ..Default::default()
        }
    }

    #[test]
    fn ready_once_caught_up_until_envoy_goes_away() {
        let v1 = snapshot(b"v1");
        let v2 = snapshot(b"v2");
        assert!(!next_readiness(false, &report(false), &v1), "no Envoy");
        assert!(!next_readiness(false, &report(true), &v1), "nothing ACKed");

        let mut acked = report(true);
        acked.acked_snapshot = v1.version.clone();
        assert!(next_readiness(false, &acked, &v1));
        assert!(!next_readiness(false, &acked, &v2), "an older snapshot");
        // Once caught up, a newer snapshot being pushed does not unready it.
        assert!(next_readiness(true, &report(true), &v2));
        assert!(!next_readiness(true, &report(false), &v2), "Envoy gone");

        let mut per_gateway = report(true);
        per_gateway.acked.insert(
            "ns/gw".into(),
            v2.gateways[&ObjectRef::new("ns", "gw")].hash.clone(),
        );
        assert!(next_readiness(false, &per_gateway, &v2));
        let mut nacked = report(true);
        nacked.nacked.insert("ns/gw".into(), "bad regex".into());
        assert!(next_readiness(false, &nacked, &v2), "a NACK is an answer");
    }
}
