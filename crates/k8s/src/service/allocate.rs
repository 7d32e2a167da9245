//! Envoy port allocations: read back from the edge Services, chosen by the leader,
//! applied to the IR by every agent.
//!
//! ```text
//!  edge Service ── annotation "80=20000,443=20001" (fallback: targetPorts) ──► Allocations
//!  Allocations + Ir ──apply_allocations──► Ir with Port.port = Envoy port, bound on 0.0.0.0
//!                                       └► Unallocated (ports taken out, and why)
//! ```
//!
//! An allocation is per (Gateway, listener port), whatever the L4 protocol: a TCP
//! and a UDP listener on port 53 share one Envoy port number (two sockets).
//!
//! A (Gateway, listener port) keeps its Envoy port for as long as the Gateway has a
//! listener on that port. A new one gets the lowest port of the range that no edge
//! Service uses, counting Services not yet garbage-collected: a freed port is only
//! handed out again once the Service that held it has been seen updated, so no two
//! Gateways ever bind one port in any agent's view.

use super::{ALLOCATIONS_ANNOTATION, ServiceConfig, gateway_of, is_edge_service, service_name};
use aether_gateway::Store;
use aether_ir::{Ir, ObjectRef};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::{BTreeMap, BTreeSet};

/// Per Gateway: listener port → Envoy port.
pub type Allocations = BTreeMap<ObjectRef, BTreeMap<u16, u16>>;

/// Ports of a served Gateway taken out of the IR because Envoy cannot bind them yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unallocated {
    #[error("no Envoy port is allocated yet for listener port(s) {ports:?} of Gateway {gateway}")]
    Missing { gateway: ObjectRef, ports: Vec<u16> },
    #[error(
        "Envoy port {envoy_port} (listener port {port} of Gateway {gateway}) is also allocated to Gateway {other}"
    )]
    Conflict {
        gateway: ObjectRef,
        port: u16,
        envoy_port: u16,
        other: ObjectRef,
    },
}

impl Unallocated {
    pub fn gateway(&self) -> &ObjectRef {
        match self {
            Unallocated::Missing { gateway, .. } | Unallocated::Conflict { gateway, .. } => gateway,
        }
    }
}

/// The allocations recorded on the edge Services in the store. Only a Service
/// with the Gateway's own deterministic name counts, so a stray copy of the label
/// cannot claim a Gateway.
pub fn allocations(store: &Store, edge_namespace: &str) -> Allocations {
    let mut out = Allocations::new();
    for svc in store.all::<Service>().values() {
        if !is_edge_service(svc, edge_namespace) {
            continue;
        }
        let Some(gw) = gateway_of(svc) else { continue };
        if svc.metadata.name.as_deref() != Some(service_name(&gw).as_str()) {
            continue;
        }
        out.insert(gw, recorded(svc));
    }
    out
}

/// Envoy ports any edge Service uses (recorded or targeted), including Services
/// of Gateways that are gone but not yet deleted.
pub(crate) fn used_ports(store: &Store, edge_namespace: &str) -> BTreeSet<u16> {
    let mut used = BTreeSet::new();
    for svc in store.all::<Service>().values() {
        if !is_edge_service(svc, edge_namespace) {
            continue;
        }
        used.extend(recorded(svc).into_values());
        used.extend(target_ports(svc).into_values());
    }
    used
}

/// What one Service records: the annotation when it parses, else its targetPorts.
fn recorded(svc: &Service) -> BTreeMap<u16, u16> {
    svc.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ALLOCATIONS_ANNOTATION))
        .and_then(|v| parse(v))
        .unwrap_or_else(|| target_ports(svc))
}

/// Service port → integer targetPort.
fn target_ports(svc: &Service) -> BTreeMap<u16, u16> {
    let ports = svc.spec.as_ref().and_then(|s| s.ports.as_ref());
    ports
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let port = u16::try_from(p.port).ok()?;
            match p.target_port.as_ref()? {
                IntOrString::Int(t) => Some((port, u16::try_from(*t).ok()?)),
                IntOrString::String(_) => None,
            }
        })
        .collect()
}

/// Parses `"80=20000,443=20001"`; `None` if any entry is malformed.
pub fn parse(s: &str) -> Option<BTreeMap<u16, u16>> {
    let mut out = BTreeMap::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (port, envoy) = entry.split_once('=')?;
        out.insert(port.trim().parse().ok()?, envoy.trim().parse().ok()?);
    }
    Some(out)
}

