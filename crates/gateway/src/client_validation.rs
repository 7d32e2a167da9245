//! Frontend client certificate validation: a Gateway's `spec.tls.frontend`,
//! resolved per HTTPS port.
//!
//! ```text
//!  spec.tls.frontend ── perPort[port].tls.validation ── (replaces, never merges)
//!                    └─ default.validation ──────────── every other HTTPS port
//!  validation ── caCertificateRefs* ── ConfigMap (core) `ca.crt`, PEM certificates
//!             │                    └─ ClusterTrustBundle (certificates.k8s.io,
//!             │                       cluster-scoped, no namespace) `spec.trustBundle`
//!             └─ mode: AllowValidOnly (a valid client certificate is required)
//!                    | AllowInsecureFallback (asked for, but not required)
//! ```
//!
//! A ref of another kind is `InvalidCACertificateKind`; a missing ConfigMap or
//! ClusterTrustBundle, no `ca.crt` or no certificate that parses is
//! `InvalidCACertificateRef`; a ConfigMap in another namespace without a
//! ReferenceGrant is `RefNotPermitted` (a ClusterTrustBundle is cluster-scoped
//! and public by design: no grant, and a ref naming a namespace is invalid). Some
//! refs invalid: the listener's ResolvedRefs says so and the valid ones are
//! used. All invalid: the listener is not accepted (`NoValidCACertificate`),
//! since serving it without validation would let in what was meant to be kept
//! out. Certificates are parsed here (as trust anchors) because a bundle Envoy
//! cannot read makes it refuse the whole listener.

use crate::reference_grant::{self, Referent};
use crate::status::GROUP;
use crate::store::Store;
use crate::vocabulary::listener;
use aether_ir::{CaBundle, ClientValidation, Kind, ObjectRef};
use gateway_api::apis::experimental::gateways::Gateway;
use k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle;
use k8s_openapi::api::core::v1::ConfigMap;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// Why a caCertificateRef does not resolve; each maps to a listener ResolvedRefs reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaRefError {
    #[error(
        "caCertificateRef {0}: kind {1} is not supported (only core ConfigMaps and certificates.k8s.io ClusterTrustBundles)"
    )]
    Kind(String, String),
    #[error("caCertificateRef {0} is not permitted by any ReferenceGrant")]
    RefNotPermitted(String),
    #[error("caCertificateRef {0}: {1}")]
    Invalid(String, String),
}

impl CaRefError {
    pub fn reason(&self) -> listener::Reason {
        match self {
            CaRefError::Kind(..) => listener::Reason::InvalidCACertificateKind,
            CaRefError::RefNotPermitted(_) => listener::Reason::RefNotPermitted,
            CaRefError::Invalid(..) => listener::Reason::InvalidCACertificateRef,
        }
    }
}

/// What the frontend validation of one HTTPS port comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortValidation {
    /// `None`: no ref resolved (the listener is then not accepted).
    pub validation: Option<ClientValidation>,
    /// The refs that did not resolve, in order.
    pub errors: Vec<CaRefError>,
}

/// A validation block of either generated type (default or perPort).
struct Spec<'a> {
    refs: Vec<(&'a str, &'a str, &'a str, Option<&'a str>)>,
    insecure: bool,
}

/// The validation that applies to HTTPS listeners on `port`, if any.
pub fn for_port(store: &Store, gw: &Gateway, port: u16) -> Option<PortValidation> {
    let spec = spec_for_port(gw, port)?;
    let ns = gw.metadata.namespace.as_deref().unwrap_or_default();
    let mut pem = String::new();
    let mut sources = Vec::new();
    let mut errors = Vec::new();
    for (group, kind, name, namespace) in spec.refs {
        match resolve(store, ns, group, kind, name, namespace) {
            Ok(bundle) => {
                pem.push_str(bundle.trim_end());
                pem.push('\n');
                sources.push(source(ns, group, kind, name, namespace));
            }
            Err(e) => errors.push(e),
        }
    }
    let validation = (!pem.is_empty()).then_some(ClientValidation {
        trusted_ca: CaBundle { sources, pem },
        allow_insecure_fallback: spec.insecure,
    });
    Some(PortValidation { validation, errors })
}

/// Does any validation (default or per port) let clients in without a valid
/// certificate? (The Gateway's `InsecureFrontendValidationMode` condition.)
pub fn insecure_fallback(gw: &Gateway) -> bool {
    let Some(frontend) = gw.spec.tls.as_ref().and_then(|t| t.frontend.as_ref()) else {
        return false;
    };
    let default = frontend.default.validation.as_ref().is_some_and(|v| {
        matches!(
            v.mode,
            Some(gateway_api::apis::experimental::gateways::GatewayTlsFrontendDefaultValidationMode::AllowInsecureFallback)
        )
    });
    let per_port = frontend.per_port.iter().flatten().any(|p| {
        p.tls.validation.as_ref().is_some_and(|v| {
            matches!(
                v.mode,
                Some(gateway_api::apis::experimental::gateways::GatewayTlsFrontendPerPortTlsValidationMode::AllowInsecureFallback)
            )
        })
    });
    default || per_port
}

