//! Applying status patches: every object tried, failures aggregated and counted.
//!
//! A batch applies each [`StatusPatch`] to the object's `/status` subresource with
//! server-side apply (field manager [`FIELD_MANAGER`], forced: the status of our
//! objects is ours to set), a few at a time, each under a timeout. A failure does
//! not stop the batch; the batch then fails with every failed object named, so the
//! caller requeues. An object deleted meanwhile (404) is not a failure.
//!
//! Each write goes to the version the patch names (the version the kind is served
//! at), through an untyped client; what it returns is decoded like a watched
//! object.
//!
//! The watch that feeds the store lags behind our own writes. So that a recompute
//! right after a write neither re-sends it nor, worse, believes a status we just
//! overwrote is still there, the writer keeps what each write returned and lays it
//! over the store while the store shows a version our writes replaced — the one
//! the first write was based on, or one of our own later-overwritten writes (a
//! lagging watch delivers them one by one). Any other version (ours caught up,
//! or someone else's) ends the overlay.

use super::compute::{Settled, StatusInputs, compute_over};
use super::metrics::{StatusMetrics, WriteResult};
use super::patch::{StatusKind, StatusPatch};
use crate::recent::RecentWrites;
use crate::watch::convert;
use aether_gateway::{Store, StoreObject};
use aether_ir::ObjectRef;
use futures::StreamExt;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::experimental::listenersets::ListenerSet;
use gateway_api::apis::experimental::xbackends::XBackend;
use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::tcproutes::TcpRoute;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use gateway_api::apis::standard::udproutes::UdpRoute;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde::de::DeserializeOwned;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Semaphore;
use tracing::{debug, warn};

/// Our server-side apply field manager.
pub const FIELD_MANAGER: &str = "aether-edge";

/// Why one object's status write failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("API server answered {code} {reason}: {message}")]
    Rejected {
        code: u16,
        reason: String,
        message: String,
    },
    #[error("request failed: {0}")]
    Request(kube::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl From<kube::Error> for WriteError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => WriteError::Rejected {
                code: s.code,
                reason: s.reason,
                message: s.message,
            },
            other => WriteError::Request(other),
        }
    }
}

/// One object whose status could not be written.
#[derive(Debug)]
pub struct WriteFailure {
    pub kind: StatusKind,
    pub object: ObjectRef,
    pub error: WriteError,
}

impl fmt::Display for WriteFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.kind, self.object, self.error)
    }
}

/// What a batch did; lists sorted by (kind, object).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteReport {
    pub written: Vec<(StatusKind, ObjectRef)>,
    /// Deleted before their status could be written.
    pub gone: Vec<(StatusKind, ObjectRef)>,
}

/// A batch in which at least one write failed.
#[derive(Debug, thiserror::Error)]
#[error("{} status write(s) failed: {}", .failures.len(), join(.failures))]
pub struct WriteErrors {
    /// Sorted by (kind, object).
    pub failures: Vec<WriteFailure>,
    /// What went through.
    pub report: WriteReport,
}

fn join(failures: &[WriteFailure]) -> String {
    let all: Vec<String> = failures.iter().map(ToString::to_string).collect();
    all.join("; ")
}

/// Our writes (each object as the write returned it, alone in a store) until
/// the store shows them ([`crate::recent`]).
type Written = RecentWrites<(StatusKind, ObjectRef), Store>;

/// Applies status patches and counts what happened.
pub struct StatusWriter {
    timeout: Duration,
    concurrency: usize,
    /// One per write in flight, shared by the batches in flight: first come,
    /// first served.
    slots: Semaphore,
    metrics: StatusMetrics,
    written: Mutex<Written>,
    /// Routes found as planned, so the next compute need not read them again.
    settled: Mutex<Settled>,
}

impl Default for StatusWriter {
    /// 10 s per write, 16 in flight: an ACK that flips 40 objects lands in well
    /// under a second, and 2,000 objects take a couple of seconds.
    fn default() -> Self {
        Self::new(Duration::from_secs(10), 16)
    }
}

impl StatusWriter {
    /// `timeout` per write; at most `concurrency` writes in flight.
    pub fn new(timeout: Duration, concurrency: usize) -> Self {
        StatusWriter {
            timeout,
            concurrency: concurrency.max(1),
            slots: Semaphore::new(concurrency.max(1)),
            metrics: StatusMetrics::default(),
            written: Mutex::default(),
            settled: Mutex::default(),
        }
    }

    /// A batch written `lag` after the fleet report it follows.
    pub fn observe_follow(&self, lag: Duration) {
        self.metrics.follow(lag);
    }

