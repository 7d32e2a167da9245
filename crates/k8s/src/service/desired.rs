//! The edge Services the leader wants (pure).
//!
//! ```text
//!  Gateways of our class (and the IR's) ──listeners (HTTP|HTTPS|TLS → TCP)──► ports per Gateway (set)
//!        ──allocate (keep existing, lowest free)──► one Service per Gateway:
//!              ports p-<port> : port → targetPort = Envoy port, sorted by port
//! ```
//!
//! Several listeners on one port share one Service port, so the ports are unique by
//! construction (the Go implementation this replaces emitted one per listener and
//! the API server rejected them as `Duplicate value: "port-80"`). Every port is TCP:
//! HTTP, HTTPS and TLS all are; a listener of any other protocol gets no port.

use super::allocate::{allocate, format};
use super::{
    ALLOCATIONS_ANNOTATION, GATEWAY_LABEL, GATEWAY_NAME_ANNOTATION, GATEWAY_NAMESPACE_ANNOTATION,
    ServiceConfig, label_value, service_name,
};
use aether_gateway::Store;
use aether_ir::{Ir, ObjectRef};
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::{BTreeMap, BTreeSet};

/// The L4 protocol of every Service port (HTTP, HTTPS and TLS listeners).
const L4: &str = "TCP";

/// The name of the Service port for a listener port.
pub fn port_name(port: u16) -> String {
    format!("p-{port}")
}

/// One Service per Gateway of our class that has at least one TCP listener port,
/// sorted by Service name, with new ports allocated as needed.
///
/// `ir` may be taken before or after [`super::apply_allocations`]: its Gateways
/// count as ours, but ports always come from the Gateways' listeners in the store,
/// never from the IR (whose ports are Envoy ports once allocations are applied).
pub fn desired_services(store: &Store, ir: &Ir, cfg: &ServiceConfig) -> Vec<Service> {
    let wanted = wanted_ports(store, ir, cfg);
    let allocated = allocate(store, &wanted, cfg);
    let mut out: Vec<Service> = wanted
        .keys()
        .filter_map(|gw| {
            let ports = allocated.get(gw)?;
            let spec = store.get::<Gateway>(&gw.namespace, &gw.name);
            Some(service(gw, spec, ports, cfg))
        })
        .collect();
    out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    out
}

/// Listener ports per Gateway: every TCP listener of each Gateway of our class
/// or in the IR.
pub(crate) fn wanted_ports(
    store: &Store,
    ir: &Ir,
    cfg: &ServiceConfig,
) -> BTreeMap<ObjectRef, BTreeSet<u16>> {
    let ours: BTreeSet<&str> = store
        .all::<GatewayClass>()
        .iter()
        .filter(|(_, c)| c.spec.controller_name == cfg.controller_name)
        .map(|(k, _)| k.name.as_str())
        .collect();
    let served: BTreeSet<ObjectRef> = ir.gateways.iter().map(|g| g.object_ref()).collect();
    let mut wanted: BTreeMap<ObjectRef, BTreeSet<u16>> = BTreeMap::new();
    for (key, gw) in store.all::<Gateway>() {
        if !ours.contains(gw.spec.gateway_class_name.as_str()) && !served.contains(key) {
            continue;
        }
        let ports = gw
            .spec
            .listeners
            .iter()
            .filter(|l| matches!(l.protocol.as_str(), "HTTP" | "HTTPS" | "TLS"))
            .filter_map(|l| u16::try_from(l.port).ok().filter(|p| *p > 0));
        wanted.entry(key.clone()).or_default().extend(ports);
    }
    wanted.retain(|_, ports| !ports.is_empty());
    wanted
}

fn service(
    gw: &ObjectRef,
    spec: Option<&Gateway>,
    allocated: &BTreeMap<u16, u16>,
    cfg: &ServiceConfig,
) -> Service {
    // Gateway API: infrastructure labels and annotations SHOULD go on the
    // resources made for the Gateway. Ours win on a clash.
    let infra = spec.and_then(|g| g.spec.infrastructure.as_ref());
    let mut labels = infra.and_then(|i| i.labels.clone()).unwrap_or_default();
    labels.insert(GATEWAY_LABEL.into(), label_value(gw));
    let mut annotations = infra
        .and_then(|i| i.annotations.clone())
        .unwrap_or_default();
    annotations.insert(GATEWAY_NAMESPACE_ANNOTATION.into(), gw.namespace.clone());
    annotations.insert(GATEWAY_NAME_ANNOTATION.into(), gw.name.clone());
    annotations.insert(ALLOCATIONS_ANNOTATION.into(), format(allocated));
    let ports = allocated
        .iter()
        .map(|(port, envoy)| ServicePort {
            name: Some(port_name(*port)),
            port: i32::from(*port),
            protocol: Some(L4.into()),
            target_port: Some(IntOrString::Int(i32::from(*envoy))),
            ..Default::default()
        })
        .collect();
    Service {
        metadata: ObjectMeta {
            name: Some(service_name(gw)),
            namespace: Some(cfg.namespace.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            selector: Some(cfg.selector.clone()),
            ports: Some(ports),
            load_balancer_class: cfg.load_balancer_class.clone(),
            allocate_load_balancer_node_ports: cfg.allocate_node_ports,
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
#[path = "desired_tests.rs"]
mod tests;
