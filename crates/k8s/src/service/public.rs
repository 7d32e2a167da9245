//! The public Service of each Gateway, in the Gateway's own namespace (pure).
//!
//! ```text
//!  edge namespace (ours alone)                     Gateway's namespace
//!  record Service edge-<ns>-<gw>-<hash>            public Service <gw>-edge-<hash>
//!    selector: edge pods, ClusterIP                  LoadBalancer, no selector,
//!    ports p-<port> → Envoy port                     the record's ports, ownerRef → Gateway,
//!    allocations annotation                          infrastructure labels + annotations,
//!    │                                               spec.addresses for the load balancer
//!    └─ EndpointSlices (EndpointSlice controller) ──copy endpoints──► EndpointSlice per family
//!         edge pod IPs, nodeName, ready                 ports = the Envoy ports
//! ```
//!
//! Clients, the load balancer and Gateway API's tooling find a Gateway's Service
//! beside the Gateway (`gateway.networking.k8s.io/gateway-name`), carrying its
//! `spec.infrastructure` labels and annotations. What decides who serves the
//! Gateway and which Envoy ports it binds stays on the record, which tenants
//! cannot write: someone who edits the public Service or its slices changes
//! only where their own Gateway's address sends traffic, never another
//! Gateway's ports or the status gate.

use super::{
    GATEWAY_NAME_ANNOTATION, GATEWAY_NAME_LABEL, GATEWAY_NAMESPACE_ANNOTATION, PUBLIC_LABEL,
    REQUESTED_IPS_ANNOTATION, SLICE_MANAGER, SLICE_MANAGER_LABEL, ServiceConfig, gateway_of,
    label_value, members::SERVICE_NAME_LABEL, public_name, requested_ips,
};
use aether_gateway::Store;
use aether_ir::ObjectRef;
use gateway_api::apis::experimental::gateways::Gateway;
use k8s_openapi::api::core::v1::{Service, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// Kubernetes caps label values at 63 characters.
const MAX_LABEL_VALUE: usize = 63;

/// What the leader wants beside the Gateways, sorted by (namespace, name).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Public {
    pub services: Vec<Service>,
    pub slices: Vec<EndpointSlice>,
}

/// The public Service and EndpointSlices of every Gateway that has a record
/// Service among `records` (what [`super::desired_services`] wants).
pub fn desired_public(store: &Store, records: &[Service], cfg: &ServiceConfig) -> Public {
    let mut out = Public::default();
    for record in records {
        let Some(gw) = gateway_of(record) else {
            continue;
        };
        let spec = store.get::<Gateway>(&gw.namespace, &gw.name);
        out.services.push(service(&gw, spec, record, cfg));
        out.slices.extend(slices(&gw, spec, record, store, cfg));
    }
    let key = |m: &ObjectMeta| (m.namespace.clone(), m.name.clone());
    out.services.sort_by_key(|s| key(&s.metadata));
    out.slices.sort_by_key(|s| key(&s.metadata));
    out
}

/// The metadata both kinds share: in the Gateway's namespace, owned by it (the
/// API server collects them with the Gateway, even while no leader runs).
fn meta(gw: &ObjectRef, spec: Option<&Gateway>, name: String) -> ObjectMeta {
    let labels = BTreeMap::from([(PUBLIC_LABEL.to_string(), label_value(gw))]);
    let annotations = BTreeMap::from([
        (
            GATEWAY_NAMESPACE_ANNOTATION.to_string(),
            gw.namespace.clone(),
        ),
        (GATEWAY_NAME_ANNOTATION.to_string(), gw.name.clone()),
    ]);
    let owner = spec.and_then(|g| {
        Some(OwnerReference {
            api_version: aether_ir::Kind::Gateway.api_version("v1"),
            kind: aether_ir::Kind::Gateway.as_str().into(),
            name: gw.name.clone(),
            uid: g.metadata.uid.clone()?,
            controller: Some(true),
            block_owner_deletion: None,
        })
    });
    ObjectMeta {
        name: Some(name),
        namespace: Some(gw.namespace.clone()),
        labels: Some(labels),
        annotations: Some(annotations),
        owner_references: owner.map(|o| vec![o]),
        ..Default::default()
    }
}

fn service(
    gw: &ObjectRef,
    spec: Option<&Gateway>,
    record: &Service,
    cfg: &ServiceConfig,
) -> Service {
    let mut metadata = meta(gw, spec, public_name(gw));
    // Gateway API: infrastructure labels and annotations SHOULD go on what is
    // made for the Gateway. Ours win on a clash.
    let infra = spec.and_then(|g| g.spec.infrastructure.as_ref());
    let mut labels = infra.and_then(|i| i.labels.clone()).unwrap_or_default();
    labels.extend(metadata.labels.take().unwrap_or_default());
    if gw.name.len() <= MAX_LABEL_VALUE {
        labels.insert(GATEWAY_NAME_LABEL.into(), gw.name.clone());
    }
    let mut annotations = infra
        .and_then(|i| i.annotations.clone())
        .unwrap_or_default();
    annotations.extend(metadata.annotations.take().unwrap_or_default());
    let requested = spec.map(requested_ips).unwrap_or_default();
    if requested.is_empty() {
        annotations.remove(REQUESTED_IPS_ANNOTATION);
    } else {
        annotations.insert(REQUESTED_IPS_ANNOTATION.into(), requested.join(","));
    }
    metadata.labels = Some(labels);
    metadata.annotations = Some(annotations);
    let ports = record.spec.as_ref().and_then(|s| s.ports.clone());
    // A Gateway whose every address is Cluster-scoped gets no load balancer:
    // its ClusterIP is its address.
    let requests = spec
        .map(aether_gateway::routability::requests)
        .unwrap_or_default();
    let spec = if aether_gateway::routability::wants_default_scope(&requests) {
        ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports,
            load_balancer_class: cfg.load_balancer_class.clone(),
            allocate_load_balancer_node_ports: cfg.allocate_node_ports,
            external_traffic_policy: cfg.external_traffic_policy.clone(),
            ..Default::default()
        }
    } else {
        ServiceSpec {
            type_: Some("ClusterIP".into()),
            ports,
            ..Default::default()
        }
    };
    Service {
        metadata,
        spec: Some(spec),
        status: None,
    }
}

