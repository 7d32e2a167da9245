//! Translate Gateway API objects into the IR and a status plan (pure).
//!
//! ```text
//!  Store ──► classes (ours: spec.controllerName) ──► Gateways of our classes
//!                                                     │ listeners validated, conflicts marked
//!        ──► HTTP/GRPC/TLS/TCP/UDPRoutes ─ RouteModel ┤ attach per parentRef (status, counts)
//!                                                     ▼
//!                                     served Gateways ──► Ir (ports, route tables, clusters)
//!                                     every object    ──► StatusPlan
//! ```
//!
//! Nothing does I/O and nothing is skipped silently: every Gateway of our class is
//! in the IR or says in its status why not, and an invalid object only affects
//! itself. Routes naming Gateways that are not ours get no status from us.

pub mod allowed_routes;
pub mod assemble;
pub mod attach;
pub mod backend;
pub mod backend_tls;
pub mod certificate;
pub mod client_validation;
pub mod cors;
pub mod duration;
pub mod grpc_route;
pub mod header;
pub mod hostname;
pub mod http_filters;
pub mod http_route;
pub mod l4_route;
pub mod lenient;
pub mod listener;
pub mod listener_set;
pub mod load;
pub mod precedence;
pub mod re2;
pub mod reference_grant;
pub mod route;
pub mod route_table;
pub mod status;
pub mod store;
pub mod tls_overlap;
pub mod vocabulary;
pub mod yaml_guard;

#[cfg(test)]
mod fuzz_tests;

pub use assemble::{AckState, Addresses, Assignment, Served, assemble};
pub use load::LoadError;
pub use status::StatusPlan;
pub use store::{Store, StoreObject};

use aether_ir::{Ir, ObjectRef};
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::tcproutes::TcpRoute;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use gateway_api::apis::standard::udproutes::UdpRoute;
use listener::GatewayModel;
use route::RouteModel;
use status::{Condition, GatewayClassStatus, RouteStatus, set_condition};
use std::collections::{BTreeMap, BTreeSet};
use vocabulary::gateway_class;

/// What the translator needs to know about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// GatewayClasses with this `spec.controllerName` are ours.
    pub controller_name: String,
    /// Where listeners bind when a Gateway names no addresses.
    pub default_address: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            controller_name: "gateway.aether.io/edge".into(),
            default_address: "127.0.0.1".into(),
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

