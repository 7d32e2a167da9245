//! The config the live tests serve: one Gateway made of real Envoy resources.

use crate::support::{add_resources, members_of, mk_resources};
use aether_ir::ObjectRef;
use aether_xds::{ResourceType, Snapshot};
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    Address, AggregatedConfigSource, ApiVersion, ConfigSource, DataSource, SocketAddress, address,
    config_source, data_source, socket_address,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, Route, RouteConfiguration, RouteMatch, VirtualHost, route, route_match,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager, http_filter,
};
use envoy_types::pb::google::protobuf::{Any, Duration as PbDuration};
use prost::{Message, Name};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

fn any<M: Message + Name>(m: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

fn ads() -> Option<ConfigSource> {
    Some(ConfigSource {
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource {},
        )),
        resource_api_version: ApiVersion::V3 as i32,
        ..Default::default()
    })
}

fn socket(port: u16) -> Option<Address> {
    Some(Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: "127.0.0.1".into(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(port.into())),
            ..Default::default()
        })),
    })
}

fn direct(body: &str) -> Route {
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        action: Some(route::Action::DirectResponse(DirectResponseAction {
            status: 200,
            body: Some(DataSource {
                specifier: Some(data_source::Specifier::InlineString(body.into())),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// What varies between the test's snapshots.
#[derive(Debug, Clone, Copy)]
pub struct Variant {
    /// The route table answers `rev <rev>`.
    pub rev: u32,
    /// A second `*` virtual host, which Envoy rejects.
    pub broken: bool,
    pub cluster_timeout_s: i64,
    pub listener_stat_prefix: &'static str,
    /// A second listener `http2`, on this port, sharing the route table.
    pub second_port: Option<u16>,
    /// A Gateway `edge/bad` whose listener has two filter chains with the same
    /// match, which Envoy rejects (by name).
    pub bad_listener: bool,
}

impl Variant {
    pub fn rev(rev: u32) -> Self {
        Variant {
            rev,
            broken: false,
            cluster_timeout_s: 1,
            listener_stat_prefix: "web",
            second_port: None,
            bad_listener: false,
        }
    }
}

/// Gateway `edge/web`: an EDS cluster and its endpoints, a listener on
/// `listen_port` whose routes come from RDS, and a route table.
pub fn snapshot(listen_port: u16, rev: u32, broken: bool) -> Arc<Snapshot> {
    snapshot_with(
        listen_port,
        Variant {
            broken,
            ..Variant::rev(rev)
        },
    )
}

/// Gateway `edge/web` as `v` has it, and Gateway [`bad`] if `v` asks for it.
pub fn snapshot_with(listen_port: u16, v: Variant) -> Arc<Snapshot> {
    let listener = Listener {
        stat_prefix: v.listener_stat_prefix.into(),
        ..rds_listener("http", listen_port, "routes")
    };
    let routes = mk_route_table("routes", &format!("rev {}", v.rev), v.broken);
    let mut resources = vec![
        (
            ResourceType::Cluster,
            "backend",
            mk_eds_cluster("backend", v.cluster_timeout_s).encode_to_vec(),
        ),
        (
            ResourceType::Endpoint,
            "backend",
            mk_endpoints("backend").encode_to_vec(),
        ),
        (ResourceType::Listener, "http", listener.encode_to_vec()),
        (ResourceType::Route, "routes", routes.encode_to_vec()),
    ];
    if let Some(port) = v.second_port {
        let second = Listener {
            name: "http2".into(),
            address: socket(port),
            ..listener.clone()
        };
        resources.push((ResourceType::Listener, "http2", second.encode_to_vec()));
    }
    let mut gateways = BTreeMap::from([(web(), members_of(&resources))]);
    if v.bad_listener {
        let bad_listener = [(
            ResourceType::Listener,
            "bad",
            mk_twice_matching(&listener, "bad").encode_to_vec(),
        )];
        gateways.insert(bad(), members_of(&bad_listener));
        resources.extend(bad_listener);
    }
    Arc::new(Snapshot::new(mk_resources(resources), gateways))
}

/// Cluster `name`, its endpoints from EDS.
fn mk_eds_cluster(name: &str, connect_timeout_s: i64) -> Cluster {
    Cluster {
        name: name.into(),
        connect_timeout: Some(PbDuration {
            seconds: connect_timeout_s,
            nanos: 0,
        }),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::EdsClusterConfig {
            eds_config: ads(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Cluster `cluster`'s one endpoint, on the discard port: the routes answer
/// directly, so it is never reached.
fn mk_endpoints(cluster: &str) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: cluster.into(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: vec![LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                    address: socket(9),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Route table `name`, answering `body` to any host; `broken` adds a second `*`
/// virtual host, which Envoy rejects.
fn mk_route_table(name: &str, body: &str, broken: bool) -> RouteConfiguration {
    let mut virtual_hosts = vec![VirtualHost {
        name: "any".into(),
        domains: vec!["*".into()],
        routes: vec![direct(body)],
        ..Default::default()
    }];
    if broken {
        virtual_hosts.push(VirtualHost {
            name: "any-again".into(),
            domains: vec!["*".into()],
            routes: vec![direct("never")],
            ..Default::default()
        });
    }
    RouteConfiguration {
        name: name.into(),
        virtual_hosts,
        ..Default::default()
    }
}

/// Listener `name`: `like`, with its filter chain twice, so two chains have the
/// same match, which Envoy rejects (by name).
fn mk_twice_matching(like: &Listener, name: &str) -> Listener {
    let chain = like.filter_chains[0].clone();
    Listener {
        name: name.into(),
        filter_chains: vec![chain.clone(), chain],
        ..like.clone()
    }
}

pub fn web() -> ObjectRef {
    ObjectRef::new("edge", "web")
}

/// A listener `name` on `port` whose HTTP routes come from RDS `routes`.
fn rds_listener(name: &str, port: u16, routes: &str) -> Listener {
    let hcm = HttpConnectionManager {
        stat_prefix: name.into(),
        route_specifier: Some(http_connection_manager::RouteSpecifier::Rds(Rds {
            config_source: ads(),
            route_config_name: routes.into(),
        })),
        http_filters: vec![HttpFilter {
            name: "envoy.filters.http.router".into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(
                any(&Router::default()),
            )),
            ..Default::default()
        }],
        ..Default::default()
    };
    Listener {
        name: name.into(),
        stat_prefix: name.into(),
        address: socket(port),
        filter_chains: vec![FilterChain {
            filters: vec![Filter {
                name: "envoy.filters.network.http_connection_manager".into(),
                config_type: Some(filter::ConfigType::TypedConfig(any(&hcm))),
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Gateway `edge/other`: its own listener on `port` and its own route table,
/// answering `other rev <rev>`.
pub fn other() -> ObjectRef {
    ObjectRef::new("edge", "other")
}

/// Gateway `edge/bad`: one listener Envoy rejects (see [`Variant::bad_listener`]).
pub fn bad() -> ObjectRef {
    ObjectRef::new("edge", "bad")
}

/// `base` with Gateway [`other`] added at `rev`.
pub fn with_other(base: &Snapshot, port: u16, rev: u32) -> Arc<Snapshot> {
    let listener = rds_listener("other", port, "other-routes");
    let routes = mk_route_table("other-routes", &format!("other rev {rev}"), false);
    let added = [
        (ResourceType::Listener, "other", listener.encode_to_vec()),
        (ResourceType::Route, "other-routes", routes.encode_to_vec()),
    ];
    let mut gateways: BTreeMap<ObjectRef, BTreeSet<(ResourceType, String)>> = base
        .gateways
        .iter()
        .map(|(gw, r)| (gw.clone(), BTreeSet::clone(&r.members)))
        .collect();
    gateways.insert(other(), members_of(&added));
    let mut resources: BTreeMap<_, _> = (base.resources.iter())
        .map(|(ty, m)| (*ty, BTreeMap::clone(m)))
        .collect();
    add_resources(&mut resources, added);
    Arc::new(Snapshot::new(resources, gateways))
}
