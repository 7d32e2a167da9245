//! Kubernetes Events (`events.k8s.io/v1`), what `kubectl describe` and
//! `kubectl events` show beside an object:
//!
//! ```text
//!  status plan (after the ACK gate) ─► notices(before, after) ─► Warning on the object:
//!      Gateway Accepted or Programmed turned False (not Pending)   Envoy's NACK, invalid
//!      route parent Accepted turned False (not Pending)           refused route, Envoy's text
//!  this agent became leader ─────────────────────────────────► Normal LeaderElected on its pod
//! ```
//!
//! Only transitions make an Event (a condition that stays False makes one),
//! the leader alone emits them for objects, and at most [`BURST`] go out per
//! plan: Events are for people, and a flood of them is noise (and load on the
//! API server). A failed write is logged at debug and dropped: Events are best
//! effort, status is what must be right.

use crate::status::StatusInputs;
use aether_gateway::status::Condition;
use aether_gateway::vocabulary::Word;
use aether_gateway::{StatusPlan, Store, StoreObject};
use aether_ir::{Kind, ObjectRef};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::watch;

/// The most Events one plan change emits.
pub const BURST: usize = 20;
/// `reportingController` of every Event we write.
pub const CONTROLLER: &str = "gateway.aether.io/edge";

/// One Event to write: about which object, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub kind: &'static str,
    pub object: ObjectRef,
    pub warning: bool,
    /// The condition's reason (`Invalid`, `UnsupportedValue`, …).
    pub reason: String,
    pub note: String,
}

/// What a condition says, for comparing plans: (type, ok, reason, message).
type Said = (String, bool, String, String);

fn said<T: Word, R: Word>(c: &Condition<T, R>) -> Said {
    (
        c.type_.as_str().to_string(),
        c.ok,
        c.reason.as_str().to_string(),
        c.message.clone(),
    )
}

/// A False Accepted or Programmed that is not Pending: worth an Event.
fn worth<T: Word, R: Word>(c: &Condition<T, R>) -> bool {
    !c.ok && c.reason.as_str() != "Pending" && matches!(c.type_.as_str(), "Accepted" | "Programmed")
}