    /// The patches for `inputs`, computed against the store with our own recent
    /// writes laid over it; counts the objects that need none.
    pub fn patches(&self, inputs: &StatusInputs, now: &Time) -> Vec<StatusPatch> {
        let computed = {
            let mut written = self.written.lock().expect("writer lock");
            let mut settled = self.settled.lock().expect("settled lock");
            let top = overlay(&mut written, &inputs.store);
            compute_over(inputs, top.as_ref(), &mut settled, now)
        };
        self.metrics.unchanged_by(computed.unchanged);
        computed.patches
    }

    /// Applies every patch, at most `concurrency` at a time across every
    /// batch in flight; `Err` names each object that failed and why.
    pub async fn write(
        &self,
        client: &Client,
        patches: Vec<StatusPatch>,
    ) -> Result<WriteReport, WriteErrors> {
        let results: Vec<(StatusPatch, Result<Option<Store>, WriteError>)> =
            futures::stream::iter(patches)
                .map(|p| async move {
                    // Never closed, so never `Err`.
                    let _slot = self.slots.acquire().await.ok();
                    let r = self.apply(client, &p).await;
                    (p, r)
                })
                .buffer_unordered(self.concurrency)
                .collect()
                .await;
        let mut report = WriteReport::default();
        let mut failures = Vec::new();
        for (patch, result) in results {
            let id = (patch.kind, patch.object.clone());
            match result {
                Ok(Some(after)) => {
                    self.metrics.written(patch.kind, WriteResult::Ok);
                    let mut written = self.written.lock().expect("writer lock");
                    let returned = seen(patch.kind, &after, &patch.object).flatten();
                    debug!(
                        kind = %patch.kind,
                        object = %patch.object,
                        based_on = patch.based_on.as_deref().unwrap_or(""),
                        returned = returned.as_deref().unwrap_or(""),
                        "status written"
                    );
                    written.record(id.clone(), Some(patch.based_on.clone()), after, returned);
                    report.written.push(id);
                }
                Ok(None) => {
                    self.metrics.written(patch.kind, WriteResult::Gone);
                    report.gone.push(id);
                }
                Err(error) => {
                    self.metrics.written(patch.kind, WriteResult::Error);
                    warn!(kind = %patch.kind, object = %patch.object, %error, "status write failed");
                    failures.push(WriteFailure {
                        kind: patch.kind,
                        object: patch.object,
                        error,
                    });
                }
            }
        }
        report.written.sort();
        report.gone.sort();
        failures.sort_by(|a, b| (a.kind, &a.object).cmp(&(b.kind, &b.object)));
        if failures.is_empty() {
            Ok(report)
        } else {
            self.metrics.batch_failed();
            Err(WriteErrors { failures, report })
        }
    }

    /// `Ok(None)`: the object no longer exists. `Ok(Some)`: the object as the
    /// write returned it, alone in a store (empty if it did not decode).
    async fn apply(
        &self,
        client: &Client,
        patch: &StatusPatch,
    ) -> Result<Option<Store>, WriteError> {
        let kind = patch.kind;
        let version = patch.version();
        let group = kind.kind().spec().group;
        let resource = ApiResource {
            group: group.to_string(),
            version: version.to_string(),
            api_version: format!("{group}/{version}"),
            kind: kind.as_str().to_string(),
            plural: kind.plural().to_string(),
        };
        let api: Api<DynamicObject> = match kind {
            StatusKind::GatewayClass => Api::all_with(client.clone(), &resource),
            _ => Api::namespaced_with(client.clone(), &patch.object.namespace, &resource),
        };
        let call = async {
            let Some(obj) = apply_status(&api, patch).await? else {
                return Ok(None);
            };
            let mut store = Store::default();
            match kind {
                StatusKind::GatewayClass => keep::<GatewayClass>(&mut store, obj),
                StatusKind::Gateway => keep::<Gateway>(&mut store, obj),
                StatusKind::HttpRoute => keep::<HttpRoute>(&mut store, obj),
                StatusKind::GrpcRoute => keep::<GrpcRoute>(&mut store, obj),
                StatusKind::TlsRoute => keep::<TlsRoute>(&mut store, obj),
                StatusKind::TcpRoute => keep::<TcpRoute>(&mut store, obj),
                StatusKind::UdpRoute => keep::<UdpRoute>(&mut store, obj),
                StatusKind::BackendTlsPolicy => keep::<BackendTlsPolicy>(&mut store, obj),
                StatusKind::XBackend => keep::<XBackend>(&mut store, obj),
                StatusKind::ListenerSet => keep::<ListenerSet>(&mut store, obj),
            }
            Ok(Some(store))
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| WriteError::Timeout(self.timeout))?
    }

    /// What the writer counted: registered by the binary, read by tests.
    pub fn metrics(&self) -> &StatusMetrics {
        &self.metrics
    }
}

