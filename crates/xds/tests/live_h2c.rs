//! Live check of HTTP/2 without TLS, both ways: the HTTP listener accepts h2c with
//! prior knowledge (gRPC clients and the BackendProtocolH2C test send it to port
//! 80), and an h2c cluster speaks HTTP/2 to its endpoints while an HTTP/1.1 cluster
//! does not. Raw bytes on 127.0.0.1, no HTTP/2 library.

mod common;

use aether_ir as ir;
use common::live::{Envoy, free_port, get, spawn_recording_backend};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The client connection preface and an empty SETTINGS frame.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
/// The frame type of SETTINGS, the first frame a server sends.
const SETTINGS: u8 = 0x4;

fn h2c_ir(port: u16, h2c: SocketAddr, h1: SocketAddr) -> ir::Ir {
    let route = |path: &str, cluster: &str| ir::Route {
        name: format!("httproute/app{path}/rule/0/match/0"),
        matcher: ir::RouteMatch {
            path: ir::PathMatch::Prefix(path.into()),
            method: None,
            headers: vec![],
            query_params: vec![],
        },
        action: ir::RouteAction::Forward(ir::Forward {
            backends: vec![ir::WeightedBackend {
                cluster: cluster.into(),
                weight: 1,
            }],
            invalid_weight: 0,
            rewrite: None,
        }),
        request_headers: Default::default(),
        response_headers: Default::default(),
    };
    let cluster = |name: &str, addr: SocketAddr, protocol| ir::Cluster {
        name: ir::names::cluster("app", name, 80),
        service: ir::ObjectRef::new("app", name),
        port: 80,
        protocol,
        endpoints: vec![ir::Endpoint {
            address: addr.ip().to_string(),
            port: addr.port(),
            weight: 0,
        }],
    };
    ir::Ir {
        gateways: vec![ir::Gateway {
            namespace: "infra".into(),
            name: "h2c".into(),
            addresses: vec!["127.0.0.1".into()],
            ports: vec![ir::Port {
                port,
                protocol: ir::PortProtocol::Http,
                listener_name: ir::names::listener("infra", "h2c", port),
                route_table: Some(ir::RouteTable {
                    name: ir::names::route_table("infra", "h2c", port, None),
                    virtual_hosts: vec![ir::VirtualHost {
                        name: "*".into(),
                        domains: vec!["*".into()],
                        routes: vec![
                            route("/h2c", "edge_cl_app_h2c_80"),
                            route("/h1", "edge_cl_app_h1_80"),
                        ],
                    }],
                }),
                tls_chains: vec![],
                forward: None,
            }],
        }],
        clusters: vec![
            cluster("h1", h1, ir::UpstreamProtocol::Http1),
            cluster("h2c", h2c, ir::UpstreamProtocol::H2c),
        ],
    }
}

#[test]
fn http2_without_tls_downstream_and_upstream() {
    let (h2c_addr, h2c_seen) = spawn_recording_backend();
    let (h1_addr, h1_seen) = spawn_recording_backend();
    let port = free_port();
    let bootstrap =
        aether_xds::validation_bootstrap(&aether_xds::build(&h2c_ir(port, h2c_addr, h1_addr)))
            .expect("rendering the bootstrap");
    let file = common::scratch_file("live-h2c.yaml");
    std::fs::write(&file, bootstrap).unwrap();
    let _envoy = Envoy::start(&file, || TcpStream::connect(("127.0.0.1", port)).is_ok());

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
    let _ = std::fs::remove_file(&file);
}
