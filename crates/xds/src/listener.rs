//! IR ports → Envoy `Listener` (LDS): one per (Gateway, port).
//!
//! ```text
//!  HTTP port ─► Listener ── filter chain ── HCM ── RDS(route_table.name)
//!  HTTPS port ► Listener ── tls_inspector
//!                        ├─ chain [SNI a.example.com] ── TLS(SDS certs) ── HCM ── RDS(chain table)
//!                        └─ chain [no SNI: catch-all, last] ── TLS ── HCM ── RDS(...)
//!  TLS port  ► Listener ── tls_inspector
//!                        ├─ chain [SNI] ── tcp_proxy (passthrough: the TLS stream as is)
//!                        ├─ chain [SNI] ── TLS(certs) ── tcp_proxy (terminate)
//!                        └─ chain [SNI] ── TLS(certs) ── HCM (an HTTPS listener on the port)
//!  TCP port  ► Listener ── chain ── tcp_proxy (weighted clusters)
//!  UDP port  ► Listener (UDP) ── udp_proxy listener filter ── one cluster
//! ```
//!
//! A TCP proxy with no valid backend points at a cluster that is never defined:
//! Envoy closes each connection (a client sees EOF, not a refused connect).
//!
//! The first Gateway address is the bind address, the others are additional
//! addresses of the same listener. Routes always come over RDS and certificates
//! and CAs over SDS (never inline, see `secret.rs`), so neither a route change
//! nor a certificate rotation drains a listener.

use crate::INVALID_BACKEND;
use crate::access_log::AccessLog;
use crate::any::{ads_config_source, pack};
use crate::endpoint::socket_address;
use crate::parts::{Fragments, KeyHashes, OWN};
use crate::proxy_protocol::ProxyProtocol;
use crate::secret;
use aether_ir as ir;
use envoy_types::pb::envoy::config::core::v3::{Address, TransportSocket, address, socket_address};
use envoy_types::pb::envoy::config::listener::v3::{
    AdditionalAddress, Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter,
    UdpListenerConfig, filter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager::CodecType,
    http_connection_manager::RouteSpecifier, http_connection_manager::UpgradeConfig, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::envoy::extensions::filters::udp::udp_proxy::v3::{
    Route as UdpRoute, UdpProxyConfig, udp_proxy_config,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, DownstreamTlsContext,
    certificate_validation_context::TrustChainVerification,
    common_tls_context::CombinedCertificateValidationContext,
    common_tls_context::ValidationContextType,
};
use envoy_types::pb::google::protobuf::BoolValue;
use envoy_types::pb::xds::core::v3::TypedExtensionConfig;
use envoy_types::pb::xds::r#type::matcher::v3::{Matcher, matcher::OnMatch, matcher::on_match};
use prost::Message;
use std::collections::BTreeMap;

/// Extension names Envoy expects for the filters we configure.
pub const HTTP_CONNECTION_MANAGER: &str = "envoy.filters.network.http_connection_manager";
const ROUTER: &str = "envoy.filters.http.router";
const TLS_INSPECTOR: &str = "envoy.filters.listener.tls_inspector";
const TLS_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.tls";
const TCP_PROXY: &str = "envoy.filters.network.tcp_proxy";
const UDP_PROXY: &str = "envoy.filters.udp_listener.udp_proxy";
const UDP_ROUTE_ACTION: &str = "route";

/// Where Envoy binds when a Gateway has no address (the IR promises at least one).
const ANY_ADDRESS: &str = "0.0.0.0";

pub fn listener(
    gateway: &ir::Gateway,
    port: &ir::Port,
    log: AccessLog,
    proxy: ProxyProtocol,
) -> Listener {
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
        per_connection_buffer_limit_bytes: crate::edge::buffer_limit(),
        ..Default::default()
    };
    match port.protocol {
        ir::PortProtocol::Http => {
            if let Some(table) = &port.route_table {
                listener.filter_chains = vec![FilterChain {
                    filters: vec![hcm_filter(&port.listener_name, table, log)],
                    ..Default::default()
                }];
            }
        }
        ir::PortProtocol::Https | ir::PortProtocol::Tls => {
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
                .filter_map(|c| tls_filter_chain(c, log))
                .collect();
        }
        ir::PortProtocol::Tcp => {
            listener.filter_chains = vec![FilterChain {
                filters: vec![tcp_proxy_filter(
                    &port.listener_name,
                    port.forward.as_ref(),
                    log,
                )],
                ..Default::default()
            }];
        }
        ir::PortProtocol::Udp => {
            if let Some(forward) = &port.forward {
                udp_listener(&mut listener, forward);
            }
        }
    }
    if proxy == ProxyProtocol::Required && port.protocol != ir::PortProtocol::Udp {
        let first = crate::proxy_protocol::listener_filter();
        listener.listener_filters.insert(0, first);
    }
    listener
}

