//! BackendTLSPolicy: TLS from the Gateway to a Service's port.
//!
//! ```text
//!  BackendTLSPolicy ── targetRefs* (core Service, sectionName = a port's name)
//!                   └─ validation ── caCertificateRefs* (ConfigMap ca.crt, ClusterTrustBundle
//!                                    spec.trustBundle) | wellKnownCACertificates: System
//!                                 ├─ hostname (the SNI; the name verified when no SANs)
//!                                 └─ subjectAltNames* (Hostname → DNS, URI → URI; any of them)
//! ```
//!
//! Several policies on one target (same Service, same sectionName or both
//! none): the oldest wins (creationTimestamp, then namespace/name), the others
//! are `Accepted=False/Conflicted`. A policy naming a port wins over one for
//! the whole Service on that port. A policy whose CAs all fail
//! (`NoValidCACertificate`) makes its backends invalid: their share of
//! requests answers 500, never plain text or TLS that trusts anyone.
//!
//! A policy's ancestors are the Gateways of our class that a route attached to
//! them sends to the Service: each gets the policy's conditions.

use crate::client_validation::{check_bundle, is_trust_bundle, trust_bundle as trust_bundle_pem};
use crate::status::{AncestorStatus, Condition, Identity};
use crate::store::Store;
use crate::vocabulary::policy::{Reason, Type};
use aether_ir::{CaBundle, ObjectRef, SubjectAltName, TrustedCa, UpstreamTls};
use gateway_api::apis::standard::backendtlspolicies::{
    BackendTlsPolicy, BackendTlsPolicyValidation, BackendTlsPolicyValidationCaCertificateRefs,
    BackendTlsPolicyValidationSubjectAltNamesType as SanType,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::collections::{BTreeMap, BTreeSet};

pub type PolicyCondition = Condition<Type, Reason>;

/// What one policy comes to.
#[derive(Debug, Clone)]
pub struct PolicyModel {
    pub key: ObjectRef,
    pub of: Identity,
    created: Option<Time>,
    /// (Service, sectionName) it targets.
    targets: Vec<(ObjectRef, Option<String>)>,
    /// The TLS to speak, or why the policy cannot be met.
    pub tls: Result<UpstreamTls, String>,
    /// CA refs that did not resolve: (reason, message).
    unresolved: Vec<(Reason, String)>,
    /// `wellKnownCACertificates` we do not know.
    invalid: Option<String>,
    /// The policy that wins its target, when it is not this one.
    conflicted_by: Option<ObjectRef>,
}

/// Every BackendTLSPolicy, conflicts decided.
#[derive(Debug, Default)]
pub struct Policies {
    models: Vec<PolicyModel>,
    /// (Service, sectionName) → the winning policy.
    winners: BTreeMap<(ObjectRef, Option<String>), usize>,
}

/// The system's CA bundle (Debian and most distributions), for
/// `wellKnownCACertificates: System`.
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

impl Policies {
    pub fn new(store: &Store) -> Policies {
        let mut models: Vec<PolicyModel> = store
            .all::<BackendTlsPolicy>()
            .iter()
            .map(|(key, p)| model(store, key, p))
            .collect();
        let mut order: Vec<usize> = (0..models.len()).collect();
        order.sort_by_key(|&i| {
            let m = &models[i];
            (m.created.is_none(), m.created.clone(), m.key.clone())
        });
        let mut winners = BTreeMap::new();
        for i in order {
            for target in models[i].targets.clone() {
                match winners.get(&target) {
                    None => {
                        winners.insert(target, i);
                    }
                    Some(&w) if w != i => {
                        models[i].conflicted_by = Some(models[w].key.clone());
                    }
                    Some(_) => {}
                }
            }
        }
        Policies { models, winners }
    }

    /// The policy for a Service port (by its name): the one naming the port,
    /// else the one for the whole Service.
    pub fn lookup(&self, service: &ObjectRef, port_name: &str) -> Option<&PolicyModel> {
        let named = (!port_name.is_empty())
            .then(|| {
                self.winners
                    .get(&(service.clone(), Some(port_name.to_string())))
            })
            .flatten();
        named
            .or_else(|| self.winners.get(&(service.clone(), None)))
            .map(|&i| &self.models[i])
    }

    /// Each policy's status on its ancestors: the Gateways (of ours) that
    /// `routes_to` says send to one of its target Services.
    pub fn status(
        &self,
        gateways_sending_to: impl Fn(&ObjectRef) -> BTreeSet<ObjectRef>,
        controller_name: &str,
    ) -> BTreeMap<ObjectRef, PolicyStatus> {
        let mut out = BTreeMap::new();
        for m in &self.models {
            let ancestors: BTreeSet<ObjectRef> = m
                .targets
                .iter()
                .flat_map(|(svc, _)| gateways_sending_to(svc))
                .collect();
            if ancestors.is_empty() {
                continue;
            }
            let status = PolicyStatus::on_gateways(
                ancestors,
                &m.conditions(),
                controller_name,
                m.of.clone(),
            );
            out.insert(m.key.clone(), status);
        }
        out
    }
}

impl PolicyModel {
    fn conditions(&self) -> Vec<PolicyCondition> {
        let g = self.of.generation;
        let accepted = if let Some(winner) = &self.conflicted_by {
            let m = format!("the older policy {winner} targets the same backend");
            Condition::new(Type::Accepted, false, Reason::Conflicted, m, g)
        } else if let Some(why) = &self.invalid {
            Condition::new(Type::Accepted, false, Reason::Invalid, why.clone(), g)
        } else if let Err(why) = &self.tls {
            Condition::new(
                Type::Accepted,
                false,
                Reason::NoValidCACertificate,
                why.clone(),
                g,
            )
        } else {
            Condition::new(
                Type::Accepted,
                true,
                Reason::Accepted,
                "policy is accepted",
                g,
            )
        };
        let resolved = match self.unresolved.first() {
            None => Condition::new(
                Type::ResolvedRefs,
                true,
                Reason::ResolvedRefs,
                "all references resolved",
                g,
            ),
            Some((reason, _)) => {
                let all: Vec<&str> = self.unresolved.iter().map(|(_, m)| m.as_str()).collect();
                Condition::new(Type::ResolvedRefs, false, *reason, all.join("; "), g)
            }
        };
        vec![accepted, resolved]
    }
}

fn model(store: &Store, key: &ObjectRef, p: &BackendTlsPolicy) -> PolicyModel {
    let targets = p
        .spec
        .target_refs
        .iter()
        .filter(|t| t.group.is_empty() && t.kind == "Service")
        .map(|t| {
            (
                ObjectRef::new(&key.namespace, &t.name),
                t.section_name.clone(),
            )
        })
        .collect();
    let Validation {
        tls,
        unresolved,
        invalid,
    } = validation(store, &key.namespace, &p.spec.validation);
    PolicyModel {
        key: key.clone(),
        of: Identity::of(&p.metadata),
        created: p.metadata.creation_timestamp.clone(),
        targets,
        tls,
        unresolved,
        invalid,
        conflicted_by: None,
    }
}

/// What a `validation` stanza comes to (a BackendTLSPolicy's, or an
/// XBackend's `tls.validation`: the same API type).
#[derive(Debug, Clone)]
pub struct Validation {
    /// The TLS to speak (no client certificate), or why it cannot be met.
    pub tls: Result<UpstreamTls, String>,
    /// CA refs that did not resolve: (reason, message).
    pub unresolved: Vec<(Reason, String)>,
    /// A value we do not support (`wellKnownCACertificates`, the hostname).
    pub invalid: Option<String>,
}

/// Reads a `validation` stanza of an object in `namespace` (where its
/// ConfigMaps are).
pub fn validation(store: &Store, namespace: &str, v: &BackendTlsPolicyValidation) -> Validation {
    let mut invalid = None;
    let mut system = false;
    match v.well_known_ca_certificates.as_deref() {
        Some("System") => system = true,
        Some(other) => {
            invalid = Some(format!(
                "wellKnownCACertificates {other:?} is not supported (only System)"
            ))
        }
        None => {}
    }
    // The SNI: Envoy refuses one over 255 characters (and its refusal quoted
    // the cluster, client key and all).
    if let Err(why) =
        crate::hostname::checked("hostname", &v.hostname, crate::hostname::Wildcard::Refused)
    {
        invalid.get_or_insert(why);
    }
    let CaCertificates {
        pem,
        sources,
        unresolved,
    } = ca_certificates(store, namespace, v.ca_certificate_refs.iter().flatten());
    let trusted_ca = if system {
        Some(TrustedCa::File(SYSTEM_CA_BUNDLE.into()))
    } else if !pem.is_empty() {
        Some(TrustedCa::Pem(CaBundle { sources, pem }))
    } else {
        None
    };
    let tls = match (trusted_ca, &invalid) {
        (_, Some(why)) => Err(why.clone()),
        (None, None) => Err("no caCertificateRef resolves to a CA certificate".into()),
        (Some(trusted_ca), None) => Ok(UpstreamTls {
            sni: v.hostname.to_ascii_lowercase(),
            trusted_ca,
            subject_alt_names: subject_alt_names(v),
            client_certificate: None,
            alpn: vec![],
        }),
    };
    Validation {
        tls,
        unresolved,
        invalid,
    }
}

/// What a policy's caCertificateRefs resolve to: the CA bundles' PEM, one
/// after another, the objects it came from, and each ref that did not resolve.
#[derive(Default)]
struct CaCertificates {
    pem: String,
    sources: Vec<ObjectRef>,
    unresolved: Vec<(Reason, String)>,
}

/// Reads each caCertificateRef (a ConfigMap in `namespace`, or a
/// ClusterTrustBundle).
fn ca_certificates<'r>(
    store: &Store,
    namespace: &str,
    refs: impl Iterator<Item = &'r BackendTlsPolicyValidationCaCertificateRefs>,
) -> CaCertificates {
    let mut out = CaCertificates::default();
    for r in refs {
        let trust_bundle = is_trust_bundle(&r.group, &r.kind);
        let shown = if trust_bundle {
            format!("ClusterTrustBundle {}", r.name)
        } else {
            format!("{namespace}/{}", r.name)
        };
        if !trust_bundle && (!r.group.is_empty() || r.kind != "ConfigMap") {
            let gk = crate::status::group_kind(&r.group, &r.kind);
            out.unresolved.push((
                Reason::InvalidKind,
                format!(
                    "caCertificateRef {shown}: kind {gk} is not supported (only core ConfigMaps and certificates.k8s.io ClusterTrustBundles)"
                ),
            ));
            continue;
        }
        let bundle = if trust_bundle {
            trust_bundle_pem(store, &r.name)
        } else {
            config_map_bundle(store, namespace, &r.name)
        };
        match bundle {
            Ok(b) => {
                out.pem.push_str(b.trim_end());
                out.pem.push('\n');
                // A ClusterTrustBundle's identity has no namespace.
                let ns = if trust_bundle { "" } else { namespace };
                out.sources.push(ObjectRef::new(ns, &r.name));
            }
            Err(why) => out.unresolved.push((
                Reason::InvalidCACertificateRef,
                format!("caCertificateRef {shown}: {why}"),
            )),
        }
    }
    out
}

