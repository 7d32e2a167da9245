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
pub mod held;
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
mod validate;
mod values;
mod yaml;

pub use access_log::AccessLog;
pub use action::{INVALID_BACKEND, Scheme};
pub use bootstrap::{BootstrapError, BootstrapOptions, bootstrap, try_bootstrap};
pub use incremental::Builder;
pub use parts::{ObjectParts, Part};
pub use proxy_protocol::ProxyProtocol;
pub use render::{RenderError, to_yaml, to_yaml_redacted};
pub use snapshot::{GatewayResources, Resource, ResourceType, Snapshot};
pub use validate::validation_bootstrap;

use aether_ir as ir;
use parts::OWN;
use prost::Message;
use route_cache::{EncodedTable, RouteCount};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Each object's fragment of one shared resource, by object key.
type Fragment = BTreeMap<String, String>;

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

/// What a Gateway's build reads of a cluster it names: `None` when the IR
/// does not define it, else what the cluster references (its endpoints and
/// secrets).
type ClusterReads = Option<Arc<[(ResourceType, String)]>>;

/// What one Gateway adds to a snapshot: its listeners and route tables, its
/// members, its and its routes' parts (not yet fingerprinted), the fragments
/// of its shared resources.
#[derive(Debug, Default)]
struct GatewayBuild {
    resources: Vec<(ResourceType, Resource)>,
    members: BTreeSet<(ResourceType, String)>,
    own: ObjectParts,
    routes: BTreeMap<String, ObjectParts>,
    /// Per resource the Gateway's objects share, each object's fragment.
    fragments: Vec<((ResourceType, String), Arc<Fragment>)>,
    /// Every cluster name its routes forward to, and what it read of it.
    clusters_named: BTreeMap<String, ClusterReads>,
    /// The resources some route's parts take whole: what the routes'
    /// fingerprints read besides the parts themselves.
    wholes: BTreeSet<(ResourceType, String)>,
    /// Its route tables encoded route by route, by name: what the next build
    /// of the Gateway takes unchanged routes' encodings from.
    tables: BTreeMap<String, EncodedTable>,
    /// IR routes whose encodings this build took from the one before, and
    /// those it encoded.
    route_count: RouteCount,
}

