//! Gateways and their listeners: what is valid, what conflicts, what can be served.
//!
//! ```text
//!  Gateway ── addresses (IPAddress or the configured default)
//!          └─ Listener* ── protocol (HTTP | HTTPS | TLS Passthrough/Terminate | TCP | UDP;
//!                       │             others: UnsupportedProtocol)
//!                       ├─ port groups (TCP and UDP ports apart): HTTP, {HTTPS, TLS}
//!                       │   and TCP cannot share a port → ProtocolConflict;
//!                       │   same hostname (or none) on one port → HostnameConflict
//!                       ├─ HTTPS / TLS Terminate certificateRefs → certificates (ResolvedRefs)
//!                       ├─ HTTPS: the Gateway's frontend validation for the port
//!                       │   (client_validation.rs: CA refs → ResolvedRefs, none → NoValidCACertificate)
//!                       └─ allowedRoutes (namespaces, kinds the protocol carries)
//! ```
//!
//! A listener is *programmable* when it is accepted, not conflicted, its refs
//! resolve and it supports at least one route kind. Routes may attach to any
//! listener (attachment counts do not depend on listener health); only
//! programmable listeners reach the IR.

use crate::Config;
use crate::allowed_routes::{self, AllowedNamespaces};
use crate::certificate;
use crate::certificate::CertificateError;
use crate::client_validation::{self, CaRefError};
use crate::hostname::{self, Wildcard};
use crate::status::{
    Condition, GatewayCondition, GatewayStatus, GatewayStatusAddress, Identity, ListenerCondition,
    ListenerStatus, RouteGroupKind, set_condition,
};
use crate::store::Store;
use crate::vocabulary::{gateway, listener};
use aether_ir::{Certificate, ClientValidation, ObjectRef, PortProtocol, names};
use gateway_api::apis::standard::gateways::GatewayListenersTlsMode;
use gateway_api::apis::standard::gateways::{Gateway, GatewayListeners};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

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
    pub fn route_kinds(self) -> &'static [&'static str] {
        match self {
            ListenerProtocol::Http | ListenerProtocol::Https => &allowed_routes::HTTP_KINDS,
            ListenerProtocol::TlsPassthrough | ListenerProtocol::TlsTerminate => &["TLSRoute"],
            ListenerProtocol::Tcp => &["TCPRoute"],
            ListenerProtocol::Udp => &["UDPRoute"],
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
    /// Accepted, Conflicted and ResolvedRefs are decided here; Programmed derives.
    not_accepted: Option<NotAccepted>,
    conflicted: Option<Conflict>,
    /// Every reference that does not resolve, in the order found.
    unresolved: Vec<Unresolved>,
    /// Routes attached (Accepted) here, by (kind, route).
    pub attached: BTreeSet<(&'static str, ObjectRef)>,
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
}

impl Unresolved {
    fn reason(&self) -> listener::Reason {
        match self {
            Unresolved::RouteKinds(_) => listener::Reason::InvalidRouteKinds,
            Unresolved::Certificate(e) => e.reason(),
            Unresolved::CaCertificate(e) => e.reason(),
        }
    }

    fn message(&self) -> String {
        match self {
            Unresolved::RouteKinds(kinds) => {
                format!("unsupported route kinds: {}", kinds.join(", "))
            }
            Unresolved::Certificate(e) => e.to_string(),
            Unresolved::CaCertificate(e) => e.to_string(),
        }
    }
}

impl Listener {
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
    /// resolving is `NoValidCACertificate`: not accepted).
    fn resolved_refs_ok(&self) -> bool {
        self.unresolved
            .iter()
            .all(|u| matches!(u, Unresolved::RouteKinds(_) | Unresolved::CaCertificate(_)))
    }

    pub fn supports_kind(&self, kind: &str) -> bool {
        self.supported_kinds.iter().any(|k| k.kind == kind)
    }
}

/// A Gateway of our class, validated.
#[derive(Debug, Clone)]
pub struct GatewayModel {
    pub key: ObjectRef,
    /// uid and generation: whose status this Gateway's is.
    pub of: Identity,
    /// Err: why the addresses cannot be used.
    pub addresses: Result<Vec<String>, String>,
    /// Why `spec.infrastructure.parametersRef` cannot be used: we read no
    /// parameters kind, so any reference is invalid (the Gateway is not accepted).
    pub invalid_parameters: Option<String>,
    pub listeners: Vec<Listener>,
    /// `spec.tls.frontend` lets clients in without a valid certificate somewhere.
    pub insecure_frontend_validation: bool,
    /// The ListenerSets naming this Gateway, in precedence order.
    pub listener_sets: Vec<crate::listener_set::ListenerSetModel>,
    /// `spec.allowedListeners` admits some namespace.
    pub allows_listener_sets: bool,
    /// `spec.tls.backend.clientCertificateRef`: `None` when not set; else the
    /// certificate presented on TLS to backends, or why it cannot be used.
    pub backend_client_certificate: Option<Result<Certificate, CertificateError>>,
}

impl GatewayModel {
    pub fn new(store: &Store, config: &Config, key: ObjectRef, gw: &Gateway) -> Self {
        let addresses = addresses(gw, config);
        let mut listeners: Vec<Listener> = gw
            .spec
            .listeners
            .iter()
            .map(|l| {
                let holder = certificate::Holder::gateway(&key.namespace);
                let mut listener = listener(store, holder, None, l);
                frontend_validation(&mut listener, store, gw);
                listener
            })
            .collect();
        mark_conflicts(&mut listeners);
        let listener_sets =
            crate::listener_set::attach(store, &key, gw, &mut listeners, |ls_ns, ls, l| {
                let holder = certificate::Holder {
                    kind: "ListenerSet",
                    namespace: ls_ns,
                };
                let mut listener = listener(store, holder, Some(ls), l);
                frontend_validation(&mut listener, store, gw);
                listener
            });
        crate::tls_overlap::mark(&mut listeners);
        let invalid_parameters = gw
            .spec
            .infrastructure
            .as_ref()
            .and_then(|i| i.parameters_ref.as_ref())
            .map(|p| {
                format!(
                    "parametersRef {}/{} {}: no parameters kind is supported",
                    p.group, p.kind, p.name
                )
            });
        let backend_client_certificate = backend_client_certificate(store, &key.namespace, gw);
        GatewayModel {
            of: Identity::of(&gw.metadata),
            key,
            addresses,
            invalid_parameters,
            listeners,
            insecure_frontend_validation: client_validation::insecure_fallback(gw),
            backend_client_certificate,
            listener_sets,
            allows_listener_sets: crate::listener_set::allows_any(gw),
        }
    }

    /// Served: accepted parameters, addresses usable and at least one listener
    /// programmable.
    pub fn is_served(&self) -> bool {
        self.invalid_parameters.is_none()
            && self.addresses.is_ok()
            && self.listeners.iter().any(Listener::is_programmable)
    }

    pub fn status(&self) -> GatewayStatus {
        let g = self.of.generation;
        let served = self.is_served();
        let mut conditions = Vec::new();
        let own = || self.listeners.iter().filter(|l| l.origin.is_none());
        let accepted_count = own().filter(|l| l.is_accepted()).count();
        let invalid: Vec<&str> = own()
            .filter(|l| !l.is_accepted())
            .map(|l| l.name.as_str())
            .collect();
        use gateway::{Reason, Type};
        let accepted = |ok: bool, reason: Reason, message: String| {
            GatewayCondition::new(Type::Accepted, ok, reason, message, g)
        };
        let accepted = match &self.addresses {
            _ if let Some(why) = &self.invalid_parameters => {
                accepted(false, Reason::InvalidParameters, why.clone())
            }
            Err(why) => accepted(false, Reason::UnsupportedAddress, why.clone()),
            Ok(_) if invalid.is_empty() => {
                accepted(true, Reason::Accepted, "Gateway is accepted".into())
            }
            Ok(_) => accepted(
                accepted_count > 0,
                Reason::ListenersNotValid,
                format!("invalid listeners: {}", invalid.join(", ")),
            ),
        };
        set_condition(&mut conditions, accepted);
        let (ok, reason, message) = if served {
            (true, Reason::Programmed, "Gateway is programmed")
        } else if self.invalid_parameters.is_some() {
            (
                false,
                Reason::Invalid,
                "the Gateway is not accepted: invalid parametersRef",
            )
        } else if self.addresses.is_err() {
            (false, Reason::AddressNotUsable, "no usable address")
        } else {
            (false, Reason::Invalid, "no listener can be programmed")
        };
        set_condition(
            &mut conditions,
            Condition::new(Type::Programmed, ok, reason, message, g),
        );
        if let Some(c) = &self.backend_client_certificate {
            let resolved = match c {
                Ok(_) => Condition::new(
                    Type::ResolvedRefs,
                    true,
                    Reason::ResolvedRefs,
                    "all references resolved",
                    g,
                ),
                Err(e) => {
                    let reason = match e {
                        CertificateError::RefNotPermitted(_) => Reason::RefNotPermitted,
                        CertificateError::Invalid(..) => Reason::InvalidClientCertificateRef,
                    };
                    let message = format!("spec.tls.backend.clientCertificateRef: {e}");
                    Condition::new(Type::ResolvedRefs, false, reason, message, g)
                }
            };
            set_condition(&mut conditions, resolved);
        }
        if self.insecure_frontend_validation {
            let insecure = Condition::new(
                Type::InsecureFrontendValidationMode,
                true,
                Reason::ConfigurationChanged,
                "spec.tls.frontend allows clients without a valid certificate (AllowInsecureFallback)",
                g,
            );
            set_condition(&mut conditions, insecure);
        }
        let addresses = match (&self.addresses, served) {
            (Ok(a), true) => a
                .iter()
                .map(|v| GatewayStatusAddress {
                    type_: "IPAddress".into(),
                    value: v.clone(),
                })
                .collect(),
            _ => vec![],
        };
        let attached_sets = self
            .listener_sets
            .iter()
            .filter(|s| s.is_attached(self))
            .count();
        GatewayStatus {
            addresses,
            conditions,
            listeners: own().map(|l| listener_status(l, served, g)).collect(),
            attached_listener_sets: (!self.listener_sets.is_empty() || self.allows_listener_sets)
                .then(|| i32::try_from(attached_sets).unwrap_or(i32::MAX)),
            of: self.of.clone(),
        }
    }
}

pub(crate) fn listener_status(l: &Listener, gateway_served: bool, g: i64) -> ListenerStatus {
    let mut c = Vec::new();
    for condition in l.acceptance(g) {
        set_condition(&mut c, condition);
    }
    set_condition(&mut c, l.resolved_refs(g));
    if let Some(why) = &l.overlapping_tls {
        let reason = listener::Reason::OverlappingHostnames;
        let overlap = Condition::new(
            listener::Type::OverlappingTLSConfig,
            true,
            reason,
            why.clone(),
            g,
        );
        set_condition(&mut c, overlap);
    }
    set_condition(&mut c, l.programmed(gateway_served, g));
    ListenerStatus {
        name: l.name.clone(),
        supported_kinds: l.supported_kinds.clone(),
        attached_routes: i32::try_from(l.attached.len()).unwrap_or(i32::MAX),
        conditions: c,
        attached: l
            .attached
            .iter()
            .map(|(kind, r)| names::route_key(kind, &r.namespace, &r.name))
            .collect(),
    }
}

impl Listener {
    /// Accepted and Conflicted: a conflict names its reason on both.
    fn acceptance(&self, g: i64) -> [ListenerCondition; 2] {
        use listener::{Reason, Type};
        if let Some(conflict) = &self.conflicted {
            let (reason, message) = conflict.reason_message();
            return [
                Condition::new(Type::Accepted, false, reason, message, g),
                Condition::new(Type::Conflicted, true, reason, message, g),
            ];
        }
        let accepted = match &self.not_accepted {
            Some(problem) => problem.condition(g),
            None => Condition::new(
                Type::Accepted,
                true,
                Reason::Accepted,
                "listener is accepted",
                g,
            ),
        };
        let none = Condition::new(
            Type::Conflicted,
            false,
            Reason::NoConflicts,
            "no conflicts",
            g,
        );
        [accepted, none]
    }

    /// ResolvedRefs: the first unresolved reference's reason, every one in the message.
    fn resolved_refs(&self, g: i64) -> ListenerCondition {
        let kind = (listener::Type::ResolvedRefs, listener::Reason::ResolvedRefs);
        crate::status::resolved_refs(
            kind,
            &self.unresolved,
            Unresolved::reason,
            Unresolved::message,
            g,
        )
    }

    /// Programmed, as planned (the fleet's ACKs come later, in `assemble`).
    fn programmed(&self, gateway_served: bool, g: i64) -> ListenerCondition {
        use listener::{Reason, Type};
        let not_programmed = if !self.is_accepted() {
            Some("the listener is not accepted")
        } else if !self.resolved_refs_ok() {
            Some("the listener's references do not resolve")
        } else if self.supported_kinds.is_empty() {
            Some("the listener supports no route kind")
        } else if !gateway_served {
            Some("the Gateway is not served")
        } else {
            None
        };
        let (ok, reason, message) = match not_programmed {
            None => (true, Reason::Programmed, "listener is programmed"),
            // A ListenerSet's listener that loses a conflict says which (the
            // conformance suite asks for the conflict reason there).
            Some(why) => match (&self.origin, &self.conflicted) {
                (Some(_), Some(conflict)) => (false, conflict.reason_message().0, why),
                _ => (false, Reason::Invalid, why),
            },
        };
        Condition::new(Type::Programmed, ok, reason, message, g)
    }
}

/// spec.addresses of type IPAddress (or no type), else the configured default.
/// An IPAddress without a value asks for any address (GatewayAddressEmpty):
/// the configured default here, the load balancer's in service mode.
fn addresses(gw: &Gateway, config: &Config) -> Result<Vec<String>, String> {
    let spec = gw.spec.addresses.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    for a in spec {
        let ty = a.r#type.as_deref().unwrap_or("IPAddress");
        if ty != "IPAddress" {
            return Err(format!(
                "address type {ty} is not supported (only IPAddress)"
            ));
        }
        let Some(value) = a.value.as_deref().filter(|v| !v.is_empty()) else {
            out.push(config.default_address.clone());
            continue;
        };
        let ip: IpAddr = value
            .parse()
            .map_err(|_| format!("address {value:?} is not an IP address"))?;
        out.push(ip.to_string());
    }
    if out.is_empty() {
        out.push(config.default_address.clone());
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn listener(
    store: &Store,
    holder: certificate::Holder<'_>,
    origin: Option<&ObjectRef>,
    spec: &GatewayListeners,
) -> Listener {
    let tls_mode = spec.tls.as_ref().and_then(|t| t.mode.clone());
    let protocol = match spec.protocol.as_str() {
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
    };
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
    let mut certificates = Vec::new();
    if protocol.is_some_and(ListenerProtocol::terminates_tls) {
        let refs = spec
            .tls
            .as_ref()
            .and_then(|t| t.certificate_refs.clone())
            .unwrap_or_default();
        match certificate::resolve(store, holder, &refs) {
            Ok(c) => certificates = c,
            Err(e) => unresolved.push(Unresolved::Certificate(e)),
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
        not_accepted,
        conflicted: None,
        unresolved,
        attached: BTreeSet::new(),
        overlapping_tls: None,
    }
}

/// The Gateway's backend client certificate (`spec.tls.backend`), resolved
/// as a listener's certificateRef is (a core Secret with tls.crt and tls.key).
fn backend_client_certificate(
    store: &Store,
    gateway_ns: &str,
    gw: &Gateway,
) -> Option<Result<Certificate, CertificateError>> {
    let r = gw
        .spec
        .tls
        .as_ref()?
        .backend
        .as_ref()?
        .client_certificate_ref
        .as_ref()?;
    let as_listener_ref =
        gateway_api::apis::standard::gateways::GatewayListenersTlsCertificateRefs {
            group: r.group.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            namespace: r.namespace.clone(),
        };
    let holder = certificate::Holder::gateway(gateway_ns);
    Some(certificate::resolve_one(store, holder, &as_listener_ref))
}

/// An HTTPS listener's frontend validation (`spec.tls.frontend` for its port):
/// refs that do not resolve go to ResolvedRefs; none resolving is
/// `NoValidCACertificate`.
fn frontend_validation(l: &mut Listener, store: &Store, gw: &Gateway) {
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

/// Marks indistinct listeners. Among listeners on one port that we serve: HTTP
/// and HTTPS together conflict on protocol (all of them); otherwise listeners
/// sharing a hostname (or both without) conflict on hostname. No winner is picked.
fn mark_conflicts(listeners: &mut [Listener]) {
    let mut by_port: BTreeMap<(bool, u16), Vec<usize>> = BTreeMap::new();
    for (i, l) in listeners.iter().enumerate() {
        if let Some(p) = l.protocol
            && l.not_accepted.is_none()
        {
            by_port
                .entry((p == ListenerProtocol::Udp, l.port))
                .or_default()
                .push(i);
        }
    }
    for ((_, port), idx) in by_port {
        let classes: BTreeSet<u8> = idx
            .iter()
            .filter_map(|&i| listeners[i].protocol.map(ListenerProtocol::port_class))
            .collect();
        if classes.len() > 1 {
            let mut protocols: Vec<&str> = idx
                .iter()
                .filter_map(|&i| listeners[i].protocol.map(protocol_name))
                .collect();
            protocols.sort_unstable();
            protocols.dedup();
            for &i in &idx {
                listeners[i].conflicted = Some(Conflict::Protocol(format!(
                    "{} listeners share port {port}",
                    protocols.join(" and ")
                )));
            }
            continue;
        }
        let mut by_host: BTreeMap<Option<String>, Vec<usize>> = BTreeMap::new();
        for &i in &idx {
            by_host
                .entry(listeners[i].hostname.clone())
                .or_default()
                .push(i);
        }
        for (host, same) in by_host.into_iter().filter(|(_, v)| v.len() > 1) {
            let names: Vec<&str> = same.iter().map(|&i| listeners[i].name.as_str()).collect();
            let msg = format!(
                "listeners {} share port {port} and hostname {}",
                names.join(", "),
                host.as_deref().unwrap_or("(none)")
            );
            for &i in &same {
                listeners[i].conflicted = Some(Conflict::Hostname(msg.clone()));
            }
        }
    }
}

/// ListenerSets: listeners from `from` on are checked, in order, against every
/// accepted listener before them, and lose to it (the first in precedence
/// wins, unlike listeners of one Gateway).
pub(crate) fn mark_later_conflicts(listeners: &mut [Listener], from: usize) {
    for i in from..listeners.len() {
        let (earlier, rest) = listeners.split_at_mut(i);
        let l = &mut rest[0];
        let Some(p) = l.protocol.filter(|_| l.not_accepted.is_none()) else {
            continue;
        };
        let same_port = |e: &&Listener| {
            e.is_accepted()
                && e.port == l.port
                && e.protocol.is_some_and(|q| q.is_udp() == p.is_udp())
        };
        for e in earlier.iter().filter(same_port) {
            let q = e.protocol.expect("filtered on a protocol");
            if q.port_class() != p.port_class() {
                l.conflicted = Some(Conflict::Protocol(format!(
                    "port {} is served as {} by listener {}, which comes first",
                    l.port,
                    protocol_name(q),
                    e.name
                )));
                break;
            }
            if e.hostname == l.hostname {
                l.conflicted = Some(Conflict::Hostname(format!(
                    "listener {} comes first with port {} and hostname {}",
                    e.name,
                    l.port,
                    l.hostname.as_deref().unwrap_or("(none)")
                )));
                break;
            }
        }
    }
}

impl ListenerProtocol {
    fn is_udp(self) -> bool {
        self == ListenerProtocol::Udp
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

fn protocol_name(p: ListenerProtocol) -> &'static str {
    match p {
        ListenerProtocol::Http => "HTTP",
        ListenerProtocol::Https => "HTTPS",
        ListenerProtocol::TlsPassthrough | ListenerProtocol::TlsTerminate => "TLS",
        ListenerProtocol::Tcp => "TCP",
        ListenerProtocol::Udp => "UDP",
    }
}
