//! Live check of TLS termination: a real Envoy serves an HTTPS port with one SNI
//! chain and one catch-all chain (certificates inline, from the `https-chains`
//! golden case). Known SNI picks its chain; unknown SNI and no SNI at all land on
//! the catch-all instead of failing the handshake. The client is the `openssl
//! s_client` command (no TLS library needed in the tests).

use crate::common::live::{
    Response, free_port, mk_cluster, mk_forward, mk_ir, mk_route, mk_virtual_host, read_response,
    request_text, serve, spawn_echo_backend,
};
use aether_ir as ir;
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};

/// An HTTPS GET through `openssl s_client`, with `sni` as the server name (or none).
fn tls_get(port: u16, sni: Option<&str>, host: &str, path: &str) -> Response {
    tls_request(port, sni, host, path, None)
        .unwrap_or_else(|e| panic!("TLS request with SNI {sni:?}: {e}"))
}

/// [`tls_get`] presenting a client certificate (PEM files: certificate, key)
/// or none; `Err` when no HTTP answer comes (the handshake failed).
pub(crate) fn tls_request(
    port: u16,
    sni: Option<&str>,
    host: &str,
    path: &str,
    client: Option<(&Path, &Path)>,
) -> std::io::Result<Response> {
    let mut cmd = Command::new("openssl");
    if let Some((cert, key)) = client {
        cmd.arg("s_client")
            .arg("-cert")
            .arg(cert)
            .arg("-key")
            .arg(key);
    } else {
        cmd.arg("s_client");
    }
    cmd.args(["-quiet", "-ign_eof", "-alpn", "http/1.1", "-connect"])
        .arg(format!("127.0.0.1:{port}"));
    match sni {
        Some(name) => cmd.args(["-servername", name]),
        None => cmd.arg("-noservername"),
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the TLS live test needs the `openssl` command");
    child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(request_text("GET", host, path, &[]).as_bytes())
        .unwrap();
    let response = read_response(&mut BufReader::new(child.stdout.as_mut().unwrap()));
    let _ = child.kill();
    let _ = child.wait();
    response
}

pub(crate) fn chain(
    listener: &str,
    server_names: &[&str],
    cert: &ir::Certificate,
    cluster: &str,
) -> ir::TlsChain {
    let name = format!("httproute/app/{listener}/rule/0/match/0");
    let prefix = ir::PathMatch::Prefix("/".into());
    let mut route = mk_route(&name, prefix, mk_forward(&[cluster], 0, None));
    // The backend echoes x- headers: this one says which chain served.
    route.request_headers.set.push(ir::Header {
        name: "x-chain".into(),
        value: listener.into(),
    });
    ir::TlsChain {
        listener: listener.into(),
        server_names: server_names.iter().map(|s| s.to_string()).collect(),
        certificates: vec![cert.clone()],
        client_validation: None,
        route_table: Some(ir::RouteTable {
            name: format!("edge_rt_infra_tls_443_{listener}"),
            virtual_hosts: vec![std::sync::Arc::new(mk_virtual_host(
                "*",
                &["*"],
                vec![route],
            ))],
        }),
        forward: None,
    }
}

/// The server certificate of the `https-chains` golden case.
pub(crate) fn server_certificate() -> ir::Certificate {
    let golden = crate::common::load_ir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/https-chains"),
    );
    golden.gateways[0]
        .ports
        .iter()
        .flat_map(|p| &p.tls_chains)
        .map(|c| c.certificates[0].clone())
        .next()
        .expect("the https-chains case has a certificate")
}

fn tls_ir(port: u16, backend: SocketAddr) -> ir::Ir {
    let cert = server_certificate();
    let cluster = mk_cluster("echo", backend, ir::UpstreamProtocol::Http1);
    let https = ir::Port {
        port,
        protocol: ir::PortProtocol::Https,
        listener_name: ir::names::listener("infra", "tls", port),
        route_table: None,
        // Catch-all first, as the IR sorts by listener name; the builder
        // must still let the SNI chain win for its name.
        tls_chains: vec![
            chain("any", &[], &cert, &cluster.name),
            chain("sni", &["example.com"], &cert, &cluster.name),
        ],
        forward: None,
    };
    mk_ir("tls", https, vec![cluster])
}

#[test]
fn sni_picks_its_chain_and_anything_else_gets_the_catch_all() {
    let backend = spawn_echo_backend();
    let port = free_port();
    let ready = || TcpStream::connect(("127.0.0.1", port)).is_ok();
    let _envoy = serve("live-tls", &tls_ir(port, backend), ready);
    let served_by = |sni: Option<&str>| {
        let r = tls_get(port, sni, "example.com", "/hello");
        assert_eq!(r.status, 200, "SNI {sni:?}: {}", r.body);
        assert!(r.body.starts_with("GET /hello "), "{}", r.body);
        r.body
            .lines()
            .find_map(|l| l.strip_prefix("x-chain: "))
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(served_by(Some("example.com")), "sni");
    assert_eq!(served_by(Some("unknown.test")), "any");
    assert_eq!(served_by(None), "any");
}
