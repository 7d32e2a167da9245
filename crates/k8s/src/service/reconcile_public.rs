//! Puts the public Services and their EndpointSlices in place, in every
//! Gateway's namespace (leader only; I/O).
//!
//! ```text
//!  desired (Public) ──(missing or different?)──► server-side apply, field manager aether-edge
//!  name taken by a Service or slice not ours ──► error for that Gateway, nothing written
//!  ours (any namespace) that nobody wants ──► delete (uid precondition)
//! ```
//!
//! Services before slices: a slice names its Service. As for the records, a
//! failure never stops the others.

use super::public::{Public, is_public_slice, slice_up_to_date};
use super::reconcile::{ReconcileErrors, ReconcileReport, ServiceError, up_to_date};
use super::{FIELD_MANAGER, gateway_of, is_public_service};
use aether_gateway::Store;
use aether_ir::ObjectRef;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use tracing::{info, warn};

/// Writes in flight at once.
const CONCURRENCY: usize = 8;

/// Applies what differs, refuses names held by objects not ours, deletes ours
/// nobody wants. Names in the report are `<Kind> <ns>/<name>`, sorted.
pub async fn reconcile_public(
    client: &Client,
    desired: &Public,
    store: &Store,
) -> Result<ReconcileReport, ReconcileErrors> {
    let mut report = ReconcileReport::default();
    let mut errors = BTreeMap::new();
    let services = plan(
        &desired.services,
        store.all::<Service>(),
        is_public_service,
        |d, c| up_to_date(d, c) && d.metadata.owner_references == c.metadata.owner_references,
    );
    run(client, "Service", services, &mut report, &mut errors).await;
    let slices = plan(
        &desired.slices,
        store.all::<EndpointSlice>(),
        is_public_slice,
        slice_up_to_date,
    );
    run(client, "EndpointSlice", slices, &mut report, &mut errors).await;
    report.applied.sort();
    report.unchanged.sort();
    report.deleted.sort();
    if errors.is_empty() {
        Ok(report)
    } else {
        Err(ReconcileErrors { errors, report })
    }
}

/// What to do with one kind (pure).
#[derive(Debug)]
pub struct Plan<K> {
    pub apply: Vec<K>,
    pub unchanged: Vec<ObjectRef>,
    /// Desired names that an object not ours holds: never overwritten.
    pub taken: Vec<K>,
    pub delete: Vec<K>,
}

/// Splits `desired` against the store's objects of that kind; `ours` tells
/// our objects from anyone else's.
pub fn plan<K: Resource + Clone>(
    desired: &[K],
    existing: &BTreeMap<ObjectRef, std::sync::Arc<K>>,
    ours: impl Fn(&K) -> bool,
    same: impl Fn(&K, &K) -> bool,
) -> Plan<K> {
    let key = |k: &K| {
        let m = k.meta();
        ObjectRef::new(
            m.namespace.as_deref().unwrap_or_default(),
            m.name.as_deref().unwrap_or_default(),
        )
    };
    let mut out = Plan {
        apply: Vec::new(),
        unchanged: Vec::new(),
        taken: Vec::new(),
        delete: Vec::new(),
    };
    for want in desired {
        let k = key(want);
        match existing.get(&k) {
            Some(have) if !ours(have) => out.taken.push(want.clone()),
            Some(have) if same(want, have) => out.unchanged.push(k),
            _ => out.apply.push(want.clone()),
        }
    }
    let wanted: BTreeSet<ObjectRef> = desired.iter().map(key).collect();
    out.delete = existing
        .iter()
        .filter(|(k, have)| ours(have) && !wanted.contains(*k))
        .map(|(_, have)| (**have).clone())
        .collect();
    out
}

/// The Gateway an object of ours names (the same annotations as the records).
fn gateway<K: Resource>(k: &K) -> Option<ObjectRef> {
    let probe = Service {
        metadata: k.meta().clone(),
        ..Default::default()
    };
    gateway_of(&probe)
}

async fn run<K>(
    client: &Client,
    kind: &'static str,
    plan: Plan<K>,
    report: &mut ReconcileReport,
    errors: &mut BTreeMap<String, ServiceError>,
) where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
    K: Clone + Debug + Serialize + DeserializeOwned + Send + Sync,
    K: 'static,
{
    let mut run = Run {
        client,
        kind,
        report,
        errors,
    };
    run.unchanged(&plan.unchanged);
    run.refuse_taken(plan.taken);
    run.apply(plan.apply).await;
    run.delete(plan.delete).await;
}