/// One Gateway's resources; `known` says which clusters the IR defines, and
/// what each references; `before` is an earlier build of it (and the IR it
/// was built from) to take unchanged routes' encodings from.
fn build_gateway(
    gw: &ir::Gateway,
    known: &dyn Fn(&str) -> ClusterReads,
    log: AccessLog,
    proxy: ProxyProtocol,
    before: Option<(&ir::Gateway, &GatewayBuild)>,
) -> GatewayBuild {
    let mut out = GatewayBuild::default();
    let GatewayBuild {
        resources,
        members: mine,
        own,
        routes,
        fragments,
        clusters_named,
        tables: encoded_tables,
        route_count,
        ..
    } = &mut out;
    let mut add = |ty: ResourceType, name: &str, encoded: Vec<u8>, clusters: Vec<String>| {
        let references = clusters.into_iter().map(|c| (ResourceType::Cluster, c));
        resources.push((
            ty,
            Resource::new(name, ty.type_url(), encoded).with_references(references),
        ));
    };
    // A route's clusters: the cluster as built, its endpoints as they come,
    // its secrets as they are now.
    let mut uses = |mine: &mut BTreeSet<(ResourceType, String)>,
                    routes: &mut BTreeMap<String, ObjectParts>,
                    key: &str,
                    cluster: &str| {
        let reads = known(cluster);
        clusters_named.insert(cluster.to_string(), reads.clone());
        if let Some(reads) = reads {
            mine.insert((ResourceType::Cluster, cluster.to_string()));
            let r = routes.entry(key.to_string()).or_default();
            r.require(ResourceType::Cluster, cluster, Part::Whole);
            for (ty, name) in reads.iter() {
                match ty {
                    ResourceType::Endpoint => {
                        mine.insert((*ty, name.clone()));
                        r.require(*ty, name, Part::Present);
                    }
                    ResourceType::Secret => {
                        mine.insert((*ty, name.clone()));
                        r.require(*ty, name, Part::Whole);
                    }
                    _ => {}
                }
            }
        }
    };
    let mut secrets_added = BTreeSet::new();
    // The authorization servers of listeners' pre-routing filters: the Gateway's own.
    let mut auth_clusters: BTreeSet<String> = BTreeSet::new();
    for port in &gw.ports {
        let listener = listener::listener(gw, port, log, proxy);
        // Envoy rejects a listener without filter chains, and a rejected LDS
        // update takes every other listener down with it. A port with nothing
        // to serve (say, every HTTPS listener lost its certificate, which the
        // status says) is simply not bound.
        if listener.filter_chains.is_empty() && listener.udp_listener_config.is_none() {
            continue;
        }
        let lds = (ResourceType::Listener, port.listener_name.clone());
        let mut of_listener = listener::fragments(port, &listener);
        let own_share = of_listener.get(OWN).cloned().unwrap_or_default();
        for (key, hash) in &of_listener {
            let part = Part::Fragment(hash.clone());
            if key == OWN {
                own.require(lds.0, &lds.1, part);
            } else {
                routes
                    .entry(key.clone())
                    .or_default()
                    .require(lds.0, &lds.1, part);
            }
        }
        // An L4 listener forwards to its clusters itself.
        let l4_clusters: Vec<String> = port
            .forward
            .iter()
            .chain(port.tls_chains.iter().filter_map(|c| c.forward.as_ref()))
            .flat_map(|f| f.backends.iter().map(|b| b.cluster.clone()))
            .filter(|c| known(c).is_some())
            .collect();
        // Its connection managers' authorization servers: Envoy refuses an
        // ext_authz filter whose gRPC cluster it does not have.
        let of_port = ext_authz::clusters(port).filter(|c| known(c).is_some());
        let of_port: BTreeSet<String> = of_port.collect();
        auth_clusters.extend(of_port.iter().cloned());
        let references: Vec<String> = l4_clusters.into_iter().chain(of_port).collect();
        // Not among its references: Envoy asks for a listener's secrets only
        // once it has the listener, and warms it until they arrive.
        add(lds.0, &lds.1, listener.encode_to_vec(), references);
        mine.insert(lds.clone());
        // Its certificates and CAs, each one SDS secret, which the object
        // owning the chain needs as it is now.
        let mut secrets: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for chain in &port.tls_chains {
            let owner = listener::chain_owner(chain);
            for s in secret::of_chain(chain) {
                mine.insert((ResourceType::Secret, s.name.clone()));
                let parts = if owner == OWN {
                    &mut *own
                } else {
                    routes.entry(owner.to_string()).or_default()
                };
                parts.require(ResourceType::Secret, &s.name, Part::Whole);
                if secrets_added.insert(s.name.clone()) {
                    add(ResourceType::Secret, &s.name, s.encode_to_vec(), vec![]);
                }
                secrets.entry(owner).or_default().insert(s.name);
            }
        }
        // Exactly the route tables the listener's connection managers name.
        let tables: Vec<(&ir::RouteTable, Scheme)> = match port.protocol {
            ir::PortProtocol::Http => port.route_table.iter().map(|t| (t, Scheme::Http)).collect(),
            ir::PortProtocol::Https | ir::PortProtocol::Tls => port
                .tls_chains
                .iter()
                .filter_map(|c| c.route_table.as_ref())
                .map(|t| (t, Scheme::Https))
                .collect(),
            ir::PortProtocol::Tcp | ir::PortProtocol::Udp => vec![],
        };
        let forwards = port
            .forward
            .iter()
            .chain(port.tls_chains.iter().filter_map(|c| c.forward.as_ref()));
        for f in forwards {
            for b in &f.backends {
                if !f.route.is_empty() {
                    uses(mine, routes, &f.route, &b.cluster);
                }
            }
        }
        for (table, scheme) in tables {
            let earlier = before.and_then(|(gw, b)| {
                Some((
                    route_cache::route_table(gw, &table.name)?,
                    b.tables.get(&table.name)?,
                ))
            });
            let encoded = EncodedTable::new(table, scheme, earlier, route_count);
            let rds = (ResourceType::Route, table.name.clone());
            own.require(rds.0, &rds.1, Part::Present);
            let of_table = encoded.fragments(table);
            for (key, hash) in &of_table {
                let r = routes.entry(key.clone()).or_default();
                r.require(rds.0, &rds.1, Part::Fragment(hash.clone()));
                // Served on the listener as it is now (its address, its
                // certificates): the Gateway's share of it, under this key.
                r.require(lds.0, &lds.1, Part::Fragment(own_share.clone()));
                of_listener.insert(key.clone(), own_share.clone());
            }
            fragments.push((rds.clone(), Arc::new(of_table)));
            let table_clusters = referenced_clusters(table)
                .map(|(_, c)| c.to_string())
                .chain(mirrored_clusters(table))
                .filter(|c| known(c).is_some())
                .collect();
            add(rds.0, &rds.1, encoded.bytes(), table_clusters);
            encoded_tables.insert(table.name.clone(), encoded);
            mine.insert(rds);
            for (key, cluster) in referenced_clusters(table) {
                // A backend naming a cluster the IR does not define would be a
                // translator bug; it simply is not a member then.
                uses(mine, routes, key, cluster);
            }
        }
        // Every route served on the listener as it is now is served with the
        // Gateway's certificates as they are now.
        if let Some(gateway_secrets) = secrets.get(OWN) {
            for key in of_listener.keys().filter(|k| k.as_str() != OWN) {
                let r = routes.entry(key.clone()).or_default();
                for name in gateway_secrets {
                    r.require(ResourceType::Secret, name, Part::Whole);
                }
            }
        }
        fragments.push((lds, Arc::new(of_listener)));
    }
    for cluster in auth_clusters {
        let reads = known(&cluster);
        if let Some(reads) = &reads {
            for (ty, name) in std::iter::once((ResourceType::Cluster, cluster.clone())).chain(
                reads
                    .iter()
                    .filter(|(ty, _)| matches!(ty, ResourceType::Endpoint | ResourceType::Secret))
                    .cloned(),
            ) {
                let part = match ty {
                    ResourceType::Endpoint => Part::Present,
                    _ => Part::Whole,
                };
                own.require(ty, &name, part);
                mine.insert((ty, name));
            }
        }
        clusters_named.insert(cluster, reads);
    }
    out.wholes = out
        .routes
        .values()
        .flat_map(|r| r.parts.iter())
        .filter(|(_, part)| **part == parts::Part::Whole)
        .map(|(key, _)| key.clone())
        .collect();
    out
}

