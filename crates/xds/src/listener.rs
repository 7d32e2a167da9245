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
use envoy_types::pb::google::protobuf::BoolValue;

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
/// routes from RDS. We are the edge, so the peer's address is the client's
/// (`use_remote_address`): it is appended to `x-forwarded-for`, and `x-envoy-*`
/// headers from outside are dropped instead of steering Envoy.
pub fn http_connection_manager(stat_prefix: &str, route_table: &str) -> HttpConnectionManager {
    HttpConnectionManager {
        codec_type: CodecType::Auto as i32,
        stat_prefix: stat_prefix.to_string(),
        use_remote_address: Some(BoolValue { value: true }),
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

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::core::v3::address;
    use prost::Message;

    fn table(name: &str) -> ir::RouteTable {
        ir::RouteTable {
            name: name.into(),
            virtual_hosts: vec![],
        }
    }

    fn chain(listener: &str, server_names: &[&str]) -> ir::TlsChain {
        ir::TlsChain {
            listener: listener.into(),
            server_names: server_names.iter().map(|s| s.to_string()).collect(),
            certificates: vec![ir::Certificate {
                secret: "infra/cert".into(),
                certificate_chain: "CERT".into(),
                private_key: "KEY".into(),
            }],
            route_table: table(&format!("edge_rt_infra_gw_443_{listener}")),
        }
    }

    fn gateway(ports: Vec<ir::Port>) -> ir::Gateway {
        ir::Gateway {
            namespace: "infra".into(),
            name: "gw".into(),
            addresses: vec!["10.0.0.1".into(), "10.0.0.2".into()],
            ports,
        }
    }

    fn hcm(chain: &FilterChain) -> HttpConnectionManager {
        match &chain.filters[0].config_type {
            Some(filter::ConfigType::TypedConfig(any)) => {
                HttpConnectionManager::decode(any.value.as_slice()).unwrap()
            }
            other => panic!("unexpected filter config {other:?}"),
        }
    }

    fn rds_name(chain: &FilterChain) -> String {
        match hcm(chain).route_specifier {
            Some(RouteSpecifier::Rds(rds)) => rds.route_config_name,
            other => panic!("routes must come over RDS, got {other:?}"),
        }
    }

    fn ip(a: &Option<envoy_types::pb::envoy::config::core::v3::Address>) -> String {
        match a.as_ref().and_then(|a| a.address.as_ref()) {
            Some(address::Address::SocketAddress(s)) => s.address.clone(),
            other => panic!("unexpected address {other:?}"),
        }
    }

    #[test]
    fn http_port_binds_first_address_and_uses_rds() {
        let port = ir::Port {
            port: 80,
            protocol: ir::PortProtocol::Http,
            listener_name: "edge_ls_infra_gw_80".into(),
            route_table: Some(table("edge_rt_infra_gw_80")),
            tls_chains: vec![],
        };
        let l = listener(&gateway(vec![port.clone()]), &port);
        assert_eq!(l.name, "edge_ls_infra_gw_80");
        assert_eq!(ip(&l.address), "10.0.0.1");
        assert_eq!(l.additional_addresses.len(), 1);
        assert_eq!(ip(&l.additional_addresses[0].address), "10.0.0.2");
        assert_eq!(l.filter_chains.len(), 1);
        assert_eq!(rds_name(&l.filter_chains[0]), "edge_rt_infra_gw_80");
        let h = hcm(&l.filter_chains[0]);
        assert_eq!(h.codec_type, CodecType::Auto as i32);
        assert_eq!(h.use_remote_address, Some(BoolValue { value: true }));
        assert_eq!(h.upgrade_configs[0].upgrade_type, "websocket");
        assert_eq!(h.http_filters[0].name, ROUTER);
        assert!(l.listener_filters.is_empty());
    }

    #[test]
    fn https_port_puts_the_catch_all_chain_last() {
        let port = ir::Port {
            port: 443,
            protocol: ir::PortProtocol::Https,
            listener_name: "edge_ls_infra_gw_443".into(),
            route_table: None,
            tls_chains: vec![
                chain("any", &[]),
                chain("a", &["a.example.com"]),
                chain("b", &["*.b.example.com"]),
            ],
        };
        let l = listener(&gateway(vec![port.clone()]), &port);
        assert_eq!(l.listener_filters[0].name, TLS_INSPECTOR);
        let names: Vec<&str> = l.filter_chains.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["a", "b", "any"]);
        assert_eq!(
            l.filter_chains[1]
                .filter_chain_match
                .as_ref()
                .unwrap()
                .server_names,
            vec!["*.b.example.com"]
        );
        assert_eq!(l.filter_chains[2].filter_chain_match, None);
        assert_eq!(rds_name(&l.filter_chains[2]), "edge_rt_infra_gw_443_any");
        let tls = match &l.filter_chains[0]
            .transport_socket
            .as_ref()
            .unwrap()
            .config_type
        {
            Some(
                envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
                    any,
                ),
            ) => DownstreamTlsContext::decode(any.value.as_slice()).unwrap(),
            other => panic!("unexpected transport socket {other:?}"),
        };
        let common = tls.common_tls_context.unwrap();
        assert_eq!(common.alpn_protocols, vec!["h2", "http/1.1"]);
        assert_eq!(
            common.tls_certificates[0].certificate_chain,
            Some(inline("CERT"))
        );
    }
}