/// Formats allocations as the annotation value, sorted by listener port.
pub fn format(allocations: &BTreeMap<u16, u16>) -> String {
    allocations
        .iter()
        .map(|(p, e)| format!("{p}={e}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The leader's allocation for every wanted (Gateway, listener port): existing ones
/// kept (unless another Gateway earlier in order already holds that Envoy port),
/// new ones the lowest free port of the range. A port the exhausted range cannot
/// give stays unallocated (the Gateway is then reported as [`Unallocated`]).
pub(crate) fn allocate(
    store: &Store,
    wanted: &BTreeMap<ObjectRef, BTreeSet<u16>>,
    cfg: &ServiceConfig,
) -> Allocations {
    let existing = allocations(store, &cfg.namespace);
    let mut taken = used_ports(store, &cfg.namespace);
    let mut out = Allocations::new();
    let mut kept = BTreeSet::new();
    for (gw, ports) in wanted {
        let have = existing.get(gw);
        for port in ports {
            if let Some(&envoy) = have.and_then(|h| h.get(port))
                && kept.insert(envoy)
            {
                out.entry(gw.clone()).or_default().insert(*port, envoy);
            }
        }
    }
    let (low, high) = cfg.port_range;
    let mut free = (low..=high)
        .filter(|p| !taken.contains(p))
        .collect::<Vec<_>>();
    free.reverse();
    for (gw, ports) in wanted {
        for port in ports {
            let mine = out.entry(gw.clone()).or_default();
            if mine.contains_key(port) {
                continue;
            }
            let Some(envoy) = free.pop() else { continue };
            taken.insert(envoy);
            mine.insert(*port, envoy);
        }
    }
    out.retain(|_, m| !m.is_empty());
    out
}

/// Rewrites each IR Gateway to bind `bind_address` at its allocated Envoy ports.
/// Listener and route table names keep the listener port, so they do not change.
/// A TCP and a UDP port with one listener port number (listeners `edge_ls_…_53`
/// and `edge_ls_…_53_udp`) both bind that port's Envoy port: one TCP socket and
/// one UDP socket.
///
/// A port with no allocation yet, or whose Envoy port an earlier Gateway (in IR
/// order) already binds, is taken out and reported; the Gateway's other ports stay
/// served (a listener added to a live Gateway must not take its running ports
/// down while the leader allocates), and a Gateway left with no port is removed.
/// Every Gateway named in the result is not fully served: report it (see
/// [`super::problems`]).
pub fn apply_allocations(
    ir: &mut Ir,
    allocations: &Allocations,
    bind_address: &str,
) -> Vec<Unallocated> {
    // (Envoy port, UDP?) → the Gateway binding it.
    let mut bound: BTreeMap<(u16, bool), ObjectRef> = BTreeMap::new();
    let mut out = Vec::new();
    let none = BTreeMap::new();
    ir.gateways.retain_mut(|gw| {
        // Copied on write: the translator's IR stays as it computed it.
        let gw = std::sync::Arc::make_mut(gw);
        let key = gw.object_ref();
        let mine = allocations.get(&key).unwrap_or(&none);
        let mut missing = Vec::new();
        gw.ports.retain_mut(|p| {
            let Some(&envoy) = mine.get(&p.port) else {
                missing.push(p.port);
                return false;
            };
            let socket = (envoy, p.protocol.is_udp());
            if let Some(other) = bound.get(&socket) {
                out.push(Unallocated::Conflict {
                    gateway: key.clone(),
                    port: p.port,
                    envoy_port: envoy,
                    other: other.clone(),
                });
                return false;
            }
            bound.insert(socket, key.clone());
            p.port = envoy;
            true
        });
        missing.sort_unstable();
        missing.dedup();
        if !missing.is_empty() {
            out.push(Unallocated::Missing {
                gateway: key,
                ports: missing,
            });
        }
        gw.ports.sort_by_key(|p| (p.port, p.protocol.is_udp()));
        gw.addresses = vec![bind_address.to_string()];
        !gw.ports.is_empty()
    });
    out
}

#[cfg(test)]
#[path = "allocate_tests.rs"]
mod tests;
