//! A Gateway's listeners (the Gateway itself is `gateway_model.rs`): what is
//! valid, what conflicts (`conflicts.rs`), what can be served.
//!
//! ```text
//!  Gateway └─ Listener* ── protocol (HTTP | HTTPS | TLS Passthrough/Terminate | TCP | UDP;
//!                       │             others: UnsupportedProtocol)
//!                       ├─ port groups (TCP and UDP ports apart): HTTP, {HTTPS, TLS}
//!                       │   and TCP cannot share a port → ProtocolConflict;
//!                       │   same hostname (or none) on one port → HostnameConflict
//!                       ├─ HTTPS / TLS Terminate certificateRefs → certificates (ResolvedRefs)
//!                       ├─ HTTPS: the Gateway's frontend validation for the port
//!                       │   (client_validation.rs: CA refs → ResolvedRefs, none → NoValidCACertificate)
//!                       ├─ HTTP/HTTPS filters.requests (listener_filters.rs: ExternalAuth
//!                       │   backendRef → ResolvedRefs; ExtensionRef → not accepted)
//!                       └─ allowedRoutes (namespaces, kinds the protocol carries)
//! ```
//!
//! A listener is *programmable* when it is accepted, not conflicted, its refs
//! resolve and it supports at least one route kind. Routes may attach to any
//! listener (attachment counts do not depend on listener health); only
//! programmable listeners reach the IR.

use crate::allowed_routes::{self, AllowedNamespaces};
use crate::backend::Backends;
use crate::certificate;
use crate::certificate::CertificateError;
use crate::client_validation::{self, CaRefError};
use crate::hostname::{self, Wildcard};
use crate::listener_filters::{self, FilterError, ListenerFilters};
use crate::status::{Condition, ListenerCondition, RouteGroupKind};
use crate::store::Store;
use crate::vocabulary::listener;
use aether_ir::{Certificate, ClientValidation, ObjectRef, PortProtocol, RouteKind};
use gateway_api::apis::experimental::gateways::GatewayListenersTlsMode;
use gateway_api::apis::experimental::gateways::{Gateway, GatewayListeners};

pub(crate) mod conflicts;
pub(crate) mod status;

/// A listener protocol we serve (TLS split by its mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ListenerProtocol {
    Http,
    Https,
    TlsPassthrough,
    TlsTerminate,
    Tcp,
    Udp,
}

impl ListenerProtocol {
    /// The IR port this listener's port becomes (HTTPS mixed with TLS: TLS).
    pub fn port_protocol(self) -> PortProtocol {
        match self {
            ListenerProtocol::Http => PortProtocol::Http,
            ListenerProtocol::Https => PortProtocol::Https,
            ListenerProtocol::TlsPassthrough | ListenerProtocol::TlsTerminate => PortProtocol::Tls,
            ListenerProtocol::Tcp => PortProtocol::Tcp,
            ListenerProtocol::Udp => PortProtocol::Udp,
        }
    }

    /// The route kinds a listener of this protocol carries.
    pub fn route_kinds(self) -> &'static [RouteKind] {
        match self {
            ListenerProtocol::Http | ListenerProtocol::Https => &allowed_routes::HTTP_KINDS,
            ListenerProtocol::TlsPassthrough | ListenerProtocol::TlsTerminate => &[RouteKind::Tls],
            ListenerProtocol::Tcp => &[RouteKind::Tcp],
            ListenerProtocol::Udp => &[RouteKind::Udp],
        }
    }

    /// Which listeners may share a port: HTTP alone, HTTPS with TLS (chains picked
    /// by SNI), TCP alone; UDP ports are apart from TCP ports altogether.
    fn port_class(self) -> u8 {
        match self {
            ListenerProtocol::Http => 0,
            ListenerProtocol::Https
            | ListenerProtocol::TlsPassthrough
            | ListenerProtocol::TlsTerminate => 1,
            ListenerProtocol::Tcp => 2,
            ListenerProtocol::Udp => 3,
        }
    }

    /// Does a hostname on this listener mean anything? (Not for TCP or UDP.)
    fn has_hostname(self) -> bool {
        !matches!(self, ListenerProtocol::Tcp | ListenerProtocol::Udp)
    }

    /// Terminates TLS with the listener's certificateRefs.
    fn terminates_tls(self) -> bool {
        matches!(
            self,
            ListenerProtocol::Https | ListenerProtocol::TlsTerminate
        )
    }
}