/// One slice per address family the record's slices have (IPv4 always, so a
/// Gateway nobody serves yet still has a slice, with no endpoint): the edge
/// pods' endpoints, once each, at the Envoy ports.
fn slices(
    gw: &ObjectRef,
    spec: Option<&Gateway>,
    record: &Service,
    store: &Store,
    cfg: &ServiceConfig,
) -> Vec<EndpointSlice> {
    let record_name = record.metadata.name.as_deref().unwrap_or_default();
    let mut families: BTreeMap<String, Vec<Endpoint>> =
        BTreeMap::from([("IPv4".to_string(), Vec::new())]);
    // The edge namespace's slices alone (keys are namespace first): pod
    // churn in the applications' namespaces costs no walk here.
    let edge_namespace = ObjectRef::new(&cfg.namespace, "");
    let in_edge_namespace = store
        .all::<EndpointSlice>()
        .range(edge_namespace..)
        .take_while(|(key, _)| key.namespace == cfg.namespace);
    for (_, slice) in in_edge_namespace {
        let of_record = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
            .is_some_and(|s| s == record_name);
        if !of_record {
            continue;
        }
        if !matches!(slice.address_type.as_str(), "IPv4" | "IPv6") {
            continue;
        }
        let endpoints = families.entry(slice.address_type.clone()).or_default();
        for e in &slice.endpoints {
            if !endpoints.iter().any(|have| have.addresses == e.addresses) {
                endpoints.push(Endpoint {
                    addresses: e.addresses.clone(),
                    conditions: e.conditions.clone(),
                    node_name: e.node_name.clone(),
                    target_ref: e.target_ref.clone(),
                    zone: e.zone.clone(),
                    ..Default::default()
                });
            }
        }
    }
    let ports: Vec<EndpointPort> = record
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|p| match p.target_port.as_ref()? {
            IntOrString::Int(envoy) => Some(EndpointPort {
                name: p.name.clone(),
                port: Some(*envoy),
                protocol: p.protocol.clone(),
                app_protocol: None,
            }),
            IntOrString::String(_) => None,
        })
        .collect();
    let service = public_name(gw);
    families
        .into_iter()
        .map(|(family, mut endpoints)| {
            endpoints.sort_by(|a, b| a.addresses.cmp(&b.addresses));
            let mut metadata = meta(gw, spec, format!("{service}-{}", family.to_lowercase()));
            let labels = metadata.labels.get_or_insert_default();
            labels.insert(SERVICE_NAME_LABEL.into(), service.clone());
            labels.insert(SLICE_MANAGER_LABEL.into(), SLICE_MANAGER.into());
            EndpointSlice {
                metadata,
                address_type: family,
                endpoints,
                ports: Some(ports.clone()),
            }
        })
        .collect()
}

/// Whether an EndpointSlice is one of ours: [`SLICE_MANAGER`] manages it, it
/// carries [`PUBLIC_LABEL`] and lives in the namespace of the Gateway it names.
pub fn is_public_slice(slice: &EndpointSlice) -> bool {
    let labels = slice.metadata.labels.as_ref();
    let ours = labels.is_some_and(|l| {
        l.get(SLICE_MANAGER_LABEL).map(String::as_str) == Some(SLICE_MANAGER)
            && l.contains_key(PUBLIC_LABEL)
    });
    let ann = slice.metadata.annotations.as_ref();
    let home = ann.and_then(|a| a.get(GATEWAY_NAMESPACE_ANNOTATION));
    ours && home.is_some() && home == slice.metadata.namespace.as_ref()
}

/// Whether `current` already says what `desired` does (labels and annotations
/// others add are left alone).
pub fn slice_up_to_date(desired: &EndpointSlice, current: &EndpointSlice) -> bool {
    let contains = |want: &Option<BTreeMap<String, String>>,
                    have: &Option<BTreeMap<String, String>>| {
        want.iter()
            .flatten()
            .all(|(k, v)| have.as_ref().and_then(|h| h.get(k)) == Some(v))
    };
    let (dm, cm) = (&desired.metadata, &current.metadata);
    contains(&dm.labels, &cm.labels)
        && contains(&dm.annotations, &cm.annotations)
        && dm.owner_references == cm.owner_references
        && desired.address_type == current.address_type
        && desired.endpoints == current.endpoints
        && desired.ports == current.ports
}

#[cfg(test)]
#[path = "public_tests.rs"]
mod tests;
