//! The status loop: debounce, recompute from the latest inputs, write, back off.
//!
//! ```text
//!   leader? ──no──► wait for leadership (and forget pending retries)
//!     │yes
//!   inputs changed ─► settle (DEBOUNCE quiet, at most MAX_DELAY; at most
//!                     FOLLOW after the fleet's reports changed) ─► patches
//!     ▲                                                                │
//!     │         due: never failed, failed with another body, or its retry time came;
//!     │              a "Pending"-only write once PENDING_HOLD has passed;
//!     │              not in flight already
//!     │                                                                ▼
//!     └── wait: next input change, the earliest retry ◄── start a batch of the due ones
//!               or hold, a batch done                     (failed object: retry after
//!                                                          200 ms, doubling, ≤ 10 s)
//! ```
//!
//! Batches overlap: a pass starts its batch without waiting for the ones still
//! in flight (all of them share the writer's slots, first come first served),
//! so an ACK that lands while a large batch writes is followed at once rather
//! than after it. An object is never written by two batches at a time: a pass
//! leaves out an object in flight with the same status, and holds one whose
//! status changed again until that write is done, then passes again. Every
//! pass recomputes from the whole latest input, so a retry never re-sends a
//! stale status, and inputs that changed during a write or a backoff are
//! picked up. Backoff is per object: an object the API server keeps refusing
//! (or an outage) slows down retries of that write, while a changed status of
//! any object, including that one, still goes out at once. Writes happen only
//! while `is_leader` says so; losing leadership stops retries and the batches
//! in flight.
//!
//! The debounce batches the writes a burst of object changes causes. What the
//! fleet serves changing (an ACK reported) is different: it is when status may
//! advance, so the batch goes out at most [`FOLLOW`] after it, and the time from
//! the report to the written batch is measured (`aether_edge_status_follow_seconds`).
//! Writes stay bounded: a batch writes only objects whose status changed.
//!
//! A write that would say only that a route waits for its Envoys, where no
//! status of ours yet speaks of its current generation (a new route, a route
//! just edited), is held for [`PENDING_HOLD`]: when the ACK comes first, the
//! route gets one write, `Accepted`, instead of `Pending` and then `Accepted`.
//! Holding it claims nothing: until then the route has no status of ours about
//! this generation. A route already `Accepted` at its generation that stops
//! being served is written `Pending` at once.

use super::compute::StatusInputs;
use super::patch::{StatusKind, StatusPatch};
use super::writer::StatusWriter;
use crate::backoff::Backoff;
use aether_ir::ObjectRef;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until};
use tracing::{debug, warn};

/// Quiet time after the last input change before a batch starts.
pub const DEBOUNCE: Duration = Duration::from_millis(100);
/// A burst of changes delays a batch by at most this much.
pub const MAX_DELAY: Duration = Duration::from_millis(500);
/// A batch goes out at most this long after the fleet's reports changed:
/// reports come in bursts (every node after the same push, their Envoys ACKing
/// within a few ms of each other), and 10 ms take in the agents of one push
/// while status still follows the ACK at once. (20 ms put the p99 of status
/// written − last ACK at 145–154 ms in the status_latency bench; 10 ms, 112–141.)
pub const FOLLOW: Duration = Duration::from_millis(10);
/// ...but no sooner than this after the previous batch: under churn (reports
/// every few ms) an object's status is written at most 20 times a second.
/// Only write load needs these two, not correctness. A 25 ms gap was tried
/// (status_latency bench) and made status trail the ACK longer, not shorter:
/// 17 % more batches, and the API server's writes slowed more than the waits
/// shrank.
pub const FOLLOW_GAP: Duration = Duration::from_millis(50);

