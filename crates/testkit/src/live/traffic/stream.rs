//! A client connection: plain TCP, or TLS accepting any certificate (the test
//! made it) and recording which one the server presented.

use std::hash::{Hash, Hasher};
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::Target;

/// A client connection: plain TCP or TLS over it.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// A connection to `target`, its TLS handshake done (then also the hash of the
/// certificate the server presented).
pub(crate) fn connect(target: &Target) -> std::io::Result<(BufReader<Stream>, Option<u64>)> {
    let tcp = TcpStream::connect(&target.addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    tcp.set_nodelay(true)?;
    let Some(sni) = &target.sni else {
        return Ok((BufReader::new(Stream::Plain(tcp)), None));
    };
    let name = ServerName::try_from(sni.clone()).map_err(std::io::Error::other)?;
    let mut tls = rustls::ClientConnection::new(tls_config(b"http/1.1"), name)
        .map_err(std::io::Error::other)?;
    let mut tcp = tcp;
    while tls.is_handshaking() {
        tls.complete_io(&mut tcp)?;
    }
    let cert = tls.peer_certificates().and_then(|c| c.first()).map(|c| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        c.as_ref().hash(&mut h);
        h.finish()
    });
    let stream = Stream::Tls(Box::new(rustls::StreamOwned::new(tls, tcp)));
    Ok((BufReader::new(stream), cert))
}

/// TLS offering `alpn` (`http/1.1` or `h2`), any server certificate accepted
/// (the test made it; the clients record which one they saw).
pub(super) fn tls_config(alpn: &'static [u8]) -> Arc<rustls::ClientConfig> {
    static HTTP1: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    static H2: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    let cell = if alpn == b"h2" { &H2 } else { &HTTP1 };
    cell.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        Arc::new(config)
    })
    .clone()
}

/// Accepts any certificate, but checks the handshake's signatures with it.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
