//! Live check of TLS to backends (BackendTLSPolicy): a real Envoy in front of
//! an `openssl s_server` whose certificate (made at test time) names
//! `abc.example.com`. A cluster that trusts its CA and wants that name is
//! served; one that wants another name, or trusts another CA, is refused (503,
//! never the backend's answer).

use crate::client_certificates::given_a_ca_and_a_leaf;
use crate::common::live::mk_virtual_host;
use crate::common::live::{free_port, get, mk_cluster, mk_forward, mk_http_port, mk_ir, mk_route};
use aether_ir as ir;
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `openssl s_server -www`: answers every request with an HTTP 200 status page.
struct TlsServer(Child);

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn given_a_tls_backend(cert: &std::path::Path, key: &std::path::Path) -> (TlsServer, SocketAddr) {
    let port = free_port();
    let child = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(port.to_string())
        .arg("-cert")
        .arg(cert)
        .arg("-key")
        .arg(key)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the upstream TLS test needs the `openssl` command");
    let server = TlsServer(child);
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "openssl s_server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (server, SocketAddr::from(([127, 0, 0, 1], port)))
}

fn tls_cluster(name: &str, backend: SocketAddr, ca: &str, san: &str) -> ir::Cluster {
    let mut c = mk_cluster(name, backend, ir::UpstreamProtocol::Http1);
    c.tls = Some(ir::UpstreamTls {
        sni: "abc.example.com".into(),
        trusted_ca: ir::TrustedCa::Pem(ir::CaBundle {
            sources: vec![ir::ObjectRef::new("app", format!("{name}-ca"))],
            pem: ca.to_string(),
        }),
        subject_alt_names: vec![ir::SubjectAltName::Dns(san.into())],
        client_certificate: None,
        alpn: vec![],
    });
    c
}

#[test]
fn a_backend_is_reached_over_tls_only_with_its_ca_and_name() {
    let dir = crate::common::scratch_file("upstream-tls");
    std::fs::create_dir_all(&dir).unwrap();
    let server = given_a_ca_and_a_leaf(&dir, "backend", Some("DNS:abc.example.com"));
    let other = given_a_ca_and_a_leaf(&dir, "other", None);
    let (_tls, backend) = given_a_tls_backend(&server.cert, &server.key);
    let ca = std::fs::read_to_string(&server.ca).unwrap();
    let other_ca = std::fs::read_to_string(&other.ca).unwrap();
    let clusters = vec![
        tls_cluster("good", backend, &ca, "abc.example.com"),
        tls_cluster("other-ca", backend, &other_ca, "abc.example.com"),
        tls_cluster("wrong-san", backend, &ca, "wrong.example.com"),
    ];
    let routes = clusters
        .iter()
        .map(|c| {
            let path = format!("/{}", c.service.name);
            mk_route(
                &c.service.name,
                ir::PathMatch::Prefix(path),
                mk_forward(&[&c.name], 0, None),
            )
        })
        .collect();
    let port = free_port();
    let hosts = vec![mk_virtual_host("*", &["*"], routes)];
    let ir = mk_ir(
        "upstream-tls",
        mk_http_port("upstream-tls", port, hosts),
        clusters,
    );
    let ready = || TcpStream::connect(("127.0.0.1", port)).is_ok();
    let _envoy = crate::common::live::serve("live-upstream-tls", &ir, ready);
    let status = |path: &str| get(port, "example.com", path).unwrap().status;
    let deadline = Instant::now() + Duration::from_secs(5);
    while status("/good") != 200 {
        assert!(
            Instant::now() < deadline,
            "the trusted backend never answered 200"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        status("/wrong-san"),
        503,
        "a certificate without the name is refused"
    );
    assert_eq!(
        status("/other-ca"),
        503,
        "a certificate of another CA is refused"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
