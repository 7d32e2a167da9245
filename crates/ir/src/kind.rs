//! Kinds as a type: every Kubernetes kind the controller reads, and the one
//! table saying what each is.
//!
//! ```text
//!  "HTTPRoute" ──FromStr──► Kind::HttpRoute ──spec()──► KindSpec { name, group, plural,
//!        ▲     (unknown: UnknownKind)  ▲                  versions, namespaced, status }
//!        └──────── as_str() ───────────┤                        │
//!                         RouteKind ───┘ (HTTP, GRPC, TLS,      ▼
//!                                         TCP, UDP)     store, watches, discovery,
//!                                                       status patches, the loader
//! ```
//!
//! A kind's name appears in production code here and in serialization only;
//! everything else asks [`Kind::spec`]. Variants are declared in the order of
//! their names, so sorting by `Kind` sorts by name, as sorting the strings did.

use std::fmt;
use std::str::FromStr;

/// The Gateway API group.
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// The Gateway API's experimental group (`XBackend`).
pub const X_GATEWAY_GROUP: &str = "gateway.networking.x-k8s.io";

/// The versions of [`GATEWAY_GROUP`] an API server may serve a kind at that we
/// read, most preferred first (Kubernetes version priority): our v1 types decode
/// each of them once what older versions leave optional is filled in.
pub const GATEWAY_VERSIONS: &[&str] = &["v1", "v1beta1", "v1alpha3", "v1alpha2"];

/// The versions of [`X_GATEWAY_GROUP`] kinds we read.
pub const X_GATEWAY_VERSIONS: &[&str] = &["v1alpha1"];

/// A Kubernetes kind the store holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    BackendTlsPolicy,
    ClusterTrustBundle,
    ConfigMap,
    EndpointSlice,
    GrpcRoute,
    Gateway,
    GatewayClass,
    HttpRoute,
    ListenerSet,
    Namespace,
    ReferenceGrant,
    Secret,
    Service,
    TcpRoute,
    TlsRoute,
    UdpRoute,
    XBackend,
}

/// What the store, watches, discovery, status writer and loader need to know
/// of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindSpec {
    pub kind: Kind,
    /// The kind as the API spells it (`HTTPRoute`).
    pub name: &'static str,
    /// Its API group; empty for the core group.
    pub group: &'static str,
    /// The resource name in API paths (`httproutes`).
    pub plural: &'static str,
    /// The versions a manifest may carry it at (the standalone loader).
    pub versions: &'static [&'static str],
    /// Namespaced, or cluster-scoped (keyed with an empty namespace).
    pub namespaced: bool,
    /// We write its status.
    pub status: bool,
}

const fn spec(
    kind: Kind,
    name: &'static str,
    group: &'static str,
    plural: &'static str,
    versions: &'static [&'static str],
    namespaced: bool,
    status: bool,
) -> KindSpec {
    KindSpec {
        kind,
        name,
        group,
        plural,
        versions,
        namespaced,
        status,
    }
}

const GW: &str = GATEWAY_GROUP;
const NS: bool = true;
const CLUSTER: bool = false;
const STATUS: bool = true;
const NO_STATUS: bool = false;

