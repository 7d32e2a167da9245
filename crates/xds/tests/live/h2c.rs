//! Live check of HTTP/2 without TLS, both ways: the HTTP listener accepts h2c with
//! prior knowledge (gRPC clients and the BackendProtocolH2C test send it to port
//! 80), and an h2c cluster speaks HTTP/2 to its endpoints while an HTTP/1.1 cluster
//! does not. Raw bytes on 127.0.0.1, no HTTP/2 library.

use crate::common::live::{
    free_port, get, mk_cluster, mk_forward, mk_http_port, mk_ir, mk_route, mk_virtual_host, serve,
    spawn_recording_backend,
};
use aether_ir as ir;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The client connection preface and an empty SETTINGS frame.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
/// The frame type of SETTINGS, the first frame a server sends.
const SETTINGS: u8 = 0x4;

fn h2c_ir(port: u16, h2c: SocketAddr, h1: SocketAddr) -> ir::Ir {
    let route = |path: &str, cluster: &str| {
        let name = format!("httproute/app{path}/rule/0/match/0");
        let matching = ir::PathMatch::Prefix(path.into());
        mk_route(&name, matching, mk_forward(&[cluster], 0, None))
    };
    let routes = vec![
        route("/h2c", "edge_cl_app_h2c_80"),
        route("/h1", "edge_cl_app_h1_80"),
    ];
    let hosts = vec![mk_virtual_host("*", &["*"], routes)];
    let clusters = vec![
        mk_cluster("h1", h1, ir::UpstreamProtocol::Http1),
        mk_cluster("h2c", h2c, ir::UpstreamProtocol::H2c),
    ];
    mk_ir("h2c", mk_http_port("h2c", port, hosts), clusters)
}

#[test]
fn http2_without_tls_downstream_and_upstream() {
    let (h2c_addr, h2c_seen) = spawn_recording_backend();
    let (h1_addr, h1_seen) = spawn_recording_backend();
    let port = free_port();
    let ready = || TcpStream::connect(("127.0.0.1", port)).is_ok();
    let _envoy = serve("live-h2c", &h2c_ir(port, h2c_addr, h1_addr), ready);

    // Downstream: prior-knowledge h2c gets a SETTINGS frame back, not an HTTP/1 400.
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn.write_all(H2_PREFACE).unwrap();
    let mut frame_header = [0u8; 9];
    conn.read_exact(&mut frame_header).unwrap();
    assert_eq!(
        frame_header[3],
        SETTINGS,
        "expected an HTTP/2 SETTINGS frame, got {:?}",
        String::from_utf8_lossy(&frame_header)
    );

    // Upstream: the backends hang up, so the client sees an error status; what
    // matters is the first line each backend received.
    let _ = get(port, "example.com", "/h2c/x");
    let _ = get(port, "example.com", "/h1/x");
    let deadline = Instant::now() + Duration::from_secs(5);
    while (h2c_seen.lock().unwrap().is_empty() || h1_seen.lock().unwrap().is_empty())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        h2c_seen.lock().unwrap().first().map(String::as_str),
        Some("PRI * HTTP/2.0")
    );
    assert_eq!(
        h1_seen.lock().unwrap().first().map(String::as_str),
        Some("GET /h1/x HTTP/1.1")
    );
}
