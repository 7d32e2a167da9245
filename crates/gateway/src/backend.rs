//! Resolving a route's backendRefs to clusters with endpoints.
//!
//! ```text
//!  backendRef (Service ns/name, port) ── ReferenceGrant? ── Service.spec.ports[port]
//!      └─► Cluster edge_cl_<ns>_<svc>_<port>
//!            endpoints_from: PortNamed { Service, the Service port's name }
//!            endpoints ◄── filled last (`endpoints.rs`), from the EndpointSlices
//!                          labeled kubernetes.io/service-name=<svc>
//! ```
//!
//! Endpoints come from EndpointSlices, never from selectors or ClusterIPs, so
//! selector-less Services (hand-written slices) and headless Services work alike.
//! Slices are indexed by Service ([`BackendIndex`]), so filling them stays
//! cheap with thousands of Services.

mod endpoints;
mod index;

pub use index::BackendIndex;

use crate::backend_tls::Policies;
use crate::reference_grant::{self, Referent};
use crate::store::Store;
use crate::vocabulary::route;
use crate::xbackend::{self, XBackendModel};
use aether_ir::{Cluster, EndpointsFrom, Kind, ObjectRef, UpstreamProtocol, names};
use gateway_api::apis::experimental::xbackends::XBackend;
use k8s_openapi::api::core::v1::{Service, ServicePort};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Why a backendRef does not resolve; each maps to a route ResolvedRefs reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error(
        "backendRef {0}: kind {1} is not supported (only core Services and gateway.networking.x-k8s.io XBackends)"
    )]
    InvalidKind(String, String),
    #[error("backendRef {0}: {1}")]
    NotFound(String, String),
    #[error("backendRef {0} is not permitted by any ReferenceGrant")]
    RefNotPermitted(String),
    #[error("backendRef {0}: appProtocol {1} is not supported")]
    UnsupportedProtocol(String, String),
    /// The BackendTLSPolicy of the Service port cannot be met: requests that
    /// would go there answer 500 (never plain text, never unverified TLS).
    #[error("backendRef {0}: BackendTLSPolicy {1} cannot be met: {2}")]
    TlsPolicy(String, String, String),
    /// The XBackend's protocol (MCP, or one that does not fit the route kind).
    #[error("backendRef {0}: XBackend protocol {1}: {2}")]
    XBackendProtocol(String, String, String),
    /// The XBackend is not accepted, or its TLS references do not resolve.
    #[error("backendRef {0}: XBackend cannot be used: {1}")]
    XBackendInvalid(String, String),
    /// The XBackend asks for what Envoy cannot do (here).
    #[error("backendRef {0}: XBackend {1}")]
    XBackendUnsupported(String, String),
}

impl BackendError {
    /// The route `ResolvedRefs` reason.
    pub fn reason(&self) -> route::Reason {
        match self {
            BackendError::InvalidKind(..) => route::Reason::InvalidKind,
            BackendError::NotFound(..) => route::Reason::BackendNotFound,
            BackendError::RefNotPermitted(_) => route::Reason::RefNotPermitted,
            BackendError::UnsupportedProtocol(..) => route::Reason::UnsupportedProtocol,
            BackendError::TlsPolicy(..) => route::Reason::InvalidBackendTLSPolicy,
            BackendError::XBackendProtocol(..) => route::Reason::UnsupportedProtocol,
            BackendError::XBackendInvalid(..) => route::Reason::InvalidXBackend,
            BackendError::XBackendUnsupported(..) => route::Reason::UnsupportedValue,
        }
    }
}

/// What a route speaks to its backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Upstream {
    /// HTTP/1.1, or h2c when the Service port's appProtocol says so.
    Http,
    /// gRPC: always h2c.
    Grpc,
    /// A TCP stream (TLSRoute, TCPRoute): appProtocol is not ours to read.
    Tcp,
    /// The stream inside TLS the Gateway terminated (a TLSRoute on a Terminate
    /// listener): like [`Upstream::Tcp`], and re-encrypted to the backend when
    /// a BackendTLSPolicy covers the Service port.
    TlsTerminated,
    /// UDP datagrams (UDPRoute): the Service port must be a UDP port.
    Udp,
}

/// A backendRef as every route kind spells it.
#[derive(Debug, Clone, Copy)]
pub struct BackendRef<'a> {
    pub group: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub port: Option<i32>,
}

