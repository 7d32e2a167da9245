//! XBackend status: one entry per ancestor, as a BackendTLSPolicy's.
//!
//! ```text
//!  XBackend.status.ancestors[]  one per Gateway of ours that an attached
//!    ├ ancestorRef              HTTP/GRPC/TLS/TCPRoute names the XBackend from
//!    ├ controllerName           ours
//!    └ conditions  Accepted      True/Accepted, or False: Invalid (what the CRD
//!                                refuses), UnsupportedValue, UnsupportedProtocol,
//!                                NoValidCACertificate
//!                  ResolvedRefs  True/ResolvedRefs, or False: InvalidCACertificateRef,
//!                                InvalidKind, InvalidClientCertificateRef,
//!                                RefNotPermitted, BackendNotFound (no Service made
//!                                for an EndpointSelector yet)
//! ```
//!
//! The conditions are about the XBackend itself and the same on every
//! ancestor; a route kind its protocol does not fit is said on the route. An
//! XBackend no route of ours reaches gets no entry.

use super::{Target, XBackendModel};
use crate::backend::Backends;
use crate::status::{AncestorStatus, Condition, GROUP};
use crate::store::Store;
use crate::vocabulary::xbackend::{Reason, Type};
use aether_ir::{Kind, ObjectRef};
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::tcproutes::TcpRoute;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use std::collections::{BTreeMap, BTreeSet};

pub type XBackendCondition = Condition<Type, Reason>;

pub use crate::status::XBackendStatus;
pub type XBackendAncestorStatus = AncestorStatus<Type, Reason>;

/// The status of every XBackend a route attached to one of `gateways` names.
pub fn statuses(
    store: &Store,
    gateways: &BTreeSet<ObjectRef>,
    backends: &Backends<'_>,
    controller_name: &str,
) -> BTreeMap<ObjectRef, XBackendStatus> {
    let mut out = BTreeMap::new();
    for (key, ancestors) in gateways_by_xbackend(store, gateways) {
        let Some(m) = backends.xbackend(&key) else {
            continue;
        };
        let status =
            XBackendStatus::on_gateways(ancestors, &conditions(&m), controller_name, m.of.clone());
        out.insert(key, status);
    }
    out
}

/// Accepted, then ResolvedRefs.
pub fn conditions(m: &XBackendModel) -> Vec<XBackendCondition> {
    let g = m.of.generation;
    let accepted = match &m.not_accepted {
        Some((reason, why)) => Condition::new(Type::Accepted, false, *reason, why.clone(), g),
        None => Condition::new(
            Type::Accepted,
            true,
            Reason::Accepted,
            "XBackend is accepted",
            g,
        ),
    };
    let mut unresolved = m.unresolved.clone();
    if m.not_accepted.is_none() && m.target == (Target::Endpoints { service: None }) {
        unresolved.push((
            Reason::BackendNotFound,
            "endpoints are not resolved yet: no Service made for this XBackend exists".into(),
        ));
    }
    let resolved = match unresolved.first() {
        None => Condition::new(
            Type::ResolvedRefs,
            true,
            Reason::ResolvedRefs,
            "all references resolved",
            g,
        ),
        Some((reason, _)) => {
            let all: Vec<&str> = unresolved.iter().map(|(_, m)| m.as_str()).collect();
            Condition::new(Type::ResolvedRefs, false, *reason, all.join("; "), g)
        }
    };
    vec![accepted, resolved]
}

/// Per XBackend, the Gateways in `gateways` that a route naming it in a
/// backendRef has as a parentRef.
fn gateways_by_xbackend(
    store: &Store,
    gateways: &BTreeSet<ObjectRef>,
) -> BTreeMap<ObjectRef, BTreeSet<ObjectRef>> {
    let mut out: BTreeMap<ObjectRef, BTreeSet<ObjectRef>> = BTreeMap::new();
    macro_rules! collect {
        ($ty:ty, |$r:ident| $backend_refs:expr) => {
            for (key, $r) in store.all::<$ty>() {
                let parents: Vec<ObjectRef> = $r
                    .spec
                    .parent_refs
                    .iter()
                    .flatten()
                    .filter(|p| {
                        p.group.as_deref().unwrap_or(GROUP) == GROUP
                            && p.kind
                                .as_deref()
                                .is_none_or(|k| k == Kind::Gateway.as_str())
                    })
                    .map(|p| {
                        ObjectRef::new(p.namespace.as_deref().unwrap_or(&key.namespace), &p.name)
                    })
                    .filter(|gw| gateways.contains(gw))
                    .collect();
                if parents.is_empty() {
                    continue;
                }
                let named = $backend_refs
                    .filter(|b| {
                        b.group.as_deref() == Some(super::GROUP)
                            && b.kind.as_deref() == Some(super::KIND)
                    })
                    .map(|b| {
                        ObjectRef::new(b.namespace.as_deref().unwrap_or(&key.namespace), &b.name)
                    });
                for x in named {
                    out.entry(x).or_default().extend(parents.iter().cloned());
                }
            }
        };
    }
    collect!(HttpRoute, |r| r
        .spec
        .rules
        .iter()
        .flatten()
        .flat_map(|rule| rule.backend_refs.iter().flatten()));
    collect!(GrpcRoute, |r| r
        .spec
        .rules
        .iter()
        .flatten()
        .flat_map(|rule| rule.backend_refs.iter().flatten()));
    collect!(TlsRoute, |r| r
        .spec
        .rules
        .iter()
        .flat_map(|rule| rule.backend_refs.iter()));
    collect!(TcpRoute, |r| r
        .spec
        .rules
        .iter()
        .flat_map(|rule| rule.backend_refs.iter()));
    out
}