/// Per route key, a hash over what that route owns of the listener (its filter
/// chains; a UDP port's proxy filter), and under [`OWN`] a hash over the rest:
/// the Gateway's own share (see `parts.rs`).
pub fn fragments(port: &ir::Port, listener: &Listener) -> KeyHashes {
    let mut mine: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    let mut rest = listener.clone();
    let l4_route = port
        .forward
        .as_ref()
        .map(|fw| fw.route.as_str())
        .filter(|r| !r.is_empty());
    match (port.protocol, l4_route) {
        (ir::PortProtocol::Tcp, Some(route)) => {
            let chains = std::mem::take(&mut rest.filter_chains);
            let pieces = mine.entry(route.to_string()).or_default();
            pieces.extend(chains.iter().map(Message::encode_to_vec));
        }
        (ir::PortProtocol::Udp, Some(route)) => {
            let filters = std::mem::take(&mut rest.listener_filters);
            let pieces = mine.entry(route.to_string()).or_default();
            pieces.extend(filters.iter().map(Message::encode_to_vec));
        }
        (ir::PortProtocol::Https | ir::PortProtocol::Tls, _) => {
            // A TLS route's chain is named `<listener>/<route key>`.
            rest.filter_chains.retain(|chain| {
                match chain.name.split_once('/').map(|(_, key)| key) {
                    Some(key) => {
                        mine.entry(key.to_string())
                            .or_default()
                            .push(chain.encode_to_vec());
                        false
                    }
                    None => true,
                }
            });
        }
        _ => {}
    }
    // A route is served on the listener as it is now: its fragment covers the
    // Gateway's share (addresses, other chains) too.
    let rest = rest.encode_to_vec();
    let mut f = Fragments::default();
    for (key, pieces) in &mine {
        let mut all: Vec<&[u8]> = vec![&rest];
        all.extend(pieces.iter().map(Vec::as_slice));
        f.add(key, &all);
    }
    f.add(OWN, &[&rest]);
    f.finish()
}

/// One SNI-selected chain; `None` for a chain with nothing behind it (a bug in
/// the IR, never sent).
fn tls_filter_chain(chain: &ir::TlsChain, log: AccessLog) -> Option<FilterChain> {
    let filter = match (&chain.route_table, &chain.forward) {
        (Some(table), _) => hcm_filter(&table.name, table, log),
        (None, Some(forward)) => tcp_proxy_filter(&chain.listener, Some(forward), log),
        (None, None) => return None,
    };
    // HTTPS offers h2 and HTTP/1.1; a terminated TLS stream carries no ALPN of ours.
    let alpn = if chain.route_table.is_some() {
        vec!["h2".to_string(), "http/1.1".to_string()]
    } else {
        vec![]
    };
    let transport_socket = (!chain.certificates.is_empty()).then(|| {
        let tls = DownstreamTlsContext {
            common_tls_context: Some(CommonTlsContext {
                tls_certificate_sds_secret_configs: chain
                    .certificates
                    .iter()
                    .map(|c| secret::sds(secret::certificate_name(c)))
                    .collect(),
                alpn_protocols: alpn,
                validation_context_type: chain.client_validation.as_ref().map(client_validation),
                ..Default::default()
            }),
            require_client_certificate: chain.client_validation.as_ref().map(|v| BoolValue {
                value: !v.allow_insecure_fallback,
            }),
            ..Default::default()
        };
        TransportSocket {
            name: TLS_TRANSPORT_SOCKET.to_string(),
            config_type: Some(
                envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
                    pack(&tls),
                ),
            ),
        }
    });
    Some(FilterChain {
        name: chain.listener.clone(),
        filter_chain_match: if chain.server_names.is_empty() {
            None
        } else {
            Some(FilterChainMatch {
                server_names: chain.server_names.clone(),
                ..Default::default()
            })
        },
        filters: vec![filter],
        transport_socket,
        ..Default::default()
    })
}