/// How long a write that says only "Pending" ([`StatusPatch::only_pending`])
/// waits for the ACK that would make it `Accepted` instead. A new route on a
/// Gateway of 10,000 is served in ~0.3 s; a route whose Envoys take longer
/// shows no status of ours for this long, then `Pending`.
pub const PENDING_HOLD: Duration = Duration::from_secs(2);
/// Held writes falling due within this much of each other go in one batch: a
/// burst of new routes (one every few ms) wakes the loop a few times a
/// second, not once per route. Each pass reads every route of the store: at
/// 10,000 routes a wake-up per route held the status loop busy and slowed
/// the burst's `Accepted` from ~35 s to ~95 s in the peer bench.
pub const HOLD_BATCH: Duration = Duration::from_millis(500);

type Id = (StatusKind, ObjectRef);

/// The "Pending"-only writes held back, each since when it was first due.
#[derive(Default)]
struct Holds {
    since: BTreeMap<Id, Instant>,
}

impl Holds {
    /// The patches to write now: all but the "Pending"-only ones younger than
    /// [`PENDING_HOLD`] (less [`HOLD_BATCH`]: the ones about to fall due go
    /// with the first); forgets the objects that need no such write any more.
    fn due(&mut self, patches: Vec<StatusPatch>, now: Instant) -> Vec<StatusPatch> {
        let mut held = BTreeMap::new();
        let due = patches
            .into_iter()
            .filter(|p| {
                if !p.only_pending {
                    return true;
                }
                let since = self.since.get(&id(p)).copied().unwrap_or(now);
                let waiting = now + HOLD_BATCH < since + PENDING_HOLD;
                if waiting {
                    held.insert(id(p), since);
                }
                !waiting
            })
            .collect();
        self.since = held;
        due
    }

    /// When the oldest held write falls due.
    fn next(&self) -> Option<Instant> {
        self.since.values().min().map(|since| *since + PENDING_HOLD)
    }
}

/// A write that failed: what it said (timestamps stripped), when to try it again,
/// and the backoff that led there.
struct Retry {
    body: Value,
    at: Instant,
    backoff: Backoff,
}

/// Per-object retry schedule.
#[derive(Default)]
struct Retries {
    failed: BTreeMap<Id, Retry>,
}

fn id(p: &StatusPatch) -> Id {
    (p.kind, p.object.clone())
}

/// The body without `lastTransitionTime`s: a retry of the same status computed a
/// second later is the same write.
fn comparable(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "lastTransitionTime")
                .map(|(k, v)| (k.clone(), comparable(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(comparable).collect()),
        other => other.clone(),
    }
}

impl Retries {
    /// The patches to send now; forgets objects that need no write any more.
    fn due(&mut self, patches: Vec<StatusPatch>, now: Instant) -> Vec<StatusPatch> {
        let wanted: BTreeSet<Id> = patches.iter().map(id).collect();
        self.failed.retain(|k, _| wanted.contains(k));
        patches
            .into_iter()
            .filter(|p| match self.failed.get(&id(p)) {
                Some(r) => r.at <= now || r.body != comparable(&p.body),
                None => true,
            })
            .collect()
    }

    fn failed(&mut self, id: Id, body: Value, now: Instant) {
        let mut backoff = self.failed.get(&id).map(|r| r.backoff).unwrap_or_default();
        let at = now + backoff.failed();
        self.failed.insert(id, Retry { body, at, backoff });
    }

    /// When the earliest retry falls due, of the objects not in `flying`: a
    /// retry in flight waits for its answer, not its time (which has come).
    fn next(&self, flying: &BTreeMap<Id, Value>) -> Option<Instant> {
        self.failed
            .iter()
            .filter(|(id, _)| !flying.contains_key(id))
            .map(|(_, r)| r.at)
            .min()
    }
}

/// The batches in flight and the objects they write.
#[derive(Default)]
struct InFlight {
    /// Each batch's objects whose write failed.
    batches: JoinSet<BTreeSet<Id>>,
    /// What each batch writes: each object and its status.
    writes: BTreeMap<tokio::task::Id, Vec<(Id, Value)>>,
    /// Each object in flight, with the status (timestamps stripped) it writes.
    bodies: BTreeMap<Id, Value>,
    /// Objects a pass held back because a batch in flight writes another
    /// status of theirs: when that write is done, another pass.
    held: BTreeSet<Id>,
}