/// Translates the whole store. Same store, same output, byte for byte.
pub fn translate(store: &Store, config: &Config) -> Translation {
    let mut status = StatusPlan::default();
    let mut ours = BTreeSet::new();
    for (key, class) in store.all::<GatewayClass>() {
        if class.spec.controller_name != config.controller_name {
            continue;
        }
        ours.insert(key.name.clone());
        let mut conditions = Vec::new();
        let g = class.metadata.generation.unwrap_or(0);
        set_condition(
            &mut conditions,
            Condition::new(
                gateway_class::Type::Accepted,
                true,
                gateway_class::Reason::Accepted,
                "GatewayClass is accepted",
                g,
            ),
        );
        status
            .gateway_classes
            .insert(key.name.clone(), GatewayClassStatus { conditions });
    }

    let mut gateways: BTreeMap<ObjectRef, GatewayModel> = store
        .all::<Gateway>()
        .iter()
        .filter(|(_, gw)| ours.contains(&gw.spec.gateway_class_name))
        .map(|(key, gw)| {
            (
                key.clone(),
                GatewayModel::new(store, config, key.clone(), gw),
            )
        })
        .collect();

    // The Gateway of ours each ListenerSet names.
    let set_gateway: BTreeMap<ObjectRef, ObjectRef> = gateways
        .iter()
        .flat_map(|(gw, m)| {
            m.listener_sets
                .iter()
                .map(move |s| (s.key.clone(), gw.clone()))
        })
        .collect();
    let backends = backend::Backends::new(store);
    let mut routes: Vec<RouteModel> = Vec::new();
    for (key, r) in store.all::<GrpcRoute>() {
        routes.push(grpc_route::model(&backends, key.clone(), r));
    }
    for (key, r) in store.all::<HttpRoute>() {
        routes.push(http_route::model(&backends, key.clone(), r));
    }
    for (key, r) in store.all::<TcpRoute>() {
        routes.push(l4_route::tcp_model(&backends, key.clone(), r));
    }
    for (key, r) in store.all::<TlsRoute>() {
        routes.push(l4_route::tls_model(&backends, key.clone(), r));
    }
    for (key, r) in store.all::<UdpRoute>() {
        routes.push(l4_route::udp_model(&backends, key.clone(), r));
    }

    // (listener index, route index) per Gateway, and each route's parent statuses.
    let mut attached: BTreeMap<ObjectRef, BTreeSet<(usize, usize)>> = BTreeMap::new();
    let mut parents: Vec<Vec<status::RouteParentStatus>> = vec![Vec::new(); routes.len()];
    for (ri, route) in routes.iter().enumerate() {
        for parent_ref in &route.parent_refs {
            if parent_ref.group != status::GROUP {
                continue;
            }
            let named = parent_ref.gateway(&route.key.namespace);
            let gw_key = match parent_ref.kind.as_str() {
                "Gateway" => named,
                "ListenerSet" => match set_gateway.get(&named) {
                    Some(gw) => gw.clone(),
                    None => continue,
                },
                _ => continue,
            };
            let Some(gw) = gateways.get_mut(&gw_key) else {
                continue;
            };
            let (parent_status, listeners) =
                attach::attach(store, gw, route, parent_ref, &config.controller_name);
            parents[ri].push(parent_status);
            let set = attached.entry(gw_key).or_default();
            set.extend(listeners.into_iter().map(|li| (li, ri)));
        }
    }
    for (key, set) in &mut attached {
        if let Some(gw) = gateways.get_mut(key) {
            attach::reject_mixed_kinds(gw, &routes, set, &mut parents);
        }
    }
    for (route, parents) in routes.iter().zip(parents) {
        if parents.is_empty() {
            continue;
        }
        status.routes_of_kind_mut(route.kind).insert(
            route.key.clone(),
            RouteStatus {
                parents,
                of: route.of.clone(),
            },
        );
    }

    let mut ir = Ir::default();
    let mut clusters = BTreeMap::new();
    let none = BTreeSet::new();
    for (key, gw) in &gateways {
        status.gateways.insert(key.clone(), gw.status());
        for set in &gw.listener_sets {
            status.listener_sets.insert(set.key.clone(), set.status(gw));
        }
        if gw.is_served() {
            let on_gw = attached.get(key).unwrap_or(&none);
            ir.gateways
                .push(route_table::gateway(gw, &routes, on_gw, &mut clusters));
        }
    }
    ir.clusters = clusters.into_values().collect();
    let by_service = gateways_by_service(store, &gateways);
    status.backend_tls_policies = backends.tls.status(
        |svc| by_service.get(svc).cloned().unwrap_or_default(),
        &config.controller_name,
    );
    Translation { ir, status }
}

/// Per Service, the Gateways of ours that an HTTPRoute or GRPCRoute naming
/// the Service in a backendRef has as a parentRef: a BackendTLSPolicy's
/// ancestors.
fn gateways_by_service(
    store: &Store,
    gateways: &BTreeMap<ObjectRef, GatewayModel>,
) -> BTreeMap<ObjectRef, BTreeSet<ObjectRef>> {
    let mut out: BTreeMap<ObjectRef, BTreeSet<ObjectRef>> = BTreeMap::new();
    macro_rules! collect {
        ($ty:ty) => {
            for (key, r) in store.all::<$ty>() {
                let parents: Vec<ObjectRef> = r
                    .spec
                    .parent_refs
                    .iter()
                    .flatten()
                    .filter(|p| {
                        p.group.as_deref().unwrap_or(status::GROUP) == status::GROUP
                            && p.kind.as_deref().unwrap_or("Gateway") == "Gateway"
                    })
                    .map(|p| {
                        ObjectRef::new(p.namespace.as_deref().unwrap_or(&key.namespace), &p.name)
                    })
                    .filter(|gw| gateways.contains_key(gw))
                    .collect();
                let services = r.spec.rules.iter().flatten().flat_map(|rule| {
                    rule.backend_refs
                        .iter()
                        .flatten()
                        .filter(|b| {
                            b.group.as_deref().unwrap_or("").is_empty()
                                && b.kind.as_deref().unwrap_or("Service") == "Service"
                        })
                        .map(|b| {
                            ObjectRef::new(
                                b.namespace.as_deref().unwrap_or(&key.namespace),
                                &b.name,
                            )
                        })
                });
                for svc in services {
                    out.entry(svc).or_default().extend(parents.iter().cloned());
                }
            }
        };
    }
    collect!(HttpRoute);
    collect!(GrpcRoute);
    out
}