/// The table of kinds, in [`Kind`]'s order (one row per variant).
#[rustfmt::skip]
const TABLE: [KindSpec; 17] = [
    spec(Kind::BackendTlsPolicy, "BackendTLSPolicy", GW, "backendtlspolicies", &["v1", "v1alpha3"], NS, STATUS),
    spec(Kind::ClusterTrustBundle, "ClusterTrustBundle", "certificates.k8s.io", "clustertrustbundles", &["v1beta1", "v1alpha1"], CLUSTER, NO_STATUS),
    spec(Kind::ConfigMap, "ConfigMap", "", "configmaps", &["v1"], NS, NO_STATUS),
    spec(Kind::EndpointSlice, "EndpointSlice", "discovery.k8s.io", "endpointslices", &["v1"], NS, NO_STATUS),
    spec(Kind::GrpcRoute, "GRPCRoute", GW, "grpcroutes", &["v1"], NS, STATUS),
    spec(Kind::Gateway, "Gateway", GW, "gateways", &["v1", "v1beta1"], NS, STATUS),
    spec(Kind::GatewayClass, "GatewayClass", GW, "gatewayclasses", &["v1", "v1beta1"], CLUSTER, STATUS),
    spec(Kind::HttpRoute, "HTTPRoute", GW, "httproutes", &["v1", "v1beta1"], NS, STATUS),
    spec(Kind::ListenerSet, "ListenerSet", GW, "listenersets", &["v1"], NS, STATUS),
    spec(Kind::Namespace, "Namespace", "", "namespaces", &["v1"], CLUSTER, NO_STATUS),
    spec(Kind::ReferenceGrant, "ReferenceGrant", GW, "referencegrants", &["v1", "v1beta1"], NS, NO_STATUS),
    spec(Kind::Secret, "Secret", "", "secrets", &["v1"], NS, NO_STATUS),
    spec(Kind::Service, "Service", "", "services", &["v1"], NS, NO_STATUS),
    spec(Kind::TcpRoute, "TCPRoute", GW, "tcproutes", &["v1", "v1alpha2"], NS, STATUS),
    spec(Kind::TlsRoute, "TLSRoute", GW, "tlsroutes", &["v1", "v1alpha3", "v1alpha2"], NS, STATUS),
    spec(Kind::UdpRoute, "UDPRoute", GW, "udproutes", &["v1", "v1alpha2"], NS, STATUS),
    spec(Kind::XBackend, "XBackend", X_GATEWAY_GROUP, "xbackends", &["v1alpha1"], NS, STATUS),
];

impl Kind {
    /// Every kind, sorted by name.
    pub const ALL: [Kind; 17] = {
        let mut all = [Kind::BackendTlsPolicy; 17];
        let mut i = 0;
        while i < TABLE.len() {
            all[i] = TABLE[i].kind;
            i += 1;
        }
        all
    };

    /// This kind's row of the table.
    pub const fn spec(self) -> &'static KindSpec {
        &TABLE[self as usize]
    }

    /// The kind as the API spells it.
    pub const fn as_str(self) -> &'static str {
        self.spec().name
    }

    /// Of the Gateway API (either group): discovered, watched at a served version.
    pub fn is_gateway_api(self) -> bool {
        matches!(self.spec().group, GATEWAY_GROUP | X_GATEWAY_GROUP)
    }

    /// The Gateway API kinds, sorted by name.
    pub fn gateway_api() -> impl Iterator<Item = Kind> {
        Kind::ALL.into_iter().filter(|k| k.is_gateway_api())
    }

    /// The kinds we write status for, sorted by name.
    pub fn with_status() -> impl Iterator<Item = Kind> {
        Kind::ALL.into_iter().filter(|k| k.spec().status)
    }

    /// The versions an API server may serve this kind at that we read, most
    /// preferred first (empty outside the Gateway API: those are read at v1).
    pub fn served_versions(self) -> &'static [&'static str] {
        match self.spec().group {
            GATEWAY_GROUP => GATEWAY_VERSIONS,
            X_GATEWAY_GROUP => X_GATEWAY_VERSIONS,
            _ => &[],
        }
    }

    /// `group/version` (`version` alone for the core group).
    pub fn api_version(self, version: &str) -> String {
        match self.spec().group {
            "" => version.to_string(),
            group => format!("{group}/{version}"),
        }
    }

    /// The version of `api_version` when it is one a manifest may carry this
    /// kind at.
    pub fn manifest_version(self, api_version: &str) -> Option<&'static str> {
        let spec = self.spec();
        let version = match spec.group {
            "" => api_version,
            group => api_version.strip_prefix(group)?.strip_prefix('/')?,
        };
        spec.versions.iter().find(|v| **v == version).copied()
    }

    /// The route kind this is, if it is one.
    pub const fn route(self) -> Option<RouteKind> {
        match self {
            Kind::GrpcRoute => Some(RouteKind::Grpc),
            Kind::HttpRoute => Some(RouteKind::Http),
            Kind::TcpRoute => Some(RouteKind::Tcp),
            Kind::TlsRoute => Some(RouteKind::Tls),
            Kind::UdpRoute => Some(RouteKind::Udp),
            _ => None,
        }
    }
}

