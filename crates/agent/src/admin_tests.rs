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

/// Every sample line of an exposition: `name{labels} value`, the value a
/// number; the names in order.
fn sample_names(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("a sample: series value");
            assert!(value.parse::<f64>().is_ok(), "not a number: {l}");
            let name = series.split('{').next().unwrap();
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "a bad name: {l}"
            );
            assert_eq!(series.contains('{'), series.ends_with('}'), "{l}");
            name
        })
        .collect()
}

/// The metrics listener answers `/metrics` and nothing of the admin server:
/// no debug view (Secrets' material), no explain. `/metrics` is the one
/// registry, in the format the client asks for.
#[tokio::test]
async fn the_metrics_listener_serves_metrics_alone() {
    let fleet = aether_ads::Fleet::new();
    let stats = crate::pipeline::Stats::default();
    let mut registry = crate::metrics::registry();
    fleet
        .metrics()
        .register(registry.sub_registry_with_prefix("aether_ads"));
    stats.register(registry.sub_registry_with_prefix("aether_edge"));
    stats.loads_ok.inc();
    let state = Arc::new(AdminState {
        published: watch::channel(None).1,
        fleet,
        metrics: registry,
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
    let get = |path: &'static str, accept: &'static str| async move {
        let mut s = tokio::net::TcpStream::connect(address).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: x\r\n{accept}Connection: close\r\n\r\n");
        s.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).await.unwrap();
        answer
    };
    let answer = get("/metrics", "").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("content-type: text/plain; version=0.0.4"),
        "{answer}"
    );
    let (_, text) = answer.split_once("\r\n\r\n").unwrap();
    assert!(
        text.contains("aether_edge_config_loads_total{result=\"ok\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE aether_ads_acks_total counter\n"),
        "{text}"
    );
    assert!(
        !text.contains(".."),
        "a help text ends with two periods: {text}"
    );
    let names = sample_names(text);
    for name in [
        "aether_edge_build_info",
        "aether_ads_pushes_total",
        "aether_ads_connected_streams",
        "aether_edge_build_seconds",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
        "aether_edge_heap_allocated_bytes",
        "aether_edge_heap_resident_bytes",
    ] {
        assert!(names.contains(&name), "no {name} in {text}");
    }

    let prometheus = "Accept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4\r\n";
    let answer = get("/metrics", prometheus).await;
    assert!(
        answer.contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{answer}"
    );
    let (_, om) = answer.split_once("\r\n\r\n").unwrap();
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert!(om.contains("# TYPE aether_ads_acks counter\n"), "{om}");
    let mut plain = names.clone();
    let mut openmetrics = sample_names(om);
    plain.sort();
    openmetrics.sort();
    assert_eq!(plain, openmetrics, "the same series in both formats");

    for path in [
        "/debug/snapshot",
        "/debug/status",
        "/debug/explain",
        "/readyz",
    ] {
        let answer = get(path, "").await;
        assert!(answer.starts_with("HTTP/1.1 404"), "{path}: {answer}");
    }
}