/// A TCP proxy to a route's weighted backends. The invalid share (or everything,
/// with no route or no valid backend) goes to a cluster that is never defined, so
/// Envoy closes those connections.
fn tcp_proxy_filter(stat_prefix: &str, forward: Option<&ir::L4Forward>, log: AccessLog) -> Filter {
    let mut weighted: Vec<(&str, u32)> = forward
        .map(|f| {
            f.backends
                .iter()
                .map(|b| (b.cluster.as_str(), b.weight))
                .collect()
        })
        .unwrap_or_default();
    if let Some(f) = forward.filter(|f| f.invalid_weight > 0) {
        weighted.push((INVALID_BACKEND, f.invalid_weight));
    }
    let cluster_specifier = match weighted.as_slice() {
        [] => tcp_proxy::ClusterSpecifier::Cluster(INVALID_BACKEND.to_string()),
        [(one, _)] => tcp_proxy::ClusterSpecifier::Cluster((*one).to_string()),
        many => tcp_proxy::ClusterSpecifier::WeightedClusters(tcp_proxy::WeightedCluster {
            clusters: many
                .iter()
                .map(
                    |(name, weight)| tcp_proxy::weighted_cluster::ClusterWeight {
                        name: (*name).to_string(),
                        weight: *weight,
                        ..Default::default()
                    },
                )
                .collect(),
        }),
    };
    let proxy = TcpProxy {
        stat_prefix: stat_prefix.to_string(),
        cluster_specifier: Some(cluster_specifier),
        access_log: log.tcp(),
        ..Default::default()
    };
    Filter {
        name: TCP_PROXY.to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(pack(&proxy))),
    }
}

/// A UDP listener: the UDP proxy listener filter sends every session to the one
/// cluster of the forward (translation folds several weighted backends into one
/// weighted cluster: Envoy's UDP proxy routes to a single cluster).
fn udp_listener(listener: &mut Listener, forward: &ir::L4Forward) {
    let cluster = forward
        .backends
        .first()
        .map_or(INVALID_BACKEND, |b| b.cluster.as_str());
    let action = TypedExtensionConfig {
        name: UDP_ROUTE_ACTION.to_string(),
        typed_config: Some(pack(&UdpRoute {
            cluster: cluster.to_string(),
        })),
    };
    let proxy = UdpProxyConfig {
        stat_prefix: listener.name.clone(),
        route_specifier: Some(udp_proxy_config::RouteSpecifier::Matcher(Matcher {
            on_no_match: Some(Box::new(OnMatch {
                on_match: Some(on_match::OnMatch::Action(action)),
                ..Default::default()
            })),
            ..Default::default()
        })),
        ..Default::default()
    };
    for a in std::iter::once(&mut listener.address).chain(
        listener
            .additional_addresses
            .iter_mut()
            .map(|a| &mut a.address),
    ) {
        if let Some(Address {
            address: Some(address::Address::SocketAddress(s)),
        }) = a
        {
            s.protocol = socket_address::Protocol::Udp as i32;
        }
    }
    listener.udp_listener_config = Some(UdpListenerConfig::default());
    listener.listener_filters = vec![ListenerFilter {
        name: UDP_PROXY.to_string(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(pack(&proxy))),
        ..Default::default()
    }];
}

/// Client certificates verified against the CAs (an SDS secret; the policy
/// stays here, Envoy merges the two). AllowInsecureFallback: the certificate is
/// still asked for (Envoy sends a CertificateRequest whenever it has CAs), but
/// one that does not verify is let through, as is none.
fn client_validation(v: &ir::ClientValidation) -> ValidationContextType {
    ValidationContextType::CombinedValidationContext(CombinedCertificateValidationContext {
        default_validation_context: Some(CertificateValidationContext {
            trust_chain_verification: if v.allow_insecure_fallback {
                TrustChainVerification::AcceptUntrusted as i32
            } else {
                TrustChainVerification::VerifyTrustChain as i32
            },
            ..Default::default()
        }),
        validation_context_sds_secret_config: Some(secret::sds(secret::ca_bundle_name(
            &v.trusted_ca,
        ))),
        ..Default::default()
    })
}

