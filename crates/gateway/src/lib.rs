//! Translate Gateway API objects into the IR and a status plan (pure).
//!
//! ```text
//!  Store ──► classes (ours: spec.controllerName)
//!        ──► route models (http_route, grpc_route, l4_route: rules, backends, filters)
//!        ──► Gateway models (gateway_model: addresses, listeners, ListenerSets, conflicts)
//!        ──► per Gateway, its unit:  attach each parentRef ──► attachments table
//!                                     (attach.rs)               (attachments.rs)
//!                                                    ├──► listener + Gateway status
//!                                                    └──► route table ──► IR Gateway
//!        ──► route statuses (each route's parents, from their units)
//!        ──► IR merge (clusters shared across Gateways), policy status
//!        ──► endpoints (backend/endpoints.rs: the only phase that reads EndpointSlices)
//! ```
//!
//! [`incremental::Translator`] calls these phases in this order and keeps
//! what each gave for inputs that did not change (its reuse rules are
//! `incremental/reuse.rs`); [`translate`] is the same with nothing kept.
//!
//! Nothing does I/O and nothing is skipped silently: every Gateway of our class is
//! in the IR or says in its status why not, and an invalid object only affects
//! itself. Routes naming Gateways that are not ours get no status from us.

pub mod allowed_routes;
pub mod assemble;
pub mod attach;
pub mod attachments;
pub mod backend;
pub mod backend_tls;
pub mod certificate;
pub mod client_validation;
pub mod cors;
pub mod duration;
pub mod gateway_model;
pub mod grpc_route;
pub mod header;
pub mod hostname;
pub mod http_filters;
pub mod http_route;
pub mod incremental;
pub mod l4_route;
pub mod lenient;
pub mod listener;
pub mod listener_filters;
pub mod listener_set;
pub mod load;
pub mod object_name;
pub mod port_claims;
pub mod precedence;
pub mod re2;
pub mod reference_grant;
pub mod routability;
pub mod route;
pub mod route_memo;
pub mod route_table;
pub mod status;
pub mod store;
pub mod tls_overlap;
pub mod vocabulary;
pub mod xbackend;
pub mod yaml_guard;

#[cfg(any(test, feature = "fuzz"))]
pub mod fuzz;
#[cfg(test)]
mod fuzz_tests;

pub use aether_ir::{Kind, RouteKind};
pub use assemble::{AckState, Addresses, Assignment, Served, assemble};
pub use load::{FileErrors, LoadError};
pub use status::StatusPlan;
pub use store::{Store, StoreObject};

use aether_ir::{Ir, ObjectRef};
use gateway_api::apis::experimental::gateways::{Gateway, GatewayListenersTlsMode};
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use std::collections::{BTreeMap, BTreeSet};

/// What the translator needs to know about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// GatewayClasses with this `spec.controllerName` are ours.
    pub controller_name: String,
    /// Where listeners bind when a Gateway names no addresses.
    pub default_address: String,
    /// Every Gateway binds its listener ports on the same Envoy addresses
    /// (standalone, static address mode): a port one Gateway holds is taken
    /// for the others (`port_claims`). `false` in service address mode, where
    /// each Gateway gets Envoy ports of its own.
    pub shared_ports: bool,
    /// XBackends of type ExternalHostname are served (off by default). A
    /// tenant who may create an XBackend could otherwise name any host the
    /// edge node reaches — `localhost` and Envoy's admin port, a name whose
    /// DNS answers with the node's or the cluster's private addresses — and
    /// route the internet to it (Contour's ExternalName advisory,
    /// GHSA-5ph6-qq5x-7jwc). Off, such an XBackend is `Accepted=False`.
    pub external_hostnames: bool,
}

impl Config {
    /// The plan's addresses are the ones Envoy binds and status reports
    /// (standalone, static mode). Otherwise (service mode) each Gateway's
    /// Service decides them later: its load balancer's and its ClusterIP, in
    /// [`assemble`].
    pub fn planned_addresses_are_final(&self) -> bool {
        self.shared_ports
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            controller_name: "gateway.aether.io/edge".into(),
            default_address: "127.0.0.1".into(),
            shared_ports: true,
            external_hostnames: false,
        }
    }
}

/// The output of one translation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Translation {
    pub ir: Ir,
    /// As planned, before the fleet and the addresses are known ([`assemble`]).
    pub status: StatusPlan,
}

/// Translates the whole store. Same store, same output, byte for byte: the
/// full recompute (an [`incremental::Translator`] with nothing cached).
pub fn translate(store: &Store, config: &Config) -> Translation {
    incremental::Translator::new(config.clone()).translate(store)
}

/// Per Service, the Gateways of ours that an HTTPRoute or GRPCRoute naming
/// the Service in a backendRef has as a parentRef, and those with a TLS
/// listener in Terminate mode that such a TLSRoute has: a BackendTLSPolicy's
/// ancestors (TLS passthrough carries the client's TLS as it is).
pub(crate) fn gateways_by_service(
    store: &Store,
    gateways: &BTreeSet<ObjectRef>,
) -> BTreeMap<ObjectRef, BTreeSet<ObjectRef>> {
    let mut out: BTreeMap<ObjectRef, BTreeSet<ObjectRef>> = BTreeMap::new();
    let terminates_tls = |gw: &ObjectRef| {
        store
            .get::<Gateway>(&gw.namespace, &gw.name)
            .is_some_and(|g| {
                g.spec.listeners.iter().any(|l| {
                    l.protocol == "TLS"
                        && l.tls.as_ref().and_then(|t| t.mode.as_ref())
                            != Some(&GatewayListenersTlsMode::Passthrough)
                })
            })
    };
    macro_rules! collect {
        ($ty:ty, |$r:ident| $backend_refs:expr, $served:expr) => {
            for (key, $r) in store.all::<$ty>() {
                let parents: Vec<ObjectRef> = $r
                    .spec
                    .parent_refs
                    .iter()
                    .flatten()
                    .filter(|p| {
                        p.group.as_deref().unwrap_or(status::GROUP) == status::GROUP
                            && p.kind
                                .as_deref()
                                .is_none_or(|k| k == Kind::Gateway.as_str())
                    })
                    .map(|p| {
                        ObjectRef::new(p.namespace.as_deref().unwrap_or(&key.namespace), &p.name)
                    })
                    .filter(|gw| gateways.contains(gw) && $served(gw))
                    .collect();
                let services = $backend_refs
                    .filter(|b| {
                        b.group.as_deref().unwrap_or("").is_empty()
                            && b.kind.as_deref().unwrap_or("Service") == "Service"
                    })
                    .map(|b| {
                        ObjectRef::new(b.namespace.as_deref().unwrap_or(&key.namespace), &b.name)
                    });
                for svc in services {
                    out.entry(svc).or_default().extend(parents.iter().cloned());
                }
            }
        };
    }
    let any = |_: &ObjectRef| true;
    collect!(
        HttpRoute,
        |r| r
            .spec
            .rules
            .iter()
            .flatten()
            .flat_map(|rule| rule.backend_refs.iter().flatten()),
        any
    );
    collect!(
        GrpcRoute,
        |r| r
            .spec
            .rules
            .iter()
            .flatten()
            .flat_map(|rule| rule.backend_refs.iter().flatten()),
        any
    );
    collect!(
        TlsRoute,
        |r| r
            .spec
            .rules
            .iter()
            .flat_map(|rule| rule.backend_refs.iter()),
        terminates_tls
    );
    out
}
