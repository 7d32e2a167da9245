//! The Envoy bootstrap that points an Envoy at our ADS server.
//!
//! ```text
//!  node {id, cluster}
//!  dynamic_resources: ads_config (gRPC or Delta gRPC, v3) ─► cluster edge_xds ─► xds_address
//!                     cds_config / lds_config = ADS   (EDS and RDS follow from them)
//!  static_resources:  cluster edge_xds (HTTP/2; STATIC for an IP or unix socket,
//!                                       STRICT_DNS for a hostname)
//!                     with a stats address: listener edge_stats (GET
//!                     /stats/prometheus alone) ─► cluster edge_admin (`stats_listener.rs`)
//!  admin:             admin_address
//!  layered_runtime:   RE2 program size limit raised from 100 to 1000
//!  overload_manager:  heap ≥ 95 %: shrink the heap, 98 %: stop taking requests;
//!                     at most 50,000 downstream connections (Envoy's edge guide)
//! ```
//!
//! Envoy's default RE2 limit (program size 100) rejects everyday regexes: a path
//! with one UUID (`[a-f0-9-]{36}`) is 121, and one rejected route NACKs the whole
//! route table. The validation bootstrap carries the same runtime, so
//! `envoy --mode validate` judges regexes exactly as the served Envoy will.

