//! Live check of frontend client certificate validation (Gateway
//! `spec.tls.frontend`): a real Envoy on two HTTPS ports, one that requires a
//! client certificate from a test CA (AllowValidOnly) and one that only asks
//! for it (AllowInsecureFallback). Certificates are made with the `openssl`
//! command at test time; they protect nothing.

use crate::common::live::{free_port, mk_cluster, mk_ir, serve, spawn_echo_backend};
use crate::tls::{chain, server_certificate, tls_request};
use aether_ir as ir;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A CA and a certificate it signed, as files in `dir`.
pub(crate) struct Issued {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the client certificate test needs the `openssl` command");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn given_a_ca_and_a_client(dir: &Path, name: &str) -> Issued {
    given_a_ca_and_a_leaf(dir, name, None)
}

/// A CA `<name>-ca` and a leaf certificate `<name>` it signed, with `san` as
/// its subjectAltName extension (e.g. `DNS:abc.example.com`) if given.
pub(crate) fn given_a_ca_and_a_leaf(dir: &Path, name: &str, san: Option<&str>) -> Issued {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let (ca, ca_key) = (format!("{name}-ca.crt"), format!("{name}-ca.key"));
    let (cert, key, csr) = (
        format!("{name}.crt"),
        format!("{name}.key"),
        format!("{name}.csr"),
    );
    let ca_subject = format!("/CN={name}-ca");
    let mut args = vec!["req", "-x509"];
    args.extend(ec);
    args.extend([
        "-keyout",
        &ca_key,
        "-out",
        &ca,
        "-subj",
        &ca_subject,
        "-days",
        "2",
    ]);
    openssl(dir, &args);
    let mut args = vec!["req"];
    args.extend(ec);
    args.extend(["-keyout", &key, "-out", &csr, "-subj", "/CN=client"]);
    openssl(dir, &args);
    let mut args = vec![
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca,
        "-CAkey",
        &ca_key,
        "-CAcreateserial",
        "-out",
        &cert,
        "-days",
        "2",
    ];
    let ext = format!("{name}.ext");
    if let Some(san) = san {
        std::fs::write(dir.join(&ext), format!("subjectAltName={san}\n")).unwrap();
        args.extend(["-extfile", &ext]);
    }
    openssl(dir, &args);
    Issued {
        ca: dir.join(ca),
        cert: dir.join(cert),
        key: dir.join(key),
    }
}

fn https_port(port: u16, cluster: &str, validation: ir::ClientValidation) -> ir::Port {
    let mut any = chain("any", &[], &server_certificate(), cluster);
    any.client_validation = Some(validation);
    ir::Port {
        port,
        protocol: ir::PortProtocol::Https,
        listener_name: ir::names::listener("infra", "mtls", port),
        route_table: None,
        tls_chains: vec![any],
        forward: None,
    }
}

#[test]
fn a_client_certificate_is_required_and_verified_or_only_asked_for() {
    let dir = crate::common::scratch_file("client-certificates");
    std::fs::create_dir_all(&dir).unwrap();
    let trusted = given_a_ca_and_a_client(&dir, "trusted");
    let stranger = given_a_ca_and_a_client(&dir, "stranger");
    let ca = ir::CaBundle {
        sources: vec![ir::ObjectRef::new("infra", "trusted-ca")],
        pem: std::fs::read_to_string(&trusted.ca).unwrap(),
    };
    let backend = spawn_echo_backend();
    let cluster = mk_cluster("echo", backend, ir::UpstreamProtocol::Http1);
    let (strict, fallback) = (free_port(), free_port());
    let mut ir = mk_ir(
        "mtls",
        https_port(
            strict,
            &cluster.name,
            ir::ClientValidation {
                trusted_ca: ca.clone(),
                allow_insecure_fallback: false,
            },
        ),
        vec![cluster.clone()],
    );
    std::sync::Arc::make_mut(&mut ir.gateways[0])
        .ports
        .push(https_port(
            fallback,
            &cluster.name,
            ir::ClientValidation {
                trusted_ca: ca,
                allow_insecure_fallback: true,
            },
        ));
    let ready = || {
        [strict, fallback]
            .iter()
            .all(|p| TcpStream::connect(("127.0.0.1", *p)).is_ok())
    };
    let _envoy = serve("live-mtls", &ir, ready);
    let status = |port: u16, client: Option<&Issued>| {
        let files = client.map(|c| (c.cert.as_path(), c.key.as_path()));
        tls_request(port, Some("example.com"), "example.com", "/", files)
            .ok()
            .map(|r| r.status)
    };
    assert_eq!(
        status(strict, Some(&trusted)),
        Some(200),
        "a trusted client is served"
    );
    assert_eq!(status(strict, None), None, "no certificate: refused");
    assert_eq!(
        status(strict, Some(&stranger)),
        None,
        "another CA's: refused"
    );
    for client in [Some(&trusted), Some(&stranger), None] {
        assert_eq!(
            status(fallback, client),
            Some(200),
            "fallback lets every client in"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
