//! Puts the desired edge Services in place (leader only; I/O).
//!
//! ```text
//!  desired ──(differs from existing?)──► server-side apply, field manager aether-edge
//!  existing edge Services not desired ──► delete (uid precondition)
//!  every failure ──► ReconcileErrors (per Service, naming the Gateway), after the rest ran
//! ```
//!
//! A Service that already says what we want is not written. A failure never stops
//! the others: all of them run, then the failures come back together, so the
//! caller can report them per Gateway and requeue with backoff.

use super::{FIELD_MANAGER, gateway_of, is_edge_service};
use aether_ir::ObjectRef;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client};
use std::collections::{BTreeMap, BTreeSet};
use tracing::{info, warn};

/// Writes in flight at once: enough for 1,000 Gateways, gentle on the API server.
const CONCURRENCY: usize = 8;

/// What a reconcile did, by Service name (sorted).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReconcileReport {
    /// Created or updated.
    pub applied: Vec<String>,
    /// The applied Services as the API server returned them (sorted by name), for
    /// [`super::RecentWrites`].
    pub written: Vec<Service>,
    /// Already as desired: not written.
    pub unchanged: Vec<String>,
    /// Deleted: their Gateway is gone (or no longer ours).
    pub deleted: Vec<String>,
}

/// One Service that could not be put in place or removed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("applying {kind} {namespace}/{name}: {source}")]
    Apply {
        kind: &'static str,
        namespace: String,
        name: String,
        gateway: Option<ObjectRef>,
        #[source]
        source: kube::Error,
    },
    #[error("deleting {kind} {namespace}/{name}: {source}")]
    Delete {
        kind: &'static str,
        namespace: String,
        name: String,
        gateway: Option<ObjectRef>,
        #[source]
        source: kube::Error,
    },
}

impl ServiceError {
    /// The Gateway the Service is for, if it names one.
    pub fn gateway(&self) -> Option<&ObjectRef> {
        match self {
            ServiceError::Apply { gateway, .. } | ServiceError::Delete { gateway, .. } => {
                gateway.as_ref()
            }
        }
    }
}

/// Every failure of one reconcile, and what did succeed.
#[derive(Debug, thiserror::Error)]
#[error("{} edge Service write(s) failed: {}", errors.len(), summary(errors))]
pub struct ReconcileErrors {
    /// By Service name.
    pub errors: BTreeMap<String, ServiceError>,
    pub report: ReconcileReport,
}

fn summary(errors: &BTreeMap<String, ServiceError>) -> String {
    errors
        .values()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl ReconcileErrors {
    /// Why each Gateway's Service is not in place (apply failures only: a Service
    /// that failed to delete has no Gateway to report on), for
    /// [`super::assignments`].
    pub fn by_gateway(&self) -> BTreeMap<ObjectRef, String> {
        self.errors
            .values()
            .filter(|e| matches!(e, ServiceError::Apply { .. }))
            .filter_map(|e| Some((e.gateway()?.clone(), e.to_string())))
            .collect()
    }
}

/// Applies every desired Service that differs from the existing one and deletes
/// the existing edge Services (in the desired Services' namespace) nobody wants.
/// `existing`: the edge Services as last seen (the store's, or a fresh list).
pub async fn reconcile<'a>(
    client: &Client,
    desired: Vec<Service>,
    existing: impl IntoIterator<Item = &'a Service>,
    namespace: &str,
) -> Result<ReconcileReport, ReconcileErrors> {
    let api: Api<Service> = Api::namespaced(client.clone(), namespace);
    let existing: Vec<&Service> = existing.into_iter().collect();
    let Diff {
        apply: to_apply,
        unchanged,
        delete: to_delete,
    } = diff(&desired, &existing, namespace);
    let mut report = ReconcileReport {
        unchanged,
        ..Default::default()
    };
    let mut errors = BTreeMap::new();
    // Owned items: closures over borrowed items make this future fail the
    // higher-ranked `Send` check when a caller spawns it.
    let to_apply: Vec<(String, Service)> = to_apply
        .into_iter()
        .map(|(name, svc)| (name, svc.clone()))
        .collect();
    let to_delete: Vec<Service> = to_delete.into_iter().cloned().collect();
    let mut outcome = Outcome {
        namespace,
        report: &mut report,
        errors: &mut errors,
    };
    outcome.apply(&api, to_apply).await;
    outcome.delete(&api, to_delete).await;

    report.applied.sort();
    report
        .written
        .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    report.unchanged.sort();
    report.deleted.sort();
    if errors.is_empty() {
        Ok(report)
    } else {
        Err(ReconcileErrors { errors, report })
    }
}