impl InFlight {
    /// The patches to start now. Drops those in flight with the same status;
    /// holds those in flight with another one.
    fn start(&mut self, due: Vec<StatusPatch>) -> Vec<StatusPatch> {
        due.into_iter()
            .filter(|p| match self.bodies.get(&id(p)) {
                None => true,
                Some(body) => {
                    if *body != comparable(&p.body) {
                        self.held.insert(id(p));
                    }
                    false
                }
            })
            .collect()
    }

    /// Starts the batch `write` makes of `due`.
    fn spawn<F>(&mut self, due: Vec<StatusPatch>, write: impl FnOnce(Vec<StatusPatch>) -> F)
    where
        F: Future<Output = BTreeSet<Id>> + Send + 'static,
    {
        let writes: Vec<(Id, Value)> = due.iter().map(|p| (id(p), comparable(&p.body))).collect();
        self.bodies.extend(writes.iter().cloned());
        let task = self.batches.spawn(write(due)).id();
        self.writes.insert(task, writes);
    }

    /// The next batch done: each of its objects, the status it wrote and
    /// whether that failed (a batch that panicked failed every write), and
    /// `true` if an object held for one of them may now be written. `None`
    /// when no batch is in flight.
    async fn next_done(&mut self) -> Option<(Vec<(Id, Value, bool)>, bool)> {
        let (task, failed) = match self.batches.join_next_with_id().await? {
            Ok((task, failed)) => (task, Some(failed)),
            Err(e) => (e.id(), None),
        };
        let results: Vec<(Id, Value, bool)> = self
            .writes
            .remove(&task)
            .unwrap_or_default()
            .into_iter()
            .map(|(id, body)| {
                let failed = failed.as_ref().is_none_or(|f| f.contains(&id));
                (id, body, failed)
            })
            .collect();
        let mut pass = false;
        for (id, body, _) in &results {
            if self.bodies.get(id) == Some(body) {
                self.bodies.remove(id);
            }
            pass |= self.held.remove(id);
        }
        Some((results, pass))
    }
}

/// Runs until either input channel closes.
pub async fn run(
    client: Client,
    mut inputs: watch::Receiver<Arc<StatusInputs>>,
    mut is_leader: watch::Receiver<bool>,
    writer: Arc<StatusWriter>,
) {
    let mut retries = Retries::default();
    let mut holds = Holds::default();
    let mut flying = InFlight::default();
    // The fleet change the last pass followed.
    let mut followed: Option<Instant> = None;
    // When the last batch started.
    let mut last_batch = Instant::now();
    let mut pass = true;
    loop {
        if !*is_leader.borrow_and_update() {
            retries = Retries::default();
            holds = Holds::default();
            flying.batches.abort_all();
            flying = InFlight::default();
            while !*is_leader.borrow_and_update() {
                if is_leader.changed().await.is_err() {
                    return;
                }
            }
            pass = true;
        }
        if pass {
            let latest = inputs.borrow_and_update().clone();
            let news = news(&latest, followed);
            followed = latest.served_at;
            let computing = Instant::now();
            let patches = holds.due(writer.patches(&latest, &now()), Instant::now());
            let due = flying.start(retries.due(patches, Instant::now()));
            let compute_us = computing.elapsed().as_micros();
            if !due.is_empty() {
                last_batch = Instant::now();
                let (client, writer) = (client.clone(), writer.clone());
                let timing = (news, computing, compute_us);
                flying.spawn(due, |due| async move {
                    write_batch(&client, &writer, due, timing).await
                });
            }
        }
        let retry_at = [retries.next(&flying.bodies), holds.next()]
            .into_iter()
            .flatten()
            .min();
        tokio::select! {
            r = inputs.changed() => {
                if r.is_err() || !settle(&mut inputs, followed, last_batch).await {
                    return;
                }
                pass = true;
            }
            Some((results, held)) = flying.next_done() => {
                let now = Instant::now();
                for (id, body, failed) in results {
                    if failed {
                        retries.failed(id, body, now);
                    } else {
                        retries.failed.remove(&id);
                    }
                }
                pass = held;
            }
            _ = sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() => {
                pass = true;
            }
            r = is_leader.changed() => {
                if r.is_err() {
                    return;
                }
                pass = true;
            }
        }
    }
}

