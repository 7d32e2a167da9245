//! Resolving an HTTPS listener's certificateRefs to PEM material.
//!
//! A ref names a core Secret (group `""`, kind `Secret`), in the Gateway's
//! namespace unless a ReferenceGrant lets the Gateway reach another. The Secret
//! must be `kubernetes.io/tls` with `tls.crt` (PEM certificate chain) and `tls.key`
//! (PEM private key). The PEM check is structural (armour lines, base64 body,
//! well-formed DER inside); Envoy itself parses the certificate and key. A key that is not the one of the first (leaf)
//! certificate is refused too: Envoy refuses the listener otherwise. That check
//! is rustls's (SubjectPublicKeyInfo of the key against the certificate's, ring
//! keys: RSA, ECDSA P-256/P-384, Ed25519); a pair it cannot read (another key
//! type, a certificate webpki will not parse) is left to Envoy. What the check
//! says of a chain and key is remembered by their digest ([`checked_key_pair`]):
//! a Gateway whose 100 HTTPS listeners name one Secret checks it once.

use crate::reference_grant::{self, Referent};
use crate::status::GROUP;
use crate::store::Store;
use crate::vocabulary::listener;
use aether_ir::{Certificate, Kind};
use gateway_api::apis::experimental::gateways::GatewayListenersTlsCertificateRefs;
use k8s_openapi::api::core::v1::Secret;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// Why a certificateRef does not resolve; each maps to a listener ResolvedRefs reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertificateError {
    #[error("certificateRef {0} is not permitted by any ReferenceGrant")]
    RefNotPermitted(String),
    #[error("certificateRef {0}: {1}")]
    Invalid(String, String),
}

impl CertificateError {
    /// The listener `ResolvedRefs` reason.
    pub fn reason(&self) -> listener::Reason {
        match self {
            CertificateError::RefNotPermitted(_) => listener::Reason::RefNotPermitted,
            CertificateError::Invalid(..) => listener::Reason::InvalidCertificateRef,
        }
    }
}

/// Who holds the certificateRefs: a Gateway, a ListenerSet or an XBackend, in its namespace
/// (the default namespace of a ref, and the `from` of a ReferenceGrant).
#[derive(Debug, Clone, Copy)]
pub struct Holder<'a> {
    /// The holder's API group (`gateway.networking.k8s.io`, or
    /// `gateway.networking.x-k8s.io` for an XBackend).
    pub group: &'a str,
    pub kind: Kind,
    pub namespace: &'a str,
}

impl<'a> Holder<'a> {
    pub fn gateway(namespace: &'a str) -> Self {
        Holder {
            group: GROUP,
            kind: Kind::Gateway,
            namespace,
        }
    }
}

/// Resolves every ref of one listener, in order. No refs at all is invalid too.
pub fn resolve(
    store: &Store,
    from: Holder<'_>,
    refs: &[GatewayListenersTlsCertificateRefs],
) -> Result<Vec<Certificate>, CertificateError> {
    if refs.is_empty() {
        return Err(CertificateError::Invalid(
            "(none)".into(),
            "an HTTPS listener needs at least one certificateRef".into(),
        ));
    }
    refs.iter().map(|r| resolve_one(store, from, r)).collect()
}

/// One certificate ref of a Gateway (a listener's, or `spec.tls.backend`'s
/// clientCertificateRef: the same fields).
pub fn resolve_one(
    store: &Store,
    holder: Holder<'_>,
    r: &GatewayListenersTlsCertificateRefs,
) -> Result<Certificate, CertificateError> {
    let ns = r.namespace.as_deref().unwrap_or(holder.namespace);
    let group = r.group.as_deref().unwrap_or("");
    let kind = r.kind.as_deref().unwrap_or("Secret");
    let shown = format!("{ns}/{}", r.name);
    if !group.is_empty() || kind != "Secret" {
        return Err(CertificateError::Invalid(
            shown,
            format!("unsupported kind {group}/{kind} (only core Secrets)"),
        ));
    }
    let from = Referent {
        group: holder.group,
        kind: holder.kind.as_str(),
        namespace: holder.namespace,
        name: "",
    };
    let to = Referent {
        group: "",
        kind: "Secret",
        namespace: ns,
        name: &r.name,
    };
    if !reference_grant::permitted(store, from, to) {
        return Err(CertificateError::RefNotPermitted(shown));
    }
    let invalid = |why: &str| CertificateError::Invalid(shown.clone(), why.to_string());
    let secret: &Secret = store.get(ns, &r.name).ok_or_else(|| {
        invalid("Secret not found (a certificateRef names a kubernetes.io/tls Secret)")
    })?;
    if secret.type_.as_deref() != Some("kubernetes.io/tls") {
        return Err(invalid("Secret type is not kubernetes.io/tls"));
    }
    let chain = tls_value(secret, "tls.crt").ok_or_else(|| invalid("missing tls.crt"))?;
    let key = tls_value(secret, "tls.key").ok_or_else(|| invalid("missing tls.key"))?;
    checked_key_pair(&chain, &key).map_err(|why| invalid(&why))?;
    Ok(Certificate {
        secret: shown,
        certificate_chain: chain,
        private_key: key,
    })
}

