//! Route tables: virtual hosts, their pre-routing filters, and routes in
//! precedence order, each with its matches and its action (forward to weighted
//! backends, redirect, or a fixed answer).

use crate::session::SessionPersistence;
use crate::skip::{is_false, is_zero};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use thin_vec::ThinVec;

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RouteTable {
    /// The RDS resource name (see [`names::route_table`](crate::names::route_table)).
    pub name: String,
    /// Sorted by name. Exactly one has domain `*` (hostname-less routes and the
    /// 404 default), always present, possibly with no routes. Shared (`Arc`),
    /// as routes are: a virtual host none of whose routes changed is the same
    /// allocation in the next IR.
    pub virtual_hosts: Vec<Arc<VirtualHost>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VirtualHost {
    /// Unique within the route table; the (lower-cased) domain itself.
    pub name: String,
    /// Lower-cased, unique across the route table. `*.example.com` is a suffix
    /// wildcard that spans labels, as Envoy matches it.
    pub domains: Vec<String>,
    /// In Gateway API precedence order across every route sharing this virtual
    /// host: Envoy takes the first route that matches. Shared (`Arc`): a
    /// route that did not change is the same allocation in the next IR, which
    /// lets each stage after translate tell it apart by identity.
    pub routes: Vec<Arc<Route>>,
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

impl RouteMatch {
    /// Requests whose path has this prefix, and nothing else asked of them.
    pub fn prefix(prefix: &str) -> RouteMatch {
        RouteMatch {
            path: PathMatch::Prefix(prefix.into()),
            method: None,
            headers: vec![],
            query_params: vec![],
        }
    }
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
    #[serde(default, skip_serializing_if = "ThinVec::is_empty")]
    pub set: ThinVec<Header>,
    /// Append to any existing value.
    #[serde(default, skip_serializing_if = "ThinVec::is_empty")]
    pub add: ThinVec<Header>,
    #[serde(default, skip_serializing_if = "ThinVec::is_empty")]
    pub remove: ThinVec<String>,
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
    // The rare parts are boxed: every route holds a Forward, and few
    // rewrite, retry or keep sessions.
    /// Valid backends with their weights, in backendRefs order. May be empty only
    /// when `invalid_weight > 0`.
    pub backends: Vec<WeightedBackend>,
    /// The weight share of invalid backendRefs: that share of requests answers 500.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub invalid_weight: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<Box<UrlRewrite>>,
    #[serde(default, skip_serializing_if = "Timeouts::is_empty")]
    pub timeouts: Timeouts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Box<Retry>>,
    /// Copies of each request sent to these clusters (answers discarded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<Box<Cors>>,
    /// Requests of one session go to the endpoint the first was sent to (the
    /// XBackend's `sessionPersistence`; its rule has that one backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Box<SessionPersistence>>,
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

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WeightedBackend {
    /// A [`Cluster::name`](crate::Cluster::name) present in [`Ir::clusters`](crate::Ir::clusters).
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
