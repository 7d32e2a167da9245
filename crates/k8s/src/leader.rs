//! Leader election on a `coordination.k8s.io/v1` Lease: only the leader writes.
//!
//! ```text
//!           ┌──────── every renew_interval ────────┐
//!           ▼                                      │
//!   read Lease ─► absent ─────────────► create (holder = me)      ──► leader
//!               ├ holder = me ────────► renew (renewTime = now)   ──► leader
//!               ├ no holder, or holder
//!               │ silent ≥ lease_duration ► take over (transitions+1) ► leader
//!               └ else ───────────────────────────────────────────► follower
//! ```
//!
//! Every write carries the `resourceVersion` that was read, so two candidates
//! never both win: the API server refuses the slower one. Whether a holder is
//! silent is judged by this process's own clock (how long the Lease record has not
//! changed since we first saw it), never by comparing our clock with the holder's
//! `renewTime`. A leader that cannot renew for `renew_deadline` (shorter than the
//! lease duration) steps down before anyone else may take over. On shutdown the
//! leader releases the Lease so a successor takes over at once.
//!
//! The holder also writes its report address into the Lease's
//! [`REPORT_ADDRESS_ANNOTATION`] and the certificate its report port serves
//! (TLS; the key never leaves the holder's memory) into
//! [`REPORT_CERTIFICATE_ANNOTATION`], so agents find where to send their ACK
//! reports and whom to trust there ([`current_leader`]). Only the writer
//! identity may write the Lease, so the certificate is as trustworthy as the
//! API server's answer.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, PostParams};
use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

/// Lease annotation holding the leader's report address (`host:port`).
pub const REPORT_ADDRESS_ANNOTATION: &str = "aether.io/report-address";
/// Lease annotation holding the certificate (PEM) the leader's report port serves.
pub const REPORT_CERTIFICATE_ANNOTATION: &str = "aether.io/report-certificate";

/// Who campaigns for which Lease, and how fast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderConfig {
    /// Namespace of the Lease (the edge namespace).
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// This candidate (the pod name).
    pub identity: String,
    /// Written to [`REPORT_ADDRESS_ANNOTATION`] while we hold the Lease.
    pub report_address: Option<String>,
    /// Written to [`REPORT_CERTIFICATE_ANNOTATION`] while we hold the Lease.
    pub report_certificate: Option<String>,
    /// How long a silent holder keeps the Lease.
    pub lease_duration: Duration,
    /// How often the holder renews (and a follower looks again).
    pub renew_interval: Duration,
    /// A holder that has not renewed for this long steps down; below `lease_duration`.
    pub renew_deadline: Duration,
}

impl LeaderConfig {
    /// 15 s lease, renewed every 2 s, stepping down after 10 s without renewal.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        LeaderConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            report_address: None,
            report_certificate: None,
            lease_duration: Duration::from_secs(15),
            renew_interval: Duration::from_secs(2),
            renew_deadline: Duration::from_secs(10),
        }
    }
}

/// `--leader-elect=false`: a receiver that says "leader" and never changes.
pub fn always_leader() -> watch::Receiver<bool> {
    // The sender lives for the whole process, so `changed()` never reports a
    // closed channel to consumers that treat that as shutdown.
    static ALWAYS: OnceLock<watch::Sender<bool>> = OnceLock::new();
    ALWAYS.get_or_init(|| watch::channel(true).0).subscribe()
}

/// Who holds the Lease, and where and with which certificate it takes reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub identity: String,
    pub report_address: Option<String>,
    pub report_certificate: Option<String>,
}

/// The current holder of a Lease; `None` when the Lease is absent, unheld,
/// expired by the wall clock, or cannot be read.
pub async fn current_leader(client: &Client, namespace: &str, name: &str) -> Option<Holder> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let lease = match api.get_opt(name).await {
        Ok(lease) => lease?,
        Err(e) => {
            debug!(lease = %name, error = %e, "cannot read the leader lease");
            return None;
        }
    };
    let spec = lease.spec?;
    let holder = spec.holder_identity.filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time?.0;
    let duration = SignedDuration::from_secs(spec.lease_duration_seconds.unwrap_or(0).into());
    if renewed + duration < Timestamp::now() {
        return None;
    }
    let annotations = lease.metadata.annotations.unwrap_or_default();
    Some(Holder {
        identity: holder,
        report_address: annotations.get(REPORT_ADDRESS_ANNOTATION).cloned(),
        report_certificate: annotations.get(REPORT_CERTIFICATE_ANNOTATION).cloned(),
    })
}

