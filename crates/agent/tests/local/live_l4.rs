//! Live: the L4 half of the edge through aether-edge's ADS and a real Envoy.
//!
//! ```text
//!  client ─TLS(SNI abc.example.com)─► Envoy :PT ─(bytes as they are)─► openssl s_server (its own cert)
//!  client ─TLS(SNI tls.example.com)─► Envoy :PT ─(TLS ends, gateway cert)─► TCP echo "term"
//!  client ─TLS(SNI www.example.com)─► Envoy :PT ─(HTTPS listener, same port)─► HTTP backend
//!  client ─TLS(SNI other.example.com) ► Envoy :PT ─► closed (no chain)
//!  client ─TCP─► Envoy :PTCP ─► TCP echo "tcp-old" (the older of two TCPRoutes)
//!  client ─UDP─► Envoy :PUDP ─► UDP echo "udp"; the TCP listener on the same number too
//! ```
//!
//! TLS clients are the `openssl s_client` command; certificates are made with
//! `openssl req` per run.

use crate::support::*;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A self-signed certificate for `cn` (also its SAN), as PEM (cert, key),
/// also written to `<cn>.crt` and `<cn>.key` in `dir`.
pub(crate) fn make_cert(dir: &Path, cn: &str) -> (String, String) {
    let pem = aether_testkit::live::traffic::self_signed_cert(cn);
    std::fs::write(dir.join(format!("{cn}.crt")), &pem.0).unwrap();
    std::fs::write(dir.join(format!("{cn}.key")), &pem.1).unwrap();
    pem
}

