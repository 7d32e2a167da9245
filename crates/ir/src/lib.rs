//! The intermediate representation between Gateway API semantics and Envoy.
//!
//! Translation (`aether-gateway`) produces an [`Ir`]; building (`aether-xds`) turns it
//! into Envoy resources. Everything Gateway API decides (which routes attach where,
//! hostname intersection, precedence order, resolved redirect ports, backend weights)
//! is already decided here, so the builder is a plain mapping.
//!
//! ```text
//!  Ir ─┬─ Gateway (ns/name) ── Port (80, HTTP) ── RouteTable ── VirtualHost* ── Route*
//!      │                    ├─ Port (443, HTTPS|TLS) ─ TlsChain* (SNI, certs?) ─┬─ RouteTable
//!      │                    │                                                    └─ L4Forward
//!      │                    └─ Port (9000, TCP|UDP) ── L4Forward (weighted clusters)
//!      └─ Cluster* (one per Service port, shared by every Gateway that routes to it)
//! ```
//!
//! Every collection is sorted (or kept in a meaningful order, like routes in
//! precedence order), so the same input always yields the same bytes downstream.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

#[cfg(feature = "fixtures")]
pub mod fixtures;
#[cfg(feature = "fuzz")]
pub mod fuzz;
pub mod gate;
pub mod kind;
pub mod names;
pub mod untrusted;

pub use gate::{AckState, Pending, Rejection, Served};
pub use kind::{Kind, KindSpec, RouteKind, UnknownKind};

/// A namespaced Kubernetes object, ordered namespace first.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
pub struct ObjectRef {
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Everything one data plane serves.
///
/// Gateways and clusters are shared (`Arc`): an IR computed from another
/// shares every piece an edit did not touch, so copying and comparing IRs
/// costs what changed, not the size of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Ir {
    /// Sorted by (namespace, name). Only Gateways that are served are here; the
    /// status plan says why any other Gateway of our class is not.
    pub gateways: Vec<Arc<Gateway>>,
    /// Sorted by name. Shared across Gateways.
    pub clusters: Vec<Arc<Cluster>>,
}