/// Resolves backendRefs against the store, with EndpointSlices indexed by Service.
pub struct Backends<'a> {
    store: &'a Store,
    index: Arc<BackendIndex>,
    /// Clusters resolved so far, by (Service, port, upstream): the routes that
    /// name one backend share one cluster (with its endpoints) instead of
    /// each holding a copy — at 10,000 routes, megabytes.
    resolved: RefCell<BTreeMap<(ObjectRef, u16, Upstream), Arc<Cluster>>>,
    /// XBackends read so far (`None`: there is none of that name).
    xbackends: RefCell<BTreeMap<ObjectRef, Option<Arc<XBackendModel>>>>,
    /// XBackend clusters resolved so far, by (XBackend, upstream).
    xbackend_clusters: RefCell<BTreeMap<(ObjectRef, Upstream), Arc<Cluster>>>,
    /// ExternalHostname XBackends are served ([`crate::Config::external_hostnames`]).
    external_hostnames: bool,
}

impl<'a> Backends<'a> {
    pub fn new(store: &'a Store) -> Self {
        Backends::with_index(store, Arc::new(BackendIndex::new(store)))
    }

    /// Backends over `store` with an index built from a store whose
    /// EndpointSlices and BackendTLSPolicies are the ones `store` holds.
    pub fn with_index(store: &'a Store, index: Arc<BackendIndex>) -> Self {
        Backends {
            store,
            index,
            resolved: RefCell::new(BTreeMap::new()),
            xbackends: RefCell::new(BTreeMap::new()),
            xbackend_clusters: RefCell::new(BTreeMap::new()),
            external_hostnames: false,
        }
    }

    /// These backends with ExternalHostname XBackends served, or not (the
    /// default; see [`crate::Config::external_hostnames`]).
    pub fn allowing_external_hostnames(self, external_hostnames: bool) -> Self {
        Backends {
            external_hostnames,
            ..self
        }
    }

    /// BackendTLSPolicies, conflicts decided.
    pub fn tls(&self) -> &Policies {
        &self.index.tls
    }

    /// Resolves one backendRef of a route (`route_kind` in `route_ns`; or of a
    /// listener filter, whose holder is a Gateway or ListenerSet). gRPC
    /// routes always speak h2c upstream; UDP routes need a UDP Service port.
    pub fn resolve(
        &self,
        route_kind: impl Into<Kind>,
        route_ns: &str,
        r: BackendRef<'_>,
        upstream: Upstream,
    ) -> Result<Arc<Cluster>, BackendError> {
        let route_kind = route_kind.into();
        let store = self.store;
        let ns = r.namespace.unwrap_or(route_ns);
        let group = r.group.unwrap_or("");
        let kind = r.kind.unwrap_or("Service");
        let shown = format!("{ns}/{}", r.name);
        if group == xbackend::GROUP && kind == xbackend::KIND {
            return xbackend::resolve::resolve(self, route_kind, route_ns, r, upstream);
        }
        if !group.is_empty() || kind != "Service" {
            let gk = crate::status::group_kind(group, kind);
            return Err(BackendError::InvalidKind(shown, gk));
        }
        let to = Referent {
            group: "",
            kind: "Service",
            namespace: ns,
            name: r.name,
        };
        if !reference_grant::route_may_name(store, route_kind, route_ns, to) {
            return Err(BackendError::RefNotPermitted(shown));
        }
        let port = r.port.and_then(|p| u16::try_from(p).ok());
        let service = ObjectRef::new(ns, r.name);
        if let Some(port) = port
            && let Some(cluster) = self
                .resolved
                .borrow()
                .get(&(service.clone(), port, upstream))
        {
            return Ok(cluster.clone());
        }
        let svc: &Service = store
            .get(ns, r.name)
            .ok_or_else(|| BackendError::NotFound(shown.clone(), "Service not found".into()))?;
        let Some(port) = port else {
            return Err(BackendError::NotFound(shown, "port is required".into()));
        };
        let memo = (service, port, upstream);
        let svc_port = service_port(svc, port, upstream, &shown)?;
        let protocol = upstream_protocol(svc_port.app_protocol.as_deref(), upstream, &shown)?;
        let port_name = svc_port.name.as_deref().unwrap_or("");
        let tls = self.backend_tls(&memo.0, port_name, upstream, &shown)?;
        let name = match upstream {
            Upstream::Udp => names::udp_cluster(ns, r.name, port),
            // The stream as it is, to a port a BackendTLSPolicy covers: not the
            // cluster that HTTP routes and terminated TLS reach it by, which
            // speaks TLS under the plain name.
            Upstream::Tcp if self.index.tls.lookup(&memo.0, port_name).is_some() => {
                format!("{}_as_is", names::cluster(ns, r.name, port))
            }
            _ => names::cluster(ns, r.name, port),
        };
        let cluster = Arc::new(Cluster {
            name,
            service: memo.0.clone(),
            port,
            protocol,
            endpoints: Vec::new(),
            endpoints_from: EndpointsFrom::PortNamed {
                service: memo.0.clone(),
                name: port_name.to_string(),
            },
            tls,
            backend_kind: aether_ir::BackendKind::Service,
            discovery: aether_ir::Discovery::Eds,
            session: None,
        });
        self.resolved.borrow_mut().insert(memo, cluster.clone());
        Ok(cluster)
    }