/// The `ca.crt` of ConfigMap `namespace/name`, checked to be a CA bundle.
fn config_map_bundle(store: &Store, namespace: &str, name: &str) -> Result<String, String> {
    store
        .get::<ConfigMap>(namespace, name)
        .ok_or("ConfigMap not found".to_string())
        .and_then(|cm| {
            cm.data
                .as_ref()
                .and_then(|d| d.get("ca.crt"))
                .cloned()
                .ok_or("no ca.crt key".to_string())
        })
        .and_then(|b| check_bundle(&b).map(|()| b))
}

/// The names the backend's certificate must carry one of: the listed SANs, or
/// else the hostname (which then is not the only name, but the one verified).
fn subject_alt_names(v: &BackendTlsPolicyValidation) -> Vec<SubjectAltName> {
    let listed: Vec<SubjectAltName> = v
        .subject_alt_names
        .iter()
        .flatten()
        .filter_map(|s| match s.r#type {
            SanType::Hostname => s.hostname.clone().map(SubjectAltName::Dns),
            SanType::Uri => s.uri.clone().map(SubjectAltName::Uri),
        })
        .collect();
    if listed.is_empty() {
        vec![SubjectAltName::Dns(v.hostname.to_ascii_lowercase())]
    } else {
        listed
    }
}

pub use crate::status::PolicyStatus;
pub type PolicyAncestorStatus = AncestorStatus<Type, Reason>;
