//! A backendRef to an XBackend → a cluster, or why not.
//!
//! ```text
//!  backendRef (gateway.networking.x-k8s.io XBackend ns/name, port unset or = spec.port.number)
//!    ── ReferenceGrant (to: that group and kind) when across namespaces
//!    ── XBackend accepted? ── its protocol fits the route kind?
//!    └─► Cluster edge_xb_<ns>_<name>_<port>
//! ```
//!
//! How each protocol is spoken, per route kind (anything else is
//! `UnsupportedProtocol`; ALPN is offered when there is TLS):
//!
//! ```text
//!                    HTTPRoute                GRPCRoute      TCPRoute / TLSRoute
//!  unset             HTTP/1.1 (http/1.1)      HTTP/2 (h2)    the stream as is
//!  HTTP, HTTP11      HTTP/1.1 (http/1.1)      -              -
//!  WSS               HTTP/1.1 (http/1.1), WebSocket upgrades let through
//!  H2C               h2c                      h2c            -
//!  HTTP2, GRPC       HTTP/2 (h2)              HTTP/2 (h2)    -
//!  TCP               -                        -              the stream as is
//! ```
//!
//! A port on the backendRef must be the XBackend's own (`spec.port.number`):
//! the XBackend says where to connect, and a ref naming another port names
//! nothing (`BackendNotFound`). Leaving it out is the common case.

use super::{KIND, Target, XBackendModel};
use crate::backend::{BackendError, BackendRef, Backends, Upstream};
use crate::reference_grant::{self, Referent};
use crate::vocabulary::xbackend::Reason;
use aether_ir::{
    BackendKind, Cluster, Discovery, EndpointsFrom, Kind, ObjectRef, UpstreamProtocol, names,
};
use gateway_api::apis::experimental::xbackends::XBackendProtocol;
use std::sync::Arc;

/// The API's spelling of a protocol.
pub fn protocol_name(p: &XBackendProtocol) -> &'static str {
    match p {
        XBackendProtocol::Tcp => "TCP",
        XBackendProtocol::Http => "HTTP",
        XBackendProtocol::Http2 => "HTTP2",
        XBackendProtocol::Http11 => "HTTP11",
        XBackendProtocol::H2c => "H2C",
        XBackendProtocol::Mcp => "MCP",
        XBackendProtocol::Grpc => "GRPC",
        XBackendProtocol::Wss => "WSS",
    }
}

/// Resolves a backendRef whose group and kind are the XBackend's.
pub fn resolve(
    backends: &Backends<'_>,
    route_kind: Kind,
    route_ns: &str,
    r: BackendRef<'_>,
    upstream: Upstream,
) -> Result<Arc<Cluster>, BackendError> {
    let ns = r.namespace.unwrap_or(route_ns);
    let shown = format!("{ns}/{}", r.name);
    let to = Referent {
        group: super::GROUP,
        kind: KIND,
        namespace: ns,
        name: r.name,
    };
    if !reference_grant::route_may_name(backends.store(), route_kind, route_ns, to) {
        return Err(BackendError::RefNotPermitted(shown));
    }
    let key = ObjectRef::new(ns, r.name);
    let m = backends
        .xbackend(&key)
        .ok_or_else(|| BackendError::NotFound(shown.clone(), "XBackend not found".into()))?;
    check_accepted(&m, &shown)?;
    if let Some(port) = r.port.filter(|p| *p != i32::from(m.port)) {
        return Err(BackendError::NotFound(
            shown,
            format!(
                "port {port} is not the XBackend's port {} (leave it unset, or set it to spec.port.number)",
                m.port
            ),
        ));
    }
    let (protocol, alpn) = wire(&m, route_kind, upstream).map_err(|why| {
        let p = m.protocol.as_ref().map_or("(unset)", protocol_name);
        BackendError::XBackendProtocol(shown.clone(), p.into(), why)
    })?;
    if m.session.is_some() && !matches!(upstream, Upstream::Http | Upstream::Grpc) {
        return Err(BackendError::XBackendUnsupported(
            shown,
            format!("sessionPersistence applies to HTTP requests; a {route_kind} carries a stream"),
        ));
    }
    let passthrough = route_kind == Kind::TlsRoute && upstream == Upstream::Tcp;
    let tls = backend_tls(&m, alpn, passthrough, &shown)?;
    let memo = (key.clone(), upstream);
    if let Some(cluster) = backends.xbackend_cluster(&memo) {
        return Ok(cluster);
    }
    let (endpoints_from, discovery) = endpoints(&m, &key, &shown)?;
    let cluster = Arc::new(Cluster {
        name: names::xbackend_cluster(ns, r.name, m.port),
        service: key,
        port: m.port,
        protocol,
        endpoints: Vec::new(),
        endpoints_from,
        tls,
        backend_kind: BackendKind::XBackend,
        discovery,
        session: m.session.clone(),
    });
    backends.remember_xbackend_cluster(memo, cluster.clone());
    Ok(cluster)
}

