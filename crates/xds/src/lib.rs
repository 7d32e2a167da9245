//! Build: IR → Envoy resources, with content versions (pure).
//!
//! ```text
//!  Ir ─► build() ─► Snapshot { CDS clusters, EDS load assignments, LDS listeners, RDS routes,
//!                              SDS secrets }
//!                        │
//!                        ├─► to_yaml()              what `aether-edge translate` prints
//!                        ├─► to_yaml_redacted()     the same, private keys `[redacted]` (/debug/snapshot)
//!                        └─► validation_bootstrap() the same resources, static, for
//!                                                    `envoy --mode validate`
//!  BootstrapOptions ─► bootstrap()                  what `aether-edge bootstrap` prints
//! ```
//!
//! One module per resource kind (`listener`, `route` + `action`, `cluster`,
//! `endpoint`, `secret`); `render` turns any of them into proto3 JSON/YAML through a
//! descriptor pool compiled from Envoy's own `.proto` files. `incremental` caches
//! what a build encodes, per cluster, per Gateway and (`route_cache`) per route.

pub mod access_log;
mod action;
mod any;
pub mod bootstrap;
pub mod cluster;
mod cors;
pub mod edge;
pub mod endpoint;
mod ext_authz;
mod gateway;
pub mod held;
mod in_order;
mod incremental;
pub mod listener;
pub mod parts;
pub mod proxy_protocol;
pub mod render;
pub mod route;
mod route_cache;
pub mod secret;
pub mod snapshot;
mod stateful_session;
pub mod stats_listener;
mod table_parts;
mod validate;
mod values;
mod yaml;

pub use access_log::AccessLog;
pub use action::{INVALID_BACKEND, Scheme};
pub use bootstrap::{BootstrapError, BootstrapOptions, bootstrap, try_bootstrap};
pub use incremental::Builder;
pub use parts::{KeyHashes, ObjectParts, Part, PartName, Parts, RouteParts};
pub use proxy_protocol::ProxyProtocol;
pub use render::{RenderError, to_yaml, to_yaml_redacted};
pub use snapshot::{GatewayResources, Resource, ResourceType, Snapshot};
pub use validate::validation_bootstrap;

use aether_ir as ir;
use prost::Message;

/// Every Envoy resource the IR describes, versioned, with each Gateway's members
/// (its listeners, route tables and their secrets, and the clusters, endpoints
/// and secrets its routes use).
/// Pure and deterministic: the same IR gives an equal snapshot. The full
/// rebuild: a [`Builder`] with nothing cached.
pub fn build(ir: &ir::Ir) -> Snapshot {
    Builder::default().build(ir)
}

/// A cluster's CDS and EDS resources, and the SDS secrets its TLS reads.
#[derive(Debug)]
struct ClusterBuild {
    cluster: Resource,
    /// `None` for a cluster that resolves a DNS name itself (no EDS).
    endpoints: Option<Resource>,
    secrets: Vec<Resource>,
}

impl ClusterBuild {
    /// Its resources, each with its type.
    fn resources(&self) -> impl Iterator<Item = (ResourceType, &Resource)> {
        std::iter::once((ResourceType::Cluster, &self.cluster))
            .chain(self.endpoints.iter().map(|e| (ResourceType::Endpoint, e)))
            .chain(self.secrets.iter().map(|s| (ResourceType::Secret, s)))
    }
}

