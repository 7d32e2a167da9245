//! Live check: a real Envoy runs our resources (as the static validation bootstrap)
//! in front of a tiny echo backend, on 127.0.0.1 only. It proves on the wire what
//! the golden files can only show as config: prefix rewrites never make `//`, the
//! query survives rewrites, invalid backends answer 500, redirects carry the port
//! the spec asks for, and the Host header reaches the backend with its port.

mod common;

use aether_ir as ir;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Answers every request with 200 and a body echoing the request line and Host.
fn spawn_echo_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding the backend");
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || echo(conn));
        }
    });
    addr
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

fn read_head(conn: &mut TcpStream) -> String {
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

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One request on a fresh connection. The response is read by its content-length,
/// not to EOF: Envoy delays closing after a local reply (500, redirect).
fn get(port: u16, host: &str, path: &str) -> std::io::Result<Response> {
    let mut conn = TcpStream::connect(("127.0.0.1", port))?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nhost: {host}\r\nx-remove-me: yes\r\nconnection: close\r\n\r\n"
    )?;
    let head = read_head(&mut conn);
    let mut lines = head.trim_end().split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    conn.read_exact(&mut body)?;
    Ok(Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

struct Envoy(Child);

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn route(name: &str, path: ir::PathMatch, action: ir::RouteAction) -> ir::Route {
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

fn forward(
    backends: &[&str],
    invalid_weight: u32,
    rewrite: Option<ir::UrlRewrite>,
) -> ir::RouteAction {
    ir::RouteAction::Forward(ir::Forward {
        backends: backends
            .iter()
            .map(|c| ir::WeightedBackend {
                cluster: c.to_string(),
                weight: 1,
            })
            .collect(),
        invalid_weight,
        rewrite,
    })
}

fn prefix(p: &str) -> ir::PathMatch {
    ir::PathMatch::Prefix(p.into())
}

fn redirect(
    scheme: Option<&str>,
    hostname: Option<&str>,
    path: Option<ir::PathRewrite>,
) -> ir::RouteAction {
    ir::RouteAction::Redirect(ir::Redirect {
        scheme: scheme.map(Into::into),
        hostname: hostname.map(Into::into),
        port: None,
        path,
        status_code: 302,
    })
}

fn live_ir(port: u16, backend: SocketAddr) -> ir::Ir {
    let cluster = ir::names::cluster("app", "echo", 80);
    let c = cluster.as_str();
    let mut root = route("root", prefix("/"), forward(&[c], 0, None));
    root.request_headers.set.push(ir::Header {
        name: "x-set".into(),
        value: "by-envoy".into(),
    });
    root.request_headers.remove.push("x-remove-me".into());
    root.response_headers.add.push(ir::Header {
        name: "x-response".into(),
        value: "added".into(),
    });
    let star = vec![
        route(
            "strip",
            prefix("/strip"),
            forward(
                &[c],
                0,
                Some(ir::UrlRewrite {
                    hostname: None,
                    path: Some(ir::PathRewrite::ReplacePrefixMatch("/".into())),
                }),
            ),
        ),
        route(
            "prefix-one",
            prefix("/prefix/one"),
            forward(
                &[c],
                0,
                Some(ir::UrlRewrite {
                    hostname: Some("rewritten.example".into()),
                    path: Some(ir::PathRewrite::ReplacePrefixMatch("/one".into())),
                }),
            ),
        ),
        route(
            "full",
            prefix("/full"),
            forward(
                &[c],
                0,
                Some(ir::UrlRewrite {
                    hostname: None,
                    path: Some(ir::PathRewrite::ReplaceFullPath("/one".into())),
                }),
            ),
        ),
        route("all-invalid", prefix("/all-invalid"), forward(&[], 1, None)),
        route(
            "half-invalid",
            prefix("/half-invalid"),
            forward(&[c], 1, None),
        ),
        route(
            "scheme",
            prefix("/scheme"),
            redirect(Some("https"), None, None),
        ),
        route(
            "redirect-prefix",
            prefix("/redirect-prefix"),
            redirect(
                None,
                Some("example.org"),
                Some(ir::PathRewrite::ReplacePrefixMatch("/".into())),
            ),
        ),
        root,
    ];
    let exact = vec![route(
        "exact-scheme",
        prefix("/"),
        redirect(Some("https"), None, None),
    )];
    ir::Ir {
        gateways: vec![ir::Gateway {
            namespace: "infra".into(),
            name: "live".into(),
            addresses: vec!["127.0.0.1".into()],
            ports: vec![ir::Port {
                port,
                protocol: ir::PortProtocol::Http,
                listener_name: ir::names::listener("infra", "live", port),
                route_table: Some(ir::RouteTable {
                    name: ir::names::route_table("infra", "live", port, None),
                    virtual_hosts: vec![
                        ir::VirtualHost {
                            name: "*".into(),
                            domains: vec!["*".into()],
                            routes: star,
                        },
                        ir::VirtualHost {
                            name: "redirect.example".into(),
                            domains: vec!["redirect.example".into()],
                            routes: exact,
                        },
                    ],
                }),
                tls_chains: vec![],
            }],
        }],
        clusters: vec![ir::Cluster {
            name: cluster.clone(),
            service: ir::ObjectRef::new("app", "echo"),
            port: 80,
            protocol: ir::UpstreamProtocol::Http1,
            endpoints: vec![ir::Endpoint {
                address: backend.ip().to_string(),
                port: backend.port(),
            }],
        }],
    }
}

#[test]
fn envoy_serves_rewrites_redirects_and_invalid_backends() {
    let backend = spawn_echo_backend();
    let port = free_port();
    let bootstrap = aether_xds::validation_bootstrap(&aether_xds::build(&live_ir(port, backend)))
        .expect("rendering the bootstrap");
    let file = common::scratch_file("live.yaml");
    std::fs::write(&file, bootstrap).unwrap();
    let _envoy = Envoy(
        Command::new(common::envoy_bin())
            .args(["--disable-hot-restart", "--log-level", "error", "-c"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting envoy"),
    );
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        if matches!(get(port, "example.com", "/"), Ok(r) if r.status == 200) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Envoy did not serve on 127.0.0.1:{port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let ok = |host: &str, path: &str| {
        let r = get(port, host, path).unwrap();
        assert_eq!(r.status, 200, "{host}{path}: {}", r.body);
        r
    };
    // Host reaches the backend as sent, port included; header modifiers apply.
    let r = ok("example.com:8080", "/anything");
    assert!(r.body.starts_with("GET /anything HTTP/1.1\n"), "{}", r.body);
    assert!(r.body.contains("host: example.com:8080\n"), "{}", r.body);
    assert!(r.body.contains("x-set: by-envoy\n"), "{}", r.body);
    assert!(!r.body.contains("x-remove-me"), "{}", r.body);
    assert_eq!(r.header("x-response"), Some("added"));

    // ReplacePrefixMatch "/" never yields "//"; the query survives.
    assert!(
        ok("example.com", "/strip/bar?x=1")
            .body
            .starts_with("GET /bar?x=1 ")
    );
    assert!(ok("example.com", "/strip").body.starts_with("GET / "));
    assert!(ok("example.com", "/strip/").body.starts_with("GET / "));
    let r = ok("example.com", "/prefix/one/two");
    assert!(r.body.starts_with("GET /one/two "), "{}", r.body);
    assert!(r.body.contains("host: rewritten.example\n"), "{}", r.body);
    assert!(
        ok("example.com", "/full/x/y?q=2")
            .body
            .starts_with("GET /one?q=2 ")
    );

    // Invalid backends answer 500: all of them, or their share.
    assert_eq!(
        get(port, "example.com", "/all-invalid").unwrap().status,
        500
    );
    let statuses: Vec<u16> = (0..24)
        .map(|_| get(port, "example.com", "/half-invalid").unwrap().status)
        .collect();
    assert!(
        statuses.contains(&200) && statuses.contains(&500),
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 500),
        "{statuses:?}"
    );

    // Redirects: a scheme change never keeps the request's non-default port.
    let location = |host: &str, path: &str| {
        let r = get(port, host, path).unwrap();
        assert_eq!(r.status, 302, "{host}{path}");
        r.header("location").unwrap_or_default().to_string()
    };
    assert_eq!(
        location("redirect.example:8080", "/a?b=c"),
        "https://redirect.example/a?b=c"
    );
    assert_eq!(
        location("example.com:8080", "/scheme"),
        "https://example.com:443/scheme"
    );
    assert_eq!(
        location("example.com:8080", "/redirect-prefix/x?y=1"),
        "http://example.org/x?y=1"
    );
    assert_eq!(
        location("example.com:8080", "/redirect-prefix"),
        "http://example.org/"
    );
    let _ = std::fs::remove_file(&file);
}