/// A key of a TLS Secret, from `data` or else `stringData`.
fn tls_value(secret: &Secret, key: &str) -> Option<String> {
    let from_data = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .and_then(|b| String::from_utf8(b.0.clone()).ok());
    from_data.or_else(|| {
        secret
            .string_data
            .as_ref()
            .and_then(|d| d.get(key))
            .cloned()
    })
}

/// [`check_key_pair`], remembered by a SHA-256 of the chain and the key (no key
/// material is kept): parsing a key and checking it against its certificate is
/// the costly part of a translation whose Gateway has many HTTPS listeners, and
/// its answer depends on those bytes alone. At most [`CHECKS_KEPT`] answers are
/// kept; then they are forgotten together.
fn checked_key_pair(chain: &str, key: &str) -> Result<(), String> {
    static CHECKED: OnceLock<Mutex<Answers>> = OnceLock::new();
    let digest: [u8; 32] = Sha256::new()
        .chain_update((chain.len() as u64).to_le_bytes())
        .chain_update(chain)
        .chain_update(key)
        .finalize()
        .into();
    let checked = CHECKED.get_or_init(Mutex::default);
    let lock = || checked.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(said) = lock().get(&digest) {
        return said.clone();
    }
    let said = check_key_pair(chain, key);
    let mut kept = lock();
    if kept.len() >= CHECKS_KEPT {
        kept.clear();
    }
    kept.insert(digest, said.clone());
    said
}

/// [`check_key_pair`]'s answers by the digest of what it checked.
type Answers = HashMap<[u8; 32], Result<(), String>>;

/// The most key-pair answers [`checked_key_pair`] keeps.
const CHECKS_KEPT: usize = 4096;

/// Why Envoy could not serve `chain` with `key` (each is PEM, within its
/// size, well-formed DER, and the key is the first certificate's), if it
/// could not.
fn check_key_pair(chain: &str, key: &str) -> Result<(), String> {
    if chain.len() > MAX_CHAIN_BYTES {
        return Err(format!(
            "tls.crt is {} bytes; at most {MAX_CHAIN_BYTES} are served (TLS clients refuse a \
             certificate message much past that, so every handshake would fail)",
            chain.len()
        ));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(format!(
            "tls.key is {} bytes; a private key takes at most {MAX_KEY_BYTES}",
            key.len()
        ));
    }
    if !has_pem_block(chain, |label| label == "CERTIFICATE") {
        return Err("tls.crt holds no PEM certificate".into());
    }
    if !has_pem_block(key, |label| label.ends_with("PRIVATE KEY")) {
        return Err("tls.key holds no PEM private key".into());
    }
    if !CertificateDer::pem_slice_iter(chain.as_bytes())
        .all(|c| c.is_ok_and(|c| der_well_formed(&c)))
    {
        return Err("tls.crt holds a certificate that is not well-formed DER".into());
    }
    if !PrivateKeyDer::from_pem_slice(key.as_bytes()).is_ok_and(|k| der_well_formed(k.secret_der()))
    {
        return Err("tls.key holds no well-formed DER private key".into());
    }
    if ec_key_refused(key) {
        return Err(
            "tls.key is a P-256 or P-384 key whose public point is not on its curve or \
             does not match its private scalar"
                .into(),
        );
    }
    if keys_differ(chain, key) {
        return Err("tls.key is not the private key of the first certificate in tls.crt".into());
    }
    Ok(())
}

/// The longest `tls.crt` served: 64 KiB of PEM is ~48 KiB of DER, under the
/// 64 KiB handshake message Go's crypto/tls accepts (OpenSSL's default is 100
/// KiB). A real chain of three certificates is under 8 KiB; a 1 MB one was
/// Programmed while every handshake failed.
pub const MAX_CHAIN_BYTES: usize = 64 << 10;
/// The longest `tls.key`: an 8192-bit RSA key is under 7 KiB of PEM.
pub const MAX_KEY_BYTES: usize = 16 << 10;

/// Is `key` surely not the private key of the first certificate of `chain`?
/// `false` when either cannot be read here.
fn keys_differ(chain: &str, key: &str) -> bool {
    let Some(Ok(leaf)) = CertificateDer::pem_slice_iter(chain.as_bytes()).next() else {
        return false;
    };
    let Ok(key) = PrivateKeyDer::from_pem_slice(key.as_bytes()) else {
        return false;
    };
    let Ok(signing_key) = rustls::crypto::ring::sign::any_supported_type(&key) else {
        return false;
    };
    matches!(
        rustls::sign::CertifiedKey::new(vec![leaf], signing_key).keys_match(),
        Err(rustls::Error::InconsistentKeys(
            rustls::InconsistentKeys::KeyMismatch
        ))
    )
}