/// A kind name that is not one of [`Kind`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKind(pub String);

impl fmt::Display for UnknownKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown kind {:?}", self.0)
    }
}

impl std::error::Error for UnknownKind {}

impl FromStr for Kind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TABLE
            .iter()
            .find(|spec| spec.name == s)
            .map(|spec| spec.kind)
            .ok_or_else(|| UnknownKind(s.to_string()))
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A route kind: each has a `status.parents` list and attaches to listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteKind {
    Grpc,
    Http,
    Tcp,
    Tls,
    Udp,
}

impl RouteKind {
    /// Every route kind, sorted by name.
    pub const ALL: [RouteKind; 5] = [
        RouteKind::Grpc,
        RouteKind::Http,
        RouteKind::Tcp,
        RouteKind::Tls,
        RouteKind::Udp,
    ];

    pub const fn kind(self) -> Kind {
        match self {
            RouteKind::Grpc => Kind::GrpcRoute,
            RouteKind::Http => Kind::HttpRoute,
            RouteKind::Tcp => Kind::TcpRoute,
            RouteKind::Tls => Kind::TlsRoute,
            RouteKind::Udp => Kind::UdpRoute,
        }
    }

    /// The kind as the API spells it (`HTTPRoute`).
    pub const fn as_str(self) -> &'static str {
        self.kind().as_str()
    }
}

impl From<RouteKind> for Kind {
    fn from(kind: RouteKind) -> Kind {
        kind.kind()
    }
}

impl FromStr for RouteKind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse::<Kind>()
            .ok()
            .and_then(Kind::route)
            .ok_or_else(|| UnknownKind(s.to_string()))
    }
}

impl fmt::Display for RouteKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for RouteKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_one_row_per_kind_in_name_order() {
        for (i, spec) in TABLE.iter().enumerate() {
            assert_eq!(spec.kind as usize, i, "{} is out of place", spec.name);
            assert_eq!(spec.kind.spec(), spec);
        }
        let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "sorting by Kind sorts by name");
    }

    #[test]
    fn names_round_trip_and_an_unknown_kind_is_an_error() {
        for kind in Kind::ALL {
            assert_eq!(kind.as_str().parse::<Kind>(), Ok(kind));
        }
        for kind in RouteKind::ALL {
            assert_eq!(kind.as_str().parse::<RouteKind>(), Ok(kind));
            assert_eq!(Kind::from(kind).route(), Some(kind));
        }
        assert_eq!(
            "HttpRoute".parse::<Kind>(),
            Err(UnknownKind("HttpRoute".into()))
        );
        assert!("Gateway".parse::<RouteKind>().is_err());
        assert_eq!(Kind::ALL.iter().filter_map(|k| k.route()).count(), 5);
    }

    #[test]
    fn api_versions_by_group() {
        assert_eq!(
            Kind::TcpRoute.api_version("v1alpha2"),
            "gateway.networking.k8s.io/v1alpha2"
        );
        assert_eq!(Kind::Service.api_version("v1"), "v1");
        assert_eq!(
            Kind::TlsRoute.manifest_version("gateway.networking.k8s.io/v1alpha3"),
            Some("v1alpha3")
        );
        assert_eq!(
            Kind::GrpcRoute.manifest_version("gateway.networking.k8s.io/v1beta1"),
            None
        );
        assert_eq!(
            Kind::XBackend.manifest_version("gateway.networking.k8s.io/v1alpha1"),
            None
        );
        assert_eq!(Kind::Service.manifest_version("v1"), Some("v1"));
        assert_eq!(Kind::gateway_api().count(), 11);
        assert_eq!(Kind::with_status().count(), 10);
    }
}
