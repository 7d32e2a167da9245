//! The headless Service behind each EndpointSelector XBackend (leader only).
//!
//! ```text
//!  store: XBackends (type EndpointSelector, with a port) ──┐
//!  store: Services with an XBackend ownerReference and     ├─► plan() ─► create (generateName) ─┐
//!         our managed-by label                             │            replace (resourceVersion)├─► API server
//!  recent: our own writes, until the watch shows them ─────┘            delete (uid)           ─┘
//!                                                                          │ failure
//!                                                                          ▼
//!                                               Warning Event on the XBackend, retry (backoff::run_writer)
//! ```
//!
//! Gateway API v1.7.0 lets an implementation resolve an EndpointSelector
//! XBackend through a Service made from its selector, until an upstream
//! EndpointSelector resource exists: headless (`clusterIP: None`), its
//! `targetPort` the XBackend's `spec.port.number`, owned by the XBackend, and
//! named with `generateName` so that no predictable DNS name comes to be relied
//! upon. Translation finds it by that ownerReference (kind XBackend, uid) in the
//! XBackend's namespace, and its endpoints in the EndpointSlices the EndpointSlice
//! controller writes for it (`kubernetes.io/service-name`).
//!
//! So it is never looked up by name: ours are the Services whose ownerReference
//! names the XBackend's uid and that carry [`MANAGED_BY_LABEL`] (another
//! controller's Service for the same XBackend is left alone). One per XBackend:
//! a second one (two leaders racing across a handover) is deleted, the oldest
//! kept. Garbage collection deletes a Service whose XBackend is gone, but this
//! does not rely on it: a Service whose XBackend is gone, is being deleted or is
//! no longer of type EndpointSelector is deleted here.

mod plan;
mod recent;

pub use plan::{Action, desired, generate_name, plan};
pub use recent::Recent;

use crate::backoff::{Failed, Writer, run_writer};
use crate::events::{Events, Notice};
use crate::index::Index;
use crate::service::FIELD_MANAGER;
use aether_gateway::StoreObject;
use aether_ir::ObjectRef;
use gateway_api::apis::experimental::xbackends::XBackend;
use k8s_openapi::api::core::v1::{ObjectReference, Service};
use kube::Resource;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The XBackend's name, on its Service when it fits a label value.
pub const XBACKEND_LABEL: &str = "gateway.aether.io/xbackend";
/// Kubernetes' recommended label; with [`MANAGED_BY`] it marks the Services
/// this loop owns (and may delete).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = FIELD_MANAGER;
/// The API server appends 5 random characters to a `generateName`, and a
/// Service name is at most 63: the prefix, its trailing `-` included, gets 58.
const PREFIX_MAX: usize = 57;
/// Our own write is taken over the store's view for at most this long (the
/// watch normally shows it within milliseconds).
const RECENT_TTL: Duration = Duration::from_secs(10);

/// The group and version an XBackend is owned at.
fn api_version() -> String {
    XBackend::api_version(&()).into_owned()
}

/// Leader only: one headless Service per EndpointSelector XBackend, kept as
/// its XBackend says; failures retried ([`run_writer`]), each new one a
/// Warning Event on the XBackend.
pub async fn run(
    client: kube::Client,
    index: Arc<Index>,
    is_leader: watch::Receiver<bool>,
    events: Events,
) {
    let generation = index.subscribe();
    let services = XBackendServices {
        client,
        index,
        generation,
        events,
        recent: Recent::default(),
        told: BTreeMap::new(),
    };
    run_writer(services, is_leader).await
}

struct XBackendServices {
    client: kube::Client,
    index: Arc<Index>,
    generation: watch::Receiver<u64>,
    events: Events,
    recent: Recent,
    /// The last failure told per XBackend: an Event for a new one only.
    told: BTreeMap<ObjectRef, String>,
}

