//! A Gateway's ports: one Envoy listener each, every Gateway listener on the
//! port merged; on an HTTPS or TLS port, a TLS chain per listener (and SNI),
//! each with its certificates and its route table or L4 forward.

use crate::certificate::{CaBundle, Certificate};
use crate::route::{RouteTable, WeightedBackend};
use crate::skip::{is_false, is_zero};
use serde::{Deserialize, Serialize};

/// One Envoy listener: every Gateway listener on this port merged.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Port {
    /// The port Envoy binds (in static mode, the Gateway listener port).
    pub port: u16,
    pub protocol: PortProtocol,
    /// The Envoy listener name (see [`names::listener`](crate::names::listener)).
    pub listener_name: String,
    /// HTTP: one route table shared by every HTTP listener on the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_table: Option<RouteTable>,
    /// HTTPS: one filter chain per Gateway listener, selected by SNI. Sorted by
    /// listener name; a chain with no server names is the catch-all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tls_chains: Vec<TlsChain>,
    /// TCP and UDP: where connections (datagram sessions) go. `None` on such a
    /// port: no route is served, connections are closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward: Option<L4Forward>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PortProtocol {
    #[serde(rename = "HTTP")]
    Http,
    #[serde(rename = "HTTPS")]
    Https,
    /// TLS listeners (passthrough or terminate), possibly mixed with HTTPS
    /// listeners on the same port: every chain picked by SNI.
    #[serde(rename = "TLS")]
    Tls,
    #[serde(rename = "TCP")]
    Tcp,
    #[serde(rename = "UDP")]
    Udp,
}

impl PortProtocol {
    /// Does this port listen on UDP (rather than TCP)?
    pub fn is_udp(self) -> bool {
        self == PortProtocol::Udp
    }
}

/// Where a TCP connection, a TLS stream or a UDP session is proxied: one route's
/// backends, weighted.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct L4Forward {
    /// The route served, `<kind>/<namespace>/<name>`.
    pub route: String,
    /// Valid backends with their weights, in backendRefs order.
    pub backends: Vec<WeightedBackend>,
    /// The weight share of invalid backendRefs: that share of connections is
    /// closed. No valid backend and no invalid weight: every connection is closed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub invalid_weight: u32,
}

/// A filter chain selected by SNI: for an HTTPS listener (TLS terminated, then
/// a route table), a TLS listener in Terminate mode (TLS terminated, then a TCP
/// proxy) or in Passthrough mode (no certificates: the TLS stream is proxied).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TlsChain {
    /// The Gateway listener (sectionName) this chain serves; for TLS listeners,
    /// `<listener>/<route kind>/<namespace>/<name>` (a chain per route).
    pub listener: String,
    /// SNI names to match (the listener hostname); empty means any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_names: Vec<String>,
    /// Certificates in listener certificateRefs order; empty for passthrough.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificates: Vec<Certificate>,
    /// HTTPS: the client certificates this chain asks for (Gateway `spec.tls.frontend`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_validation: Option<ClientValidation>,
    /// HTTPS: the route table behind the TLS terminator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_table: Option<RouteTable>,
    /// TLS: the TCP proxy behind (or instead of) the TLS terminator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward: Option<L4Forward>,
}

/// Frontend client certificate validation of one HTTPS chain.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClientValidation {
    /// The CA certificates a client certificate must chain to.
    pub trusted_ca: CaBundle,
    /// AllowInsecureFallback: a certificate is asked for, but a client without
    /// one (or with one that does not verify) is let in.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_insecure_fallback: bool,
}