    /// The TLS the BackendTLSPolicy of the Service port asks for, if any.
    /// TLS is for HTTP and gRPC backends and for terminated TLS streams; TCP
    /// routes and TLS passthrough carry the stream as is.
    fn backend_tls(
        &self,
        service: &ObjectRef,
        port_name: &str,
        upstream: Upstream,
        shown: &str,
    ) -> Result<Option<aether_ir::UpstreamTls>, BackendError> {
        match self.index.tls.lookup(service, port_name) {
            Some(p)
                if matches!(
                    upstream,
                    Upstream::Http | Upstream::Grpc | Upstream::TlsTerminated
                ) =>
            {
                let tls = p.tls.as_ref().map_err(|why| {
                    BackendError::TlsPolicy(shown.to_string(), p.key.to_string(), why.clone())
                })?;
                Ok(Some(tls.clone()))
            }
            _ => Ok(None),
        }
    }

    pub(crate) fn store(&self) -> &'a Store {
        self.store
    }

    /// The XBackend `key`, read once per translation.
    pub(crate) fn xbackend(&self, key: &ObjectRef) -> Option<Arc<XBackendModel>> {
        if let Some(m) = self.xbackends.borrow().get(key) {
            return m.clone();
        }
        let m = self
            .store
            .get::<XBackend>(&key.namespace, &key.name)
            .map(|x| {
                let model = xbackend::model(self.store, key, x, self.external_hostnames);
                Arc::new(model)
            });
        self.xbackends.borrow_mut().insert(key.clone(), m.clone());
        m
    }

    /// An XBackend cluster resolved before in this translation.
    pub(crate) fn xbackend_cluster(&self, memo: &(ObjectRef, Upstream)) -> Option<Arc<Cluster>> {
        self.xbackend_clusters.borrow().get(memo).cloned()
    }

    pub(crate) fn remember_xbackend_cluster(&self, memo: (ObjectRef, Upstream), c: Arc<Cluster>) {
        self.xbackend_clusters.borrow_mut().insert(memo, c);
    }
}

/// The Service port a backendRef names: `port`, UDP for a UDP route, TCP
/// otherwise.
fn service_port<'s>(
    svc: &'s Service,
    port: u16,
    upstream: Upstream,
    shown: &str,
) -> Result<&'s ServicePort, BackendError> {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|ports| {
            ports.iter().find(|p| {
                let udp = p.protocol.as_deref() == Some("UDP");
                p.port == i32::from(port) && udp == (upstream == Upstream::Udp)
            })
        })
        .ok_or_else(|| {
            let l4 = if upstream == Upstream::Udp {
                "UDP"
            } else {
                "TCP"
            };
            BackendError::NotFound(
                shown.to_string(),
                format!("Service has no {l4} port {port}"),
            )
        })
}

/// What the cluster speaks to a Service port: gRPC always h2c, L4 routes the
/// stream as is, HTTP what the port's appProtocol says.
fn upstream_protocol(
    app_protocol: Option<&str>,
    upstream: Upstream,
    shown: &str,
) -> Result<UpstreamProtocol, BackendError> {
    Ok(match app_protocol {
        _ if upstream == Upstream::Grpc => UpstreamProtocol::H2c,
        _ if matches!(
            upstream,
            Upstream::Tcp | Upstream::TlsTerminated | Upstream::Udp
        ) =>
        {
            UpstreamProtocol::Http1
        }
        Some("kubernetes.io/h2c") => UpstreamProtocol::H2c,
        // WebSocket: HTTP/1.1, upgrades let through by every HTTP connection manager.
        None | Some("http" | "HTTP" | "kubernetes.io/ws") => UpstreamProtocol::Http1,
        Some(other) if other.starts_with("kubernetes.io/") => {
            return Err(BackendError::UnsupportedProtocol(
                shown.to_string(),
                other.to_string(),
            ));
        }
        // Implementation-specific appProtocols we do not know: plain HTTP/1.1.
        Some(_) => UpstreamProtocol::Http1,
    })
}
