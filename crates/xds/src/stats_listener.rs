//! Envoy's own stats for Prometheus, on a listener of their own: Envoy's admin
//! interface stays on loopback (it can dump the config, keys included, and
//! stop the server), and this listener answers only `GET /stats/prometheus`.
//!
//! ```text
//!  edge_stats listener (stats_address) ── HCM, static routes
//!       path == /stats/prometheus ──► cluster edge_admin (the admin address)
//!       anything else             ──► 404
//! ```

use crate::any::pack;
use crate::endpoint::socket_address;
use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster, cluster::ClusterDiscoveryType, cluster::DiscoveryType,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route,
    route_action, route_match,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_connection_manager::RouteSpecifier, http_filter,
};
use envoy_types::pb::google::protobuf::Duration;

/// The static listener that serves Envoy's stats.
pub const STATS_LISTENER: &str = "edge_stats";
/// The static cluster that reaches Envoy's admin interface.
pub const ADMIN_CLUSTER: &str = "edge_admin";
/// The one path the stats listener answers.
pub const PROMETHEUS_PATH: &str = "/stats/prometheus";

/// The listener on `(ip, port)` and the cluster to the admin interface on
/// `(admin_ip, admin_port)`.
pub(crate) fn stats(ip: &str, port: u16, admin_ip: &str, admin_port: u16) -> (Listener, Cluster) {
    (
        stats_listener(ip, port),
        admin_cluster(admin_ip, admin_port),
    )
}

/// The static route table: the Prometheus path to the admin cluster, a 404
/// for anything else.
fn stats_routes() -> RouteConfiguration {
    RouteConfiguration {
        name: STATS_LISTENER.to_string(),
        virtual_hosts: vec![VirtualHost {
            name: STATS_LISTENER.to_string(),
            domains: vec!["*".to_string()],
            routes: vec![
                Route {
                    r#match: Some(RouteMatch {
                        path_specifier: Some(route_match::PathSpecifier::Path(
                            PROMETHEUS_PATH.to_string(),
                        )),
                        ..Default::default()
                    }),
                    action: Some(route::Action::Route(RouteAction {
                        cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(
                            ADMIN_CLUSTER.to_string(),
                        )),
                        ..Default::default()
                    })),
                    ..Default::default()
                },
                Route {
                    r#match: Some(RouteMatch {
                        path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
                        ..Default::default()
                    }),
                    action: Some(route::Action::DirectResponse(DirectResponseAction {
                        status: 404,
                        ..Default::default()
                    })),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The listener on `(ip, port)`: one connection manager with the static routes.
fn stats_listener(ip: &str, port: u16) -> Listener {
    let hcm = HttpConnectionManager {
        stat_prefix: STATS_LISTENER.to_string(),
        route_specifier: Some(RouteSpecifier::RouteConfig(stats_routes())),
        http_filters: vec![HttpFilter {
            name: "envoy.filters.http.router".to_string(),
            config_type: Some(http_filter::ConfigType::TypedConfig(pack(
                &Router::default(),
            ))),
            ..Default::default()
        }],
        ..Default::default()
    };
    Listener {
        name: STATS_LISTENER.to_string(),
        address: Some(socket_address(ip, port)),
        filter_chains: vec![FilterChain {
            filters: vec![Filter {
                name: "envoy.filters.network.http_connection_manager".to_string(),
                config_type: Some(filter::ConfigType::TypedConfig(pack(&hcm))),
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The static cluster to Envoy's admin interface on `(admin_ip, admin_port)`.
fn admin_cluster(admin_ip: &str, admin_port: u16) -> Cluster {
    Cluster {
        name: ADMIN_CLUSTER.to_string(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
        connect_timeout: Some(Duration {
            seconds: 1,
            nanos: 0,
        }),
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: ADMIN_CLUSTER.to_string(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                        address: Some(socket_address(admin_ip, admin_port)),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}