/// One listener of a Gateway, validated.
#[derive(Debug, Clone)]
pub struct Listener {
    pub name: String,
    /// The ListenerSet it comes from; `None`: the Gateway's own.
    pub origin: Option<ObjectRef>,
    /// Its holder's namespace (the Gateway's or the ListenerSet's): what
    /// allowedRoutes `Same` means.
    pub namespace: String,
    pub port: u16,
    /// `None`: a protocol we do not serve.
    pub protocol: Option<ListenerProtocol>,
    /// Lower-cased.
    pub hostname: Option<String>,
    pub allowed_namespaces: AllowedNamespaces,
    pub supported_kinds: Vec<RouteGroupKind>,
    pub certificates: Vec<Certificate>,
    /// HTTPS: the Gateway's frontend validation for this port.
    pub client_validation: Option<ClientValidation>,
    /// HTTP and HTTPS: the pre-routing filters (`filters.requests`).
    pub filters: ListenerFilters,
    /// Accepted, Conflicted and ResolvedRefs are decided here; Programmed derives.
    not_accepted: Option<NotAccepted>,
    conflicted: Option<Conflict>,
    /// Every reference that does not resolve, in the order found.
    unresolved: Vec<Unresolved>,
    /// Why `OverlappingTLSConfig` is True here (see `tls_overlap.rs`).
    pub overlapping_tls: Option<String>,
}

/// Why a listener is not accepted (before conflicts are looked at).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAccepted {
    /// A protocol we do not serve.
    UnsupportedProtocol(String),
    /// A port outside 1..=65535.
    PortUnavailable(i32),
    /// The hostname is not a valid (wildcard) DNS name: why.
    InvalidHostname(String),
    /// Frontend validation asked for, and no caCertificateRef resolves.
    NoValidCaCertificate,
    /// A pre-routing filter we cannot run (ExtensionRef) or encode.
    Filter(FilterError),
    /// An older Gateway holds this port on this address (`port_claims`).
    PortTaken {
        port: u16,
        address: String,
        by: ObjectRef,
    },
}

impl NotAccepted {
    fn condition(&self, g: i64) -> ListenerCondition {
        let (reason, message) = match self {
            NotAccepted::UnsupportedProtocol(p) => (
                listener::Reason::UnsupportedProtocol,
                format!("protocol {p} is not supported (only HTTP, HTTPS, TLS, TCP and UDP)"),
            ),
            NotAccepted::PortUnavailable(port) => (
                listener::Reason::PortUnavailable,
                format!("port {port} is out of range"),
            ),
            NotAccepted::InvalidHostname(why) => (listener::Reason::UnsupportedValue, why.clone()),
            NotAccepted::PortTaken { port, address, by } => (
                listener::Reason::PortUnavailable,
                format!(
                    "port {port} on {address} is bound by Gateway {by}, which is older: two \
                     Gateways cannot bind one port of one address"
                ),
            ),
            NotAccepted::Filter(e) => (e.reason(), e.to_string()),
            NotAccepted::NoValidCaCertificate => (
                listener::Reason::NoValidCACertificate,
                "no caCertificateRef of the Gateway's frontend validation for this port resolves"
                    .into(),
            ),
        };
        Condition::new(listener::Type::Accepted, false, reason, message, g)
    }
}

/// Why listeners on one port cannot be told apart (the message names them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    /// Protocols that cannot share a port (HTTP with HTTPS, ...).
    Protocol(String),
    /// The same hostname (or none) twice.
    Hostname(String),
}

impl Conflict {
    fn reason_message(&self) -> (listener::Reason, &str) {
        match self {
            Conflict::Protocol(m) => (listener::Reason::ProtocolConflict, m),
            Conflict::Hostname(m) => (listener::Reason::HostnameConflict, m),
        }
    }
}

/// A listener reference that does not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved {
    /// allowedRoutes.kinds the listener cannot carry.
    RouteKinds(Vec<String>),
    Certificate(CertificateError),
    CaCertificate(CaRefError),
    /// An ExternalAuth filter's backendRef: served, refusing every request.
    Filter(FilterError),
}