/// One kind's writes, and where their outcomes go.
struct Run<'a> {
    client: &'a Client,
    kind: &'static str,
    report: &'a mut ReconcileReport,
    errors: &'a mut BTreeMap<String, ServiceError>,
}

impl Run<'_> {
    /// `<Kind> <ns>/<name>`, as the report names an object.
    fn label(&self, ns: &str, name: &str) -> String {
        format!("{} {ns}/{name}", self.kind)
    }

    fn unchanged(&mut self, unchanged: &[ObjectRef]) {
        let labels = unchanged.iter().map(|k| self.label(&k.namespace, &k.name));
        let labels: Vec<String> = labels.collect();
        self.report.unchanged.extend(labels);
    }

    /// Desired names an object not ours holds: an error each, never written.
    fn refuse_taken<K: Resource>(&mut self, taken: Vec<K>) {
        for k in taken {
            let (ns, name) = names(&k);
            warn!(kind = self.kind, namespace = %ns, name = %name, "name held by an object not ours; not written");
            let source = kube::Error::Api(
                kube::core::Status::failure(
                    &format!(
                        "{} {ns}/{name} exists and is not ours; delete or rename it",
                        self.kind
                    ),
                    "AlreadyExists",
                )
                .with_code(409)
                .boxed(),
            );
            self.failed(&k, ns, name, source);
        }
    }

    /// Applying `k` (`ns`/`name`) failed: an error for its Gateway.
    fn failed<K: Resource>(&mut self, k: &K, ns: String, name: String, source: kube::Error) {
        let label = self.label(&ns, &name);
        let e = ServiceError::Apply {
            kind: self.kind,
            namespace: ns,
            name,
            gateway: gateway(k),
            source,
        };
        self.errors.insert(label, e);
    }

    /// Server-side applies each object, a few at a time.
    async fn apply<K>(&mut self, apply: Vec<K>)
    where
        K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
        K: Clone + Debug + Serialize + DeserializeOwned + Send + Sync,
        K: 'static,
    {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let applies = futures::stream::iter(apply)
            .map(|k| {
                let (ns, name) = names(&k);
                let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
                let params = &params;
                async move {
                    let result = api.patch(&name, params, &Patch::Apply(&k)).await;
                    (ns, name, result, k)
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<_>>()
            .await;
        for (ns, name, result, k) in applies {
            match result {
                Ok(_) => {
                    info!(kind = self.kind, namespace = %ns, name = %name, "applied public Gateway object");
                    self.report.applied.push(self.label(&ns, &name));
                }
                Err(source) => {
                    warn!(kind = self.kind, namespace = %ns, name = %name, error = %source, "applying failed");
                    self.failed(&k, ns, name, source);
                }
            }
        }
    }

    /// Deletes each object, as long as it is still the one seen (its uid).
    async fn delete<K>(&mut self, delete: Vec<K>)
    where
        K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
        K: Clone + Debug + Serialize + DeserializeOwned + Send + Sync,
        K: 'static,
    {
        let deletes = futures::stream::iter(delete)
            .map(|k| {
                let (ns, name) = names(&k);
                let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: k.meta().uid.clone(),
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                async move {
                    let result = api.delete(&name, &params).await.map(|_| ());
                    (ns, name, result, k)
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<_>>()
            .await;
        for (ns, name, result, k) in deletes {
            match result {
                Ok(()) => self.report.deleted.push(self.label(&ns, &name)),
                Err(kube::Error::Api(s)) if s.is_not_found() => {
                    self.report.deleted.push(self.label(&ns, &name))
                }
                Err(source) => {
                    warn!(kind = self.kind, namespace = %ns, name = %name, error = %source, "deleting failed");
                    let e = ServiceError::Delete {
                        kind: self.kind,
                        namespace: ns.clone(),
                        name: name.clone(),
                        gateway: gateway(&k),
                        source,
                    };
                    self.errors.insert(self.label(&ns, &name), e);
                }
            }
        }
    }
}

fn names<K: Resource>(k: &K) -> (String, String) {
    let m = k.meta();
    (
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default(),
    )
}