impl Ir {
    /// An IR of these Gateways and clusters, each shared by nothing else yet.
    pub fn new(gateways: Vec<Gateway>, clusters: Vec<Cluster>) -> Ir {
        Ir {
            gateways: gateways.into_iter().map(Arc::new).collect(),
            clusters: clusters.into_iter().map(Arc::new).collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Gateway {
    pub namespace: String,
    pub name: String,
    /// IP addresses the listeners bind on (sorted, deduplicated, at least one).
    pub addresses: Vec<String>,
    /// One entry per distinct (listener port, transport), sorted by (port, protocol):
    /// TCP 53 and UDP 53 are two ports.
    pub ports: Vec<Port>,
}

impl Gateway {
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(&self.namespace, &self.name)
    }
}

/// One Envoy listener: every Gateway listener on this port merged.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Port {
    /// The port Envoy binds (in static mode, the Gateway listener port).
    pub port: u16,
    pub protocol: PortProtocol,
    /// The Envoy listener name (see [`names::listener`]).
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

/// PEM CA certificates, and the ConfigMaps they were read from: its identity,
/// which names the SDS secret Envoy gets it as (see [`names::ca_bundle`]), so
/// a changed bundle from the same ConfigMaps changes that secret alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CaBundle {
    /// The ConfigMaps whose `ca.crt` make up `pem`, in order.
    pub sources: Vec<ObjectRef>,
    pub pem: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Certificate {
    /// The Secret, as `namespace/name`: its identity, which names the SDS
    /// secret Envoy gets it as (see [`names::certificate`]).
    pub secret: String,
    /// PEM certificate chain.
    pub certificate_chain: String,
    /// PEM private key.
    pub private_key: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RouteTable {
    /// The RDS resource name (see [`names::route_table`]).
    pub name: String,
    /// Sorted by name. Exactly one has domain `*` (hostname-less routes and the
    /// 404 default), always present, possibly with no routes.
    pub virtual_hosts: Vec<VirtualHost>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VirtualHost {
    /// Unique within the route table; the (lower-cased) domain itself.
    pub name: String,
    /// Lower-cased, unique across the route table. `*.example.com` is a suffix
    /// wildcard that spans labels, as Envoy matches it.
    pub domains: Vec<String>,
    /// In Gateway API precedence order across every route sharing this virtual
    /// host: Envoy takes the first route that matches.
    pub routes: Vec<Route>,
    /// The pre-routing filters of the Gateway listener this virtual host serves
    /// (`filters.requests`), in list order: each runs on every request here
    /// before any route is matched, and on no other virtual host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_routing: Vec<ExternalAuth>,
}

/// A listener's pre-routing ExternalAuth filter: every request is checked by an
/// authorization server first (Envoy's ext_authz), and refused unless it says yes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExternalAuth {
    pub protocol: ExternalAuthProtocol,
    /// The authorization server. `None`: there is none to ask (its backendRef
    /// does not resolve, or the listener asked for a filter we do not have):
    /// every request is refused with a 500, never let through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// HTTP: prepended to the request path sent to the server.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path_prefix: String,
    /// Request headers sent to the server, lower-cased: HTTP, besides those
    /// always sent (Host, Method, Path, Content-Length, Authorization); gRPC,
    /// empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_headers: Vec<String>,
    /// HTTP: headers of the server's answer copied into the request, lower-cased;
    /// empty means all but Host and `:authority`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_response_headers: Vec<String>,
    /// Bytes of the request body sent along; 0: none. A longer body is refused.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_body_bytes: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ExternalAuthProtocol {
    #[serde(rename = "HTTP")]
    Http,
    #[serde(rename = "GRPC")]
    Grpc,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Route {
    /// Stable, readable, unique within the virtual host:
    /// `<kind>/<namespace>/<name>/rule/<i>/match/<j>`.
    pub name: String,
    #[serde(rename = "match")]
    pub matcher: RouteMatch,
    pub action: RouteAction,
    #[serde(default, skip_serializing_if = "HeaderModifier::is_empty")]
    pub request_headers: HeaderModifier,
    #[serde(default, skip_serializing_if = "HeaderModifier::is_empty")]
    pub response_headers: HeaderModifier,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RouteMatch {
    pub path: PathMatch,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Header names lower-cased; only the first of duplicate names is kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query_params: Vec<QueryParamMatch>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PathMatch {
    Exact(String),
    /// Element-wise prefix, no trailing slash (except the root prefix `/`):
    /// `/abc` matches `/abc`, `/abc/`, `/abc/def`, not `/abcd`.
    Prefix(String),
    RegularExpression(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StringMatch {
    Exact(String),
    RegularExpression(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HeaderMatch {
    pub name: String,
    pub value: StringMatch,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct QueryParamMatch {
    pub name: String,
    pub value: StringMatch,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Header {
    pub name: String,
    pub value: String,
}

/// RequestHeaderModifier / ResponseHeaderModifier, merged over the rule's filters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct HeaderModifier {
    /// Overwrite (or add when absent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<Header>,
    /// Append to any existing value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<Header>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

impl HeaderModifier {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RouteAction {
    Forward(Forward),
    Redirect(Redirect),
    /// A fixed answer, e.g. 500 for a rule whose backends are all invalid.
    DirectResponse {
        status: u16,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Forward {
    /// Valid backends with their weights, in backendRefs order. May be empty only
    /// when `invalid_weight > 0`.
    pub backends: Vec<WeightedBackend>,
    /// The weight share of invalid backendRefs: that share of requests answers 500.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub invalid_weight: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<UrlRewrite>,
    #[serde(default, skip_serializing_if = "Timeouts::is_empty")]
    pub timeouts: Timeouts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    /// Copies of each request sent to these clusters (answers discarded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<Box<Cors>>,
    /// Requests of one session go to the endpoint the first was sent to (the
    /// XBackend's `sessionPersistence`; its rule has that one backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionPersistence>,
}

/// How a session is recognized, so its requests reach the same endpoint
/// (Envoy's stateful session: the endpoint's address travels with the client).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SessionPersistence {
    /// A cookie Envoy sets on the first answer.
    Cookie {
        name: String,
        path: String,
        /// The cookie's Max-Age; `None`: a session cookie (no expiry).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_seconds: Option<u64>,
    },
    /// A header Envoy sets on the first answer and the client sends back.
    Header { name: String },
}

fn is_false(v: &bool) -> bool {
    !*v
}

/// HTTPRoute rule `timeouts`, in milliseconds; `Some(0)` disables that timeout.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Timeouts {
    /// The whole request, client to answer (Envoy's route timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_ms: Option<u64>,
    /// One request from the Gateway to a backend (Envoy's per-try timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_request_ms: Option<u64>,
}

impl Timeouts {
    pub fn is_empty(&self) -> bool {
        self.request_ms.is_none() && self.backend_request_ms.is_none()
    }
}

/// HTTPRoute rule `retry`: a backend request that answers one of `codes`, fails
/// to connect or is reset (or passes the backend timeout) is sent again.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Retry {
    /// Retries after the first try; `None`: Envoy's default (1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// The least wait before a retry, in milliseconds; `None`: Envoy's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_ms: Option<u64>,
    /// Sorted, deduplicated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<u32>,
}

/// A RequestMirror filter: a cluster, and the share of requests copied to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Mirror {
    pub cluster: String,
    /// Mirrored share as numerator / denominator; `None`: every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<(u32, u32)>,
}

/// A CORS filter: what the Gateway answers to a preflight and adds to the
/// answers of cross-origin requests.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Cors {
    /// Origins as given: `*`, `scheme://host[:port]`, or with a `*` label
    /// wildcard in the host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_origins: Vec<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_credentials: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_methods: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_seconds: Option<u32>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WeightedBackend {
    /// A [`Cluster::name`] present in [`Ir::clusters`].
    pub cluster: String,
    pub weight: u32,
    /// The backendRef's own RequestHeaderModifier / ResponseHeaderModifier.
    #[serde(default, skip_serializing_if = "HeaderModifier::is_empty")]
    pub request_headers: HeaderModifier,
    #[serde(default, skip_serializing_if = "HeaderModifier::is_empty")]
    pub response_headers: HeaderModifier,
}

impl WeightedBackend {
    pub fn new(cluster: impl Into<String>, weight: u32) -> Self {
        Self {
            cluster: cluster.into(),
            weight,
            request_headers: HeaderModifier::default(),
            response_headers: HeaderModifier::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UrlRewrite {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathRewrite>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PathRewrite {
    ReplaceFullPath(String),
    /// Replace the matched prefix (the route's `PathMatch::Prefix`) with this value.
    /// Replacing with `/` must not produce `//`.
    ReplacePrefixMatch(String),
}

/// A redirect with the spec's port rules already applied.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Redirect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// The port the Location carries. `None` means the default port of the
    /// effective scheme (80 for http, 443 for https): Location carries no port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathRewrite>,
    /// 301, 302, 303, 307 or 308.
    pub status_code: u16,
}

/// One upstream: a Service port, its endpoints taken from EndpointSlices.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cluster {
    /// See [`names::cluster`].
    pub name: String,
    pub service: ObjectRef,
    /// The Service port (not the target port).
    pub port: u16,
    pub protocol: UpstreamProtocol,
    /// Ready endpoints, sorted by (address, port), deduplicated.
    pub endpoints: Vec<Endpoint>,
    /// TLS to the endpoints (a BackendTLSPolicy, an XBackend's `tls`); `None`:
    /// plain text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<UpstreamTls>,
    /// What the cluster stands for: a Service port, or an XBackend (then
    /// `service` is the XBackend and `port` its `spec.port.number`).
    #[serde(default, skip_serializing_if = "BackendKind::is_service")]
    pub backend_kind: BackendKind,
    /// Where Envoy learns the endpoints.
    #[serde(default, skip_serializing_if = "Discovery::is_eds")]
    pub discovery: Discovery,
    /// The XBackend's `sessionPersistence`, for the routes that forward here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionPersistence>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BackendKind {
    #[default]
    Service,
    XBackend,
}

impl BackendKind {
    pub fn is_service(&self) -> bool {
        *self == BackendKind::Service
    }
}

/// Where a cluster's endpoints come from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Discovery {
    /// `endpoints`, sent over EDS.
    #[default]
    Eds,
    /// A DNS name Envoy resolves itself, at the cluster's `port` (an
    /// ExternalHostname XBackend); `endpoints` is empty and there is no EDS
    /// resource.
    Dns { hostname: String },
}

impl Discovery {
    pub fn is_eds(&self) -> bool {
        *self == Discovery::Eds
    }
}

/// TLS from Envoy to a backend, verified.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UpstreamTls {
    /// The server name sent (SNI).
    pub sni: String,
    pub trusted_ca: TrustedCa,
    /// The backend certificate must carry one of these.
    pub subject_alt_names: Vec<SubjectAltName>,
    /// Presented to the backend (the Gateway's `spec.tls.backend`, an
    /// XBackend's `clientCertificateRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<Certificate>,
    /// ALPN protocols offered, in order (an XBackend's protocol); empty: `h2`
    /// for an HTTP/2 cluster, none for HTTP/1.1 (a BackendTLSPolicy).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alpn: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TrustedCa {
    /// PEM CA certificates from ConfigMaps.
    Pem(CaBundle),
    /// A CA bundle file on the Envoy host (the system's).
    File(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SubjectAltName {
    Dns(String),
    Uri(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum UpstreamProtocol {
    #[serde(rename = "HTTP/1.1")]
    Http1,
    /// HTTP/2 without TLS (prior knowledge): `appProtocol: kubernetes.io/h2c` and gRPC.
    #[serde(rename = "h2c")]
    H2c,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Endpoint {
    pub address: String,
    pub port: u16,
    /// Load-balancing weight (0: unweighted). Only the clusters that stand for a
    /// UDPRoute's several weighted backends carry weights.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight: u32,
}
