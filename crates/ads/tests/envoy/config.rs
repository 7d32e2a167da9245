//! The config the live tests serve: one Gateway made of real Envoy resources.

use aether_ir::ObjectRef;
use aether_xds::{Resource, ResourceType, Snapshot};
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

pub fn snapshot_with(listen_port: u16, v: Variant) -> Arc<Snapshot> {
    let Variant {
        rev,
        broken,
        cluster_timeout_s,
        listener_stat_prefix,
        second_port,
        bad_listener,
    } = v;
    let cluster = Cluster {
        name: "backend".into(),
        connect_timeout: Some(PbDuration {
            seconds: cluster_timeout_s,
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
    };
    let endpoints = ClusterLoadAssignment {
        cluster_name: "backend".into(),
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
    };
    let listener = Listener {
        stat_prefix: listener_stat_prefix.into(),
        ..rds_listener("http", listen_port, "routes")
    };
    let mut virtual_hosts = vec![VirtualHost {
        name: "any".into(),
        domains: vec!["*".into()],
        routes: vec![direct(&format!("rev {rev}"))],
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
    let routes = RouteConfiguration {
        name: "routes".into(),
        virtual_hosts,
        ..Default::default()
    };

    let mut resources: BTreeMap<ResourceType, BTreeMap<String, Resource>> = BTreeMap::new();
    let mut add = |ty: ResourceType, name: &str, bytes: Vec<u8>| {
        resources
            .entry(ty)
            .or_default()
            .insert(name.into(), Resource::new(name, ty.type_url(), bytes));
    };
    add(ResourceType::Cluster, "backend", cluster.encode_to_vec());
    add(ResourceType::Endpoint, "backend", endpoints.encode_to_vec());
    add(ResourceType::Listener, "http", listener.encode_to_vec());
    add(ResourceType::Route, "routes", routes.encode_to_vec());
    let mut members: BTreeSet<(ResourceType, String)> = [
        (ResourceType::Cluster, "backend".into()),
        (ResourceType::Endpoint, "backend".into()),
        (ResourceType::Listener, "http".into()),
        (ResourceType::Route, "routes".into()),
    ]
    .into();
    if let Some(port) = second_port {
        let second = Listener {
            name: "http2".into(),
            address: socket(port),
            ..listener.clone()
        };
        add(ResourceType::Listener, "http2", second.encode_to_vec());
        members.insert((ResourceType::Listener, "http2".into()));
    }
    let mut gateways = BTreeMap::from([(web(), members)]);
    if bad_listener {
        let chain = listener.filter_chains[0].clone();
        let bad = Listener {
            name: "bad".into(),
            filter_chains: vec![chain.clone(), chain],
            ..listener.clone()
        };
        add(ResourceType::Listener, "bad", bad.encode_to_vec());
        gateways.insert(
            ObjectRef::new("edge", "bad"),
            [(ResourceType::Listener, "bad".to_string())].into(),
        );
    }
    Arc::new(Snapshot::new(resources, gateways))
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

/// `base` with Gateway [`other`] added at `rev`.
pub fn with_other(base: &Snapshot, port: u16, rev: u32) -> Arc<Snapshot> {
    let mut resources = base.resources.clone();
    let routes = RouteConfiguration {
        name: "other-routes".into(),
        virtual_hosts: vec![VirtualHost {
            name: "any".into(),
            domains: vec!["*".into()],
            routes: vec![direct(&format!("other rev {rev}"))],
            ..Default::default()
        }],
        ..Default::default()
    };
    let listener = rds_listener("other", port, "other-routes");
    for (ty, name, bytes) in [
        (ResourceType::Listener, "other", listener.encode_to_vec()),
        (ResourceType::Route, "other-routes", routes.encode_to_vec()),
    ] {
        resources
            .entry(ty)
            .or_default()
            .insert(name.into(), Resource::new(name, ty.type_url(), bytes));
    }
    let mut gateways: BTreeMap<ObjectRef, BTreeSet<(ResourceType, String)>> = base
        .gateways
        .iter()
        .map(|(gw, r)| (gw.clone(), r.members.clone()))
        .collect();
    gateways.insert(
        other(),
        [
            (ResourceType::Listener, "other".to_string()),
            (ResourceType::Route, "other-routes".to_string()),
        ]
        .into(),
    );
    Arc::new(Snapshot::new(resources, gateways))
}
