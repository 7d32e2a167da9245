//! A TLS backend: HTTP/1.1 over TLS answering `<name> <path> alpn=<protocol>
//! client=<subject>`, and echoing the bytes of an upgraded connection (a
//! WebSocket over TLS, as an XBackend with protocol WSS reaches it).
//!
//! It offers ALPN `http/1.1` only, so `alpn=` says what the client (Envoy)
//! offered and got: `none` when it offered nothing. With a client CA it
//! requires a client certificate that CA signed (the handshake fails
//! otherwise), and `client=` names the certificate's subject CN.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

type Tls = rustls::StreamOwned<rustls::ServerConnection, TcpStream>;

/// Stops accepting when dropped.
pub struct TlsBackend {
    pub name: String,
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl TlsBackend {
    /// On 127.0.0.1 with the PEM certificate chain and key; with `client_ca`
    /// (PEM), a client certificate it signed is required.
    pub fn start(name: &str, cert: &str, key: &str, client_ca: Option<&str>) -> TlsBackend {
        let config = Arc::new(server_config(cert, key, client_ca));
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let (n, s) = (name.to_string(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (n, config) = (n.clone(), config.clone());
                std::thread::spawn(move || serve(conn, &n, config));
            }
        });
        TlsBackend {
            name: name.to_string(),
            port,
            stop,
        }
    }
}

impl Drop for TlsBackend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn server_config(cert: &str, key: &str, client_ca: Option<&str>) -> rustls::ServerConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<_, _>>()
        .expect("a PEM certificate chain");
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("a PEM private key");
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions");
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots.add(c.expect("a PEM CA")).expect("a CA certificate");
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .expect("a client verifier");
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .expect("the certificate and its key");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

fn serve(conn: TcpStream, name: &str, config: Arc<rustls::ServerConfig>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(tls) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut stream = Tls::new(tls, conn);
    // Finish the handshake before reading, so ALPN and the client
    // certificate are known (and a refused one ends here).
    while stream.conn.is_handshaking() {
        if stream.conn.complete_io(&mut stream.sock).is_err() {
            return;
        }
    }
    let alpn = stream.conn.alpn_protocol().map_or("none".to_string(), |p| {
        String::from_utf8_lossy(p).into_owned()
    });
    let client = stream
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map_or("none".to_string(), |c| subject_cn(c.as_ref()));
    let mut reader = BufReader::new(stream);
    while let Some((path, upgrade)) = read_head(&mut reader) {
        if let Some(protocol) = upgrade {
            return echo_upgraded(reader, &protocol);
        }
        let answer = format!("{name} {path} alpn={alpn} client={client}");
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        let out = reader.get_mut();
        if out
            .write_all(response.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            return;
        }
    }
}

/// After a 101 for `protocol`, every byte read is written back.
fn echo_upgraded(mut reader: BufReader<Tls>, protocol: &str) {
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: {protocol}\r\nconnection: Upgrade\r\n\r\n"
    );
    if reader.get_mut().write_all(head.as_bytes()).is_err() {
        return;
    }
    let _ = reader.get_mut().flush();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = reader.read(&mut buf) {
        let out = reader.get_mut();
        if out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}

/// One request's path and `upgrade` header (requests carry no body here).
fn read_head(reader: &mut impl BufRead) -> Option<(String, Option<String>)> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return None;
    }
    let path = request_line.split_whitespace().nth(1)?.to_string();
    let mut upgrade = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            return Some((path, upgrade));
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("upgrade")
        {
            upgrade = Some(v.trim().to_string());
        }
    }
}

/// The subject's CN of a DER certificate, found by its OID (2.5.4.3) and
/// read as the string that follows; `?` when there is none.
fn subject_cn(der: &[u8]) -> String {
    const CN: [u8; 5] = [0x06, 0x03, 0x55, 0x04, 0x03];
    // The last CN is the subject's (the issuer's comes first).
    let Some(at) = der.windows(CN.len()).rposition(|w| w == CN) else {
        return "?".into();
    };
    let rest = &der[at + CN.len()..];
    match rest {
        [_tag, len, value @ ..] if usize::from(*len) <= value.len() => {
            String::from_utf8_lossy(&value[..usize::from(*len)]).into_owned()
        }
        _ => "?".into(),
    }
}