impl Unresolved {
    fn reason(&self) -> listener::Reason {
        match self {
            Unresolved::RouteKinds(_) => listener::Reason::InvalidRouteKinds,
            Unresolved::Certificate(e) => e.reason(),
            Unresolved::CaCertificate(e) => e.reason(),
            Unresolved::Filter(e) => e.reason(),
        }
    }

    fn message(&self) -> String {
        match self {
            Unresolved::RouteKinds(kinds) => {
                format!("unsupported route kinds: {}", kinds.join(", "))
            }
            Unresolved::Certificate(e) => e.to_string(),
            Unresolved::CaCertificate(e) => e.to_string(),
            Unresolved::Filter(e) => e.to_string(),
        }
    }
}

impl Listener {
    /// Not accepted when an older Gateway holds its port (and nothing else
    /// made it unaccepted first).
    pub(crate) fn mark_taken(&mut self, taken: &crate::port_claims::Taken) {
        use crate::port_claims::Transport;
        let transport = match self.protocol {
            Some(ListenerProtocol::Udp) => Transport::Udp,
            _ => Transport::Tcp,
        };
        if self.not_accepted.is_none()
            && let Some((address, by)) = taken.get(&(self.port, transport))
        {
            self.not_accepted = Some(NotAccepted::PortTaken {
                port: self.port,
                address: address.clone(),
                by: by.clone(),
            });
        }
    }

    pub fn is_accepted(&self) -> bool {
        self.not_accepted.is_none() && self.conflicted.is_none()
    }

    /// Can this listener be put in the IR (given its Gateway is served)?
    pub fn is_programmable(&self) -> bool {
        self.is_accepted()
            && self.resolved_refs_ok()
            && self.protocol.is_some()
            && !self.supported_kinds.is_empty()
    }

    /// Certificates resolved; unsupported route kinds alone do not block serving
    /// the supported ones, nor do CA refs beside one that resolves (none
    /// resolving is `NoValidCACertificate`: not accepted), nor a filter's
    /// backendRef (the filter refuses every request instead).
    fn resolved_refs_ok(&self) -> bool {
        self.unresolved.iter().all(|u| {
            matches!(
                u,
                Unresolved::RouteKinds(_) | Unresolved::CaCertificate(_) | Unresolved::Filter(_)
            )
        })
    }

    /// Not accepted because of its filters: its hostname is still served,
    /// refusing every request (see `listener_filters.rs`), unless something
    /// else is wrong with it too.
    pub fn fails_closed(&self) -> bool {
        matches!(self.not_accepted, Some(NotAccepted::Filter(_)))
            && self.conflicted.is_none()
            && self.port != 0
            && matches!(
                self.protocol,
                Some(ListenerProtocol::Http | ListenerProtocol::Https)
            )
            && !(self.protocol == Some(ListenerProtocol::Https) && self.certificates.is_empty())
    }

    pub fn supports_kind(&self, kind: RouteKind) -> bool {
        self.supported_kinds.iter().any(|k| k.kind == kind.as_str())
    }
}

/// One listener of a Gateway (`origin` None) or of a ListenerSet, read and
/// validated on its own; conflicts come later, across listeners.
pub(crate) fn read(
    store: &Store,
    backends: &Backends<'_>,
    holder: certificate::Holder<'_>,
    origin: Option<&ObjectRef>,
    spec: &GatewayListeners,
) -> Listener {
    let protocol = protocol(spec);
    let port = u16::try_from(spec.port).ok().filter(|p| *p > 0);
    let allowed = spec.allowed_routes.as_ref();
    let carried = protocol.map_or(&[][..], ListenerProtocol::route_kinds);
    let (mut supported_kinds, unsupported_kinds) = allowed_routes::route_kinds(allowed, carried);
    let mut not_accepted = None;
    let mut unresolved = Vec::new();
    if protocol.is_none() {
        not_accepted = Some(NotAccepted::UnsupportedProtocol(spec.protocol.clone()));
        supported_kinds.clear();
    } else if port.is_none() {
        not_accepted = Some(NotAccepted::PortUnavailable(spec.port));
    } else if let Some(h) = spec
        .hostname
        .as_deref()
        .filter(|_| protocol.is_some_and(ListenerProtocol::has_hostname))
        && let Err(why) = hostname::checked("hostname", h, Wildcard::Allowed)
    {
        not_accepted = Some(NotAccepted::InvalidHostname(why));
    }
    if !unsupported_kinds.is_empty() {
        unresolved.push(Unresolved::RouteKinds(
            unsupported_kinds.iter().map(ToString::to_string).collect(),
        ));
    }
    let certificates = match certificates(store, holder, protocol, spec) {
        Ok(c) => c,
        Err(e) => {
            unresolved.push(Unresolved::Certificate(e));
            Vec::new()
        }
    };
    let http = matches!(
        protocol,
        Some(ListenerProtocol::Http | ListenerProtocol::Https)
    );
    let filters = listener_filters::resolve(backends, holder.kind, holder.namespace, spec, http);
    for e in &filters.errors {
        if !e.rejects_listener() {
            unresolved.push(Unresolved::Filter(e.clone()));
        } else if not_accepted.is_none() {
            not_accepted = Some(NotAccepted::Filter(e.clone()));
        }
    }
    Listener {
        name: spec.name.clone(),
        origin: origin.cloned(),
        namespace: holder.namespace.to_string(),
        port: port.unwrap_or(0),
        protocol,
        hostname: spec
            .hostname
            .as_deref()
            .filter(|_| protocol.is_none_or(ListenerProtocol::has_hostname))
            .map(str::to_ascii_lowercase),
        allowed_namespaces: AllowedNamespaces::from_spec(allowed),
        supported_kinds,
        certificates,
        client_validation: None,
        filters,
        not_accepted,
        conflicted: None,
        unresolved,
        overlapping_tls: None,
    }
}