/// The object that owns a TLS chain (and what it names): a TLS route its own
/// chain (`<listener>/<route key>`), the Gateway ([`OWN`]) every other.
pub fn chain_owner(chain: &ir::TlsChain) -> &str {
    chain.listener.split_once('/').map_or(OWN, |(_, key)| key)
}

/// The HTTP connection manager: codec AUTO (HTTP/1.1, and h2c with prior
/// knowledge, which gRPC clients send to plain-text ports), websocket upgrades,
/// the CORS filter (policies are per route, see `cors.rs`), routes from RDS. We are the edge, so the peer's address is the client's
/// (`use_remote_address`): it is appended to `x-forwarded-for`, and `x-envoy-*`
/// headers from outside are dropped instead of steering Envoy.
pub fn http_connection_manager(
    stat_prefix: &str,
    route_table: &str,
    log: AccessLog,
) -> HttpConnectionManager {
    let mut hcm = HttpConnectionManager {
        codec_type: CodecType::Auto as i32,
        stat_prefix: stat_prefix.to_string(),
        use_remote_address: Some(BoolValue { value: true }),
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            config_source: Some(ads_config_source()),
            route_config_name: route_table.to_string(),
        })),
        // CORS first: it answers preflights for routes with a CORS policy and
        // does nothing on the others.
        http_filters: vec![
            HttpFilter {
                name: crate::cors::FILTER.to_string(),
                config_type: Some(http_filter::ConfigType::TypedConfig(
                    crate::cors::filter_config(),
                )),
                ..Default::default()
            },
            HttpFilter {
                name: ROUTER.to_string(),
                config_type: Some(http_filter::ConfigType::TypedConfig(pack(
                    &Router::default(),
                ))),
                ..Default::default()
            },
        ],
        upgrade_configs: vec![UpgradeConfig {
            upgrade_type: "websocket".to_string(),
            ..Default::default()
        }],
        access_log: log.http(),
        ..Default::default()
    };
    crate::edge::limit(&mut hcm);
    hcm
}

/// The connection manager of `table`: its listeners' pre-routing filters
/// first (off but where a virtual host turns them on, see `ext_authz.rs`).
fn hcm_filter(stat_prefix: &str, table: &ir::RouteTable, log: AccessLog) -> Filter {
    let mut hcm = http_connection_manager(stat_prefix, &table.name, log);
    let pre_routing = crate::ext_authz::http_filters(table);
    hcm.http_filters.splice(0..0, pre_routing);
    // Just before the router: the session picks among the endpoints of the
    // cluster the route chose.
    if let Some(session) = crate::stateful_session::http_filter(table) {
        let router = hcm.http_filters.len() - 1;
        hcm.http_filters.insert(router, session);
    }
    Filter {
        name: HTTP_CONNECTION_MANAGER.to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(pack(&hcm))),
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
            client_validation: None,
            route_table: Some(table(&format!("edge_rt_infra_gw_443_{listener}"))),
            forward: None,
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
            forward: None,
        };
        let l = listener(
            &gateway(vec![port.clone()]),
            &port,
            AccessLog::Json,
            ProxyProtocol::Off,
        );
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
        let filters: Vec<&str> = h.http_filters.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            filters,
            vec![crate::cors::FILTER, ROUTER],
            "the router last"
        );
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
            forward: None,
        };
        let l = listener(
            &gateway(vec![port.clone()]),
            &port,
            AccessLog::Json,
            ProxyProtocol::Off,
        );
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
        assert!(common.tls_certificates.is_empty(), "no PEM in the listener");
        assert_eq!(
            common.tls_certificate_sds_secret_configs,
            vec![secret::sds("edge_cert_infra_cert".into())]
        );
    }

    #[test]
    fn a_tls_route_owns_its_chain_and_the_gateway_the_others() {
        assert_eq!(chain_owner(&chain("https", &[])), OWN);
        let tls_route = chain("tls/TLSRoute/app/echo", &["echo.example.com"]);
        assert_eq!(chain_owner(&tls_route), "TLSRoute/app/echo");
    }
}
