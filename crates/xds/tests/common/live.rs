//! A tiny echo backend, an Envoy process guard and `mk_*` builders of the IR the
//! live tests serve (127.0.0.1 only); the HTTP/1.1 client is the testkit's.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aether_ir as ir;

pub use aether_testkit::live::{Response, free_port, http_get, read_response, request_text};

/// Answers every request with 200 and a body echoing the request line and Host.
pub fn spawn_echo_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding the backend");
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || echo(conn));
        }
    });
    addr
}

/// Records the first line of every connection's request, then hangs up: shows which
/// protocol Envoy speaks upstream (`PRI * HTTP/2.0` is the HTTP/2 preface).
pub fn spawn_recording_backend() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding the backend");
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let head = read_head(&mut conn);
            let first = head.split("\r\n").next().unwrap_or_default().to_string();
            record.lock().unwrap().push(first);
        }
    });
    (addr, seen)
}

fn echo(mut conn: TcpStream) {
    let head = read_head(&mut conn);
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_string();
    let mut body = format!("{request_line}\n");
    for line in lines {
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("host:") || lower.starts_with("x-") {
            body.push_str(&lower);
            body.push('\n');
        }
    }
    let _ = write!(
        conn,
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn read_head(conn: &mut impl Read) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// One GET on a fresh connection to 127.0.0.1:`port`, with a header the routes remove.
pub fn get(port: u16, host: &str, path: &str) -> std::io::Result<Response> {
    let addr = format!("127.0.0.1:{port}");
    http_get(&addr, host, path, &[("x-remove-me", "yes")])
}

pub struct Envoy(Child);

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Envoy {
    /// Runs Envoy on a static bootstrap and waits until `ready` says it serves.
    pub fn start(bootstrap: &Path, ready: impl Fn() -> bool) -> Envoy {
        let envoy = Envoy(
            Command::new(super::envoy_bin())
                .args(["--disable-hot-restart", "--log-level", "error", "-c"])
                .arg(bootstrap)
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("starting envoy"),
        );
        let deadline = Instant::now() + Duration::from_secs(8);
        while !ready() {
            assert!(
                Instant::now() < deadline,
                "Envoy did not start serving within 8 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        envoy
    }
}

/// Writes the validation bootstrap of `ir`'s resources to a scratch file named
/// after `tag`, and runs Envoy on it until `ready`; the file goes with the guard.
pub fn serve(tag: &str, ir: &ir::Ir, ready: impl Fn() -> bool) -> (Envoy, Scratch) {
    let bootstrap =
        aether_xds::validation_bootstrap(&aether_xds::build(ir)).expect("rendering the bootstrap");
    let file = Scratch(super::scratch_file(&format!("{tag}.yaml")));
    std::fs::write(&file.0, bootstrap).unwrap();
    (Envoy::start(&file.0, ready), file)
}

/// A scratch file removed on drop.
pub struct Scratch(pub std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Route `name`: `path`, then `action`; no header changes.
pub fn mk_route(name: &str, path: ir::PathMatch, action: ir::RouteAction) -> ir::Route {
    ir::Route {
        name: name.into(),
        matcher: ir::RouteMatch {
            path,
            method: None,
            headers: vec![],
            query_params: vec![],
        },
        action,
        request_headers: Default::default(),
        response_headers: Default::default(),
    }
}

/// Forward to each of `clusters` (weight 1), `invalid_weight` to no backend at all.
pub fn mk_forward(
    clusters: &[&str],
    invalid_weight: u32,
    rewrite: Option<ir::UrlRewrite>,
) -> ir::RouteAction {
    ir::RouteAction::Forward(ir::Forward {
        backends: clusters
            .iter()
            .map(|c| ir::WeightedBackend::new(c.to_string(), 1))
            .collect(),
        invalid_weight,
        rewrite: rewrite.map(Box::new),
        ..Default::default()
    })
}

/// Cluster `app/<service>:80` speaking `protocol` to the one endpoint `addr`.
pub fn mk_cluster(service: &str, addr: SocketAddr, protocol: ir::UpstreamProtocol) -> ir::Cluster {
    ir::Cluster {
        name: ir::names::cluster("app", service, 80),
        service: ir::ObjectRef::new("app", service),
        port: 80,
        protocol,
        endpoints: vec![ir::Endpoint {
            address: addr.ip().to_string(),
            port: addr.port(),
            weight: 0,
        }],
        endpoints_from: ir::EndpointsFrom::Nowhere,
        tls: None,
        backend_kind: ir::BackendKind::Service,
        discovery: ir::Discovery::Eds,
        session: None,
    }
}

/// Gateway `infra/<gateway>` on 127.0.0.1 with `port`, and `clusters`.
pub fn mk_ir(gateway: &str, port: ir::Port, clusters: Vec<ir::Cluster>) -> ir::Ir {
    ir::Ir::new(
        vec![ir::Gateway {
            namespace: "infra".into(),
            name: gateway.into(),
            addresses: vec!["127.0.0.1".into()],
            ports: vec![port],
        }],
        clusters,
    )
}

/// Port `port` of Gateway `infra/<gateway>`: HTTP, with these virtual hosts.
pub fn mk_http_port(gateway: &str, port: u16, virtual_hosts: Vec<ir::VirtualHost>) -> ir::Port {
    ir::Port {
        port,
        protocol: ir::PortProtocol::Http,
        listener_name: ir::names::listener("infra", gateway, port),
        route_table: Some(ir::RouteTable {
            name: ir::names::route_table("infra", gateway, port, None),
            virtual_hosts: virtual_hosts.into_iter().map(Arc::new).collect(),
        }),
        tls_chains: vec![],
        forward: None,
    }
}

/// A virtual host `name` for `domains`.
pub fn mk_virtual_host(name: &str, domains: &[&str], routes: Vec<ir::Route>) -> ir::VirtualHost {
    ir::VirtualHost {
        pre_routing: Vec::new(),
        name: name.into(),
        domains: domains.iter().map(|d| d.to_string()).collect(),
        routes: routes.into_iter().map(std::sync::Arc::new).collect(),
    }
}
