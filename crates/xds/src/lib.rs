//! Build: IR → Envoy resources, with content versions (pure).
//!
//! ```text
//!  Ir ─► build() ─► Snapshot { CDS clusters, EDS load assignments, LDS listeners, RDS routes }
//!                        │
//!                        ├─► to_yaml()              what `aether-edge translate` prints
//!                        └─► validation_bootstrap() the same resources, static, for
//!                                                    `envoy --mode validate`
//!  BootstrapOptions ─► bootstrap()                  what `aether-edge bootstrap` prints
//! ```
//!
//! One module per resource kind (`listener`, `route` + `action`, `cluster`,
//! `endpoint`); `render` turns any of them into proto3 JSON/YAML through a
//! descriptor pool compiled from Envoy's own `.proto` files.

mod action;
mod any;
pub mod bootstrap;
pub mod cluster;
pub mod endpoint;
pub mod listener;
pub mod render;
pub mod route;
pub mod snapshot;
mod validate;

pub use action::{INVALID_BACKEND, Scheme};
pub use bootstrap::{BootstrapError, BootstrapOptions, bootstrap, try_bootstrap};
pub use render::{RenderError, to_yaml};
pub use snapshot::{GatewayResources, Resource, ResourceType, Snapshot};
pub use validate::validation_bootstrap;

use aether_ir as ir;
use std::collections::{BTreeMap, BTreeSet};

/// Every Envoy resource the IR describes, versioned, with each Gateway's members
/// (its listeners, route tables, and the clusters and endpoints its routes use).
/// Pure and deterministic: the same IR gives an equal snapshot.
pub fn build(ir: &ir::Ir) -> Snapshot {
    let mut resources: BTreeMap<ResourceType, BTreeMap<String, Resource>> = BTreeMap::new();
    let mut add = |ty: ResourceType, name: &str, encoded: Vec<u8>| {
        resources.entry(ty).or_default().insert(
            name.to_string(),
            Resource::new(name, ty.type_url(), encoded),
        );
    };
    use prost::Message;

    for c in &ir.clusters {
        add(
            ResourceType::Cluster,
            &c.name,
            cluster::cluster(c).encode_to_vec(),
        );
        add(
            ResourceType::Endpoint,
            &c.name,
            endpoint::load_assignment(c).encode_to_vec(),
        );
    }
    let known_clusters: BTreeSet<&str> = ir.clusters.iter().map(|c| c.name.as_str()).collect();

    let mut members: BTreeMap<ir::ObjectRef, BTreeSet<(ResourceType, String)>> = BTreeMap::new();
    for gw in &ir.gateways {
        let mine = members.entry(gw.object_ref()).or_default();
        for port in &gw.ports {
            add(
                ResourceType::Listener,
                &port.listener_name,
                listener::listener(gw, port).encode_to_vec(),
            );
            mine.insert((ResourceType::Listener, port.listener_name.clone()));
            let tables = port.route_table.iter().map(|t| (t, Scheme::Http)).chain(
                port.tls_chains
                    .iter()
                    .map(|c| (&c.route_table, Scheme::Https)),
            );
            for (table, scheme) in tables {
                add(
                    ResourceType::Route,
                    &table.name,
                    route::route_configuration(table, scheme).encode_to_vec(),
                );
                mine.insert((ResourceType::Route, table.name.clone()));
                for name in referenced_clusters(table) {
                    // A backend naming a cluster the IR does not define would be a
                    // translator bug; it simply is not a member then.
                    if known_clusters.contains(name) {
                        mine.insert((ResourceType::Cluster, name.to_string()));
                        mine.insert((ResourceType::Endpoint, name.to_string()));
                    }
                }
            }
        }
    }
    Snapshot::new(resources, members)
}

/// The clusters a route table forwards to.
fn referenced_clusters(table: &ir::RouteTable) -> impl Iterator<Item = &str> {
    table
        .virtual_hosts
        .iter()
        .flat_map(|vh| &vh.routes)
        .filter_map(|r| match &r.action {
            ir::RouteAction::Forward(f) => Some(f.backends.iter().map(|b| b.cluster.as_str())),
            _ => None,
        })
        .flatten()
}
