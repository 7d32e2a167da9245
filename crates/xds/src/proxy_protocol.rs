//! PROXY protocol (v1 and v2) on every TCP listener, for an edge behind a load
//! balancer that prepends it (AWS NLB, GCP, HAProxy): Envoy reads the header
//! before anything else (before TLS inspection) and takes the client address
//! from it, so access logs, `x-forwarded-for` and client-IP matching see the
//! client rather than the load balancer.
//!
//! ```text
//!  client ─► load balancer ─"PROXY TCP4 <client> …"─► Envoy listener
//!                                                      proxy_protocol ─► tls_inspector ─► chains
//! ```
//!
//! Required, never optional: a connection without the header is closed. Any
//! client that reaches Envoy's ports directly could claim any address in a
//! header of its own, so only the load balancer may reach them (deploy/README.md).
//! UDP listeners are left alone (the header is a TCP stream's prefix).

use crate::any::pack;
use envoy_types::pb::envoy::config::listener::v3::{ListenerFilter, listener_filter};
use envoy_types::pb::envoy::extensions::filters::listener::proxy_protocol::v3::ProxyProtocol as Filter;

const PROXY_PROTOCOL: &str = "envoy.filters.listener.proxy_protocol";

/// Whether Envoy's listeners expect a PROXY protocol header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ProxyProtocol {
    /// Connections come straight from clients (the default).
    #[default]
    Off,
    /// Every TCP connection starts with a PROXY protocol v1 or v2 header.
    Required,
}

/// The listener filter that reads the header (both versions), first in line.
pub(crate) fn listener_filter() -> ListenerFilter {
    ListenerFilter {
        name: PROXY_PROTOCOL.to_string(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(pack(&Filter {
            stat_prefix: "edge".to_string(),
            ..Default::default()
        }))),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AccessLog;
    use crate::listener::listener;
    use aether_ir as ir;

    fn port(protocol: ir::PortProtocol) -> ir::Port {
        let forward = ir::L4Forward {
            route: "UDPRoute/infra/dns".into(),
            backends: vec![],
            invalid_weight: 0,
        };
        ir::Port {
            port: 8000,
            protocol,
            listener_name: "edge_ls_infra_gw_8000".into(),
            route_table: None,
            tls_chains: vec![],
            forward: (protocol != ir::PortProtocol::Http).then_some(forward),
        }
    }

    /// The names of `port`'s listener filters, PROXY protocol `proxy`.
    fn filters(protocol: ir::PortProtocol, proxy: ProxyProtocol) -> Vec<String> {
        let port = port(protocol);
        let gateway = ir::Gateway {
            namespace: "infra".into(),
            name: "gw".into(),
            addresses: vec!["10.0.0.1".into()],
            ports: vec![port.clone()],
        };
        let l = listener(&gateway, &port, AccessLog::Json, proxy);
        l.listener_filters.into_iter().map(|f| f.name).collect()
    }

    #[test]
    fn the_header_is_read_first_on_every_tcp_listener_and_never_on_udp() {
        use ir::PortProtocol::{Http, Https, Tcp, Tls, Udp};
        for protocol in [Http, Tcp] {
            assert_eq!(filters(protocol, ProxyProtocol::Required), [PROXY_PROTOCOL]);
            assert!(filters(protocol, ProxyProtocol::Off).is_empty());
        }
        for protocol in [Https, Tls] {
            let inspector = "envoy.filters.listener.tls_inspector";
            let with = filters(protocol, ProxyProtocol::Required);
            assert_eq!(with, [PROXY_PROTOCOL, inspector], "before TLS inspection");
            assert_eq!(filters(protocol, ProxyProtocol::Off), [inspector]);
        }
        let udp = filters(Udp, ProxyProtocol::Required);
        assert!(!udp.iter().any(|f| f == PROXY_PROTOCOL), "{udp:?}");
    }
}