/// The clusters a route table forwards to, by the route key that forwards there.
fn referenced_clusters(table: &ir::RouteTable) -> impl Iterator<Item = (&str, &str)> {
    table
        .virtual_hosts
        .iter()
        .flat_map(|vh| &vh.routes)
        .filter_map(|r| match &r.action {
            ir::RouteAction::Forward(f) => {
                let key = ir::names::route_key_of(&r.name).unwrap_or(&r.name);
                Some(f.backends.iter().map(move |b| (key, b.cluster.as_str())))
            }
            _ => None,
        })
        .flatten()
}

/// The clusters a route table's mirrors copy requests to.
fn mirrored_clusters(table: &ir::RouteTable) -> impl Iterator<Item = String> + '_ {
    table
        .virtual_hosts
        .iter()
        .flat_map(|vh| &vh.routes)
        .filter_map(|r| match &r.action {
            ir::RouteAction::Forward(f) => Some(f.mirrors.iter().map(|m| m.cluster.clone())),
            _ => None,
        })
        .flatten()
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
        route.name = "HTTPRoute/app/extra/rule/0/match/0".into();
        extra.virtual_hosts[0].routes.push(route);
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
        // Gateway `a` does not use `own`: same hash. `b` does: new hash.
        let hash =
            |s: &Snapshot, gw: &str| s.gateways[&ir::ObjectRef::new("infra", gw)].hash.clone();
        assert_eq!(hash(&before, "a"), hash(&after, "a"));
        assert_ne!(hash(&before, "b"), hash(&after, "b"));
        assert_ne!(before.version, after.version);
    }
}