/// Is `key` an ECDSA key on P-256 or P-384 (the curves ring reads) that ring
/// refuses? BoringSSL refuses it too (`POINT_IS_NOT_ON_CURVE`). Keys of other
/// types and curves are left to Envoy.
fn ec_key_refused(key: &str) -> bool {
    const P256: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
    const P384: &[u8] = &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22];
    let Ok(key) = PrivateKeyDer::from_pem_slice(key.as_bytes()) else {
        return false;
    };
    let der = key.secret_der();
    let names = |oid: &[u8]| der.windows(oid.len()).any(|w| w == oid);
    (names(P256) || names(P384)) && rustls::crypto::ring::sign::any_ecdsa_type(&key).is_err()
}

/// Whether `der` is one well-formed DER value: each length within its
/// parent, each constructed value exactly filled by its children. BoringSSL
/// refuses a certificate or key that is not; a PEM body with a span cut out
/// (a multiple of four characters) still looks like PEM.
fn der_well_formed(der: &[u8]) -> bool {
    der_value(der, 0).is_some_and(<[u8]>::is_empty)
}

/// Reads one DER value off `input`; what follows it.
fn der_value(input: &[u8], depth: usize) -> Option<&[u8]> {
    let (&tag, rest) = input.split_first()?;
    // High tag numbers appear in neither certificates nor keys.
    if depth > 32 || tag & 0x1f == 0x1f {
        return None;
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let (bytes, after) = rest.split_at_checked(n)?;
        rest = after;
        bytes.iter().fold(0, |len, b| len << 8 | usize::from(*b))
    };
    let (mut content, after) = rest.split_at_checked(len)?;
    if tag & 0x20 != 0 {
        while !content.is_empty() {
            content = der_value(content, depth + 1)?;
        }
    }
    Some(after)
}

