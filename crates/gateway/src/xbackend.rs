//! XBackend (`gateway.networking.x-k8s.io/v1alpha1`, Gateway API v1.7.0
//! experimental): a backendRef kind that says where and how to connect.
//!
//! ```text
//!  XBackend ─ type EndpointSelector ─ the Service made for it (ownerReference
//!           │                         kind XBackend, its uid, else its name)
//!           │     └─ that Service's EndpointSlices, the port numbered spec.port.number
//!           ├ type ExternalHostname ── hostname:port, resolved by Envoy (LOGICAL_DNS)
//!           ├ protocol ─── how HTTP speaks to it (HTTP/1.1, h2c, h2 over TLS, WSS)
//!           ├ tls ──────── None | ServerOnly | ClientAndServer: the same IR upstream
//!           │              TLS a BackendTLSPolicy gives (`backend_tls::validation`),
//!           │              plus its own client certificate (a kubernetes.io/tls Secret)
//!           └ sessionPersistence ── Envoy's stateful session (`session.rs`)
//!      └─► Cluster edge_xb_<ns>_<name>_<port>
//! ```
//!
//! Standalone mode has no CRD validation, so what its CEL rules refuse on a
//! cluster is checked here and makes the XBackend `Accepted=False/Invalid`
//! (with the CRD's message); what Envoy cannot do is `UnsupportedValue` or
//! `UnsupportedProtocol`. Either way the routes that name it say so in
//! `ResolvedRefs=False`, and their share of requests answers 500, as for any
//! invalid backendRef: never a NACK, never less than what was asked.
//!
//! The Service of an EndpointSelector XBackend is made by the leader in
//! Kubernetes mode, and written by hand (with its EndpointSlices) in
//! standalone mode; its label `gateway.aether.io/xbackend` helps a watch find
//! it, but only the ownerReference decides (a name over 63 characters fits no
//! label value). Of several such Services the oldest is read.

pub mod resolve;
pub mod session;
pub mod status;

use crate::backend_tls::validation;
use crate::certificate::{self, CertificateError};
use crate::status::Identity;
use crate::store::Store;
use crate::vocabulary::xbackend::Reason;
use aether_ir::{ObjectRef, SessionPersistence, UpstreamTls};
use gateway_api::apis::experimental::gateways::GatewayListenersTlsCertificateRefs;
use gateway_api::apis::experimental::xbackends::{
    XBackend, XBackendProtocol, XBackendTls, XBackendTlsMode, XBackendType,
};
use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicyValidation;
use k8s_openapi::api::core::v1::Service;

/// The XBackend's API group.
pub const GROUP: &str = aether_ir::kind::X_GATEWAY_GROUP;
pub const KIND: &str = aether_ir::Kind::XBackend.as_str();
pub const API_VERSION: &str = "gateway.networking.x-k8s.io/v1alpha1";
/// The label on the Service made for an XBackend (its name), for watches.
pub const SERVICE_LABEL: &str = "gateway.aether.io/xbackend";

/// What one XBackend comes to, whichever route names it.
#[derive(Debug, Clone, PartialEq)]
pub struct XBackendModel {
    pub key: ObjectRef,
    pub of: Identity,
    /// `spec.port.number`, once valid.
    pub port: u16,
    pub target: Target,
    pub protocol: Option<XBackendProtocol>,
    /// `Some` when `tls.mode` is not None: the TLS to speak once every
    /// reference resolved (client certificate included), else why not.
    pub tls: Option<Result<UpstreamTls, String>>,
    pub session: Option<SessionPersistence>,
    /// Why it is not accepted: the reason and the message.
    pub not_accepted: Option<(Reason, String)>,
    /// References that do not resolve: (reason, message).
    pub unresolved: Vec<(Reason, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// EndpointSelector: the Service made for it, if there is one yet.
    Endpoints { service: Option<ObjectRef> },
    /// ExternalHostname: the name Envoy resolves.
    Dns { hostname: String },
}

/// Reads one XBackend (`key` is its store key); an ExternalHostname one is
/// accepted only where `external_hostnames` allows it ([`crate::Config`]).
pub fn model(
    store: &Store,
    key: &ObjectRef,
    x: &XBackend,
    external_hostnames: bool,
) -> XBackendModel {
    let mut m = XBackendModel {
        key: key.clone(),
        of: Identity::of(&x.metadata),
        port: 0,
        target: Target::Endpoints { service: None },
        protocol: x.spec.protocol.clone(),
        tls: None,
        session: None,
        not_accepted: None,
        unresolved: vec![],
    };
    if let Err(why) = checked(store, key, x, external_hostnames, &mut m) {
        m.not_accepted = Some(why);
    }
    m
}

type Refusal = (Reason, String);

fn invalid(why: impl Into<String>) -> Refusal {
    (Reason::Invalid, why.into())
}

/// Fills `m` in, or says why the XBackend is not accepted (the first reason).
fn checked(
    store: &Store,
    key: &ObjectRef,
    x: &XBackend,
    external_hostnames: bool,
    m: &mut XBackendModel,
) -> Result<(), Refusal> {
    let spec = &x.spec;
    m.port = spec
        .port
        .number
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| invalid("port.number must be set to a port from 1 to 65535"))?;
    m.target = target(store, key, x, external_hostnames)?;
    let mode = spec
        .tls
        .as_ref()
        .map_or(&XBackendTlsMode::None, |t| &t.mode);
    let with_tls = *mode != XBackendTlsMode::None;
    check_protocol(spec.protocol.as_ref(), with_tls)?;
    if let Some(sp) = &spec.session_persistence {
        if spec.r#type != XBackendType::EndpointSelector {
            return Err(invalid(
                "sessionPersistence can only be set when type is EndpointSelector",
            ));
        }
        m.session = Some(session::session(key, sp)?);
    }
    if let Some(tls) = spec.tls.as_ref().filter(|_| with_tls) {
        m.tls = Some(upstream_tls(store, key, tls, &mut m.unresolved)?);
    } else if let Some(tls) = &spec.tls
        && (tls.validation.is_some() || tls.client_certificate_ref.is_some())
    {
        return Err(invalid(
            "validation must be set if and only if mode is either ClientAndServer or ServerOnly",
        ));
    }
    Ok(())
}

