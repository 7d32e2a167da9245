//! What the Services of ours must become (pure): one per wanted XBackend.

use super::{MANAGED_BY, MANAGED_BY_LABEL, PREFIX_MAX, XBACKEND_LABEL, api_version};
use aether_gateway::StoreObject;
use aether_ir::ObjectRef;
use gateway_api::apis::experimental::xbackends::{XBackend, XBackendType};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use std::collections::BTreeMap;

/// One write to the API server, about one XBackend's Service.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// No Service of ours yet: one with `generateName`.
    Create {
        xbackend: ObjectRef,
        service: Service,
    },
    /// Ours, but its selector, port, labels or ownerReference differ: the whole
    /// Service as it must be, with the `resourceVersion` it was read at.
    Replace {
        xbackend: ObjectRef,
        service: Service,
    },
    /// Ours, and not (or no longer) wanted.
    Delete {
        xbackend: ObjectRef,
        name: String,
        uid: Option<String>,
    },
}

impl Action {
    pub fn xbackend(&self) -> &ObjectRef {
        match self {
            Action::Create { xbackend, .. }
            | Action::Replace { xbackend, .. }
            | Action::Delete { xbackend, .. } => xbackend,
        }
    }
}

/// What the Service of `x` must say, or `None` when it must have none: not of
/// type EndpointSelector, being deleted, or lacking what a Service needs (a
/// uid, a port number, a selector).
pub fn desired(x: &XBackend) -> Option<Service> {
    let meta = &x.metadata;
    let (namespace, name, uid) = (
        meta.namespace.as_ref()?,
        meta.name.as_ref()?,
        meta.uid.as_ref()?,
    );
    let selector = x.spec.endpoint_selector.as_ref()?;
    let port = x.spec.port.number?;
    let wanted = x.spec.r#type == XBackendType::EndpointSelector
        && meta.deletion_timestamp.is_none()
        && !selector.match_labels.is_empty();
    if !wanted {
        return None;
    }
    let mut labels = BTreeMap::from([(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string())]);
    if name.len() <= 63 {
        labels.insert(XBACKEND_LABEL.to_string(), name.clone());
    }
    Some(Service {
        metadata: ObjectMeta {
            generate_name: Some(generate_name(name)),
            namespace: Some(namespace.clone()),
            labels: Some(labels),
            owner_references: Some(vec![OwnerReference {
                api_version: api_version(),
                kind: XBackend::KIND.to_string(),
                name: name.clone(),
                uid: uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(false),
            }]),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(selector.match_labels.clone()),
            ports: Some(vec![ServicePort {
                name: Some(format!("p-{port}")),
                port,
                target_port: Some(IntOrString::Int(port)),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    })
}

/// `<name, cut and made a DNS-1035 label>-`: a Service name starts with a
/// letter and has no dots, an XBackend's may.
pub fn generate_name(xbackend: &str) -> String {
    let mut base: String = xbackend
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    if !base.starts_with(|c: char| c.is_ascii_lowercase()) {
        base.insert_str(0, "xb-");
    }
    base.truncate(PREFIX_MAX);
    let base = base.trim_end_matches('-');
    format!("{base}-")
}

/// The XBackend (namespace, uid) that owns `svc` as its controller, if the
/// Service is ours.
pub(super) fn owner(svc: &Service) -> Option<(ObjectRef, &str)> {
    let ours = svc
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY);
    if !ours {
        return None;
    }
    let group = XBackend::group(&());
    let r = svc.metadata.owner_references.as_ref()?.iter().find(|r| {
        r.kind == XBackend::KIND.as_str()
            && r.api_version.split('/').next() == Some(group.as_ref())
            && r.controller == Some(true)
    })?;
    let namespace = svc.metadata.namespace.clone().unwrap_or_default();
    Some((ObjectRef::new(namespace, &r.name), r.uid.as_str()))
}

/// Whether `have` already says what `want` does (labels and ownerReferences
/// of others aside).
fn same(have: &Service, want: &Service) -> bool {
    let labels = want
        .metadata
        .labels
        .iter()
        .flatten()
        .all(|(k, v)| have.metadata.labels.as_ref().and_then(|l| l.get(k)) == Some(v));
    let name_label = have
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(XBACKEND_LABEL));
    let want_name_label = want
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(XBACKEND_LABEL));
    let (h, w) = (
        have.spec.clone().unwrap_or_default(),
        want.spec.clone().unwrap_or_default(),
    );
    let ports = |s: &ServiceSpec| {
        s.ports
            .iter()
            .flatten()
            .map(|p| {
                (
                    p.name.clone(),
                    p.port,
                    p.target_port.clone(),
                    p.protocol.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    labels
        && name_label == want_name_label
        && h.selector == w.selector
        && ports(&h) == ports(&w)
        && want.metadata.owner_references.iter().flatten().all(|r| {
            have.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|h| h == r)
        })
}

/// `have` made to say what `want` does; whatever else it carries (others'
/// labels and annotations, what the API server set) is kept.
fn amended(have: &Service, want: &Service) -> Service {
    let mut out = have.clone();
    let labels = out.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.remove(XBACKEND_LABEL);
    labels.extend(want.metadata.labels.clone().unwrap_or_default());
    // Ours replaced (the controller reference), anyone else's kept.
    let refs = out.metadata.owner_references.get_or_insert_with(Vec::new);
    refs.retain(|r| r.controller != Some(true));
    refs.extend(want.metadata.owner_references.clone().unwrap_or_default());
    out.metadata.managed_fields = None;
    let spec = out.spec.get_or_insert_with(Default::default);
    let w = want.spec.clone().unwrap_or_default();
    spec.selector = w.selector;
    spec.ports = w.ports;
    out.status = None;
    out
}

/// The writes that bring the Services of ours (`services`, all namespaces) to
/// one per wanted XBackend, in (XBackend, Service name) order.
pub fn plan<'a>(
    xbackends: impl IntoIterator<Item = &'a XBackend>,
    services: impl IntoIterator<Item = &'a Service>,
) -> Vec<Action> {
    // Ours by owner (namespace, uid): oldest first, then by name.
    let mut owned: BTreeMap<(String, String), Vec<(ObjectRef, &Service)>> = BTreeMap::new();
    for svc in services {
        if let Some((xbackend, uid)) = owner(svc) {
            let key = (xbackend.namespace.clone(), uid.to_string());
            owned.entry(key).or_default().push((xbackend, svc));
        }
    }
    for list in owned.values_mut() {
        list.sort_by_key(|(_, s)| {
            (
                s.metadata.creation_timestamp.clone(),
                s.metadata.name.clone(),
            )
        });
    }
    let mut out = Vec::new();
    let mut wanted: Vec<(ObjectRef, Service)> = xbackends
        .into_iter()
        .filter_map(|x| {
            Some((
                ObjectRef::new(x.metadata.namespace.clone()?, x.metadata.name.clone()?),
                desired(x)?,
            ))
        })
        .collect();
    wanted.sort_by(|a, b| a.0.cmp(&b.0));
    for (xbackend, want) in wanted {
        let uid = want
            .metadata
            .owner_references
            .as_ref()
            .map(|o| o[0].uid.clone())
            .unwrap_or_default();
        let mut list = owned
            .remove(&(xbackend.namespace.clone(), uid))
            .unwrap_or_default();
        if list.is_empty() {
            out.push(Action::Create {
                xbackend,
                service: want,
            });
            continue;
        }
        let (_, kept) = list.remove(0);
        if !same(kept, &want) {
            out.push(Action::Replace {
                xbackend: xbackend.clone(),
                service: amended(kept, &want),
            });
        }
        out.extend(list.into_iter().map(|(_, s)| delete(xbackend.clone(), s)));
    }
    // Owned by an XBackend that wants none (or is gone).
    out.extend(owned.into_values().flatten().map(|(x, s)| delete(x, s)));
    out
}

fn delete(xbackend: ObjectRef, svc: &Service) -> Action {
    Action::Delete {
        xbackend,
        name: svc.metadata.name.clone().unwrap_or_default(),
        uid: svc.metadata.uid.clone(),
    }
}
