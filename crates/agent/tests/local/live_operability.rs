//! Live: what a platform team operates by — Envoy's access log, what
//! Prometheus scrapes, and PROXY protocol behind a load balancer — through a
//! real Envoy served by `aether-edge standalone`.

use crate::live_resilience::{setup, then_served};
use crate::support::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Envoy logs each request as one JSON line on its stdout (the default
/// `--access-log json`): what was asked and answered, where it went, Envoy's
/// response flags; never the query string nor a credential header.
#[test]
fn envoy_logs_each_request_as_json_without_its_query_or_credentials() {
    let s = setup("access-log");
    let _agent = s.standalone(&[]);
    let envoy = envoy("access-log", &s.xds, true, &s.logs);
    then_served(&s, "/good", "b0", 30, "first route");
    let secret = "s3cr3t-token";
    let r = http_get(
        &s.gateway,
        "example.test",
        &format!("/good/page?token={secret}"),
        &[("authorization", &format!("Bearer {secret}"))],
    )
    .unwrap();
    assert_eq!(r.status, 200);
    let line = wait_until(Duration::from_secs(10), "the request's log line", || {
        envoy.proc.log_text().lines().find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            (v["path"] == "/good/page").then_some(v)
        })
    });
    assert_eq!(line["response_code"], 200, "{line}");
    assert_eq!(line["response_flags"], "-", "{line}");
    assert_eq!(line["authority"], "example.test", "{line}");
    assert!(
        line["route_name"]
            .as_str()
            .is_some_and(|n| n.starts_with("HTTPRoute/default/good")),
        "{line}"
    );
    assert!(
        line["upstream_cluster"]
            .as_str()
            .is_some_and(|c| c.contains("b0")),
        "{line}"
    );
    assert!(
        !envoy.proc.log_text().contains(secret),
        "a secret reached the access log"
    );
}

/// What Prometheus scrapes: the agent's `--metrics-address` serves `/metrics`
/// and none of the admin endpoints; Envoy's stats listener (`bootstrap
/// --stats-address`) serves `/stats/prometheus` and nothing else of Envoy's
/// admin.
#[test]
fn prometheus_reaches_the_agents_metrics_and_envoys_stats_and_nothing_else() {
    let s = setup("scrape");
    let metrics = format!("127.0.0.1:{}", free_port());
    let _agent = s.standalone(&["--metrics-address", &metrics]);
    let stats = format!("127.0.0.1:{}", free_port());
    let logs = &s.logs;
    let _envoy = Envoy::start_with(
        agent_bin(),
        "scrape",
        &s.xds,
        true,
        logs,
        &["--stats-address", &stats],
    );
    then_served(&s, "/good", "b0", 30, "first route");
    let get = |addr: &str, path: &str| http_get(addr, "scrape", path, &[]).unwrap();
    let m = get(&metrics, "/metrics");
    assert_eq!(m.status, 200);
    assert!(
        m.body.contains("aether_edge_snapshots_published_total"),
        "{}",
        m.body
    );
    for path in ["/debug/snapshot", "/debug/status", "/readyz"] {
        assert_eq!(get(&metrics, path).status, 404, "{path}");
    }
    let e = wait_until(Duration::from_secs(10), "Envoy's stats", || {
        let r = http_get(&stats, "scrape", "/stats/prometheus", &[]).ok()?;
        (r.status == 200).then_some(r)
    });
    assert!(
        e.body.contains("envoy_cluster_upstream_rq"),
        "{}",
        &e.body[..e.body.len().min(500)]
    );
    for path in ["/config_dump", "/quitquitquit", "/stats", "/clusters"] {
        assert_eq!(get(&stats, path).status, 404, "{path}");
    }
}

/// `GET /good` for example.test on `gateway`, the connection opened with
/// `header` (a PROXY protocol header, or nothing): the status line and body,
/// or `None` when Envoy closed the connection without an answer.
fn get_after(gateway: &str, header: &[u8]) -> Option<String> {
    let mut c = TcpStream::connect(gateway).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    c.write_all(header).ok()?;
    c.write_all(b"GET /good HTTP/1.1\r\nhost: example.test\r\nconnection: close\r\n\r\n")
        .ok()?;
    let mut answer = String::new();
    let _ = c.read_to_string(&mut answer);
    (!answer.is_empty()).then_some(answer)
}

/// PROXY protocol v2 for a TCP/IPv4 connection from `client` to 127.0.0.1:`port`.
fn proxy_v2(client: [u8; 4], client_port: u16, port: u16) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.extend([0x21, 0x11, 0, 12]); // v2 PROXY, TCP over IPv4, 12 address bytes
    h.extend(client);
    h.extend([127, 0, 0, 1]);
    h.extend(client_port.to_be_bytes());
    h.extend(port.to_be_bytes());
    h
}

/// `--proxy-protocol`: Envoy takes the client's address from the load
/// balancer's header (v1 text or v2 binary) — the access log names that
/// client — and closes a connection that comes without one.
#[test]
fn behind_a_proxy_protocol_load_balancer_the_client_address_is_the_headers() {
    let s = setup("proxy-protocol");
    let _agent = s.standalone(&["--proxy-protocol"]);
    let envoy = envoy("proxy-protocol", &s.xds, true, &s.logs);
    let port: u16 = s.gateway.rsplit_once(':').unwrap().1.parse().unwrap();
    let v1 = format!("PROXY TCP4 203.0.113.7 127.0.0.1 40001 {port}\r\n");
    let answer = wait_until(Duration::from_secs(30), "the route behind PROXY v1", || {
        get_after(&s.gateway, v1.as_bytes()).filter(|a| a.starts_with("HTTP/1.1 200"))
    });
    assert!(answer.contains("b0 /good"), "{answer}");
    let v2 = proxy_v2([198, 51, 100, 9], 40002, port);
    let answer = get_after(&s.gateway, &v2).unwrap_or_default();
    assert!(answer.starts_with("HTTP/1.1 200"), "PROXY v2: {answer}");
    let clients = |log: &str| -> Vec<String> {
        log.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["path"] == "/good")
            .filter_map(|v| v["downstream_remote_address"].as_str().map(str::to_string))
            .collect()
    };
    let logged = wait_until(Duration::from_secs(10), "both requests logged", || {
        let c = clients(&envoy.proc.log_text());
        (c.iter().any(|a| a.starts_with("203.0.113.7:"))
            && c.iter().any(|a| a.starts_with("198.51.100.9:")))
        .then_some(c)
    });
    assert!(!logged.iter().any(|a| a.starts_with("127.")), "{logged:?}");
    // Straight from a client, without the header: no answer.
    let direct = get_after(&s.gateway, b"");
    assert!(
        direct.is_none(),
        "answered without a PROXY header: {direct:?}"
    );
}