use crate::any::{ads_config_source, pack};
use crate::cluster::http2_protocol_options;
use crate::endpoint::socket_address;
use crate::render::{message_value, yaml_string};
use envoy_types::pb::envoy::config::bootstrap::v3::{
    Admin, Bootstrap, LayeredRuntime, RuntimeLayer,
    bootstrap::{DynamicResources, StaticResources},
    runtime_layer::LayerSpecifier,
};
use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster, cluster::ClusterDiscoveryType, cluster::DiscoveryType,
};
use envoy_types::pb::envoy::config::core::v3::{
    Address, ApiConfigSource, ApiVersion, GrpcService, Node, Pipe, address,
    api_config_source::ApiType, grpc_service,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::overload::v3::{
    OverloadAction, OverloadManager, ResourceMonitor, ThresholdTrigger, Trigger,
    resource_monitor::ConfigType as MonitorConfig, trigger::TriggerOneof,
};
use envoy_types::pb::envoy::extensions::resource_monitors::downstream_connections::v3::DownstreamConnectionsConfig;
use envoy_types::pb::envoy::extensions::resource_monitors::fixed_heap::v3::FixedHeapConfig;
use envoy_types::pb::google::protobuf::{Duration, Struct, Value, value::Kind};
use prost::{Message, Name};
use std::net::IpAddr;

/// The heap an Envoy may use before it sheds load, unless told otherwise.
pub const DEFAULT_MAX_HEAP_BYTES: u64 = 1 << 30;

/// Downstream connections one Envoy holds at most (Envoy's edge guide).
pub const MAX_DOWNSTREAM_CONNECTIONS: i64 = 50_000;

/// Envoy's "Configuring Envoy as an edge proxy" overload manager: near its heap
/// limit it first returns free memory to the system, then refuses new requests
/// rather than being killed with every connection; and it caps connections.
fn overload_manager(max_heap_bytes: u64) -> OverloadManager {
    const HEAP: &str = "envoy.resource_monitors.fixed_heap";
    const CONNECTIONS: &str = "envoy.resource_monitors.global_downstream_max_connections";
    let action = |name: &str, threshold: f64| OverloadAction {
        name: name.to_string(),
        triggers: vec![Trigger {
            name: HEAP.to_string(),
            trigger_oneof: Some(TriggerOneof::Threshold(ThresholdTrigger {
                value: threshold,
            })),
        }],
        ..Default::default()
    };
    OverloadManager {
        refresh_interval: Some(Duration {
            seconds: 0,
            nanos: 250_000_000,
        }),
        resource_monitors: vec![
            ResourceMonitor {
                name: HEAP.to_string(),
                config_type: Some(MonitorConfig::TypedConfig(pack(&FixedHeapConfig {
                    max_heap_size_bytes: max_heap_bytes,
                    ..Default::default()
                }))),
            },
            ResourceMonitor {
                name: CONNECTIONS.to_string(),
                config_type: Some(MonitorConfig::TypedConfig(pack(
                    &DownstreamConnectionsConfig {
                        max_active_downstream_connections: MAX_DOWNSTREAM_CONNECTIONS,
                    },
                ))),
            },
        ],
        actions: vec![
            action("envoy.overload_actions.shrink_heap", 0.95),
            action("envoy.overload_actions.stop_accepting_requests", 0.98),
        ],
        ..Default::default()
    }
}

/// The static cluster through which Envoy reaches the ADS server.
pub const XDS_CLUSTER: &str = "edge_xds";

/// The largest RE2 program Envoy accepts in our configs (its default is 100).
pub const MAX_REGEX_PROGRAM_SIZE: u32 = 1000;

/// The runtime every bootstrap we generate carries (see the module docs).
pub(crate) fn runtime() -> LayeredRuntime {
    LayeredRuntime {
        layers: vec![RuntimeLayer {
            name: "static".to_string(),
            layer_specifier: Some(LayerSpecifier::StaticLayer(Struct {
                fields: [(
                    "re2.max_program_size.error_level".to_string(),
                    Value {
                        kind: Some(Kind::NumberValue(f64::from(MAX_REGEX_PROGRAM_SIZE))),
                    },
                )]
                .into(),
            })),
        }],
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapOptions {
    /// The Envoy's node id (what the ADS server tracks ACKs by).
    pub node_id: String,
    /// The Envoy's service cluster (`--service-cluster`); may be empty.
    pub cluster: String,
    /// `HOST:PORT` (an IP, `[v6]`, or a DNS name) or `unix:/path`.
    pub xds_address: String,
    /// `HOST:PORT` for Envoy's admin interface; HOST must be an IP (or `localhost`).
    pub admin_address: String,
    /// Incremental (Delta) ADS instead of state-of-the-world.
    pub delta: bool,
    /// The heap Envoy's overload manager measures against (see the module docs);
    /// [`DEFAULT_MAX_HEAP_BYTES`] unless the pod's memory limit says otherwise.
    pub max_heap_bytes: u64,
    /// `IP:PORT` of a listener that serves Envoy's stats in Prometheus format
    /// (`/stats/prometheus` alone; see `stats_listener.rs`), if any.
    pub stats_address: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BootstrapError {
    #[error("{what} {address:?}: expected HOST:PORT")]
    InvalidAddress { what: &'static str, address: String },
    #[error("admin address {0:?}: Envoy's admin interface needs an IP address")]
    AdminNotIp(String),
    #[error("stats address {0:?}: Envoy's stats listener needs an IP address")]
    StatsNotIp(String),
}

/// The bootstrap as YAML. Panics on an address [`try_bootstrap`] rejects; callers
/// that take addresses from users should call that instead.
pub fn bootstrap(opts: &BootstrapOptions) -> String {
    try_bootstrap(opts).unwrap_or_else(|e| panic!("invalid bootstrap options: {e}"))
}

/// The bootstrap as YAML, or why the addresses are unusable.
pub fn try_bootstrap(opts: &BootstrapOptions) -> Result<String, BootstrapError> {
    let xds = xds_cluster(&opts.xds_address)?;
    let (admin_host, admin_port) = host_port("admin address", &opts.admin_address)?;
    let admin_ip = match admin_host.as_str() {
        "localhost" => "127.0.0.1".to_string(),
        h if h.parse::<IpAddr>().is_ok() => h.to_string(),
        _ => return Err(BootstrapError::AdminNotIp(opts.admin_address.clone())),
    };
    let mut statics = StaticResources {
        clusters: vec![xds],
        ..Default::default()
    };
    if let Some(address) = &opts.stats_address {
        let (ip, port) = host_port("stats address", address)?;
        if ip.parse::<IpAddr>().is_err() {
            return Err(BootstrapError::StatsNotIp(address.clone()));
        }
        let (listener, admin) = crate::stats_listener::stats(&ip, port, &admin_ip, admin_port);
        statics.listeners.push(listener);
        statics.clusters.push(admin);
    }
    let bootstrap = Bootstrap {
        node: Some(Node {
            id: opts.node_id.clone(),
            cluster: opts.cluster.clone(),
            ..Default::default()
        }),
        dynamic_resources: Some(DynamicResources {
            ads_config: Some(ApiConfigSource {
                api_type: if opts.delta {
                    ApiType::DeltaGrpc as i32
                } else {
                    ApiType::Grpc as i32
                },
                transport_api_version: ApiVersion::V3 as i32,
                grpc_services: vec![GrpcService {
                    target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                        grpc_service::EnvoyGrpc {
                            cluster_name: XDS_CLUSTER.to_string(),
                            ..Default::default()
                        },
                    )),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            cds_config: Some(ads_config_source()),
            lds_config: Some(ads_config_source()),
            ..Default::default()
        }),
        static_resources: Some(statics),
        admin: Some(Admin {
            address: Some(socket_address(&admin_ip, admin_port)),
            ..Default::default()
        }),
        layered_runtime: Some(runtime()),
        overload_manager: Some(overload_manager(opts.max_heap_bytes)),
        ..Default::default()
    };
    let value = message_value(&Bootstrap::full_name(), &bootstrap.encode_to_vec())
        .expect("the bootstrap message is in the descriptor set");
    Ok(yaml_string(&value).expect("a YAML value always renders"))
}

fn xds_cluster(xds_address: &str) -> Result<Cluster, BootstrapError> {
    let (discovery, address) = match xds_address.strip_prefix("unix:") {
        Some(path) if !path.is_empty() => (
            DiscoveryType::Static,
            Address {
                address: Some(address::Address::Pipe(Pipe {
                    path: path.to_string(),
                    mode: 0,
                })),
            },
        ),
        _ => {
            let (host, port) = host_port("xds address", xds_address)?;
            let discovery = if host.parse::<IpAddr>().is_ok() {
                DiscoveryType::Static
            } else {
                DiscoveryType::StrictDns
            };
            (discovery, socket_address(&host, port))
        }
    };
    Ok(Cluster {
        name: XDS_CLUSTER.to_string(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(discovery as i32)),
        connect_timeout: Some(Duration {
            seconds: 1,
            nanos: 0,
        }),
        // ADS is gRPC: HTTP/2 to the control plane.
        typed_extension_protocol_options: http2_protocol_options(),
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: XDS_CLUSTER.to_string(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                        address: Some(address),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// Splits `host:port`, `[v6]:port`; the host comes back without brackets.
fn host_port(what: &'static str, s: &str) -> Result<(String, u16), BootstrapError> {
    let invalid = || BootstrapError::InvalidAddress {
        what,
        address: s.to_string(),
    };
    let (host, port) = s.rsplit_once(':').ok_or_else(invalid)?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() || host.contains(':') && host.parse::<IpAddr>().is_err() {
        return Err(invalid());
    }
    let port = port.parse::<u16>().map_err(|_| invalid())?;
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(xds: &str, admin: &str) -> BootstrapOptions {
        BootstrapOptions {
            node_id: "edge-1".into(),
            cluster: "aether-edge".into(),
            xds_address: xds.into(),
            admin_address: admin.into(),
            delta: false,
            max_heap_bytes: DEFAULT_MAX_HEAP_BYTES,
            stats_address: None,
        }
    }

    #[test]
    fn the_stats_listener_answers_prometheus_alone_through_the_admin() {
        let none: serde_norway::Value =
            serde_norway::from_str(&bootstrap(&opts("127.0.0.1:18000", "127.0.0.1:9901"))).unwrap();
        assert!(none["staticResources"]["listeners"].is_null());
        let yaml = bootstrap(&BootstrapOptions {
            stats_address: Some("0.0.0.0:19004".into()),
            ..opts("127.0.0.1:18000", "127.0.0.1:9901")
        });
        let v: serde_norway::Value = serde_norway::from_str(&yaml).unwrap();
        let l = &v["staticResources"]["listeners"][0];
        assert_eq!(l["name"], "edge_stats");
        assert_eq!(l["address"]["socketAddress"]["portValue"], 19004);
        let routes = &l["filterChains"][0]["filters"][0]["typedConfig"]["routeConfig"]["virtualHosts"]
            [0]["routes"];
        assert_eq!(routes[0]["match"]["path"], "/stats/prometheus");
        assert_eq!(routes[0]["route"]["cluster"], "edge_admin");
        assert_eq!(routes[1]["directResponse"]["status"], 404);
        let admin = &v["staticResources"]["clusters"][1];
        assert_eq!(admin["name"], "edge_admin");
        assert_eq!(
            admin["loadAssignment"]["endpoints"][0]["lbEndpoints"][0]["endpoint"]["address"]["socketAddress"]
                ["portValue"],
            9901
        );
        assert_eq!(
            try_bootstrap(&BootstrapOptions {
                stats_address: Some("stats.example:1".into()),
                ..opts("127.0.0.1:18000", "127.0.0.1:9901")
            }),
            Err(BootstrapError::StatsNotIp("stats.example:1".into()))
        );
    }

    #[test]
    fn addresses_split_into_host_and_port() {
        assert_eq!(
            host_port("x", "10.0.0.1:18000"),
            Ok(("10.0.0.1".into(), 18000))
        );
        assert_eq!(host_port("x", "[::1]:9901"), Ok(("::1".into(), 9901)));
        assert_eq!(
            host_port("x", "xds.example:18000"),
            Ok(("xds.example".into(), 18000))
        );
        assert!(host_port("x", "no-port").is_err());
        assert!(host_port("x", "h:99999").is_err());
        assert!(host_port("x", ":80").is_err());
    }

    #[test]
    fn the_xds_cluster_type_follows_the_address() {
        let kind = |a: &str| xds_cluster(a).unwrap().cluster_discovery_type;
        let ty = |d: DiscoveryType| Some(ClusterDiscoveryType::Type(d as i32));
        assert_eq!(kind("127.0.0.1:18000"), ty(DiscoveryType::Static));
        assert_eq!(kind("xds.example:18000"), ty(DiscoveryType::StrictDns));
        assert_eq!(kind("unix:/run/edge/xds.sock"), ty(DiscoveryType::Static));
    }

    #[test]
    fn bad_addresses_are_errors() {
        assert!(matches!(
            try_bootstrap(&opts("nowhere", "127.0.0.1:9901")),
            Err(BootstrapError::InvalidAddress { .. })
        ));
        assert_eq!(
            try_bootstrap(&opts("127.0.0.1:18000", "admin.example:9901")),
            Err(BootstrapError::AdminNotIp("admin.example:9901".into()))
        );
    }

    #[test]
    fn bootstrap_names_node_ads_and_admin() {
        let yaml = bootstrap(&opts("127.0.0.1:18000", "localhost:9901"));
        let v: serde_norway::Value = serde_norway::from_str(&yaml).unwrap();
        assert_eq!(v["node"]["id"], "edge-1");
        assert_eq!(v["node"]["cluster"], "aether-edge");
        assert_eq!(v["dynamicResources"]["adsConfig"]["apiType"], "GRPC");
        let overload = &v["overloadManager"];
        let actions: Vec<&str> = overload["actions"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            actions,
            [
                "envoy.overload_actions.shrink_heap",
                "envoy.overload_actions.stop_accepting_requests"
            ]
        );
        assert_eq!(
            overload["resourceMonitors"][0]["typedConfig"]["maxHeapSizeBytes"],
            DEFAULT_MAX_HEAP_BYTES.to_string()
        );
        let delta = bootstrap(&BootstrapOptions {
            delta: true,
            ..opts("127.0.0.1:18000", "localhost:9901")
        });
        let d: serde_norway::Value = serde_norway::from_str(&delta).unwrap();
        assert_eq!(d["dynamicResources"]["adsConfig"]["apiType"], "DELTA_GRPC");
        assert_eq!(
            v["dynamicResources"]["adsConfig"]["grpcServices"][0]["envoyGrpc"]["clusterName"],
            XDS_CLUSTER
        );
        assert!(v["dynamicResources"]["cdsConfig"]["ads"].is_mapping());
        assert!(v["dynamicResources"]["ldsConfig"]["ads"].is_mapping());
        assert_eq!(
            v["admin"]["address"]["socketAddress"]["address"],
            "127.0.0.1"
        );
        assert_eq!(
            v["layeredRuntime"]["layers"][0]["staticLayer"]["re2.max_program_size.error_level"],
            f64::from(MAX_REGEX_PROGRAM_SIZE)
        );
        assert_eq!(
            v["staticResources"]["clusters"][0]["typedExtensionProtocolOptions"]
                [crate::cluster::HTTP_PROTOCOL_OPTIONS]["@type"],
            "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
        );
    }
}
