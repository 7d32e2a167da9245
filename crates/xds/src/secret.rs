//! IR certificates and CA bundles → Envoy `Secret` (SDS), and the references
//! listeners and clusters carry instead of the PEM.
//!
//! ```text
//!  Listener ── chain ── DownstreamTlsContext ─ tls_certificate_sds_secret_configs ─┐
//!                                           └─ validation_context_sds_secret_config ┤ name, ADS
//!  Cluster ─── UpstreamTlsContext ───────────── (the same two)  ───────────────────┤
//!                                                                                   ▼
//!  Secret edge_cert_<ns>_<secret>  { tls_certificate: chain + private key }
//!  Secret edge_ca_<ns>_<configmap> { validation_context: trusted_ca }
//! ```
//!
//! A secret is named after what it was read from (see `aether_ir::names`), not
//! after its content or its users: a rotated certificate is a new version of
//! the same secret and no listener or cluster changes, so nothing drains. One
//! Secret used by several listeners and clusters is one resource. The private
//! key lives in the Secret resource alone (redacted wherever it is shown, see
//! `render.rs`).
//!
//! Only the PEM moves here: how a peer is verified (trust chain verification,
//! subject alt names) stays beside the reference, in a combined validation
//! context that Envoy merges with the secret's.

use crate::any::ads_config_source;
use crate::snapshot::{Resource, ResourceType};
use aether_ir as ir;
use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, SdsSecretConfig, Secret, TlsCertificate, secret,
};
use prost::Message;
use sha2::{Digest, Sha256};

/// The SDS name of a certificate: its Secret's.
pub fn certificate_name(c: &ir::Certificate) -> String {
    ir::names::certificate(&c.secret)
}

/// The SDS name of a CA bundle: its ConfigMaps', or (read from nowhere) its
/// content's digest.
pub fn ca_bundle_name(b: &ir::CaBundle) -> String {
    ir::names::ca_bundle(&b.sources).unwrap_or_else(|| {
        ir::names::ca_bundle_by_digest(&hex::encode(Sha256::digest(b.pem.as_bytes())))
    })
}

/// A certificate chain and its private key.
pub fn certificate(c: &ir::Certificate) -> Secret {
    Secret {
        name: certificate_name(c),
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(inline(&c.certificate_chain)),
            private_key: Some(inline(&c.private_key)),
            ..Default::default()
        })),
    }
}

/// CA certificates a peer's certificate must chain to.
pub fn ca_bundle(b: &ir::CaBundle) -> Secret {
    Secret {
        name: ca_bundle_name(b),
        r#type: Some(secret::Type::ValidationContext(
            CertificateValidationContext {
                trusted_ca: Some(inline(&b.pem)),
                ..Default::default()
            },
        )),
    }
}

/// "Fetch the secret `name` over the ADS stream you already have."
pub fn sds(name: String) -> SdsSecretConfig {
    SdsSecretConfig {
        name,
        sds_config: Some(ads_config_source()),
    }
}

/// The SDS secrets one TLS chain names: its certificates, its client CAs.
/// None for a chain that terminates no TLS (passthrough) or is not sent (see
/// `listener.rs`): Envoy would never ask for them.
pub fn of_chain(chain: &ir::TlsChain) -> Vec<Secret> {
    let sent = chain.route_table.is_some() || chain.forward.is_some();
    if !sent || chain.certificates.is_empty() {
        return vec![];
    }
    chain
        .certificates
        .iter()
        .map(certificate)
        .chain(
            chain
                .client_validation
                .iter()
                .map(|v| ca_bundle(&v.trusted_ca)),
        )
        .collect()
}

/// The SDS secrets a cluster's TLS reads, as Secret resources.
pub fn of_cluster(c: &ir::Cluster) -> Vec<Secret> {
    let Some(t) = &c.tls else {
        return vec![];
    };
    let ca = match &t.trusted_ca {
        ir::TrustedCa::Pem(bundle) => Some(ca_bundle(bundle)),
        ir::TrustedCa::File(_) => None,
    };
    ca.into_iter()
        .chain(t.client_certificate.iter().map(certificate))
        .collect()
}

/// A Secret as a snapshot resource.
pub(crate) fn resource(s: &Secret) -> Resource {
    Resource::new(&s.name, ResourceType::Secret.type_url(), s.encode_to_vec())
}

/// PEM text carried in the Secret itself.
fn inline(pem: &str) -> DataSource {
    DataSource {
        specifier: Some(data_source::Specifier::InlineString(pem.to_string())),
        ..Default::default()
    }
}

#[cfg(test)]
#[path = "secret_tests.rs"]
mod build_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(secret: &str, key: &str) -> ir::Certificate {
        ir::Certificate {
            secret: secret.into(),
            certificate_chain: "CERT".into(),
            private_key: key.into(),
        }
    }

    #[test]
    fn a_secret_is_named_after_its_source_not_its_content() {
        let (a, b) = (
            certificate(&cert("infra/web", "K1")),
            certificate(&cert("infra/web", "K2")),
        );
        assert_eq!(a.name, "edge_cert_infra_web");
        assert_eq!(a.name, b.name);
        assert_ne!(resource(&a).version, resource(&b).version);
        let bundle = |sources: Vec<ir::ObjectRef>, pem: &str| ir::CaBundle {
            sources,
            pem: pem.into(),
        };
        assert_eq!(
            ca_bundle_name(&bundle(vec![ir::ObjectRef::new("infra", "ca")], "A")),
            "edge_ca_infra_ca"
        );
        // Read from nowhere: by content, so two different ones never share a name.
        assert_ne!(
            ca_bundle_name(&bundle(vec![], "A")),
            ca_bundle_name(&bundle(vec![], "B"))
        );
    }

    #[test]
    fn references_go_over_ads() {
        let r = sds("edge_cert_infra_web".into());
        assert_eq!(r.name, "edge_cert_infra_web");
        assert_eq!(r.sds_config, Some(ads_config_source()));
    }

    #[test]
    fn only_a_chain_that_terminates_tls_names_secrets() {
        let mut c = ir::TlsChain {
            listener: "https".into(),
            server_names: vec![],
            certificates: vec![cert("infra/cert", "KEY")],
            client_validation: None,
            route_table: Some(ir::RouteTable {
                name: "edge_rt_infra_gw_443_https".into(),
                virtual_hosts: vec![],
            }),
            forward: None,
        };
        c.client_validation = Some(ir::ClientValidation {
            trusted_ca: ir::CaBundle {
                sources: vec![ir::ObjectRef::new("infra", "ca")],
                pem: "CA".into(),
            },
            allow_insecure_fallback: false,
        });
        let names =
            |c: &ir::TlsChain| -> Vec<String> { of_chain(c).into_iter().map(|s| s.name).collect() };
        assert_eq!(names(&c), vec!["edge_cert_infra_cert", "edge_ca_infra_ca"]);
        // Passthrough: Envoy never asks for them.
        c.certificates.clear();
        assert!(names(&c).is_empty());
    }
}
