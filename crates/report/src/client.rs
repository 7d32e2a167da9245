//! The agent's end: stream the latest local report to whoever leads.
//!
//! Bounded: only when it changed, and only the latest (intermediate reports are
//! skipped); a caught-up report at once, any other at most one per `interval`
//! ([`Pace`]); after the first, each report carries only the Gateways whose
//! state changed ([`delta`]). The stream follows the
//! leader: when the leader's report address changes, or the stream breaks, it
//! reconnects and starts again with a whole report.
//!
//! It speaks TLS only, trusting exactly the certificate the leader's Lease names
//! ([`crate::tls`]): a leader without one, a plain-text server and a server
//! showing another certificate get no report and no token. Each stream carries
//! the agent's token (read from its file at every connect: a projected token is
//! rotated on disk) as `authorization: Bearer`.

use crate::pb::AckReport;
use crate::pb::fleet_reports_client::FleetReportsClient;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tracing::{info, warn};

/// Where the leader takes reports, and the certificate it serves there (PEM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderEndpoint {
    pub address: String,
    pub certificate: String,
}

pub async fn run(
    mut leader: watch::Receiver<Option<LeaderEndpoint>>,
    reports: watch::Receiver<Arc<AckReport>>,
    interval: Duration,
    token_file: PathBuf,
) {
    loop {
        let current = leader.borrow_and_update().clone();
        let Some(current) = current else {
            if leader.changed().await.is_err() {
                return;
            }
            continue;
        };
        tokio::select! {
            r = stream_to(&current, reports.clone(), interval, &token_file) => {
                if let Err(e) = r {
                    warn!(leader = %current.address, error = %e, "reporting to the leader failed; retrying");
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            r = leader.changed() => if r.is_err() { return },
        }
    }
}

async fn stream_to(
    leader: &LeaderEndpoint,
    mut reports: watch::Receiver<Arc<AckReport>>,
    interval: Duration,
    token_file: &Path,
) -> Result<(), tonic::Status> {
    let token = read_token(token_file)?;
    let channel = connect(leader).await?;
    info!(leader = %leader.address, "reporting to the leader");
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let sender = async move {
        let mut last: Option<AckReport> = None;
        loop {
            let report = (**reports.borrow_and_update()).clone();
            let message = match &last {
                None => report.clone(),
                Some(previous) => delta(previous, &report),
            };
            last = Some(report);
            if tx.send(message).await.is_err() {
                return;
            }
            let pace = Pace::new(Instant::now(), interval);
            if reports.changed().await.is_err() {
                return;
            }
            let changed = Instant::now();
            // The next report goes when it is due; a later one may replace it
            // meanwhile (and make it due sooner: an ACK after a new snapshot).
            loop {
                let due = pace.due(changed, caught_up(&reports.borrow()));
                tokio::select! {
                    () = tokio::time::sleep_until(due) => break,
                    r = reports.changed() => if r.is_err() { return },
                }
            }
        }
    };
    let mut client = with_token(channel, Some(&token))?;
    tokio::select! {
        r = client.report(ReceiverStream::new(rx)) => r.map(|_| ()),
        () = sender => Ok(()),
    }
}

/// A report that says its Envoy serves all of the agent's snapshot.
fn caught_up(report: &AckReport) -> bool {
    !report.acked_snapshot.is_empty()
}

/// At least this long between two reports on a stream: the leader writes a
/// status batch no more often than this either (`status::driver::FOLLOW_GAP`),
/// so reports closer together would mostly make it join more.
const MIN_GAP: Duration = Duration::from_millis(50);

/// When the next report goes, after one sent at `sent`. A change makes two
/// reports: its new snapshot, not served yet, then the ACK that serves it. The
/// first tells the leader nothing it can write (what is new is not served);
/// the second is what status waits for. So a caught-up report goes [`MIN_GAP`] after the
/// last one; any other (behind, a NACK, Envoy gone) waits `interval` from
/// the last report and from the change, and an ACK arriving meanwhile goes
/// instead. A fleet's report load stays bounded: caught-up reports come at
/// most one per snapshot the agent publishes, the others one per `interval`.
/// (With one report per `interval` whatever it said, the ACK waited out the
/// rest of it: `Accepted` came ~100 ms after apply however fast Envoy was.)
#[derive(Debug, Clone, Copy)]
struct Pace {
    sent: Instant,
    interval: Duration,
}

impl Pace {
    fn new(sent: Instant, interval: Duration) -> Self {
        Pace { sent, interval }
    }

    /// When a report that appeared at `changed` is due.
    fn due(&self, changed: Instant, caught_up: bool) -> Instant {
        if caught_up {
            self.sent + MIN_GAP
        } else {
            (self.sent + self.interval).max(changed + self.interval)
        }
    }
}

/// A TLS channel to `leader` that trusts only its certificate. The handshake
/// completes (or fails) here, before any token is sent.
pub async fn connect(leader: &LeaderEndpoint) -> Result<tonic::transport::Channel, tonic::Status> {
    let unavailable = |e: &dyn std::fmt::Display| tonic::Status::unavailable(e.to_string());
    tonic::transport::Endpoint::from_shared(format!("https://{}", leader.address))
        .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?
        .tls_config(crate::tls::client_tls(&leader.certificate))
        .map_err(|e| unavailable(&e))?
        .connect_timeout(Duration::from_secs(3))
        .connect()
        .await
        .map_err(|e| unavailable(&error_chain(&e)))
}

/// `e` and its sources, so a refused certificate says why.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The token in `file`; the error names the file, never the token.
fn read_token(file: &Path) -> Result<String, tonic::Status> {
    std::fs::read_to_string(file)
        .map(|t| t.trim().to_string())
        .map_err(|e| {
            tonic::Status::unauthenticated(format!("report token {}: {e}", file.display()))
        })
}

/// A report client whose every stream carries `authorization: Bearer <token>`
/// (none with `None`).
pub fn with_token(
    channel: tonic::transport::Channel,
    token: Option<&str>,
) -> Result<
    FleetReportsClient<
        tonic::service::interceptor::InterceptedService<
            tonic::transport::Channel,
            impl tonic::service::Interceptor + use<>,
        >,
    >,
    tonic::Status,
> {
    let value: Option<tonic::metadata::AsciiMetadataValue> = token
        .map(|t| format!("Bearer {t}").parse())
        .transpose()
        .map_err(|_| tonic::Status::unauthenticated("report token: not printable ASCII"))?;
    Ok(FleetReportsClient::with_interceptor(
        channel,
        move |mut request: tonic::Request<()>| {
            if let Some(v) = &value {
                request.metadata_mut().insert("authorization", v.clone());
            }
            Ok(request)
        },
    ))
}

/// `next` as changes to `previous` (see `delta` in fleet.proto).
pub fn delta(previous: &AckReport, next: &AckReport) -> AckReport {
    let mut out = AckReport {
        node: next.node.clone(),
        envoy_connected: next.envoy_connected,
        acked_snapshot: next.acked_snapshot.clone(),
        every_part: next.every_part,
        delta: true,
        ..Default::default()
    };
    let gone = |old: &std::collections::BTreeMap<String, String>,
                new: &std::collections::BTreeMap<String, String>| {
        old.keys()
            .filter(|k| !new.contains_key(*k))
            .cloned()
            .collect::<Vec<_>>()
    };
    out.cleared = gone(&previous.acked, &next.acked);
    out.cleared.extend(gone(&previous.nacked, &next.nacked));
    out.cleared
        .extend(gone(&previous.acked_parts, &next.acked_parts));
    out.cleared
        .extend(gone(&previous.refused_routes, &next.refused_routes));
    out.cleared.sort();
    out.cleared.dedup();
    // A cleared key leaves every map, so whatever it still holds is set again.
    let changed = |old: &std::collections::BTreeMap<String, String>,
                   new: &std::collections::BTreeMap<String, String>,
                   cleared: &[String]| {
        new.iter()
            .filter(|(k, v)| old.get(*k) != Some(*v) || cleared.binary_search(k).is_ok())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    out.acked = changed(&previous.acked, &next.acked, &out.cleared);
    out.nacked = changed(&previous.nacked, &next.nacked, &out.cleared);
    out.acked_parts = changed(&previous.acked_parts, &next.acked_parts, &out.cleared);
    out.refused_routes = changed(&previous.refused_routes, &next.refused_routes, &out.cleared);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reports;

    fn mk(acked: &[(&str, &str)], nacked: &[(&str, &str)]) -> AckReport {
        AckReport {
            node: "a".into(),
            envoy_connected: true,
            acked: acked
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            nacked: nacked
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn deltas_rebuild_every_report_on_the_leader() {
        let steps = [
            mk(&[("ns/a", "h1"), ("ns/b", "h1")], &[]),
            mk(&[("ns/a", "h2"), ("ns/b", "h1")], &[]),
            mk(&[("ns/b", "h1")], &[("ns/a", "bad regex")]),
            mk(&[("ns/a", "h3")], &[]),
            AckReport {
                acked_snapshot: "v9".into(),
                ..mk(&[], &[])
            },
            mk(&[("ns/c", "h1")], &[("ns/a", "again")]),
        ];
        let leader = Reports::default();
        leader.apply(steps[0].clone());
        for pair in steps.windows(2) {
            let d = delta(&pair[0], &pair[1]);
            assert!(d.delta);
            leader.apply(d);
            assert_eq!(leader.nodes()["a"], pair[1], "after {:?}", pair[1]);
        }
    }

    #[test]
    fn a_caught_up_report_goes_at_once_any_other_waits_its_interval() {
        let t0 = Instant::now();
        let interval = Duration::from_millis(100);
        let pace = Pace::new(t0, interval);
        // An ACK right after a report: MIN_GAP after it, not the interval.
        let ack = t0 + Duration::from_millis(3);
        assert_eq!(pace.due(ack, true), t0 + MIN_GAP);
        // A new snapshot not served yet: the interval, from the change too,
        // so an ACK that follows it within the interval replaces it.
        let later = t0 + Duration::from_secs(5);
        assert_eq!(pace.due(later, false), later + interval);
        assert_eq!(pace.due(ack, false), ack + interval);
        // Long after the last report, a caught-up one is due at once.
        assert!(pace.due(later, true) <= later);
    }

    #[test]
    fn a_delta_carries_only_what_changed() {
        let before = mk(&[("ns/a", "h1"), ("ns/b", "h1"), ("ns/c", "h1")], &[]);
        let after = mk(&[("ns/a", "h1"), ("ns/b", "h2"), ("ns/c", "h1")], &[]);
        let d = delta(&before, &after);
        assert_eq!(d.acked.len(), 1);
        assert_eq!(d.acked["ns/b"], "h2");
        assert!(d.cleared.is_empty() && d.nacked.is_empty());
    }
}