/// Where an XBackend's traffic goes: a DNS name (ExternalHostname), or the
/// endpoints its selector picks (EndpointSelector), each type with only its
/// own field set.
fn target(
    store: &Store,
    key: &ObjectRef,
    x: &XBackend,
    external_hostnames: bool,
) -> Result<Target, Refusal> {
    let spec = &x.spec;
    Ok(match spec.r#type {
        XBackendType::ExternalHostname => {
            if spec.endpoint_selector.is_some() {
                return Err(invalid(
                    "endpointSelector must be set when type is EndpointSelector and must be unset otherwise",
                ));
            }
            let hostname = spec.external_hostname.as_ref().ok_or_else(|| {
                invalid("externalHostname must be set when type is ExternalHostname and must be unset otherwise")
            })?;
            let hostname = external_hostname(&hostname.hostname)?;
            if !external_hostnames {
                return Err((Reason::UnsupportedValue, EXTERNAL_HOSTNAMES_OFF.into()));
            }
            Target::Dns { hostname }
        }
        XBackendType::EndpointSelector => {
            if spec.external_hostname.is_some() {
                return Err(invalid(
                    "externalHostname must be set when type is ExternalHostname and must be unset otherwise",
                ));
            }
            let selector = spec.endpoint_selector.as_ref().ok_or_else(|| {
                invalid("endpointSelector must be set when type is EndpointSelector and must be unset otherwise")
            })?;
            if selector.match_labels.is_empty() {
                return Err(invalid(
                    "endpointSelector.matchLabels must hold at least one label",
                ));
            }
            Target::Endpoints {
                service: owned_service(store, key, x),
            }
        }
    })
}

/// The protocol against the TLS mode: H2C only without TLS, HTTP2 and WSS
/// only with it; MCP not at all.
fn check_protocol(protocol: Option<&XBackendProtocol>, with_tls: bool) -> Result<(), Refusal> {
    match protocol {
        Some(XBackendProtocol::H2c) if with_tls => {
            return Err(invalid(
                "tls must be disabled when protocol is H2C, use protocol HTTP2 for HTTP/2 with tls",
            ));
        }
        Some(XBackendProtocol::Http2) if !with_tls => {
            return Err(invalid(
                "tls must be enabled when protocol is HTTP2, use protocol H2C for HTTP/2 without tls",
            ));
        }
        Some(XBackendProtocol::Wss) if !with_tls => {
            return Err(invalid("tls must be enabled when protocol is WSS"));
        }
        Some(XBackendProtocol::Mcp) => {
            return Err((
                Reason::UnsupportedProtocol,
                "protocol MCP is not supported: Envoy has no Model Context Protocol upstream"
                    .into(),
            ));
        }
        _ => {}
    }
    Ok(())
}

/// Why an ExternalHostname XBackend is not served where the edge does not
/// allow them.
pub const EXTERNAL_HOSTNAMES_OFF: &str = "type ExternalHostname is turned off on this edge: \
     a backend named by hostname could be any host the edge node reaches (its own \
     admin ports, private addresses); the agent's --allow-external-hostname-backends \
     turns it on";