/// Per object (kind, ref), the False conditions worth an Event. Run over the
/// whole plan at every status pass: nothing is copied of a condition that is not.
fn failing(plan: &StatusPlan) -> BTreeMap<(&'static str, ObjectRef), Vec<Said>> {
    let mut out: BTreeMap<(&'static str, ObjectRef), Vec<Said>> = BTreeMap::new();
    for (gw, status) in &plan.gateways {
        let f: Vec<Said> = status
            .conditions
            .iter()
            .filter(|c| worth(c))
            .map(said)
            .collect();
        if !f.is_empty() {
            out.insert((Kind::Gateway.as_str(), gw.clone()), f);
        }
    }
    for (kind, routes) in plan.routes() {
        for (route, status) in routes {
            let f: Vec<Said> = status
                .parents
                .iter()
                .flat_map(|p| p.conditions.iter().filter(|c| worth(c)).map(said))
                .collect();
            if !f.is_empty() {
                out.insert((kind.as_str(), route.clone()), f);
            }
        }
    }
    out
}

/// The Events between two plans: every Accepted or Programmed that is False
/// now (and not Pending) and was not so before, with its reason and message.
pub fn notices(before: Option<&StatusPlan>, after: &StatusPlan) -> Vec<Notice> {
    let was = before.map(failing).unwrap_or_default();
    let mut out = Vec::new();
    for ((kind, object), now) in failing(after) {
        let old = was.get(&(kind, object.clone()));
        for s in now {
            if old.is_some_and(|o| o.contains(&s)) {
                continue;
            }
            out.push(Notice {
                kind,
                object: object.clone(),
                warning: true,
                reason: s.2.clone(),
                note: format!("{}: {}", s.0, s.3),
            });
        }
    }
    out
}

/// Writes Events for one agent (`instance`: its pod name).
#[derive(Clone)]
pub struct Events {
    client: kube::Client,
    instance: String,
}

impl Events {
    pub fn new(client: kube::Client, instance: impl Into<String>) -> Self {
        Events {
            client,
            instance: instance.into(),
        }
    }

    /// Writes one Event about `regarding` (best effort).
    pub async fn emit(&self, regarding: ObjectReference, notice: &Notice) {
        let namespace = regarding
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        let now = k8s_openapi::jiff::Timestamp::now();
        let event = Event {
            metadata: ObjectMeta {
                name: Some(event_name(&regarding, notice, now.as_nanosecond())),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(if notice.warning { "Warning" } else { "Normal" }.into()),
            reason: Some(notice.reason.chars().take(128).collect()),
            action: Some("Reconcile".into()),
            note: Some(notice.note.chars().take(1024).collect()),
            reporting_controller: Some(CONTROLLER.into()),
            reporting_instance: Some(self.instance.chars().take(128).collect()),
            regarding: Some(regarding),
            ..Default::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        if let Err(e) = api.create(&PostParams::default(), &event).await {
            tracing::debug!(error = %e, "event not written");
        }
    }
}

/// `<object name, cut>.<hash>`: within the API's 253 characters whatever the
/// object's name, and one per object, reason and moment.
fn event_name(regarding: &ObjectReference, notice: &Notice, nanos: i128) -> String {
    use std::hash::{Hash, Hasher};
    let name = regarding.name.as_deref().unwrap_or("object");
    // SipHash with fixed keys: the same on every run and every agent.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (name, &notice.reason, nanos).hash(&mut h);
    let hash = format!("{:016x}", h.finish());
    let cut: String = name.chars().take(200).collect();
    let cut = cut.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    format!("{cut}.{hash}")
}

/// Leader only: an Event for every notice between the plans the status
/// writer gets, about the objects as the store has them (uid included); and
/// on becoming leader, one on this agent's pod (`pod`: namespace and name).
pub async fn run(
    events: Events,
    mut inputs: watch::Receiver<Arc<StatusInputs>>,
    mut is_leader: watch::Receiver<bool>,
    pod: Option<(String, String)>,
) {
    let mut last: Option<Arc<StatusInputs>> = None;
    let mut was_leader = false;
    loop {
        let now = inputs.borrow_and_update().clone();
        let leading = *is_leader.borrow_and_update();
        if leading
            && !was_leader
            && let Some((namespace, name)) = &pod
        {
            let (regarding, notice) = leader_elected(namespace, name);
            events.emit(regarding, &notice).await;
        }
        // A new leader starts from what it finds, not from an empty plan.
        if leading && was_leader {
            let before = last.as_ref().map(|l| &l.plan);
            for n in notices(before, &now.plan).into_iter().take(BURST) {
                let regarding = reference(&now, &n);
                events.emit(regarding, &n).await;
            }
        }
        was_leader = leading;
        last = Some(now);
        tokio::select! {
            r = inputs.changed() => if r.is_err() { return },
            r = is_leader.changed() => if r.is_err() { return },
        }
    }
}

/// The object a notice is about, at the version status is written at, with
/// its uid when the store has it.
fn reference(inputs: &StatusInputs, n: &Notice) -> ObjectReference {
    ObjectReference {
        api_version: Some(
            n.kind
                .parse()
                .map_or_else(|_| "v1".into(), |k| inputs.served.api_version(k)),
        ),
        kind: Some(n.kind.to_string()),
        namespace: Some(n.object.namespace.clone()),
        name: Some(n.object.name.clone()),
        uid: uid_of(&inputs.store, n.kind, &n.object),
        ..Default::default()
    }
}

/// The uid of the object as the store has it.
fn uid_of(store: &Store, kind: &str, o: &ObjectRef) -> Option<String> {
    use aether_gateway::with_store_type;
    fn uid<T: StoreObject>(store: &Store, o: &ObjectRef) -> Option<String> {
        store
            .get::<T>(&o.namespace, &o.name)?
            .metadata()
            .uid
            .clone()
    }
    // Gateways and routes only (a Pod, for leader election, is not in the store).
    let kind = kind
        .parse::<Kind>()
        .ok()
        .filter(|k| *k == Kind::Gateway || k.route().is_some())?;
    with_store_type!(kind, uid(store, o))
}

/// The Event for this agent's becoming leader, on its pod.
pub fn leader_elected(namespace: &str, pod: &str) -> (ObjectReference, Notice) {
    let object = ObjectRef::new(namespace, pod);
    (
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(namespace.into()),
            name: Some(pod.into()),
            ..Default::default()
        },
        Notice {
            kind: "Pod",
            object,
            warning: false,
            reason: "LeaderElected".into(),
            note: format!("{pod} leads: it writes status and the Gateways' Services"),
        },
    )
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