/// Writes one batch; the objects whose write failed. `timing`: the fleet
/// change the batch follows (if any), when computing began and how long it
/// took.
async fn write_batch(
    client: &Client,
    writer: &StatusWriter,
    due: Vec<StatusPatch>,
    (news, computing, compute_us): (Option<Instant>, Instant, u128),
) -> BTreeSet<Id> {
    let of = due.len();
    let writing = Instant::now();
    match writer.write(client, due).await {
        Ok(report) => {
            let follow = news
                .filter(|_| !report.written.is_empty())
                .map(|at| at.elapsed());
            if let Some(lag) = follow {
                writer.observe_follow(lag);
            }
            debug!(
                written = report.written.len(),
                gone = report.gone.len(),
                follow_us = follow.map(|l| l.as_micros()),
                // Where the time went: since the report (if any) to
                // the patches, computing them, writing them.
                wait_us = news.map(|at| (computing - at).as_micros()),
                compute_us,
                write_us = writing.elapsed().as_micros(),
                "status batch written"
            );
            BTreeSet::new()
        }
        Err(e) => {
            warn!(failed = e.failures.len(), of, error = %e, "status writes failed; retrying with backoff");
            e.failures
                .iter()
                .map(|f| (f.kind, f.object.clone()))
                .collect()
        }
    }
}

/// Waits until the inputs have been quiet for [`DEBOUNCE`] (or [`MAX_DELAY`] has
/// passed, or [`FOLLOW`] since the fleet's reports changed after `followed`,
/// and [`FOLLOW_GAP`] since `last_batch`); `false` if the channel closed.
async fn settle(
    inputs: &mut watch::Receiver<Arc<StatusInputs>>,
    followed: Option<Instant>,
    last_batch: Instant,
) -> bool {
    let mut deadline = Instant::now() + MAX_DELAY;
    loop {
        if let Some(at) = news(&inputs.borrow(), followed) {
            deadline = deadline.min((at + FOLLOW).max(last_batch + FOLLOW_GAP));
        }
        let quiet = (Instant::now() + DEBOUNCE).min(deadline);
        tokio::select! {
            r = inputs.changed() => {
                if r.is_err() {
                    return false;
                }
                if Instant::now() >= deadline {
                    return true;
                }
            }
            _ = sleep_until(quiet) => return true,
        }
    }
}

/// When the fleet's reports changed, if that is after the change `followed`.
fn news(inputs: &StatusInputs, followed: Option<Instant>) -> Option<Instant> {
    inputs.served_at.filter(|at| Some(*at) != followed)
}

