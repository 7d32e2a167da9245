//! The edge Services the leader wants (pure).
//!
//! ```text
//!  Gateways of our class (and the IR's) ──listeners──► (port, L4) per Gateway (set)
//!        HTTP | HTTPS | TLS | TCP → TCP      UDP → UDP      anything else → no port
//!        ──allocate per (Gateway, port) (keep existing, lowest free)──► one Service per Gateway:
//!              p-<port> (TCP) / p-<port>-udp (UDP) : port → targetPort = Envoy port,
//!              sorted by (port, TCP before UDP)
//! ```
//!
//! Several listeners on one (port, L4 protocol) share one Service port, so ports
//! are unique by construction (the Go implementation this replaces emitted one per
//! listener and the API server rejected them as `Duplicate value: "port-80"`). A
//! TCP and a UDP listener on one port number are two Service ports with distinct
//! names and one Envoy port: a TCP and a UDP socket can bind the same number, and
//! an allocation stays per (Gateway, listener port), as the annotation records it.

use super::allocate::{allocate, format};
use super::{
    ALLOCATIONS_ANNOTATION, GATEWAY_LABEL, GATEWAY_NAME_ANNOTATION, GATEWAY_NAMESPACE_ANNOTATION,
    ServiceConfig, label_value, service_name,
};
use aether_gateway::Store;
use aether_ir::{Ir, ObjectRef};
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::listenersets::ListenerSet;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::{BTreeMap, BTreeSet};

/// The L4 protocol of a Service port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum L4 {
    Tcp,
    Udp,
}

impl L4 {
    /// The L4 protocol a listener of `protocol` is served on; `None` for a
    /// protocol we do not serve (it gets no Service port).
    pub fn of_listener(protocol: &str) -> Option<L4> {
        match protocol {
            "HTTP" | "HTTPS" | "TLS" | "TCP" => Some(L4::Tcp),
            "UDP" => Some(L4::Udp),
            _ => None,
        }
    }

    /// `ServicePort.protocol`.
    pub fn as_str(self) -> &'static str {
        match self {
            L4::Tcp => "TCP",
            L4::Udp => "UDP",
        }
    }
}

/// The name of the Service port for a listener port: `p-<port>` (TCP, the name
/// it always had) or `p-<port>-udp`.
pub fn port_name(port: u16, l4: L4) -> String {
    match l4 {
        L4::Tcp => format!("p-{port}"),
        L4::Udp => format!("p-{port}-udp"),
    }
}

/// One record Service per Gateway of our class that has at least one listener we
/// serve, sorted by Service name, with new ports allocated as needed.
///
/// `ir` may be taken before or after [`super::apply_allocations`]: its Gateways
/// count as ours, but ports always come from the Gateways' listeners in the store,
/// never from the IR (whose ports are Envoy ports once allocations are applied).
pub fn desired_services(store: &Store, ir: &Ir, cfg: &ServiceConfig) -> Vec<Service> {
    let wanted = wanted_ports(store, ir, cfg);
    let numbers: BTreeMap<ObjectRef, BTreeSet<u16>> = wanted
        .iter()
        .map(|(gw, ports)| (gw.clone(), ports.iter().map(|(p, _)| *p).collect()))
        .collect();
    let allocated = allocate(store, &numbers, cfg);
    let mut out: Vec<Service> = wanted
        .iter()
        .filter_map(|(gw, ports)| {
            let envoy = allocated.get(gw)?;
            Some(service(gw, ports, envoy, cfg))
        })
        .collect();
    out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    out
}

/// (listener port, L4 protocol) per Gateway: every listener we serve of each
/// Gateway of our class or in the IR.
pub(crate) fn wanted_ports(
    store: &Store,
    ir: &Ir,
    cfg: &ServiceConfig,
) -> BTreeMap<ObjectRef, BTreeSet<(u16, L4)>> {
    let ours: BTreeSet<&str> = store
        .all::<GatewayClass>()
        .iter()
        .filter(|(_, c)| c.spec.controller_name == cfg.controller_name)
        .map(|(k, _)| k.name.as_str())
        .collect();
    let served: BTreeSet<ObjectRef> = ir.gateways.iter().map(|g| g.object_ref()).collect();
    let mut wanted: BTreeMap<ObjectRef, BTreeSet<(u16, L4)>> = BTreeMap::new();
    for (key, gw) in store.all::<Gateway>() {
        if !ours.contains(gw.spec.gateway_class_name.as_str()) && !served.contains(key) {
            continue;
        }
        let ports = gw.spec.listeners.iter().filter_map(|l| {
            let port = u16::try_from(l.port).ok().filter(|p| *p > 0)?;
            Some((port, L4::of_listener(&l.protocol)?))
        });
        wanted.entry(key.clone()).or_default().extend(ports);
    }
    // A ListenerSet's listeners are its Gateway's ports too (whether the
    // Gateway allows the set decides what Envoy serves there, not the Service).
    for (key, set) in store.all::<ListenerSet>() {
        let p = &set.spec.parent_ref;
        let gw = ObjectRef::new(p.namespace.as_deref().unwrap_or(&key.namespace), &p.name);
        let Some(ports) = wanted.get_mut(&gw) else {
            continue;
        };
        ports.extend(set.spec.listeners.iter().filter_map(|l| {
            let port = u16::try_from(l.port).ok().filter(|p| *p > 0)?;
            Some((port, L4::of_listener(&l.protocol)?))
        }));
    }
    wanted.retain(|_, ports| !ports.is_empty());
    wanted
}

/// The record Service of one Gateway, in the edge namespace: a port per wanted
/// (port, L4) that has an Envoy port, targeting it, and the allocations. It
/// selects the edge pods, so its EndpointSlices say which nodes serve the
/// Gateway ([`super::members`]); clients reach the Gateway through its public
/// Service ([`super::public`]). Tenants cannot write the edge namespace, so
/// what it records is ours alone.
fn service(
    gw: &ObjectRef,
    wanted: &BTreeSet<(u16, L4)>,
    allocated: &BTreeMap<u16, u16>,
    cfg: &ServiceConfig,
) -> Service {
    let labels = BTreeMap::from([(GATEWAY_LABEL.to_string(), label_value(gw))]);
    let annotations = BTreeMap::from([
        (
            GATEWAY_NAMESPACE_ANNOTATION.to_string(),
            gw.namespace.clone(),
        ),
        (GATEWAY_NAME_ANNOTATION.to_string(), gw.name.clone()),
        (ALLOCATIONS_ANNOTATION.to_string(), format(allocated)),
    ]);
    let ports = wanted
        .iter()
        .filter_map(|(port, l4)| {
            let envoy = allocated.get(port)?;
            Some(ServicePort {
                name: Some(port_name(*port, *l4)),
                port: i32::from(*port),
                protocol: Some(l4.as_str().into()),
                target_port: Some(IntOrString::Int(i32::from(*envoy))),
                ..Default::default()
            })
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
            type_: Some("ClusterIP".into()),
            selector: Some(cfg.selector.clone()),
            ports: Some(ports),
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
#[path = "desired_tests.rs"]
mod tests;