fn build_cluster(c: &ir::Cluster) -> ClusterBuild {
    let secrets: Vec<Resource> = secret::of_cluster(c).iter().map(secret::resource).collect();
    // Envoy warms a cluster until its endpoints and secrets arrive: the
    // cluster names both (a DNS cluster has no EDS endpoints to wait for).
    let eds = c.discovery.is_eds();
    let references = eds
        .then(|| (ResourceType::Endpoint, c.name.clone()))
        .into_iter()
        .chain(
            secrets
                .iter()
                .map(|s| (ResourceType::Secret, s.name.clone())),
        );
    ClusterBuild {
        cluster: Resource::new(
            &c.name,
            ResourceType::Cluster.type_url(),
            cluster::cluster(c).encode_to_vec(),
        )
        .with_references(references),
        endpoints: eds.then(|| {
            Resource::new(
                &c.name,
                ResourceType::Endpoint.type_url(),
                endpoint::load_assignment(c).encode_to_vec(),
            )
        }),
        secrets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Two Gateways: `a` routes to `shared`, `b` to `shared` and `own`; `unused`
    /// belongs to nobody.
    fn sample() -> ir::Ir {
        use ir::fixtures::{forward_route, http_gateway, service_cluster};
        let gateway = |name: &str, clusters: &[&str]| {
            let routes = clusters.iter().map(|c| forward_route(c, "/", c));
            http_gateway(name, routes.collect())
        };
        ir::Ir::new(
            vec![gateway("a", &["shared"]), gateway("b", &["shared", "own"])],
            vec![
                service_cluster("own", "10.1.0.1"),
                service_cluster("shared", "10.1.0.2"),
                service_cluster("unused", "10.1.0.3"),
            ],
        )
    }

    fn members(s: &Snapshot, gw: &str) -> Vec<String> {
        s.gateways[&ir::ObjectRef::new("infra", gw)]
            .members
            .iter()
            .map(|(ty, name)| format!("{}:{name}", ty.short_name()))
            .collect()
    }

    #[test]
    fn each_route_owns_its_fragment_and_clusters_and_the_gateway_its_listener() {
        let s = build(&sample());
        let b = gateway_b(&s);
        assert_eq!(
            parts(&b.routes["HTTPRoute/app/own"]),
            vec![
                "CDS:edge_cl_app_own_80:whole",
                "EDS:edge_cl_app_own_80:present",
                "LDS:edge_ls_infra_b_80:fragment",
                "RDS:edge_rt_infra_b_80:fragment",
            ]
        );
        assert_eq!(
            parts(&b.own),
            vec![
                "LDS:edge_ls_infra_b_80:fragment",
                "RDS:edge_rt_infra_b_80:present"
            ]
        );
        then_one_more_route_moves_the_table_alone(&s);
        then_a_moved_listener_holds_back_every_route(&s);
    }

    /// Route table of Gateway `b`'s port 80.
    const RDS_B: &str = "edge_rt_infra_b_80";

    fn gateway_b(s: &Snapshot) -> &GatewayResources {
        &s.gateways[&ir::ObjectRef::new("infra", "b")]
    }

    /// `"<type>:<name>:<how>"` of each resource an object has a part in.
    fn parts(p: &ObjectParts) -> Vec<String> {
        p.parts
            .iter()
            .map(|((ty, name), part)| {
                let kind = match part {
                    Part::Present => "present",
                    Part::Fragment(_) => "fragment",
                    Part::Whole => "whole",
                };
                format!("{}:{name}:{kind}", ty.short_name())
            })
            .collect()
    }

    /// One more route on b: the table's version moves, the other routes'
    /// fragments and the Gateway's own share do not.
    fn then_one_more_route_moves_the_table_alone(s: &Snapshot) {
        let mut more = sample();
        let extra = Arc::make_mut(&mut more.gateways[1]).ports[0]
            .route_table
            .as_mut()
            .unwrap();
        let mut route = extra.virtual_hosts[0].routes[0].clone();
        Arc::make_mut(&mut route).name = "HTTPRoute/app/extra/rule/0/match/0".into();
        Arc::make_mut(&mut extra.virtual_hosts[0])
            .routes
            .push(route);
        let t = build(&more);
        let (b, b2) = (gateway_b(s), gateway_b(&t));
        assert_ne!(
            s.version_of(ResourceType::Route, RDS_B),
            t.version_of(ResourceType::Route, RDS_B)
        );
        for key in ["HTTPRoute/app/own", "HTTPRoute/app/shared"] {
            assert_eq!(
                s.fragment(ResourceType::Route, RDS_B, key),
                t.fragment(ResourceType::Route, RDS_B, key)
            );
            assert_eq!(b.routes[key].fingerprint, b2.routes[key].fingerprint);
        }
        assert_eq!(b.own.fingerprint, b2.own.fingerprint);
        assert!(b2.routes.contains_key("HTTPRoute/app/extra"));
    }

    /// The listener bound elsewhere: the same route table, but no route is
    /// served as it is now until that listener is.
    fn then_a_moved_listener_holds_back_every_route(s: &Snapshot) {
        let mut moved = sample();
        Arc::make_mut(&mut moved.gateways[1]).addresses = vec!["10.0.0.9".into()];
        let u = build(&moved);
        let (b, b3) = (gateway_b(s), gateway_b(&u));
        assert_eq!(
            s.fragment(ResourceType::Route, RDS_B, "HTTPRoute/app/own"),
            u.fragment(ResourceType::Route, RDS_B, "HTTPRoute/app/own")
        );
        assert_ne!(b.own.fingerprint, b3.own.fingerprint);
        assert_ne!(
            b.routes["HTTPRoute/app/own"].fingerprint,
            b3.routes["HTTPRoute/app/own"].fingerprint
        );
    }

    #[test]
    fn gateway_members_are_its_listeners_routes_and_used_clusters() {
        let s = build(&sample());
        assert_eq!(
            members(&s, "a"),
            vec![
                "CDS:edge_cl_app_shared_80",
                "EDS:edge_cl_app_shared_80",
                "LDS:edge_ls_infra_a_80",
                "RDS:edge_rt_infra_a_80",
            ]
        );
        assert_eq!(
            members(&s, "b"),
            vec![
                "CDS:edge_cl_app_own_80",
                "CDS:edge_cl_app_shared_80",
                "EDS:edge_cl_app_own_80",
                "EDS:edge_cl_app_shared_80",
                "LDS:edge_ls_infra_b_80",
                "RDS:edge_rt_infra_b_80",
            ]
        );
        // Unused clusters are still served (a route may reference them next).
        assert!(
            s.version_of(ResourceType::Cluster, "edge_cl_app_unused_80")
                .is_some()
        );
    }

    #[test]
    fn a_port_without_filter_chains_is_not_bound() {
        let mut ir = sample();
        Arc::make_mut(&mut ir.gateways[0]).ports.push(ir::Port {
            port: 443,
            protocol: ir::PortProtocol::Https,
            listener_name: ir::names::listener("infra", "a", 443),
            route_table: None,
            tls_chains: vec![],
            forward: None,
        });
        let s = build(&ir);
        assert!(
            s.version_of(ResourceType::Listener, "edge_ls_infra_a_443")
                .is_none()
        );
        assert!(
            s.version_of(ResourceType::Listener, "edge_ls_infra_a_80")
                .is_some()
        );
        assert!(!members(&s, "a").contains(&"LDS:edge_ls_infra_a_443".to_string()));
    }

    #[test]
    fn build_is_deterministic() {
        assert_eq!(build(&sample()), build(&sample()));
        assert_eq!(
            to_yaml(&build(&sample())).unwrap(),
            to_yaml(&build(&sample())).unwrap()
        );
    }

    #[test]
    fn an_unchanged_resource_keeps_its_version() {
        let before = build(&sample());
        let mut changed = sample();
        Arc::make_mut(&mut changed.clusters[0]).endpoints[0].address = "10.1.0.99".into(); // `own`
        let after = build(&changed);

        let v = |s: &Snapshot, ty, name| s.version_of(ty, name).unwrap().to_string();
        // The endpoints of `own` changed, nothing else did.
        assert_ne!(
            v(&before, ResourceType::Endpoint, "edge_cl_app_own_80"),
            v(&after, ResourceType::Endpoint, "edge_cl_app_own_80")
        );
        for (ty, name) in [
            (ResourceType::Cluster, "edge_cl_app_own_80"),
            (ResourceType::Endpoint, "edge_cl_app_shared_80"),
            (ResourceType::Listener, "edge_ls_infra_b_80"),
            (ResourceType::Route, "edge_rt_infra_b_80"),
        ] {
            assert_eq!(v(&before, ty, name), v(&after, ty, name), "{name}");
        }
        // Endpoints count in a Gateway's hash by presence: neither `a` nor
        // `b`, which uses `own`, has a new hash. The snapshot has a new version.
        let hash =
            |s: &Snapshot, gw: &str| s.gateways[&ir::ObjectRef::new("infra", gw)].hash.clone();
        assert_eq!(hash(&before, "a"), hash(&after, "a"));
        assert_eq!(hash(&before, "b"), hash(&after, "b"));
        assert_ne!(before.version, after.version);
    }
}