fn spec_for_port(gw: &Gateway, port: u16) -> Option<Spec<'_>> {
    use gateway_api::apis::experimental::gateways::{
        GatewayTlsFrontendDefaultValidationMode as DefaultMode,
        GatewayTlsFrontendPerPortTlsValidationMode as PortMode,
    };
    let frontend = gw.spec.tls.as_ref()?.frontend.as_ref()?;
    let per_port = frontend
        .per_port
        .iter()
        .flatten()
        .find(|p| p.port == i32::from(port));
    // The default and perPort blocks have distinct generated types, same fields.
    macro_rules! spec {
        ($v:expr, $fallback:path) => {
            Some(Spec {
                refs: $v
                    .ca_certificate_refs
                    .iter()
                    .map(|r| {
                        let ns = r.namespace.as_deref();
                        (r.group.as_str(), r.kind.as_str(), r.name.as_str(), ns)
                    })
                    .collect(),
                insecure: matches!($v.mode, Some($fallback)),
            })
        };
    }
    match per_port {
        Some(p) => spec!(p.tls.validation.as_ref()?, PortMode::AllowInsecureFallback),
        None => spec!(
            frontend.default.validation.as_ref()?,
            DefaultMode::AllowInsecureFallback
        ),
    }
}

/// The group of ClusterTrustBundle.
pub const CERTIFICATES_GROUP: &str = "certificates.k8s.io";

/// Is this (group, kind) a ClusterTrustBundle?
pub fn is_trust_bundle(group: &str, kind: &str) -> bool {
    group == CERTIFICATES_GROUP && kind == "ClusterTrustBundle"
}

/// Where a resolved bundle came from, as the CA bundle's identity: a
/// ClusterTrustBundle with an empty namespace (no ConfigMap has one).
fn source(
    gateway_ns: &str,
    group: &str,
    kind: &str,
    name: &str,
    namespace: Option<&str>,
) -> ObjectRef {
    if is_trust_bundle(group, kind) {
        ObjectRef::new("", name)
    } else {
        ObjectRef::new(namespace.unwrap_or(gateway_ns), name)
    }
}

/// A ClusterTrustBundle's `spec.trustBundle`, every PEM certificate in it parsed.
pub fn trust_bundle(store: &Store, name: &str) -> Result<String, String> {
    let ctb: &ClusterTrustBundle = store.get("", name).ok_or("ClusterTrustBundle not found")?;
    let pem = &ctb.spec.trust_bundle;
    check_bundle(pem).map_err(|why| why.replace("ca.crt", "trustBundle"))?;
    Ok(pem.clone())
}

/// One ref's `ca.crt`, every PEM certificate in it parsed.
fn resolve(
    store: &Store,
    gateway_ns: &str,
    group: &str,
    kind: &str,
    name: &str,
    namespace: Option<&str>,
) -> Result<String, CaRefError> {
    if is_trust_bundle(group, kind) {
        let shown = format!("ClusterTrustBundle {name}");
        if namespace.is_some() {
            let why = "a ClusterTrustBundle is cluster-scoped: namespace must not be set";
            return Err(CaRefError::Invalid(shown, why.into()));
        }
        return trust_bundle(store, name).map_err(|why| CaRefError::Invalid(shown, why));
    }
    let ns = namespace.unwrap_or(gateway_ns);
    let shown = format!("{ns}/{name}");
    if !group.is_empty() || kind != "ConfigMap" {
        return Err(CaRefError::Kind(
            shown,
            crate::status::group_kind(group, kind),
        ));
    }
    let from = Referent {
        group: GROUP,
        kind: Kind::Gateway.as_str(),
        namespace: gateway_ns,
        name: "",
    };
    let to = Referent {
        group: "",
        kind: "ConfigMap",
        namespace: ns,
        name,
    };
    if !reference_grant::permitted(store, from, to) {
        return Err(CaRefError::RefNotPermitted(shown));
    }
    let invalid = |why: &str| CaRefError::Invalid(shown.clone(), why.to_string());
    let cm: &ConfigMap = store
        .get(ns, name)
        .ok_or_else(|| invalid("ConfigMap not found"))?;
    let bundle = cm
        .data
        .as_ref()
        .and_then(|d| d.get("ca.crt"))
        .ok_or_else(|| invalid("no ca.crt key"))?;
    check_bundle(bundle).map_err(|why| invalid(&why))?;
    Ok(bundle.clone())
}

/// At least one certificate, and every one a trust anchor rustls (webpki)
/// can read.
pub fn check_bundle(bundle: &str) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    for der in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
        let der = der.map_err(|e| format!("ca.crt is not PEM: {e}"))?;
        roots
            .add(der)
            .map_err(|e| format!("ca.crt holds a certificate that does not parse: {e}"))?;
    }
    if roots.is_empty() {
        return Err("ca.crt holds no PEM certificate".into());
    }
    Ok(())
}
