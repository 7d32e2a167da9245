//! [`super`]: the admin server's connection limits, and query decoding.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One whole `GET /healthz` on a fresh connection: the answer as read.
async fn healthz(address: std::net::SocketAddr) -> String {
    let mut s = tokio::net::TcpStream::connect(address).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.unwrap();
    answer
}

/// Reads until the server closes the connection; how long that took.
async fn closed_within(stream: &mut tokio::net::TcpStream, limit: Duration) -> Option<Duration> {
    let started = std::time::Instant::now();
    let mut buf = [0u8; 512];
    tokio::time::timeout(limit, async {
        while stream.read(&mut buf).await.is_ok_and(|n| n > 0) {}
    })
    .await
    .ok()
    .map(|()| started.elapsed())
}

/// Half-sent requests cannot hold the admin server: past the cap the
/// oldest half-sent one gives way, so a client that asks at once is
/// answered at once; the others are closed after the header timeout.
#[tokio::test]
async fn half_sent_requests_cannot_hold_the_admin_server() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = Router::new().route("/healthz", get(|| async { "ok\n" }));
    let limits = ConnectionLimits {
        max: 4,
        header_timeout: Duration::from_millis(500),
        lifetime: Duration::from_secs(30),
    };
    tokio::spawn(serve_limited(listener, app, limits, std::future::pending()));
    let mut held = Vec::new();
    for _ in 0..limits.max * 5 {
        let mut s = tokio::net::TcpStream::connect(address).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        held.push(s);
    }
    let asked = std::time::Instant::now();
    let answer = healthz(address).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        asked.elapsed() < Duration::from_millis(400),
        "answered past the crowd at once"
    );
    // The first ones gave way at once; the last `max` are closed by the header timeout.
    for (i, s) in held.iter_mut().enumerate() {
        let took = closed_within(s, Duration::from_secs(5)).await;
        assert!(took.is_some(), "half-sent connection {i} is closed");
    }
    let answer = healthz(address).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn queries_decode() {
    assert_eq!(percent_decode("Host%3A%20a+b%2Fc"), "Host: a b/c");
    assert_eq!(percent_decode("100%"), "100%");
    assert_eq!(percent_decode("%zz"), "%zz");
}

/// The metrics listener answers `/metrics` and nothing of the admin server:
/// no debug view (Secrets' material), no explain.
#[tokio::test]
async fn the_metrics_listener_serves_metrics_alone() {
    let state = Arc::new(AdminState {
        published: watch::channel(None).1,
        fleet: aether_ads::Fleet::new(),
        metrics: vec![Box::new(|| "aether_test_metric 1\n".to_string())],
        status_view: Box::new(|p: &Published| p.status.clone()),
        envoy_ready: None,
        config_problems: None,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(serve_limited(
        listener,
        metrics_router(state),
        LIMITS,
        std::future::pending(),
    ));
    let get = |path: &'static str| async move {
        let mut s = tokio::net::TcpStream::connect(address).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).await.unwrap();
        answer
    };
    let answer = get("/metrics").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("aether_test_metric 1"), "{answer}");
    for path in [
        "/debug/snapshot",
        "/debug/status",
        "/debug/explain",
        "/readyz",
    ] {
        let answer = get(path).await;
        assert!(answer.starts_with("HTTP/1.1 404"), "{path}: {answer}");
    }
}
