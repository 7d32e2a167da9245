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
//!
//! The types live by what they hold (`port`: listeners and TLS chains; `route`:
//! route tables; `cluster`: backends; `certificate`, `session`, `object_ref`),
//! all re-exported here.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[cfg(feature = "fixtures")]
pub mod fixtures;
#[cfg(feature = "fuzz")]
pub mod fuzz;
pub mod gate;
pub mod kind;
pub mod names;
pub mod untrusted;

mod certificate;
mod cluster;
mod object_ref;
mod port;
mod route;
mod session;
mod skip;

pub use certificate::{CaBundle, Certificate};
pub use cluster::{
    BackendKind, Cluster, Discovery, Endpoint, EndpointsFrom, SubjectAltName, TrustedCa,
    UpstreamProtocol, UpstreamTls,
};
pub use gate::{AckState, Pending, Rejection, Served};
pub use kind::{Kind, KindSpec, RouteKind, UnknownKind};
pub use object_ref::ObjectRef;
pub use port::{ClientValidation, L4Forward, Port, PortProtocol, TlsChain};
pub use route::{
    Cors, ExternalAuth, ExternalAuthProtocol, Forward, Header, HeaderMatch, HeaderModifier, Mirror,
    PathMatch, PathRewrite, QueryParamMatch, Redirect, Retry, Route, RouteAction, RouteMatch,
    RouteTable, StringMatch, Timeouts, UrlRewrite, VirtualHost, WeightedBackend,
};
pub use session::SessionPersistence;

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
