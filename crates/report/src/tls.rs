//! The report port speaks TLS only; whom an agent trusts there is what the API
//! server says.
//!
//! ```text
//!  leader (writer identity): ServingCertificate::generate ── key: this process's memory only
//!       │ certificate (PEM, no key)
//!       ▼
//!  Lease aether-edge: holder, report address, report certificate   (only the writer may write it)
//!       │ get (agents may read that one Lease)
//!       ▼
//!  agent: TLS to the address, trusting exactly that certificate, server name SERVER_NAME
//!         └─ then its pod-bound token (crate::auth) says which node it speaks for
//! ```
//!
//! No CA and no Secret: each leader makes a fresh self-signed certificate when
//! it starts, and a new leader's Lease names a new one, so there is no private
//! key to store, mount, rotate or leak, and an agent that can read every Secret
//! still cannot impersonate the leader. A plain-text server, or one showing any
//! other certificate, is refused before the token is sent.

use rcgen::{CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, KeyPair};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// The name the serving certificate carries and agents check (it names the
/// service, not an address: a leader is dialled at its pod IP, which changes).
pub const SERVER_NAME: &str = "aether-edge-report";

/// The leader's serving certificate and key. `Debug` shows the certificate only.
pub struct ServingCertificate {
    certificate_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for ServingCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCertificate")
            .field("certificate_pem", &self.certificate_pem)
            .field("key_pem", &"<never shown>")
            .finish()
    }
}

impl ServingCertificate {
    /// A fresh ECDSA P-256 key and a self-signed certificate for [`SERVER_NAME`]
    /// (an end-entity certificate, server authentication only, valid ten years:
    /// it lives as long as this process).
    pub fn generate() -> Result<Self, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![SERVER_NAME.to_string()])?;
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, SERVER_NAME);
        params.distinguished_name = name;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_before = rcgen::date_time_ymd(2025, 1, 1);
        params.not_after = rcgen::date_time_ymd(2035, 1, 1);
        let certificate = params.self_signed(&key)?;
        Ok(ServingCertificate {
            certificate_pem: certificate.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// What the Lease publishes and agents pin.
    pub fn certificate_pem(&self) -> &str {
        &self.certificate_pem
    }

    /// The report server's TLS.
    pub fn server_tls(&self) -> ServerTlsConfig {
        ServerTlsConfig::new().identity(Identity::from_pem(&self.certificate_pem, &self.key_pem))
    }
}

/// An agent's TLS to the leader: `certificate_pem` (from the Lease) is the only
/// trust anchor, the server must present it for [`SERVER_NAME`].
pub fn client_tls(certificate_pem: &str) -> ClientTlsConfig {
    ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(certificate_pem))
        .domain_name(SERVER_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_leader_gets_its_own_certificate_and_its_key_is_never_shown() {
        let a = ServingCertificate::generate().unwrap();
        let b = ServingCertificate::generate().unwrap();
        assert_ne!(a.certificate_pem(), b.certificate_pem());
        assert!(
            a.certificate_pem()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        let shown = format!("{a:?}");
        assert!(
            !shown.contains("PRIVATE KEY") && !shown.contains(&a.key_pem),
            "{shown}"
        );
    }
}