/// A port free for TCP ([`free_port`]: outside the kernel's automatic range, never
/// twice in this process) that is free for UDP too.
fn free_udp_and_tcp_port() -> u16 {
    loop {
        let port = free_port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// `openssl s_client` to Envoy with `sni`, sending `input`: everything it printed
/// (the peer certificate's subject among it) and whether the handshake completed.
fn tls_exchange(port: u16, sni: &str, input: &str) -> (String, bool) {
    let mut child = Command::new("openssl")
        .args(["s_client", "-ign_eof", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-servername", sni])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl s_client");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    // Give the answer time to come back, then end the session (s_client keeps a
    // session open past its input's end).
    std::thread::sleep(Duration::from_millis(1500));
    drop(stdin);
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let handshake =
        text.contains("Server certificate") && !text.contains("no peer certificate available");
    (text, handshake)
}

fn tcp_exchange(port: u16, line: &str) -> Option<String> {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    writeln!(conn, "{line}").ok()?;
    let mut answer = String::new();
    BufReader::new(conn).read_line(&mut answer).ok()?;
    Some(answer.trim_end().to_string())
}

fn udp_exchange(port: u16, datagram: &str) -> Option<String> {
    let socket = UdpSocket::bind("127.0.0.1:0").ok()?;
    socket
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    socket
        .send_to(datagram.as_bytes(), ("127.0.0.1", port))
        .ok()?;
    let mut buf = [0u8; 2048];
    let n = socket.recv(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

pub(crate) fn secret_yaml(name: &str, pair: &(String, String)) -> String {
    aether_testkit::live::traffic::tls_secret_yaml("default", name, pair)
}

fn l4_service(name: &str, port: u16, protocol: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  ports:\n  - {{name: p, port: {port}, targetPort: {port}, protocol: {protocol}}}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: default\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports:\n- {{name: p, port: {port}, protocol: {protocol}}}\nendpoints:\n- addresses: [\"127.0.0.1\"]\n"
    )
}

fn l4_route(
    kind: &str,
    name: &str,
    section: &str,
    hostnames: &[&str],
    backend: &str,
    port: u16,
) -> String {
    let hostnames = if hostnames.is_empty() {
        String::new()
    } else {
        format!("  hostnames: [{}]\n", hostnames.join(", "))
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: {kind}\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  parentRefs: [{{name: edge, sectionName: {section}}}]\n{hostnames}  rules:\n  - backendRefs: [{{name: {backend}, port: {port}}}]\n"
    )
}

/// The TLS listeners' keys travel in SDS secrets, never in a listener;
/// /debug/snapshot shows the secrets, each `privateKey` redacted.
fn no_private_key_in_the_debug_snapshot(agent: &Agent) {
    fn private_keys<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    if k == "privateKey" {
                        out.push(v);
                    } else {
                        private_keys(v, out);
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| private_keys(v, out)),
            _ => {}
        }
    }
    let snapshot: serde_json::Value =
        wait_until(Duration::from_secs(20), "/debug/snapshot", || {
            let r = agent.admin_get("/debug/snapshot")?;
            (r.status == 200)
                .then(|| serde_json::from_str(&r.body).ok())
                .flatten()
        });
    let mut in_listeners = Vec::new();
    private_keys(&snapshot["resources"]["listeners"], &mut in_listeners);
    assert!(in_listeners.is_empty(), "a listener holds a key");
    let mut keys = Vec::new();
    private_keys(&snapshot["resources"], &mut keys);
    assert!(!keys.is_empty(), "no TLS secret in the snapshot?");
    for k in keys {
        assert_eq!(k, &serde_json::json!({"inlineString": "[redacted]"}));
    }
}

#[test]
fn tls_passthrough_terminate_mixed_tcp_and_udp_through_envoy() {
    let w = given_an_edge_of_every_l4_kind();
    no_private_key_in_the_debug_snapshot(&w.agent);
    every_route_is_accepted_through_the_ack_gate(&w.agent);
    tcp_reaches_the_older_routes_backend_and_its_own_listener(&w);
    udp_datagrams_are_echoed(&w);
    tls_is_passed_through_terminated_or_served_as_https_by_sni(&w);
    drop(w);
}

/// The edge and everything behind it; removes its directories when dropped.
struct World {
    agent: Agent,
    _envoy: Envoy,
    p_tls: u16,
    p_tcp: u16,
    p_udp: u16,
    _tls_backend: Proc,
    _http: Backend,
    dirs: [std::path::PathBuf; 2],
}

impl Drop for World {
    fn drop(&mut self) {
        self.agent.proc.kill();
        for dir in &self.dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The passthrough backend: TLS with its own certificate, echoing lines reversed.
fn tls_backend(certs: &Path, logs: &Path) -> (Proc, u16) {
    make_cert(certs, "abc.example.com");
    let port = free_port();
    let proc = Proc::spawn(
        "tls-backend",
        Command::new("openssl")
            .args(["s_server", "-rev", "-accept", &port.to_string()])
            .arg("-cert")
            .arg(certs.join("abc.example.com.crt"))
            .arg("-key")
            .arg(certs.join("abc.example.com.key"))
            .stdin(Stdio::null()),
        logs,
    );
    (proc, port)
}

fn mk_edge_gateway(p_tls: u16, p_tcp: u16, p_udp: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: aether}}\nspec: {{controllerName: gateway.aether.io/edge}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  \
         - {{name: passthrough, protocol: TLS, port: {p_tls}, hostname: abc.example.com, tls: {{mode: Passthrough}}}}\n  \
         - {{name: terminate, protocol: TLS, port: {p_tls}, hostname: tls.example.com, tls: {{mode: Terminate, certificateRefs: [{{name: gw-cert}}]}}}}\n  \
         - {{name: https, protocol: HTTPS, port: {p_tls}, hostname: www.example.com, tls: {{mode: Terminate, certificateRefs: [{{name: www-cert}}]}}}}\n  \
         - {{name: tcp, protocol: TCP, port: {p_tcp}}}\n  \
         - {{name: udp, protocol: UDP, port: {p_udp}}}\n  \
         - {{name: tcp-same-number, protocol: TCP, port: {p_udp}}}\n"
    )
}

/// A TCPRoute on listener `tcp` to `backend`, created at `created`.
fn mk_tcp_route_created(name: &str, backend: &str, port: u16, created: &str) -> String {
    l4_route("TCPRoute", name, "tcp", &[], backend, port).replace(
        "namespace: default}",
        &format!("namespace: default, creationTimestamp: \"{created}\"}}"),
    )
}

fn given_an_edge_of_every_l4_kind() -> World {
    let (dir, logs, certs) = (temp_dir("l4"), temp_dir("l4-logs"), temp_dir("l4-certs"));
    let (tls_backend, pt_backend_port) = tls_backend(&certs, &logs);
    let (term_port, tcp_old) = (
        tcp_echo("127.0.0.1", "term"),
        tcp_echo("127.0.0.1", "tcp-old"),
    );
    let (tcp_new, udp_port) = (
        tcp_echo("127.0.0.1", "tcp-new"),
        udp_echo("127.0.0.1", "udp"),
    );
    let http = Backend::start("web");
    let (p_tls, p_tcp, p_udp) = (free_port(), free_port(), free_udp_and_tcp_port());
    let objects = [
        mk_edge_gateway(p_tls, p_tcp, p_udp),
        secret_yaml("gw-cert", &make_cert(&certs, "tls.example.com")),
        secret_yaml("www-cert", &make_cert(&certs, "www.example.com")),
        l4_service("pt-backend", pt_backend_port, "TCP"),
        l4_service("term-backend", term_port, "TCP"),
        l4_service("tcp-old", tcp_old, "TCP"),
        l4_service("tcp-new", tcp_new, "TCP"),
        l4_service("udp-backend", udp_port, "UDP"),
        http.yaml("default"),
        l4_route("TLSRoute", "pt", "passthrough", &["abc.example.com"], "pt-backend", pt_backend_port),
        l4_route("TLSRoute", "term", "terminate", &["tls.example.com"], "term-backend", term_port),
        l4_route("UDPRoute", "dns", "udp", &[], "udp-backend", udp_port),
        l4_route("TCPRoute", "same-number", "tcp-same-number", &[], "tcp-new", tcp_new),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: default}\nspec:\n  parentRefs: [{name: edge, sectionName: https}]\n  rules:\n  - backendRefs: [{name: web, port: 80}]\n".to_string(),
        // Two TCPRoutes on one listener: the older one is served.
        mk_tcp_route_created("older", "tcp-old", tcp_old, "2026-01-01T00:00:00Z"),
        mk_tcp_route_created("newer", "tcp-new", tcp_new, "2026-06-01T00:00:00Z"),
    ];
    std::fs::write(dir.join("edge.yaml"), objects.join("---\n")).unwrap();
    let xds = format!("127.0.0.1:{}", free_port());
    let admin = format!("127.0.0.1:{}", free_port());
    let agent = Agent::start(agent_bin(), &dir, &xds, &admin, &logs, &[]);
    let envoy = envoy("l4", &xds, false, &logs);
    World {
        agent,
        _envoy: envoy,
        p_tls,
        p_tcp,
        p_udp,
        _tls_backend: tls_backend,
        _http: http,
        dirs: [dir, certs],
    }
}

/// Status says programmed (after Envoy's ACK) before any traffic is checked.
fn every_route_is_accepted_through_the_ack_gate(agent: &Agent) {
    let what = "every route Accepted through the ACK gate";
    wait_until(Duration::from_secs(30), what, || {
        let s = agent.admin_get("/debug/status")?;
        let docs: Vec<&str> = s.body.split("\n---\n").collect();
        let kind = |d: &str| {
            d.lines()
                .find_map(|l| l.strip_prefix("kind: "))
                .unwrap_or_default()
                .to_string()
        };
        let routes: Vec<&&str> = docs.iter().filter(|d| kind(d).ends_with("Route")).collect();
        let gateway_programmed = docs
            .iter()
            .any(|d| kind(d) == "Gateway" && d.contains("reason: Programmed"));
        let all_accepted = routes.len() == 7
            && routes
                .iter()
                .all(|d| d.contains("reason: Accepted") && !d.contains("Pending"));
        (gateway_programmed && all_accepted).then_some(())
    });
}

/// The older TCPRoute's backend, every time; the TCP listener on the UDP
/// listener's port number is its own listener.
fn tcp_reaches_the_older_routes_backend_and_its_own_listener(w: &World) {
    let answer = wait_until(Duration::from_secs(20), "TCP through Envoy", || {
        tcp_exchange(w.p_tcp, "hello")
    });
    assert_eq!(answer, "tcp-old hello");
    for i in 0..20 {
        assert_eq!(
            tcp_exchange(w.p_tcp, &format!("n{i}")).as_deref(),
            Some(format!("tcp-old n{i}").as_str())
        );
    }
    assert_eq!(
        tcp_exchange(w.p_udp, "same").as_deref(),
        Some("tcp-new same")
    );
}

fn udp_datagrams_are_echoed(w: &World) {
    let answer = wait_until(Duration::from_secs(20), "UDP through Envoy", || {
        udp_exchange(w.p_udp, "ping")
    });
    assert_eq!(answer, "udp ping");
}

/// A TLS session with `sni` completes, shows the certificate of `cn`, and gets
/// `answer` back for `input`.
fn then_tls_session(port: u16, sni: &str, input: &str, cn: &str, answer: &str) {
    let (out, handshake) = tls_exchange(port, sni, input);
    assert!(handshake, "{sni} handshake: {out}");
    assert!(
        out.contains(&format!("CN={cn}")) || out.contains(&format!("CN = {cn}")),
        "{out}"
    );
    assert!(out.contains(answer), "{sni}: {answer} in {out}");
}

fn tls_is_passed_through_terminated_or_served_as_https_by_sni(w: &World) {
    // Passthrough: the client sees the backend's own certificate and talks to it
    // (its reversed echo).
    then_tls_session(
        w.p_tls,
        "abc.example.com",
        "hello\n",
        "abc.example.com",
        "olleh",
    );
    // Terminate: the Gateway's certificate, then plain TCP to the echo backend.
    then_tls_session(
        w.p_tls,
        "tls.example.com",
        "ping\n",
        "tls.example.com",
        "term ping",
    );
    // HTTPS on the same port: its own certificate and route table.
    let get = "GET /x HTTP/1.1\r\nhost: www.example.com\r\nconnection: close\r\n\r\n";
    then_tls_session(w.p_tls, "www.example.com", get, "www.example.com", "web /x");
    // No chain for this SNI: the connection is closed before any certificate.
    let (out, handshake) = tls_exchange(w.p_tls, "other.example.com", "x\n");
    assert!(!handshake, "unknown SNI must be closed: {out}");
    assert!(!out.contains("CN="), "{out}");
}