impl Writer for XBackendServices {
    async fn pass(&mut self, leading: bool) -> Result<(), Failed> {
        self.generation.borrow_and_update();
        let (true, Some(store)) = (leading, self.index.store()) else {
            return Ok(());
        };
        // Ours only: every other Service of the cluster is not copied.
        let ours = store.all::<Service>().values().map(|s| &**s);
        let ours = ours.filter(|s| plan::owner(s).is_some());
        let services = self.recent.overlay(ours, Instant::now());
        let xbackends = store.all::<XBackend>().values().map(|x| &**x);
        let actions = plan(xbackends, &services);
        let failed = apply(&self.client, actions, &mut self.recent).await;
        for (xbackend, why) in &failed {
            tracing::warn!(xbackend = %xbackend, error = %why, "XBackend Service not written; retrying");
            if self.told.get(xbackend) != Some(why) {
                let uid = store
                    .get::<XBackend>(&xbackend.namespace, &xbackend.name)
                    .and_then(|x| x.metadata.uid.clone());
                let notice = notice(xbackend, why);
                self.events.emit(regarding(xbackend, uid), &notice).await;
            }
        }
        self.told = failed;
        if self.told.is_empty() {
            Ok(())
        } else {
            Err(Failed)
        }
    }

    async fn changed(&mut self) -> bool {
        tokio::select! {
            r = self.generation.changed() => r.is_ok(),
            // A write the watch never showed (deleted at once) is looked at again.
            _ = tokio::time::sleep(RECENT_TTL), if !self.recent.is_empty() => true,
        }
    }
}

/// Runs `actions` one by one; why each failed, per XBackend (the first failure).
async fn apply(
    client: &kube::Client,
    actions: Vec<Action>,
    recent: &mut Recent,
) -> BTreeMap<ObjectRef, String> {
    let mut failed = BTreeMap::new();
    let post = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    for action in actions {
        let xbackend = action.xbackend().clone();
        let api: Api<Service> = Api::namespaced(client.clone(), &xbackend.namespace);
        let result = match &action {
            Action::Create { service, .. } => api.create(&post, service).await.map(|svc| {
                tracing::info!(xbackend = %xbackend, service = svc.metadata.name.as_deref().unwrap_or(""), "XBackend Service created");
                recent.record(svc, None, Instant::now());
            }),
            Action::Replace { service, .. } => {
                let name = service.metadata.name.clone().unwrap_or_default();
                let based_on = service.metadata.resource_version.clone();
                api.replace(&name, &post, service)
                    .await
                    .map(|svc| recent.record(svc, based_on, Instant::now()))
            }
            Action::Delete { name, uid, .. } => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: uid.clone(),
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                recent.forget(&ObjectRef::new(&xbackend.namespace, name));
                match api.delete(name, &params).await {
                    Ok(_) => {
                        tracing::info!(xbackend = %xbackend, service = %name, "XBackend Service deleted");
                        Ok(())
                    }
                    Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
                    Err(e) => Err(e),
                }
            }
        };
        if let Err(e) = result {
            let what = match &action {
                Action::Create { .. } => "creating its Service".to_string(),
                Action::Replace { service, .. } => {
                    let name = service.metadata.name.as_deref().unwrap_or_default();
                    format!("updating Service {name}")
                }
                Action::Delete { name, .. } => format!("deleting Service {name}"),
            };
            failed.entry(xbackend).or_insert(format!("{what}: {e}"));
        }
    }
    failed
}

/// The XBackend an Event is about.
fn regarding(xbackend: &ObjectRef, uid: Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version()),
        kind: Some(XBackend::KIND.to_string()),
        namespace: Some(xbackend.namespace.clone()),
        name: Some(xbackend.name.clone()),
        uid,
        ..Default::default()
    }
}

fn notice(xbackend: &ObjectRef, why: &str) -> Notice {
    Notice {
        kind: aether_ir::Kind::XBackend.as_str(),
        object: xbackend.clone(),
        warning: true,
        reason: "ServiceNotWritten".into(),
        note: why.to_string(),
    }
}

#[cfg(test)]
mod tests;