/// What to do with the Lease as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Create,
    Renew,
    TakeOver,
    Follow,
}

/// `silent`: the Lease record has not changed for a full lease duration, by our clock.
fn step(lease: Option<&LeaseSpec>, me: &str, silent: bool) -> Step {
    let Some(spec) = lease else {
        return Step::Create;
    };
    match spec.holder_identity.as_deref() {
        Some(h) if h == me => Step::Renew,
        None | Some("") => Step::TakeOver,
        Some(_) if silent => Step::TakeOver,
        Some(_) => Step::Follow,
    }
}

/// The Lease record as last observed, and when (our clock) it last changed.
struct Observed {
    record: (Option<String>, Option<MicroTime>, Option<i32>),
    since: Instant,
}

/// Campaigns for one Lease; publishes whether we hold it.
pub struct LeaderElector {
    client: Client,
    config: LeaderConfig,
    is_leader: watch::Sender<bool>,
}

impl LeaderElector {
    pub fn new(client: Client, config: LeaderConfig) -> Self {
        LeaderElector {
            client,
            config,
            is_leader: watch::channel(false).0,
        }
    }

    /// `true` while we hold the Lease.
    pub fn is_leader(&self) -> watch::Receiver<bool> {
        self.is_leader.subscribe()
    }

    /// Campaigns until `shutdown` completes, then releases the Lease if held.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.config.namespace);
        let mut observed: Option<Observed> = None;
        let mut renewed: Option<Instant> = None;
        tokio::pin!(shutdown);
        loop {
            match self.attempt(&api, &mut observed).await {
                Ok(true) => renewed = Some(Instant::now()),
                Ok(false) => renewed = None,
                Err(e) => {
                    warn!(lease = %self.config.name, error = %e, "leader lease update failed");
                    if renewed.is_some_and(|t| t.elapsed() >= self.config.renew_deadline) {
                        renewed = None;
                    }
                }
            }
            let leader = renewed.is_some();
            if *self.is_leader.borrow() != leader {
                info!(identity = %self.config.identity, leader, "leadership changed");
            }
            self.is_leader
                .send_if_modified(|v| std::mem::replace(v, leader) != leader);
            tokio::select! {
                _ = tokio::time::sleep(self.config.renew_interval) => {}
                _ = &mut shutdown => break,
            }
        }
        if *self.is_leader.borrow() {
            self.is_leader.send_replace(false);
            if let Err(e) = self.release(&api).await {
                warn!(lease = %self.config.name, error = %e, "could not release the leader lease");
            }
        }
    }

    /// One round: `Ok(true)` if we hold the Lease afterwards.
    async fn attempt(
        &self,
        api: &Api<Lease>,
        observed: &mut Option<Observed>,
    ) -> Result<bool, kube::Error> {
        let lease = api.get_opt(&self.config.name).await?;
        let silent = self.holder_silent(lease.as_ref(), observed);
        let step = step(
            lease.as_ref().and_then(|l| l.spec.as_ref()),
            &self.config.identity,
            silent,
        );
        let written = match (step, lease) {
            (Step::Follow, _) | (Step::Renew | Step::TakeOver, None) => return Ok(false),
            (Step::Create, _) => {
                api.create(&PostParams::default(), &self.annotated(self.new_lease()))
                    .await
            }
            (step, Some(lease)) => {
                let lease = self.annotated(self.renewed(lease, step == Step::TakeOver));
                api.replace(&self.config.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match written {
            Ok(_) => Ok(true),
            // Someone else wrote first (created it, or changed what we read).
            Err(kube::Error::Api(s)) if s.is_conflict() || s.is_already_exists() => {
                if step == Step::Renew {
                    // Maybe a spurious conflict: let the renew deadline decide.
                    Err(kube::Error::Api(s))
                } else {
                    Ok(false)
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Whether the holder has let the Lease run out: its record (holder,
    /// renew time, duration) unchanged for a whole lease duration of our own
    /// clock. `observed` keeps when the record was first seen as it is.
    fn holder_silent(&self, lease: Option<&Lease>, observed: &mut Option<Observed>) -> bool {
        let spec = lease.and_then(|l| l.spec.as_ref());
        let record = spec.map(|s| {
            (
                s.holder_identity.clone(),
                s.renew_time.clone(),
                s.lease_duration_seconds,
            )
        });
        let silent = match (&record, observed.as_ref()) {
            (Some(r), Some(o)) if &o.record == r => {
                let duration = spec
                    .and_then(|s| s.lease_duration_seconds)
                    .map(|s| Duration::from_secs(s.max(0) as u64))
                    .unwrap_or(self.config.lease_duration);
                o.since.elapsed() >= duration
            }
            _ => false,
        };
        *observed = record.map(|record| Observed {
            record: record.clone(),
            since: match observed.take() {
                Some(o) if o.record == record => o.since,
                _ => Instant::now(),
            },
        });
        silent
    }

    /// A Lease that names us, as first created.
    fn new_lease(&self) -> Lease {
        let now = MicroTime(Timestamp::now());
        Lease {
            metadata: ObjectMeta {
                name: Some(self.config.name.clone()),
                namespace: Some(self.config.namespace.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.config.identity.clone()),
                lease_duration_seconds: Some(self.lease_seconds()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        }
    }

    /// `lease` renewed by us now; taken over (we become its holder, one more
    /// transition) when `take_over`.
    fn renewed(&self, mut lease: Lease, take_over: bool) -> Lease {
        let now = MicroTime(Timestamp::now());
        let spec = lease.spec.get_or_insert_with(Default::default);
        if take_over {
            spec.holder_identity = Some(self.config.identity.clone());
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.renew_time = Some(now);
        spec.lease_duration_seconds = Some(self.lease_seconds());
        lease
    }

    /// Gives the Lease up: no holder, so a successor need not wait.
    async fn release(&self, api: &Api<Lease>) -> Result<(), kube::Error> {
        let Some(mut lease) = api.get_opt(&self.config.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        if let Some(a) = lease.metadata.annotations.as_mut() {
            a.remove(REPORT_ADDRESS_ANNOTATION);
            a.remove(REPORT_CERTIFICATE_ANNOTATION);
        }
        api.replace(&self.config.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }

    fn lease_seconds(&self) -> i32 {
        self.config
            .lease_duration
            .as_secs()
            .clamp(1, i32::MAX as u64) as i32
    }

    /// The Lease with our report address and certificate annotations set (or removed).
    fn annotated(&self, mut lease: Lease) -> Lease {
        let annotations = lease
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        for (key, value) in [
            (REPORT_ADDRESS_ANNOTATION, &self.config.report_address),
            (
                REPORT_CERTIFICATE_ANNOTATION,
                &self.config.report_certificate,
            ),
        ] {
            match value {
                Some(v) => annotations.insert(key.to_string(), v.clone()),
                None => annotations.remove(key),
            };
        }
        lease
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(h: Option<&str>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: h.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn absent_lease_is_created() {
        assert_eq!(step(None, "a", false), Step::Create);
    }

    #[test]
    fn own_lease_is_renewed_even_when_silent() {
        assert_eq!(step(Some(&held_by(Some("a"))), "a", false), Step::Renew);
        assert_eq!(step(Some(&held_by(Some("a"))), "a", true), Step::Renew);
    }

    #[test]
    fn others_lease_is_taken_only_when_silent_or_released() {
        assert_eq!(step(Some(&held_by(Some("b"))), "a", false), Step::Follow);
        assert_eq!(step(Some(&held_by(Some("b"))), "a", true), Step::TakeOver);
        assert_eq!(step(Some(&held_by(None)), "a", false), Step::TakeOver);
        assert_eq!(step(Some(&held_by(Some(""))), "a", false), Step::TakeOver);
    }

    #[tokio::test]
    async fn always_leader_stays_open_and_true() {
        let mut rx = always_leader();
        assert!(*rx.borrow_and_update());
        let changed = tokio::time::timeout(Duration::from_millis(50), rx.changed()).await;
        assert!(changed.is_err(), "never changes, never closes");
    }
}