/// Every PEM block is well-formed and at least one has a wanted label. The
/// armour lines start lines, as BoringSSL reads them: a YAML plain scalar
/// folds a PEM block into one line.
fn has_pem_block(text: &str, wanted: impl Fn(&str) -> bool) -> bool {
    let mut found = false;
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        if !(rest[..start].is_empty() || rest[..start].ends_with('\n')) {
            return false;
        }
        let after = &rest[start + 11..];
        let Some(label_end) = after.find("-----") else {
            return false;
        };
        let label = &after[..label_end];
        let body_start = &after[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(body_end) = body_start.find(&end_marker) else {
            return false;
        };
        let body: String = body_start[..body_end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let base64 = !body.is_empty()
            && body.len().is_multiple_of(4)
            && body
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '=');
        if !base64 {
            return false;
        }
        found |= wanted(label);
        rest = &body_start[body_end + end_marker.len()..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_structure_table() {
        let cert = "-----BEGIN CERTIFICATE-----\nTUlJQg==\n-----END CERTIFICATE-----\n";
        let is_cert = |l: &str| l == "CERTIFICATE";
        assert!(has_pem_block(cert, is_cert));
        assert!(!has_pem_block("not a pem", is_cert));
        assert!(!has_pem_block(
            "-----BEGIN CERTIFICATE-----\nTUl!Qg==\n-----END CERTIFICATE-----",
            is_cert
        ));
        assert!(
            !has_pem_block("-----BEGIN CERTIFICATE-----\nTUlJQg==\n", is_cert),
            "no end"
        );
        assert!(!has_pem_block(
            "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----",
            is_cert
        ));
        // A YAML plain scalar folded it into one line (found by the
        // translate → Envoy fuzz test: NO_START_LINE).
        assert!(!has_pem_block(
            "x -----BEGIN CERTIFICATE----- TUlJQg== -----END CERTIFICATE-----",
            is_cert
        ));
        let key = "-----BEGIN EC PRIVATE KEY-----\nTUlJQg==\n-----END EC PRIVATE KEY-----";
        assert!(has_pem_block(key, |l| l.ends_with("PRIVATE KEY")));
        assert!(!has_pem_block(key, is_cert));
    }
    /// Pairs Envoy 1.40 refuses (`KEY_VALUES_MISMATCH`, `KEY_TYPE_MISMATCH`) and
    /// accepts (see `tests/tls/README.md`).
    #[test]
    fn a_chain_no_client_would_take_is_refused() {
        let ec = include_str!("../tests/tls/ec.crt");
        let ec_key = include_str!("../tests/tls/ec.key");
        let secret = |chain: &str| {
            let indent = |t: &str| t.lines().map(|l| format!("    {l}\n")).collect::<String>();
            format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: cert, namespace: infra}}\n\
                 type: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
                indent(chain),
                indent(ec_key)
            )
        };
        let resolve = |chain: &str| {
            let mut store = Store::default();
            store.add_yaml("s.yaml", &secret(chain)).unwrap();
            let r = GatewayListenersTlsCertificateRefs {
                name: "cert".into(),
                ..Default::default()
            };
            resolve_one(&store, Holder::gateway("infra"), &r)
        };
        assert!(resolve(ec).is_ok());
        // Sixteen base64 characters cut out of the body: still PEM, no longer
        // DER (found by the translate → Envoy fuzz test; Envoy: "Failed to
        // load certificate chain").
        let lines: Vec<&str> = ec.lines().collect();
        let cut = lines[3].get(16..).unwrap_or_default();
        let mut broken = lines.clone();
        broken[3] = cut;
        let broken = broken.join("\n") + "\n";
        assert!(has_pem_block(&broken, |l| l == "CERTIFICATE"));
        let err = resolve(&broken).unwrap_err();
        assert!(err.to_string().contains("not well-formed DER"), "{err}");
        assert_eq!(err.reason(), listener::Reason::InvalidCertificateRef);
        assert!(der_well_formed(&[0x30, 0x03, 0x02, 0x01, 0x05]));
        for bad in [
            &[0x30, 0x04, 0x02, 0x01, 0x05][..],
            &[0x30, 0x03, 0x02, 0x02, 0x05],
            &[0x30],
        ] {
            assert!(!der_well_formed(bad), "{bad:?}");
        }
        let huge = ec.repeat(MAX_CHAIN_BYTES / ec.len() + 1);
        let err = resolve(&huge).unwrap_err();
        assert!(
            err.to_string().contains("at most 65536 are served"),
            "{err}"
        );
        assert_eq!(err.reason(), listener::Reason::InvalidCertificateRef);
    }

    #[test]
    fn an_ec_key_off_its_curve_is_refused() {
        let ec_key = include_str!("../tests/tls/ec.key");
        assert!(!ec_key_refused(ec_key));
        assert!(!ec_key_refused(include_str!("../tests/tls/ec-sec1.key")));
        assert!(!ec_key_refused(include_str!("../tests/tls/rsa.key")));
        // One base64 character of the public point changed: DER as before,
        // the point off the curve (found by the translate → Envoy fuzz test:
        // POINT_IS_NOT_ON_CURVE).
        let off = ec_key.replace("R0AcC3tyEeKZiib", "R0AcC3tyEeKZiiA");
        assert_ne!(off, ec_key);
        assert!(ec_key_refused(&off));
    }

    #[test]
    fn a_remembered_answer_is_the_one_for_that_chain_and_that_key() {
        let ec = include_str!("../tests/tls/ec.crt");
        let (good, other) = (
            include_str!("../tests/tls/ec.key"),
            include_str!("../tests/tls/ec-other.key"),
        );
        for _ in 0..2 {
            assert_eq!(checked_key_pair(ec, good), Ok(()));
            assert_eq!(checked_key_pair(ec, other), check_key_pair(ec, other));
            assert!(
                checked_key_pair(ec, other).is_err(),
                "the other key is refused"
            );
            // The chain and key split elsewhere are another pair.
            let (chain, key) = (&format!("{ec}{good}")[..ec.len() + 1], &good[1..]);
            assert_eq!(checked_key_pair(chain, key), check_key_pair(chain, key));
        }
    }

    #[test]
    fn keys_must_belong_to_the_leaf_certificate() {
        let ec = include_str!("../tests/tls/ec.crt");
        let rsa = include_str!("../tests/tls/rsa.crt");
        let ec_key = include_str!("../tests/tls/ec.key");
        let rsa_key = include_str!("../tests/tls/rsa.key");
        assert!(!keys_differ(ec, ec_key));
        assert!(!keys_differ(ec, include_str!("../tests/tls/ec-sec1.key")));
        assert!(!keys_differ(rsa, rsa_key));
        assert!(keys_differ(ec, include_str!("../tests/tls/ec-other.key")));
        assert!(keys_differ(rsa, include_str!("../tests/tls/rsa-other.key")));
        assert!(keys_differ(ec, rsa_key));
        assert!(keys_differ(rsa, ec_key));
        // The leaf is the first certificate: a chain led by another one differs.
        assert!(keys_differ(&format!("{rsa}{ec}"), ec_key));
        assert!(!keys_differ(&format!("{ec}{rsa}"), ec_key));
        // What cannot be read here is left to Envoy.
        let fake = "-----BEGIN PRIVATE KEY-----\nTUlJQg==\n-----END PRIVATE KEY-----\n";
        assert!(!keys_differ(ec, fake));
    }
}