/// An ExternalHostname's name, lower-cased: a DNS name, not an IP address
/// and not a cluster-local Service name (the CRD's rule, and the spec's MUST
/// for the trust domain), nor `localhost` (RFC 6761: the edge node itself).
fn external_hostname(hostname: &str) -> Result<String, Refusal> {
    let not_ip = hostname.trim_start_matches('[').trim_end_matches(']');
    let lower = hostname.to_ascii_lowercase();
    let bare = lower.trim_end_matches('.');
    if bare == "localhost" || bare.ends_with(".localhost") {
        return Err((
            Reason::UnsupportedValue,
            format!(
                "externalHostname.hostname {hostname:?}: a localhost name is the edge node itself, never a backend"
            ),
        ));
    }
    if not_ip.parse::<std::net::IpAddr>().is_ok()
        || lower.trim_end_matches('.').ends_with(".cluster.local")
    {
        return Err(invalid(format!(
            "externalHostname.hostname {hostname:?}: hostname must not be an IP address or end with .cluster.local"
        )));
    }
    crate::hostname::checked(
        "externalHostname.hostname",
        hostname,
        crate::hostname::Wildcard::Refused,
    )
    .map_err(invalid)?;
    Ok(lower)
}

/// The TLS of mode ServerOnly or ClientAndServer, or why it cannot be met:
/// `Err` for what makes the XBackend not accepted, `Ok(Err)` for references
/// that do not resolve (recorded in `unresolved`).
fn upstream_tls(
    store: &Store,
    key: &ObjectRef,
    tls: &XBackendTls,
    unresolved: &mut Vec<Refusal>,
) -> Result<Result<UpstreamTls, String>, Refusal> {
    let client_and_server = tls.mode == XBackendTlsMode::ClientAndServer;
    if client_and_server != tls.client_certificate_ref.is_some() {
        return Err(invalid(
            "clientCertificateRef must be set if and only if mode is ClientAndServer",
        ));
    }
    let v = tls.validation.as_ref().ok_or_else(|| {
        invalid(
            "validation must be set if and only if mode is either ClientAndServer or ServerOnly",
        )
    })?;
    // The same API type as a BackendTLSPolicy's validation: read the same way.
    let v: BackendTlsPolicyValidation = serde_json::to_value(v)
        .and_then(serde_json::from_value)
        .map_err(|e| invalid(format!("tls.validation: {e}")))?;
    let read = validation(store, &key.namespace, &v);
    unresolved.extend(read.unresolved.into_iter().map(|(reason, why)| {
        let reason = match reason {
            crate::vocabulary::policy::Reason::InvalidKind => Reason::InvalidKind,
            _ => Reason::InvalidCACertificateRef,
        };
        (reason, why)
    }));
    if let Some(why) = read.invalid {
        return Err(invalid(format!("tls.validation: {why}")));
    }
    let mut upstream = read.tls.map_err(|why| {
        (
            Reason::NoValidCACertificate,
            format!("tls.validation: {why}"),
        )
    })?;
    if let Some(r) = &tls.client_certificate_ref {
        let as_ref = GatewayListenersTlsCertificateRefs {
            group: r.group.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            namespace: r.namespace.clone(),
        };
        let holder = certificate::Holder {
            group: GROUP,
            kind: aether_ir::Kind::XBackend,
            namespace: &key.namespace,
        };
        match certificate::resolve_one(store, holder, &as_ref) {
            Ok(cert) => upstream.client_certificate = Some(cert),
            Err(e) => {
                let reason = match e {
                    CertificateError::RefNotPermitted(_) => Reason::RefNotPermitted,
                    CertificateError::Invalid(..) => Reason::InvalidClientCertificateRef,
                };
                let why = format!("clientCertificateRef: {e}");
                unresolved.push((reason, why.clone()));
                return Ok(Err(why));
            }
        }
    }
    Ok(Ok(upstream))
}

/// The Service made for XBackend `key`: in its namespace, owned by it (an
/// ownerReference of kind XBackend in its group naming its uid, or its name
/// when it has no uid, as in standalone YAML). Of several, the oldest.
pub fn owned_service(store: &Store, key: &ObjectRef, x: &XBackend) -> Option<ObjectRef> {
    let uid = x.metadata.uid.as_deref();
    let owns = |svc: &Service| {
        svc.metadata.owner_references.iter().flatten().any(|o| {
            o.kind == KIND
                && o.api_version.split('/').next() == Some(GROUP)
                && match uid {
                    Some(uid) => o.uid == uid,
                    None => o.name == key.name,
                }
        })
    };
    let from = ObjectRef::new(&key.namespace, "");
    store
        .all::<Service>()
        .range(from..)
        .take_while(|(k, _)| k.namespace == key.namespace)
        .filter(|(_, svc)| owns(svc))
        .min_by_key(|(k, svc)| {
            let created = svc.metadata.creation_timestamp.clone();
            (created.is_none(), created, (*k).clone())
        })
        .map(|(k, _)| k.clone())
}

#[cfg(test)]
mod tests;
