//! Clusters: one per backend (Service port or XBackend), shared by every
//! Gateway that routes to it, with its endpoints, upstream protocol and TLS.

use crate::certificate::{CaBundle, Certificate};
use crate::object_ref::ObjectRef;
use crate::session::SessionPersistence;
use crate::skip::is_zero;
use serde::{Deserialize, Serialize};

/// One upstream: a Service port, its endpoints taken from EndpointSlices.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cluster {
    /// See [`names::cluster`](crate::names::cluster).
    pub name: String,
    pub service: ObjectRef,
    /// The Service port (not the target port).
    pub port: u16,
    pub protocol: UpstreamProtocol,
    /// Ready endpoints, sorted by (address, port), deduplicated.
    pub endpoints: Vec<Endpoint>,
    /// Where [`Cluster::endpoints`] come from. A translation reads
    /// EndpointSlices in its last phase only, from this: a pod's change
    /// costs the clusters of its Service, not the routes that name them.
    #[serde(skip)]
    pub endpoints_from: EndpointsFrom,
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

/// Which EndpointSlices, and which port of theirs, a cluster's endpoints are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum EndpointsFrom {
    /// None: Envoy resolves a hostname (DNS), or there is nothing to reach.
    #[default]
    Nowhere,
    /// The Service's slices, on the slice port named as the Service port is.
    PortNamed { service: ObjectRef, name: String },
    /// The Service's slices, on the slice port of this number (the target
    /// port: an XBackend's Service).
    PortNumbered { service: ObjectRef, port: u16 },
    /// Each backend's endpoints weighted so that the backends' shares are
    /// their weights (one cluster for a UDPRoute's weighted backends).
    Weighted(Vec<(EndpointsFrom, u32)>),
}

impl EndpointsFrom {
    /// Whether these endpoints come from any of `services`' slices.
    pub fn reads(&self, services: &impl Fn(&ObjectRef) -> bool) -> bool {
        match self {
            EndpointsFrom::Nowhere => false,
            EndpointsFrom::PortNamed { service, .. }
            | EndpointsFrom::PortNumbered { service, .. } => services(service),
            EndpointsFrom::Weighted(from) => from.iter().any(|(f, _)| f.reads(services)),
        }
    }
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
