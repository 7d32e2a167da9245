//! A Gateway of our class, read: its addresses, its listeners (its own and
//! those its ListenerSets add) with their conflicts marked, and what it asks
//! of backends.
//!
//! ```text
//!  Gateway ─ addresses (port_claims::addresses)
//!          ├ spec.listeners ──► listener::read, frontend validation, ports taken
//!          │                    by older Gateways ──► conflicts marked
//!          ├ ListenerSets naming it (listener_set::attach) ──► their listeners
//!          ├ TLS overlap across listeners (tls_overlap)
//!          └ spec.tls.backend client certificate
//! ```

use crate::Config;
use crate::backend::Backends;
use crate::certificate::{self, CertificateError};
use crate::client_validation;
use crate::listener::{self, Listener};
use crate::status::Identity;
use crate::store::Store;
use aether_ir::{Certificate, Kind, ObjectRef};
use gateway_api::apis::experimental::gateways::Gateway;

mod status;

/// A Gateway of our class, validated.
#[derive(Debug, Clone)]
pub struct GatewayModel {
    pub key: ObjectRef,
    /// uid and generation: whose status this Gateway's is.
    pub of: Identity,
    /// Err: why the addresses cannot be used.
    pub addresses: Result<Vec<String>, String>,
    /// `spec.addresses`, entry by entry, with their routability.
    pub address_requests: Vec<crate::routability::Request>,
    /// [`crate::Config::planned_addresses_are_final`]: status reports
    /// `addresses` matched against `address_requests`.
    pub addresses_final: bool,
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
    /// `taken`: the ports an older Gateway holds (see `port_claims`).
    pub fn new(
        store: &Store,
        backends: &Backends<'_>,
        config: &Config,
        key: ObjectRef,
        gw: &Gateway,
        taken: &crate::port_claims::Taken,
    ) -> Self {
        let addresses = crate::port_claims::addresses(gw, config);
        let mut listeners: Vec<Listener> = gw
            .spec
            .listeners
            .iter()
            .map(|l| {
                let holder = certificate::Holder::gateway(&key.namespace);
                let mut listener = listener::read(store, backends, holder, None, l);
                listener::frontend_validation(&mut listener, store, gw);
                listener.mark_taken(taken);
                listener
            })
            .collect();
        listener::conflicts::mark(&mut listeners);
        let listener_sets =
            crate::listener_set::attach(store, &key, gw, &mut listeners, |ls_ns, ls, l| {
                let holder = certificate::Holder {
                    group: crate::status::GROUP,
                    kind: Kind::ListenerSet,
                    namespace: ls_ns,
                };
                let mut listener = listener::read(store, backends, holder, Some(ls), l);
                listener::frontend_validation(&mut listener, store, gw);
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
            address_requests: crate::routability::requests(gw),
            addresses_final: config.planned_addresses_are_final(),
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
        gateway_api::apis::experimental::gateways::GatewayListenersTlsCertificateRefs {
            group: r.group.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            namespace: r.namespace.clone(),
        };
    let holder = certificate::Holder::gateway(gateway_ns);
    Some(certificate::resolve_one(store, holder, &as_listener_ref))
}