/// Decodes a returned object into `store` (skipped, with a warning, if it does not).
fn keep<T: StoreObject + DeserializeOwned>(store: &mut Store, obj: DynamicObject) {
    if let Some(t) = convert::<T>(obj) {
        store.insert(t);
    }
}

async fn apply_status(
    api: &Api<DynamicObject>,
    patch: &StatusPatch,
) -> Result<Option<DynamicObject>, kube::Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match api
        .patch_status(&patch.object.name, &params, &Patch::Apply(&patch.body))
        .await
    {
        Ok(o) => Ok(Some(o)),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Our writes `store` trails, to lay over it (`None`: it has caught up with
/// all of them). Any version our writes did not replace ends the overlay: ours
/// caught up, or someone else's, whose status the next compute starts from.
fn overlay(written: &mut Written, store: &Store) -> Option<Store> {
    let shows = |(kind, key): &(StatusKind, ObjectRef)| seen(*kind, store, key);
    let mut top = Store::default();
    let mut any = false;
    for (_, after) in written.trailing(shows, |_, _| true) {
        top.merge(after);
        any = true;
    }
    any.then_some(top)
}

/// `Some(resourceVersion)` of the object of `kind` in the store, `None` if absent.
fn seen(kind: StatusKind, store: &Store, key: &ObjectRef) -> Option<Option<String>> {
    match kind {
        StatusKind::GatewayClass => version::<GatewayClass>(store, key),
        StatusKind::Gateway => version::<Gateway>(store, key),
        StatusKind::HttpRoute => version::<HttpRoute>(store, key),
        StatusKind::GrpcRoute => version::<GrpcRoute>(store, key),
        StatusKind::TlsRoute => version::<TlsRoute>(store, key),
        StatusKind::TcpRoute => version::<TcpRoute>(store, key),
        StatusKind::UdpRoute => version::<UdpRoute>(store, key),
        StatusKind::BackendTlsPolicy => version::<BackendTlsPolicy>(store, key),
        StatusKind::ListenerSet => version::<ListenerSet>(store, key),
        StatusKind::XBackend => version::<XBackend>(store, key),
    }
}

/// `Some(resourceVersion)` of an object in the store, `None` if absent.
fn version<T: StoreObject>(store: &Store, key: &ObjectRef) -> Option<Option<String>> {
    store
        .get::<T>(&key.namespace, &key.name)
        .map(|o| o.metadata().resource_version.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mk_store(rv: &str, reason: &str) -> Store {
        let route: HttpRoute = serde_json::from_value(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "app", "resourceVersion": rv},
            "spec": {},
            "status": {"parents": [{
                "parentRef": {"name": "gw"},
                "controllerName": "c",
                "conditions": [{"type": "Accepted", "status": "True", "reason": reason,
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
            }]}
        }))
        .unwrap();
        let mut store = Store::default();
        store.insert(route);
        store
    }

    fn reason(store: &Store) -> String {
        let r = store.get::<HttpRoute>("app", "r").unwrap();
        r.status.as_ref().unwrap().parents[0].conditions[0]
            .reason
            .clone()
    }

    fn id() -> (StatusKind, ObjectRef) {
        (StatusKind::HttpRoute, ObjectRef::new("app", "r"))
    }

    fn written(stale_chain: &[(&str, &str, &str)]) -> Written {
        let mut w = Written::default();
        for (based_on, rv, reason) in stale_chain {
            w.record(
                id(),
                Some(Some(based_on.to_string())),
                mk_store(rv, reason),
                Some(rv.to_string()),
            );
        }
        w
    }

    #[test]
    fn a_lagging_watch_sees_our_writes_until_it_shows_the_last_one() {
        // Two writes: rv1 → rv2 (Pending), then rv2 → rv3 (Accepted).
        let mut written = written(&[("1", "2", "Pending"), ("2", "3", "Accepted")]);
        for (store_rv, store_reason) in [("1", "none"), ("2", "Pending")] {
            let store = mk_store(store_rv, store_reason);
            let top = overlay(&mut written, &store).expect("laid over");
            assert_eq!(reason(&top), "Accepted", "store at rv {store_rv}");
            assert_eq!(written.len(), 1);
        }
        // Caught up: the overlay ends.
        let store = mk_store("3", "Accepted");
        assert!(overlay(&mut written, &store).is_none());
        assert!(written.is_empty());
    }

    #[test]
    fn someone_elses_write_or_a_deletion_ends_the_overlay() {
        let mut w = written(&[("1", "2", "Accepted")]);
        assert!(overlay(&mut w, &mk_store("7", "TheirReason")).is_none());
        assert!(w.is_empty());
        let mut w = written(&[("1", "2", "Accepted")]);
        assert!(overlay(&mut w, &Store::default()).is_none(), "deleted");
    }
}