/// An XBackend that is not accepted, as the backendRef's error: its protocol,
/// what it asks for that Envoy cannot do, or what is invalid in it.
fn check_accepted(m: &XBackendModel, shown: &str) -> Result<(), BackendError> {
    let Some((reason, why)) = &m.not_accepted else {
        return Ok(());
    };
    let shown = shown.to_string();
    Err(match reason {
        Reason::UnsupportedProtocol => {
            let p = m.protocol.as_ref().map_or("", protocol_name);
            let why = why.strip_prefix(&format!("protocol {p} ")).unwrap_or(why);
            BackendError::XBackendProtocol(shown, p.into(), why.to_string())
        }
        Reason::UnsupportedValue => BackendError::XBackendUnsupported(shown, why.clone()),
        _ => BackendError::XBackendInvalid(shown, why.clone()),
    })
}

/// The XBackend's TLS, offering `alpn`. TLS passthrough carries the client's
/// own TLS: wrapping it again would reach the backend as TLS inside TLS.
fn backend_tls(
    m: &XBackendModel,
    alpn: Vec<String>,
    passthrough: bool,
    shown: &str,
) -> Result<Option<aether_ir::UpstreamTls>, BackendError> {
    match &m.tls {
        None => Ok(None),
        Some(Err(why)) => Err(BackendError::XBackendInvalid(shown.to_string(), why.clone())),
        Some(Ok(_)) if passthrough => Err(BackendError::XBackendUnsupported(
            shown.to_string(),
            "tls on the backend of a TLS passthrough listener: the stream is already the client's TLS".into(),
        )),
        Some(Ok(t)) => Ok(Some(aether_ir::UpstreamTls { alpn, ..t.clone() })),
    }
}

/// Where the cluster's endpoints come from and how Envoy finds them: the
/// ready endpoints of the Service made for the XBackend, or its hostname
/// through DNS.
fn endpoints(
    m: &XBackendModel,
    key: &ObjectRef,
    shown: &str,
) -> Result<(EndpointsFrom, Discovery), BackendError> {
    Ok(match &m.target {
        Target::Endpoints { service: None } => {
            return Err(BackendError::NotFound(
                shown.to_string(),
                format!(
                    "endpoints are not resolved yet: no Service made for XBackend {key} \
                     (an ownerReference of kind XBackend) exists"
                ),
            ));
        }
        Target::Endpoints {
            service: Some(service),
        } => (
            EndpointsFrom::PortNumbered {
                service: service.clone(),
                port: m.port,
            },
            Discovery::Eds,
        ),
        Target::Dns { hostname } => (
            EndpointsFrom::Nowhere,
            Discovery::Dns {
                hostname: hostname.clone(),
            },
        ),
    })
}

/// How this route kind speaks to the XBackend: the protocol and the ALPN
/// names offered over TLS, or why the protocol does not fit the route.
fn wire(
    m: &XBackendModel,
    route_kind: Kind,
    upstream: Upstream,
) -> Result<(UpstreamProtocol, Vec<String>), String> {
    use XBackendProtocol as P;
    let http11 = || (UpstreamProtocol::Http1, vec!["http/1.1".to_string()]);
    let h2 = || (UpstreamProtocol::H2c, vec!["h2".to_string()]);
    let p = m.protocol.as_ref();
    let wire = match (upstream, p) {
        (Upstream::Udp, _) => return Err("an XBackend cannot be a UDPRoute backend".into()),
        (Upstream::Http, None | Some(P::Http | P::Http11 | P::Wss)) => http11(),
        (Upstream::Http, Some(P::H2c)) => (UpstreamProtocol::H2c, vec![]),
        (Upstream::Http | Upstream::Grpc, Some(P::Http2 | P::Grpc)) => h2(),
        (Upstream::Grpc, None) => h2(),
        (Upstream::Grpc, Some(P::H2c)) => (UpstreamProtocol::H2c, vec![]),
        (Upstream::Tcp | Upstream::TlsTerminated, None | Some(P::Tcp)) => {
            (UpstreamProtocol::Http1, vec![])
        }
        (Upstream::Http | Upstream::Grpc, Some(P::Tcp)) => {
            return Err(format!(
                "it is for TCPRoute and TLSRoute backends, not a {route_kind}'s"
            ));
        }
        (Upstream::Grpc, Some(_)) => {
            return Err("it does not speak HTTP/2, which gRPC needs".into());
        }
        (_, Some(P::Mcp)) => return Err("not supported".into()),
        (Upstream::Tcp | Upstream::TlsTerminated, Some(_)) => {
            return Err(format!(
                "it is an HTTP protocol, and a {route_kind} carries a stream (use TCP or leave it unset)"
            ));
        }
    };
    Ok(wire)
}
