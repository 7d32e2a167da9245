//! IR ports → Envoy `Listener` (LDS): one per (Gateway, port).
//!
//! ```text
//!  HTTP port ─► Listener ── filter chain ── HCM ── RDS(route_table.name)
//!  HTTPS port ► Listener ── tls_inspector
//!                        ├─ chain [SNI a.example.com] ── TLS(certs) ── HCM ── RDS(chain table)
//!                        └─ chain [no SNI: catch-all, last] ── TLS ── HCM ── RDS(...)
//! ```
//!
//! The first Gateway address is the bind address, the others are additional
//! addresses of the same listener. Routes always come over RDS (never inline), so a
//! route change never drains a listener.

use crate::any::{ads_config_source, pack};
use crate::endpoint::socket_address;
use aether_ir as ir;
use envoy_types::pb::envoy::config::core::v3::{DataSource, TransportSocket, data_source};
use envoy_types::pb::envoy::config::listener::v3::{
    AdditionalAddress, Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter, filter,
    listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager::CodecType,
    http_connection_manager::RouteSpecifier, http_connection_manager::UpgradeConfig, http_filter,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, DownstreamTlsContext, TlsCertificate,
};

/// Extension names Envoy expects for the filters we configure.
pub const HTTP_CONNECTION_MANAGER: &str = "envoy.filters.network.http_connection_manager";
const ROUTER: &str = "envoy.filters.http.router";
const TLS_INSPECTOR: &str = "envoy.filters.listener.tls_inspector";
const TLS_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.tls";

/// Where Envoy binds when a Gateway has no address (the IR promises at least one).
const ANY_ADDRESS: &str = "0.0.0.0";

pub fn listener(gateway: &ir::Gateway, port: &ir::Port) -> Listener {
    let mut addresses = gateway.addresses.iter();
    let bind = addresses.next().map(String::as_str).unwrap_or(ANY_ADDRESS);
    let additional_addresses = addresses
        .map(|a| AdditionalAddress {
            address: Some(socket_address(a, port.port)),
            ..Default::default()
        })
        .collect();
    let mut listener = Listener {
        name: port.listener_name.clone(),
        address: Some(socket_address(bind, port.port)),
        additional_addresses,
        ..Default::default()
    };
    match port.protocol {
        ir::PortProtocol::Http => {
            if let Some(table) = &port.route_table {
                listener.filter_chains = vec![FilterChain {
                    filters: vec![hcm_filter(&port.listener_name, &table.name)],
                    ..Default::default()
                }];
            }
        }
        ir::PortProtocol::Https => {
            listener.listener_filters = vec![ListenerFilter {
                name: TLS_INSPECTOR.to_string(),
                config_type: Some(listener_filter::ConfigType::TypedConfig(pack(
                    &TlsInspector::default(),
                ))),
                ..Default::default()
            }];
            // SNI chains first, catch-alls last: Envoy picks the most specific match
            // anyway, but a reader of the config should see the fallback at the end.
            let (named, catch_all): (Vec<&ir::TlsChain>, Vec<&ir::TlsChain>) = port
                .tls_chains
                .iter()
                .partition(|c| !c.server_names.is_empty());
            listener.filter_chains = named
                .into_iter()
                .chain(catch_all)
                .map(tls_filter_chain)
                .collect();
        }
    }
    listener
}

fn tls_filter_chain(chain: &ir::TlsChain) -> FilterChain {
    let tls = DownstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            tls_certificates: chain
                .certificates
                .iter()
                .map(|c| TlsCertificate {
                    certificate_chain: Some(inline(&c.certificate_chain)),
                    private_key: Some(inline(&c.private_key)),
                    ..Default::default()
                })
                .collect(),
            alpn_protocols: vec!["h2".to_string(), "http/1.1".to_string()],
            ..Default::default()
        }),
        ..Default::default()
    };
    FilterChain {
        name: chain.listener.clone(),
        filter_chain_match: if chain.server_names.is_empty() {
            None
        } else {
            Some(FilterChainMatch {
                server_names: chain.server_names.clone(),
                ..Default::default()
            })
        },
        filters: vec![hcm_filter(&chain.route_table.name, &chain.route_table.name)],
        transport_socket: Some(TransportSocket {
            name: TLS_TRANSPORT_SOCKET.to_string(),
            config_type: Some(
                envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
                    pack(&tls),
                ),
            ),
        }),
        ..Default::default()
    }
}

fn inline(pem: &str) -> DataSource {
    DataSource {
        specifier: Some(data_source::Specifier::InlineString(pem.to_string())),
        ..Default::default()
    }
}

/// The HTTP connection manager: codec AUTO (HTTP/1.1, and h2c with prior
/// knowledge, which gRPC clients send to plain-text ports), websocket upgrades,
/// routes from RDS.
pub fn http_connection_manager(stat_prefix: &str, route_table: &str) -> HttpConnectionManager {
    HttpConnectionManager {
        codec_type: CodecType::Auto as i32,
        stat_prefix: stat_prefix.to_string(),
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            config_source: Some(ads_config_source()),
            route_config_name: route_table.to_string(),
        })),
        http_filters: vec![HttpFilter {
            name: ROUTER.to_string(),
            config_type: Some(http_filter::ConfigType::TypedConfig(pack(
                &Router::default(),
            ))),
            ..Default::default()
        }],
        upgrade_configs: vec![UpgradeConfig {
            upgrade_type: "websocket".to_string(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn hcm_filter(stat_prefix: &str, route_table: &str) -> Filter {
    Filter {
        name: HTTP_CONNECTION_MANAGER.to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(pack(
            &http_connection_manager(stat_prefix, route_table),
        ))),
    }
}