/// The protocol we serve for `spec.protocol` (TLS split by its mode), or
/// none: not a protocol we serve.
fn protocol(spec: &GatewayListeners) -> Option<ListenerProtocol> {
    let tls_mode = spec.tls.as_ref().and_then(|t| t.mode.clone());
    match spec.protocol.as_str() {
        "HTTP" => Some(ListenerProtocol::Http),
        "HTTPS" => Some(ListenerProtocol::Https),
        "TLS" => match tls_mode {
            Some(GatewayListenersTlsMode::Passthrough) => Some(ListenerProtocol::TlsPassthrough),
            // The API's default mode is Terminate.
            Some(GatewayListenersTlsMode::Terminate) | None => Some(ListenerProtocol::TlsTerminate),
        },
        "TCP" => Some(ListenerProtocol::Tcp),
        "UDP" => Some(ListenerProtocol::Udp),
        _ => None,
    }
}

/// A TLS-terminating listener's certificateRefs, resolved (none for the
/// other protocols).
fn certificates(
    store: &Store,
    holder: certificate::Holder<'_>,
    protocol: Option<ListenerProtocol>,
    spec: &GatewayListeners,
) -> Result<Vec<Certificate>, CertificateError> {
    if !protocol.is_some_and(ListenerProtocol::terminates_tls) {
        return Ok(Vec::new());
    }
    let refs = spec
        .tls
        .as_ref()
        .and_then(|t| t.certificate_refs.clone())
        .unwrap_or_default();
    certificate::resolve(store, holder, &refs)
}

/// An HTTPS listener's frontend validation (`spec.tls.frontend` for its port):
/// refs that do not resolve go to ResolvedRefs; none resolving is
/// `NoValidCACertificate`.
pub(crate) fn frontend_validation(l: &mut Listener, store: &Store, gw: &Gateway) {
    if l.protocol != Some(ListenerProtocol::Https) || l.port == 0 {
        return;
    }
    let Some(v) = client_validation::for_port(store, gw, l.port) else {
        return;
    };
    l.unresolved
        .extend(v.errors.into_iter().map(Unresolved::CaCertificate));
    match v.validation {
        Some(validation) => l.client_validation = Some(validation),
        None if l.not_accepted.is_none() => {
            l.not_accepted = Some(NotAccepted::NoValidCaCertificate)
        }
        None => {}
    }
}

impl Listener {
    /// Unique among a Gateway's listeners: a ListenerSet's listener names may
    /// repeat the Gateway's or another set's (`<namespace>/<set>/<name>`).
    pub fn ir_name(&self) -> String {
        match &self.origin {
            None => self.name.clone(),
            Some(set) => format!("{}/{}/{}", set.namespace, set.name, self.name),
        }
    }

    /// Accepted, and its certificates resolve: it counts for its ListenerSet.
    pub fn is_valid(&self) -> bool {
        self.is_accepted() && self.resolved_refs_ok()
    }
}