/// Where the outcomes of a reconcile's writes go.
struct Outcome<'a> {
    namespace: &'a str,
    report: &'a mut ReconcileReport,
    errors: &'a mut BTreeMap<String, ServiceError>,
}

impl Outcome<'_> {
    /// Server-side applies each Service, a few at a time.
    async fn apply(&mut self, api: &Api<Service>, to_apply: Vec<(String, Service)>) {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let applies = futures::stream::iter(to_apply)
            .map(|(name, svc)| {
                let params = &params;
                async move {
                    let result = api.patch(&name, params, &Patch::Apply(&svc)).await;
                    (name, result, svc)
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<_>>()
            .await;
        for (name, result, svc) in applies {
            match result {
                Ok(written) => {
                    info!(service = %name, "applied edge Service");
                    self.report.applied.push(name);
                    self.report.written.push(written);
                }
                Err(source) => {
                    warn!(service = %name, error = %source, "applying edge Service failed");
                    let gateway = gateway_of(&svc);
                    let namespace = self.namespace.to_string();
                    let e = ServiceError::Apply {
                        kind: "Service",
                        namespace,
                        name: name.clone(),
                        gateway,
                        source,
                    };
                    self.errors.insert(name, e);
                }
            }
        }
    }

    /// Deletes each Service, as long as it is still the one seen (its uid).
    async fn delete(&mut self, api: &Api<Service>, to_delete: Vec<Service>) {
        let deletes = futures::stream::iter(to_delete)
            .map(|svc| {
                let name = svc.metadata.name.clone().unwrap_or_default();
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: svc.metadata.uid.clone(),
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                async move { (name.clone(), api.delete(&name, &params).await, svc) }
            })
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<_>>()
            .await;
        for (name, result, svc) in deletes {
            match result {
                Ok(_) => {
                    info!(service = %name, "deleted edge Service of a Gateway that is gone");
                    self.report.deleted.push(name);
                }
                // Already gone: what we wanted.
                Err(kube::Error::Api(s)) if s.is_not_found() => self.report.deleted.push(name),
                Err(source) => {
                    warn!(service = %name, error = %source, "deleting edge Service failed");
                    let gateway = gateway_of(&svc);
                    let namespace = self.namespace.to_string();
                    let e = ServiceError::Delete {
                        kind: "Service",
                        namespace,
                        name: name.clone(),
                        gateway,
                        source,
                    };
                    self.errors.insert(name, e);
                }
            }
        }
    }
}

/// What a reconcile has to do (pure).
#[derive(Debug, Default)]
pub struct Diff<'a> {
    /// (Service name, desired Service) to apply: missing or different.
    pub apply: Vec<(String, &'a Service)>,
    /// Service names already as desired.
    pub unchanged: Vec<String>,
    /// Edge Services in `namespace` that no desired Service names.
    pub delete: Vec<&'a Service>,
}

/// Splits the desired Services into those to write and those already in place,
/// and finds the edge Services to garbage-collect. Sorted by name.
pub fn diff<'a>(desired: &'a [Service], existing: &[&'a Service], namespace: &str) -> Diff<'a> {
    let existing: BTreeMap<&str, &Service> = existing
        .iter()
        .filter(|s| is_edge_service(s, namespace))
        .filter_map(|s| Some((s.metadata.name.as_deref()?, *s)))
        .collect();
    let mut out = Diff::default();
    for svc in desired {
        let name = svc.metadata.name.clone().unwrap_or_default();
        match existing.get(name.as_str()) {
            Some(current) if up_to_date(svc, current) => out.unchanged.push(name),
            _ => out.apply.push((name, svc)),
        }
    }
    let wanted: BTreeSet<&str> = desired
        .iter()
        .filter_map(|s| s.metadata.name.as_deref())
        .collect();
    out.delete = existing
        .iter()
        .filter(|(name, _)| !wanted.contains(*name))
        .map(|(_, s)| *s)
        .collect();
    out.apply.sort_by(|a, b| a.0.cmp(&b.0));
    out.unchanged.sort();
    out
}

/// Whether `current` already carries everything `desired` sets. Fields the API
/// server defaults (clusterIP, nodePorts, sessionAffinity, ...) are not ours to
/// compare; labels and annotations others add are left alone.
pub fn up_to_date(desired: &Service, current: &Service) -> bool {
    let contains = |want: &Option<BTreeMap<String, String>>,
                    have: &Option<BTreeMap<String, String>>| {
        want.iter()
            .flatten()
            .all(|(k, v)| have.as_ref().and_then(|h| h.get(k)) == Some(v))
    };
    let (dm, cm) = (&desired.metadata, &current.metadata);
    if !contains(&dm.labels, &cm.labels) || !contains(&dm.annotations, &cm.annotations) {
        return false;
    }
    // A key we applied before but want no more (e.g. an infrastructure label the
    // Gateway dropped) needs an apply to go away.
    let dropped = |field: &str, want: &Option<BTreeMap<String, String>>| {
        owned_keys(current, field)
            .iter()
            .any(|k| !want.as_ref().is_some_and(|w| w.contains_key(k)))
    };
    if dropped("labels", &dm.labels) || dropped("annotations", &dm.annotations) {
        return false;
    }
    let (Some(d), Some(c)) = (desired.spec.as_ref(), current.spec.as_ref()) else {
        return desired.spec.is_none();
    };
    // Sorted: the ports are a map keyed by (port, protocol) to the API server, so
    // their order is no reason to write.
    let ports = |s: &k8s_openapi::api::core::v1::ServiceSpec| {
        let mut ports = s
            .ports
            .iter()
            .flatten()
            .map(|p| {
                (
                    p.port,
                    p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                    p.name.clone(),
                    p.target_port.clone(),
                )
            })
            .collect::<Vec<_>>();
        ports.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        ports
    };
    d.type_ == c.type_
        && d.selector == c.selector
        && ports(d) == ports(c)
        && (d.load_balancer_class.is_none() || d.load_balancer_class == c.load_balancer_class)
        && (d.allocate_load_balancer_node_ports.is_none()
            || d.allocate_load_balancer_node_ports == c.allocate_load_balancer_node_ports)
        && traffic_policy(d) == traffic_policy(c)
}

/// `spec.externalTrafficPolicy` as the API server defaults it: a Service left
/// at `Local` after the setting is dropped is not up to date.
fn traffic_policy(s: &k8s_openapi::api::core::v1::ServiceSpec) -> &str {
    match (s.type_.as_deref(), s.external_traffic_policy.as_deref()) {
        (_, Some(policy)) => policy,
        (Some("LoadBalancer" | "NodePort"), None) => "Cluster",
        _ => "",
    }
}

/// The `metadata.<field>` keys our field manager owns on `svc` (from managedFields).
fn owned_keys(svc: &Service, field: &str) -> Vec<String> {
    let ours = svc
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.manager.as_deref() == Some(FIELD_MANAGER) && m.subresource.is_none());
    let mut keys = Vec::new();
    for entry in ours {
        let Some(fields) = entry.fields_v1.as_ref() else {
            continue;
        };
        let owned = fields.0.pointer(&format!("/f:metadata/f:{field}"));
        if let Some(serde_json::Value::Object(map)) = owned {
            keys.extend(
                map.keys()
                    .filter_map(|k| k.strip_prefix("f:"))
                    .map(String::from),
            );
        }
    }
    keys
}