/// Now, to the second (the precision the API server stores).
fn now() -> Time {
    let t = Timestamp::now();
    Time(Timestamp::from_second(t.as_second()).unwrap_or(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{StatusKind, WriteResult};
    use aether_gateway::{Config, Store, translate};
    use gateway_api::apis::experimental::gateways::Gateway;
    use gateway_api::apis::standard::gatewayclasses::GatewayClass;

    const CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\n\
        metadata: {name: aether, generation: 1}\nspec: {controllerName: gateway.aether.io/edge}\n";

    fn mk_inputs() -> Arc<StatusInputs> {
        let mut store = Store::default();
        store.add_yaml("class.yaml", CLASS).unwrap();
        let config = Config::default();
        Arc::new(StatusInputs {
            plan: translate(&store, &config).status,
            store: store.into(),
            supported_features: vec![],
            controller_name: config.controller_name,
            served: crate::ServedVersions::all_v1(),
            served_at: None,
        })
    }

    /// A client whose every request the "API server" answers 500 at once, in
    /// process: no I/O, so paused time runs the loop exactly.
    fn failing_client() -> Client {
        let api_server = tower::service_fn(|_: http::Request<kube::client::Body>| async {
            let refused = http::Response::builder()
                .status(500)
                .body(kube::client::Body::empty())
                .expect("a response");
            Ok::<_, std::convert::Infallible>(refused)
        });
        Client::new(api_server, "default")
    }

    fn failed_batches(writer: &StatusWriter) -> u64 {
        writer.metrics().batches_failed()
    }

    fn mk_patch(name: &str, reason: &str, at: &str) -> StatusPatch {
        StatusPatch {
            kind: StatusKind::Gateway,
            object: ObjectRef::new("infra", name),
            based_on: None,
            body: serde_json::json!({"status": {"conditions": [
                {"type": "Programmed", "reason": reason, "lastTransitionTime": at}]}}),
            only_pending: false,
        }
    }

    fn names(patches: &[StatusPatch]) -> Vec<&str> {
        patches.iter().map(|p| p.object.name.as_str()).collect()
    }

    #[test]
    fn a_failed_write_waits_its_backoff_unless_its_status_changes() {
        let t0 = Instant::now();
        let mut retries = Retries::default();
        let failing = mk_patch("a", "Pending", "2026-01-01T00:00:00Z");
        retries.failed(id(&failing), comparable(&failing.body), t0);
        // The same status a second later (new timestamp) waits; others go.
        let again = vec![
            mk_patch("a", "Pending", "2026-01-01T00:00:01Z"),
            mk_patch("b", "Pending", "2026-01-01T00:00:01Z"),
        ];
        assert_eq!(names(&retries.due(again.clone(), t0)), vec!["b"]);
        assert_eq!(retries.next(&BTreeMap::new()), Some(t0 + Backoff::MIN));
        assert_eq!(
            names(&retries.due(again, t0 + Backoff::MIN)),
            vec!["a", "b"]
        );
        // A changed status goes at once.
        let changed = vec![mk_patch("a", "Programmed", "2026-01-01T00:00:01Z")];
        assert_eq!(names(&retries.due(changed, t0)), vec!["a"]);
    }

    #[test]
    fn a_retry_in_flight_waits_for_its_answer_not_its_time() {
        // Were its past time "due", the loop would wake at once, pass, find
        // the object in flight and wake again: a spin until the answer.
        let t0 = Instant::now();
        let mut retries = Retries::default();
        let (a, b) = (mk_patch("a", "Pending", "x"), mk_patch("b", "Pending", "x"));
        retries.failed(id(&a), comparable(&a.body), t0);
        retries.failed(id(&b), comparable(&b.body), t0 + Duration::from_secs(1));
        let flying = BTreeMap::from([(id(&a), comparable(&a.body))]);
        let b_at = t0 + Duration::from_secs(1) + Backoff::MIN;
        assert_eq!(retries.next(&flying), Some(b_at));
        assert_eq!(retries.next(&BTreeMap::new()), Some(t0 + Backoff::MIN));
    }

    #[test]
    fn a_pending_only_write_waits_its_hold_unless_news_replaces_it() {
        let t0 = Instant::now();
        let mut holds = Holds::default();
        let waiting = |name: &str| StatusPatch {
            only_pending: true,
            ..mk_patch(name, "Pending", "x")
        };
        let batch = vec![waiting("a"), mk_patch("b", "Programmed", "x")];
        assert_eq!(names(&holds.due(batch.clone(), t0)), vec!["b"]);
        assert_eq!(holds.next(), Some(t0 + PENDING_HOLD));
        // Still only "Pending" a moment later: still held, from t0.
        let soon = t0 + Duration::from_millis(100);
        assert!(holds.due(vec![waiting("a")], soon).is_empty());
        assert_eq!(holds.next(), Some(t0 + PENDING_HOLD));
        // The hold over, it goes, and one held a little later goes with it.
        let later = t0 + HOLD_BATCH;
        assert!(
            holds
                .due(vec![waiting("a"), waiting("e")], later)
                .is_empty()
        );
        let over = t0 + PENDING_HOLD;
        assert_eq!(
            names(&holds.due(vec![waiting("a"), waiting("e")], over)),
            vec!["a", "e"]
        );
        assert_eq!(holds.next(), None);
        // Served first (its write now says Accepted): at once, and forgotten.
        assert!(holds.due(vec![waiting("c")], t0).is_empty());
        assert_eq!(
            names(&holds.due(vec![mk_patch("c", "Accepted", "x")], soon)),
            vec!["c"]
        );
        assert_eq!(holds.next(), None);
        // A write no longer needed is forgotten: held afresh if it returns.
        assert!(holds.due(vec![waiting("d")], t0).is_empty());
        assert!(holds.due(vec![], soon).is_empty());
        assert!(holds.due(vec![waiting("d")], t0 + PENDING_HOLD).is_empty());
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_is_forgotten_when_no_write_is_needed() {
        let t0 = Instant::now();
        let mut retries = Retries::default();
        let p = mk_patch("a", "Pending", "x");
        let mut waits = Vec::new();
        for _ in 0..8 {
            retries.failed(id(&p), comparable(&p.body), t0);
            waits.push(retries.next(&BTreeMap::new()).unwrap() - t0);
        }
        let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, vec![200, 400, 800, 1600, 3200, 6400, 10000, 10000]);
        assert!(retries.due(vec![], t0).is_empty());
        assert_eq!(
            retries.next(&BTreeMap::new()),
            None,
            "no write needed: nothing to retry"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn writes_only_while_leader_and_backs_off_on_failure() {
        let writer = Arc::new(StatusWriter::new(Duration::from_secs(1), 2));
        let (inputs_tx, inputs) = watch::channel(mk_inputs());
        let (leader_tx, is_leader) = watch::channel(false);
        let task = tokio::spawn(run(failing_client(), inputs, is_leader, writer.clone()));

        tokio::time::sleep(Duration::from_millis(300)).await;
        inputs_tx.send(mk_inputs()).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(failed_batches(&writer), 0, "a follower never writes");

        // Leader: tries at once, then after 200, 400, 800 ms...: a handful of
        // attempts in 1.5 s, not a busy loop.
        leader_tx.send(true).unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let tries = failed_batches(&writer);
        assert!((2..=6).contains(&tries), "{tries} batches in 1.5 s");
        let failed = writer
            .metrics()
            .writes(StatusKind::GatewayClass, WriteResult::Error);
        assert!(failed >= 1, "{failed} failed GatewayClass writes");

        // Leadership lost: the retries stop.
        leader_tx.send(false).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let stopped_at = failed_batches(&writer);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(failed_batches(&writer), stopped_at);

        drop(leader_tx);
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("run ends when its inputs close")
            .unwrap();
    }

    /// Each write the API server played by [`played_client`] answered: the
    /// object's name, when it arrived and when it was answered.
    type Played = Arc<std::sync::Mutex<Vec<(String, Instant, Instant)>>>;

    /// An API server played in process (paused time runs it exactly): each
    /// apply to an object's `/status` is played on `world`
    /// ([`StatusPatch::apply_to`]) and answered with the object as it then is,
    /// after `slow` for the GatewayClass and at once for the others.
    fn played_client(world: Store, slow: Duration) -> (Client, Played) {
        let world = Arc::new(std::sync::Mutex::new(world));
        let played = Played::default();
        let log = played.clone();
        let api_server = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let (world, log) = (world.clone(), log.clone());
            async move {
                let arrived = Instant::now();
                let body: Value = serde_json::from_slice(&req.into_body().collect_bytes().await?)
                    .expect("an apply body");
                let kind = match body["kind"].as_str() {
                    Some("GatewayClass") => StatusKind::GatewayClass,
                    Some("Gateway") => StatusKind::Gateway,
                    other => panic!("no {other:?} in this world"),
                };
                if kind == StatusKind::GatewayClass {
                    tokio::time::sleep(slow).await;
                }
                let name = body["metadata"]["name"].as_str().unwrap_or_default();
                let namespace = body["metadata"]["namespace"].as_str().unwrap_or_default();
                let patch = StatusPatch {
                    kind,
                    object: ObjectRef::new(namespace, name),
                    based_on: None,
                    body: body.clone(),
                    only_pending: false,
                };
                let answer = {
                    let mut world = world.lock().unwrap();
                    patch.apply_to(&mut world).unwrap();
                    match kind {
                        StatusKind::GatewayClass => {
                            serde_json::to_vec(world.get::<GatewayClass>(namespace, name).unwrap())
                        }
                        _ => serde_json::to_vec(world.get::<Gateway>(namespace, name).unwrap()),
                    }
                    .unwrap()
                };
                log.lock()
                    .unwrap()
                    .push((name.to_string(), arrived, Instant::now()));
                let ok = http::Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(answer))
                    .expect("a response");
                Ok::<_, kube::Error>(ok)
            }
        });
        (Client::new(api_server, "default"), played)
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_in_flight_holds_back_only_its_own_objects() {
        use super::super::test_support::{mk_class, mk_inputs, mk_store, mk_web_world, mk_world};
        use aether_gateway::AckState;
        // The world: our class and Gateway infra/web.
        let world = mk_store(&mk_web_world(
            r#"{name: aether, generation: 3, resourceVersion: "1"}"#,
            r#"{name: web, namespace: infra, generation: 2, resourceVersion: "2"}"#,
            &[],
        ));
        let (client, played) = played_client(world.clone(), Duration::from_secs(1));
        let writer = Arc::new(StatusWriter::new(Duration::from_secs(10), 16));
        // First the class alone is ours to write: its write takes 1 s.
        let class = mk_class(r#"{name: aether, generation: 3, resourceVersion: "1"}"#);
        let mut class_only = mk_inputs(mk_store(&mk_world(&[class])), AckState::Acked);
        class_only.supported_features = vec![];
        let (inputs_tx, inputs) = watch::channel(Arc::new(class_only));
        let (_leader_tx, is_leader) = watch::channel(true);
        let task = tokio::spawn(run(client, inputs, is_leader, writer.clone()));
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Then the Gateway, served (fleet news), and the class with another
        // status (its supported features), while the class's write is in flight.
        let mut both = mk_inputs(world, AckState::Acked);
        both.served_at = Some(Instant::now());
        let news = Instant::now();
        inputs_tx.send(Arc::new(both)).unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let played = played.lock().unwrap().clone();
        let of = |name: &str| -> Vec<(Instant, Instant)> {
            played
                .iter()
                .filter(|(n, ..)| n == name)
                .map(|(_, a, b)| (*a, *b))
                .collect()
        };
        let (class, web) = (of("aether"), of("web"));
        // The Gateway is written at once, not after the class's write.
        assert_eq!(web.len(), 1, "{played:?}");
        assert!(web[0].0 < news + Duration::from_millis(100), "{played:?}");
        // The class's second status waits for its first write, then goes.
        assert_eq!(class.len(), 2, "{played:?}");
        assert!(
            class[1].0 >= class[0].1,
            "two writes of the class at once: {played:?}"
        );
        drop(inputs_tx);
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_batch_that_panicked_failed_every_write_and_holds_nothing() {
        let mut flying = InFlight::default();
        let (a, b) = (mk_patch("a", "Pending", "x"), mk_patch("b", "Pending", "x"));
        flying.spawn(vec![a.clone()], |_| async { panic!("a bug in a batch") });
        // b's status changed while a batch in flight writes it: held.
        flying.spawn(vec![b.clone()], |_| std::future::pending());
        let changed = mk_patch("b", "Programmed", "x");
        assert!(flying.start(vec![a.clone(), changed]).is_empty());
        let (results, held) = flying.next_done().await.expect("a batch done");
        assert_eq!(results, vec![(id(&a), comparable(&a.body), true)]);
        assert!(!held, "nothing held for a");
        assert_eq!(names(&flying.start(vec![a.clone()])), vec!["a"]);
        assert_eq!(flying.held, BTreeSet::from([id(&b)]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_in_flight_is_not_passed_again_and_again() {
        use super::super::compute::compute;
        use super::super::test_support::{apply_all, mk_inputs, mk_store, web_world};
        use aether_gateway::AckState;
        use std::sync::atomic::{AtomicUsize, Ordering};
        // Everything as planned but the class: each pass finds the rest
        // unchanged (so `unchanged` counts passes) and the class to write.
        let mut store = mk_store(&web_world());
        let planned = compute(&mk_inputs(store.clone(), AckState::Acked), &now());
        let (class, rest): (Vec<_>, Vec<_>) = planned
            .patches
            .into_iter()
            .partition(|p| p.kind == StatusKind::GatewayClass);
        assert_eq!(class.len(), 1);
        apply_all(&mut store, &rest);
        // The class's first write is refused; its retry is never answered.
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let api_server = tower::service_fn(move |_: http::Request<kube::client::Body>| {
            let first = seen.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                if !first {
                    std::future::pending::<()>().await;
                }
                let refused = http::Response::builder()
                    .status(500)
                    .body(kube::client::Body::empty())
                    .expect("a response");
                Ok::<_, std::convert::Infallible>(refused)
            }
        });
        let writer = Arc::new(StatusWriter::new(Duration::from_secs(60), 2));
        let (_inputs_tx, inputs) = watch::channel(Arc::new(mk_inputs(store, AckState::Acked)));
        let (_leader_tx, is_leader) = watch::channel(true);
        let task = tokio::spawn(run(
            Client::new(api_server, "default"),
            inputs,
            is_leader,
            writer.clone(),
        ));
        let settle = || async {
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
        };
        settle().await;
        assert_eq!(failed_batches(&writer), 1);
        tokio::time::advance(Backoff::MIN + Duration::from_millis(1)).await;
        settle().await;
        assert_eq!(calls.load(Ordering::SeqCst), 2, "the retry is in flight");
        let passes = writer.metrics().unchanged();
        for _ in 0..10 {
            settle().await;
        }
        let more = writer.metrics().unchanged() - passes;
        assert_eq!(more, 0, "passes while the retry waits for its answer");
        task.abort();
    }

    /// How long `settle` takes when the inputs change every `every` until it
    /// returns, the fleet's reports having changed (`served_at`) or not.
    async fn settle_under_churn(every: Duration, fleet_news: bool) -> Duration {
        let (tx, mut rx) = watch::channel(mk_inputs());
        let start = Instant::now();
        if fleet_news {
            let mut inputs = (*mk_inputs()).clone();
            inputs.served_at = Some(start);
            tx.send_replace(Arc::new(inputs));
        }
        rx.borrow_and_update();
        let churn = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                tx.send_modify(|_| {});
            }
        });
        assert!(settle(&mut rx, None, start - Duration::from_secs(1)).await);
        churn.abort();
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn a_fleet_report_is_followed_at_once_even_under_churn() {
        // Changes every 50 ms never leave DEBOUNCE of quiet: MAX_DELAY.
        let churn = settle_under_churn(Duration::from_millis(50), false).await;
        assert!(churn >= MAX_DELAY, "{churn:?}");
        // A report that changed what is served: FOLLOW, however busy.
        let news = settle_under_churn(Duration::from_millis(5), true).await;
        assert!(
            news >= FOLLOW && news < FOLLOW + Duration::from_millis(10),
            "{news:?}"
        );
        // News already followed does not shorten the next settle.
        let (tx, mut rx) = watch::channel(mk_inputs());
        let at = Instant::now();
        let mut inputs = (*mk_inputs()).clone();
        inputs.served_at = Some(at);
        tx.send_replace(Arc::new(inputs));
        let start = Instant::now();
        assert!(settle(&mut rx, Some(at), start).await);
        assert!(start.elapsed() >= DEBOUNCE, "{:?}", start.elapsed());
        // A batch just went out: the next one waits FOLLOW_GAP after it.
        let mut inputs = (*mk_inputs()).clone();
        inputs.served_at = Some(Instant::now());
        tx.send_replace(Arc::new(inputs));
        let start = Instant::now();
        assert!(settle(&mut rx, None, start).await);
        assert_eq!(start.elapsed(), FOLLOW_GAP);
    }
}
