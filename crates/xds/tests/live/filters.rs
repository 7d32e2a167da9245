//! Live check of the HTTPRoute features beyond matching, through a real Envoy:
//! a request timeout answers 504 after the configured time (and not long
//! after), a retried 503 succeeds on the second try, a refused connection is
//! retried on another endpoint, a mirror sees a copy of
//! the request, a backendRef's own header filter
//! reaches only that backend, a WebSocket upgrade round-trips bytes, and a CORS
//! preflight is answered by Envoy with the policy's headers.

use crate::common::live::{
    get, mk_cluster, mk_forward, mk_http_port, mk_ir, mk_route, mk_virtual_host, serve,
    spawn_echo_backend, spawn_recording_backend,
};
use aether_ir as ir;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TIMEOUT_MS: u64 = 400;

/// Accepts connections and never answers.
fn spawn_silent_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    addr
}

/// Answers its first request 503 and every later one 200; counts them.
fn spawn_flaky_backend() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let seen = seen.clone();
            std::thread::spawn(move || {
                while !read_head(&mut conn).is_empty() {
                    let status = match seen.fetch_add(1, Ordering::SeqCst) {
                        0 => "503 Service Unavailable",
                        _ => "200 OK",
                    };
                    let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
                    if conn.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, count)
}

/// Answers an upgrade with 101, then echoes every byte back.
fn spawn_upgrade_echo_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                read_head(&mut conn);
                let _ = conn.write_all(
                    b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\r\n",
                );
                let mut buf = [0u8; 256];
                while let Ok(n @ 1..) = conn.read(&mut buf) {
                    if conn.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn read_head(conn: &mut impl Read) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

struct Backends {
    echo: ir::Cluster,
    silent: ir::Cluster,
    upgrade: ir::Cluster,
    mirror: ir::Cluster,
    mirrored: Arc<Mutex<Vec<String>>>,
    /// Two flaky backends: one behind a route that retries 503, one not.
    flaky: [(ir::Cluster, Arc<AtomicUsize>); 2],
    /// The echo backend and a port nobody listens on, round robin.
    half_dead: ir::Cluster,
    /// The echo backend and one that never answers, round robin.
    half_silent: ir::Cluster,
}

fn given_backends() -> Backends {
    let (mirror_addr, mirrored) = spawn_recording_backend();
    let http1 = ir::UpstreamProtocol::Http1;
    let echo = mk_cluster("echo", spawn_echo_backend(), http1);
    let mut half_dead = mk_cluster("half-dead", spawn_echo_backend(), http1);
    half_dead.endpoints.push(ir::Endpoint {
        address: "127.0.0.1".into(),
        port: crate::common::live::free_port(),
        weight: 0,
    });
    half_dead.endpoints.sort();
    let mut half_silent = mk_cluster("half-silent", spawn_echo_backend(), http1);
    let silent = spawn_silent_backend();
    half_silent.endpoints.push(ir::Endpoint {
        address: silent.ip().to_string(),
        port: silent.port(),
        weight: 0,
    });
    half_silent.endpoints.sort();
    Backends {
        echo,
        half_dead,
        half_silent,
        silent: mk_cluster("silent", spawn_silent_backend(), http1),
        upgrade: mk_cluster("upgrade", spawn_upgrade_echo_backend(), http1),
        mirror: mk_cluster("mirror", mirror_addr, http1),
        mirrored,
        flaky: ["flaky-retried", "flaky"].map(|name| {
            let (addr, count) = spawn_flaky_backend();
            (mk_cluster(name, addr, http1), count)
        }),
    }
}

fn forward_with(cluster: &str, change: impl FnOnce(&mut ir::Forward)) -> ir::RouteAction {
    let mut action = mk_forward(&[cluster], 0, None);
    if let ir::RouteAction::Forward(f) = &mut action {
        change(f);
    }
    action
}

fn live_ir(port: u16, b: &Backends) -> ir::Ir {
    let prefix = |p: &str| ir::PathMatch::Prefix(p.into());
    let routes = vec![
        mk_route(
            "timeout",
            prefix("/timeout"),
            forward_with(&b.silent.name, |f| {
                f.timeouts.request_ms = Some(TIMEOUT_MS);
            }),
        ),
        mk_route(
            "backend-timeout",
            prefix("/backend-timeout"),
            forward_with(&b.silent.name, |f| {
                f.timeouts.backend_request_ms = Some(TIMEOUT_MS);
            }),
        ),
        mk_route(
            "mirrored",
            prefix("/mirrored"),
            forward_with(&b.echo.name, |f| {
                f.mirrors.push(ir::Mirror {
                    cluster: b.mirror.name.clone(),
                    fraction: None,
                });
            }),
        ),
        mk_route(
            "backend-headers",
            prefix("/backend-headers"),
            forward_with(&b.echo.name, |f| {
                f.backends[0].request_headers.set.push(ir::Header {
                    name: "x-backend".into(),
                    value: "echo".into(),
                });
            }),
        ),
        mk_route("ws", prefix("/ws"), mk_forward(&[&b.upgrade.name], 0, None)),
        mk_route(
            "retried",
            prefix("/retried"),
            forward_with(&b.flaky[0].0.name, |f| {
                f.retry = Some(Box::new(ir::Retry {
                    attempts: Some(1),
                    backoff_ms: Some(10),
                    codes: vec![503],
                }));
            }),
        ),
        mk_route(
            "not-retried",
            prefix("/not-retried"),
            mk_forward(&[&b.flaky[1].0.name], 0, None),
        ),
        mk_route(
            "connect-retried",
            prefix("/connect-retried"),
            forward_with(&b.half_dead.name, |f| {
                f.retry = Some(Box::new(ir::Retry {
                    attempts: Some(3),
                    ..Default::default()
                }));
            }),
        ),
        mk_route(
            "timeout-retried",
            prefix("/timeout-retried"),
            forward_with(&b.half_silent.name, |f| {
                f.timeouts.backend_request_ms = Some(TIMEOUT_MS);
                f.retry = Some(Box::new(ir::Retry {
                    attempts: Some(3),
                    ..Default::default()
                }));
            }),
        ),
        mk_route(
            "connect-not-retried",
            prefix("/connect-not-retried"),
            mk_forward(&[&b.half_dead.name], 0, None),
        ),
        mk_route(
            "cors",
            prefix("/cors"),
            forward_with(&b.mirror.name, |f| {
                f.cors = Some(Box::new(ir::Cors {
                    allow_origins: vec!["https://*.bar.com".into()],
                    allow_credentials: true,
                    allow_methods: vec!["GET".into(), "PUT".into()],
                    allow_headers: vec!["x-one".into()],
                    expose_headers: vec!["x-two".into()],
                    max_age_seconds: Some(60),
                }));
            }),
        ),
        mk_route("root", prefix("/"), mk_forward(&[&b.echo.name], 0, None)),
    ];
    let clusters = vec![
        b.echo.clone(),
        b.flaky[1].0.clone(),
        b.flaky[0].0.clone(),
        b.half_dead.clone(),
        b.half_silent.clone(),
        b.mirror.clone(),
        b.silent.clone(),
        b.upgrade.clone(),
    ];
    let hosts = vec![mk_virtual_host("*", &["*"], routes)];
    mk_ir("filters", mk_http_port("filters", port, hosts), clusters)
}

#[test]
fn envoy_serves_timeouts_retries_mirrors_backend_headers_websocket_and_cors() {
    let b = given_backends();
    let port = crate::common::live::free_port();
    let ready = || matches!(get(port, "example.com", "/"), Ok(r) if r.status == 200);
    let _envoy = serve("filters", &live_ir(port, &b), ready);
    a_silent_backend_gets_504_after_the_timeout(port, "/timeout");
    a_silent_backend_gets_504_after_the_timeout(port, "/backend-timeout");
    a_retried_503_succeeds_on_the_second_try(port, &b.flaky);
    a_refused_connection_is_retried_on_another_endpoint(port);
    a_mirror_sees_a_copy_and_the_client_the_answer(port, &b.mirrored);
    a_backends_own_header_reaches_it(port);
    a_websocket_upgrade_round_trips_bytes(port);
    a_cors_preflight_is_answered_by_the_gateway(port, &b.mirrored);
}

fn a_silent_backend_gets_504_after_the_timeout(port: u16, path: &str) {
    let started = Instant::now();
    let r = get(port, "example.com", path).unwrap();
    let took = started.elapsed();
    assert_eq!(r.status, 504, "{path}: {}", r.body);
    // Envoy arms its timer from its event loop's cached clock, which may lag
    // the request by a few milliseconds: allow a little early.
    assert!(
        took >= Duration::from_millis(TIMEOUT_MS - 50),
        "{path}: 504 after {took:?}, before the {TIMEOUT_MS} ms timeout"
    );
    // Envoy's own default (15 s) would be far later.
    assert!(took < Duration::from_secs(10), "{path}: 504 after {took:?}");
}

fn a_retried_503_succeeds_on_the_second_try(
    port: u16,
    flaky: &[(ir::Cluster, Arc<AtomicUsize>); 2],
) {
    let r = get(port, "example.com", "/retried").unwrap();
    assert_eq!(r.status, 200, "the retry did not reach the backend again");
    assert_eq!(flaky[0].1.load(Ordering::SeqCst), 2, "one try, one retry");
    // The same backend behind a route without retries: the 503 is the answer.
    let r = get(port, "example.com", "/not-retried").unwrap();
    assert_eq!(r.status, 503);
    assert_eq!(flaky[1].1.load(Ordering::SeqCst), 1);
}

/// Half the endpoints refuse connections: every request is answered, with the
/// rule's retries (connect-failure is always retried) and without them (a try
/// that never reached a backend is retried on another endpoint by default).
fn a_refused_connection_is_retried_on_another_endpoint(port: u16) {
    let statuses = |path: &str| -> Vec<u16> {
        (0..10)
            .map(|_| get(port, "example.com", path).unwrap().status)
            .collect()
    };
    let retried = statuses("/connect-retried");
    assert!(retried.iter().all(|s| *s == 200), "{retried:?}");
    let by_default = statuses("/connect-not-retried");
    assert!(
        by_default.iter().all(|s| *s == 200),
        "round robin reaches the dead endpoint, and the default retry moves on: {by_default:?}"
    );
    // A try passing the backend timeout is retried too (the spec's SHOULD for
    // a rule with retry and timeouts.backendRequest);
    // the 504 of a backend timeout without retries is checked above.
    let retried = (0..4)
        .map(|_| get(port, "example.com", "/timeout-retried").unwrap().status)
        .collect::<Vec<_>>();
    assert!(retried.iter().all(|s| *s == 200), "{retried:?}");
}

fn a_mirror_sees_a_copy_and_the_client_the_answer(port: u16, mirrored: &Mutex<Vec<String>>) {
    let r = get(port, "example.com", "/mirrored/one").unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.starts_with("GET /mirrored/one "), "{}", r.body);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let seen = mirrored.lock().unwrap().clone();
        if seen.iter().any(|l| l.starts_with("GET /mirrored/one ")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the mirror saw no copy: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Only the mirrored route copies.
    get(port, "example.com", "/not-mirrored").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let seen = mirrored.lock().unwrap().clone();
    assert!(
        !seen.iter().any(|l| l.contains("/not-mirrored")),
        "{seen:?}"
    );
}

fn a_backends_own_header_reaches_it(port: u16) {
    let r = get(port, "example.com", "/backend-headers").unwrap();
    assert!(r.body.contains("x-backend: echo\n"), "{}", r.body);
    let r = get(port, "example.com", "/elsewhere").unwrap();
    assert!(!r.body.contains("x-backend"), "{}", r.body);
}

fn a_websocket_upgrade_round_trips_bytes(port: u16) {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn.write_all(
        b"GET /ws HTTP/1.1\r\nhost: example.com\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\
          sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n",
    )
    .unwrap();
    let head = read_head(&mut conn);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let frame = [0x81u8, 0x02, b'h', b'i'];
    conn.write_all(&frame).unwrap();
    let mut back = [0u8; 4];
    conn.read_exact(&mut back).unwrap();
    assert_eq!(back, frame);
}

fn preflight(port: u16, origin: &str) -> crate::common::live::Response {
    let headers = [
        ("origin", origin),
        ("access-control-request-method", "PUT"),
        ("access-control-request-headers", "x-one"),
    ];
    let addr = format!("127.0.0.1:{port}");
    aether_testkit::live::http_request(&addr, "OPTIONS", "example.com", "/cors", &headers).unwrap()
}

/// The `/cors` route forwards to the recording backend: a preflight that
/// reached it would show up there.
fn a_cors_preflight_is_answered_by_the_gateway(port: u16, recorded: &Mutex<Vec<String>>) {
    let r = preflight(port, "https://a.b.bar.com");
    assert_eq!(r.status, 200, "{}", r.body);
    let expected = [
        ("access-control-allow-origin", "https://a.b.bar.com"),
        ("access-control-allow-credentials", "true"),
        ("access-control-allow-methods", "GET, PUT"),
        ("access-control-allow-headers", "x-one"),
        ("access-control-max-age", "60"),
    ];
    for (name, value) in expected {
        assert_eq!(r.header(name), Some(value), "{name}");
    }
    let r = preflight(port, "https://bar.com.evil.example");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), None);
    let seen = recorded.lock().unwrap().clone();
    assert!(!seen.iter().any(|l| l.starts_with("OPTIONS")), "{seen:?}");
}
