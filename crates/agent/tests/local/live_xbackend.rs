//! Live: XBackend backendRefs through a real Envoy served by `aether-edge
//! standalone` (Gateway API v1.7.0 experimental; no conformance test yet).
//!
//! ```text
//!  client ─HTTP─► Envoy :P ─┬─ /wss     ─TLS (ALPN http/1.1, CA ConfigMap)─► TLS WebSocket echo
//!                           ├─ /mtls    ─TLS + our client certificate───────► TLS backend requiring one
//!                           ├─ /no-cert ─TLS without one────────────────────► the same backend: refused
//!                           ├─ /cookie, /header ─ one XBackend, two endpoints (127.0.0.1 and
//!                           │                     127.0.0.2, one port): stateful sessions
//!                           └─ /external ─ ExternalHostname pods.aether.test (its own netns; Envoy resolves it) ─► "ext"
//! ```
//!
//! In standalone mode the Service an EndpointSelector XBackend reads (made by
//! the leader on a cluster) is written by hand: owned by the XBackend
//! (ownerReference kind XBackend, its name), with its EndpointSlices.

use crate::live_l4::secret_yaml;
use crate::live_trust_bundle::make_ca_and_client;
use crate::support::*;
use aether_testkit::live::traffic::{Target, WebSocket};
use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

const CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n";

fn gateway(port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  \
         - {{name: http, protocol: HTTP, port: {port}}}\n"
    )
}

/// XBackend `name` of type EndpointSelector on `port`, with `extra` spec lines.
fn selector_xbackend(name: &str, port: u16, extra: &str) -> String {
    format!(
        "apiVersion: gateway.networking.x-k8s.io/v1alpha1\nkind: XBackend\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  \
         type: EndpointSelector\n  endpointSelector:\n    matchLabels: {{app: {name}}}\n  port: {{number: {port}}}\n{extra}"
    )
}

/// The Service made for XBackend `owner` (by hand, as standalone needs) and
/// one EndpointSlice with `addresses` on `port`.
fn owned_service(owner: &str, port: u16, addresses: &[&str]) -> String {
    let endpoints: String = addresses
        .iter()
        .map(|a| format!("- addresses: [\"{a}\"]\n"))
        .collect();
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {owner}-backend-x7k2p\n  namespace: default\n  labels: {{gateway.aether.io/xbackend: {owner}}}\n  \
         ownerReferences:\n  - {{apiVersion: gateway.networking.x-k8s.io/v1alpha1, kind: XBackend, name: {owner}, uid: \"\"}}\n\
         spec:\n  clusterIP: None\n  ports:\n  - {{port: {port}, targetPort: {port}}}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {owner}-backend-x7k2p-1\n  namespace: default\n  \
         labels: {{kubernetes.io/service-name: {owner}-backend-x7k2p}}\naddressType: IPv4\nports:\n- {{port: {port}}}\nendpoints:\n{endpoints}"
    )
}

/// An HTTPRoute on `edge`: PathPrefix `path` → XBackend `xbackend`, one rule each.
fn route(rules: &[(&str, &str)]) -> String {
    let rules: String = rules
        .iter()
        .map(|(path, x)| {
            format!(
                "  - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]\n    \
                 backendRefs: [{{group: gateway.networking.x-k8s.io, kind: XBackend, name: {x}}}]\n"
            )
        })
        .collect();
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: web, namespace: default}}\nspec:\n  parentRefs: [{{name: edge}}]\n  rules:\n{rules}"
    )
}

/// The agent and Envoy for the YAML `docs`; they stop when dropped.
struct Edge {
    _agent: Agent,
    _envoy: Envoy,
    dirs: Vec<std::path::PathBuf>,
}

impl Edge {
    fn start(tag: &str, docs: &[String]) -> Edge {
        Edge::start_with(tag, docs, &[])
    }

    /// [`Edge::start`] with the agent's `flags`.
    fn start_with(tag: &str, docs: &[String], flags: &[&str]) -> Edge {
        let (dir, logs) = (temp_dir(tag), temp_dir(&format!("{tag}-logs")));
        std::fs::write(dir.join("edge.yaml"), docs.join("---\n")).unwrap();
        let (xds, admin) = (
            format!("127.0.0.1:{}", free_port()),
            format!("127.0.0.1:{}", free_port()),
        );
        let agent = Agent::start(agent_bin(), &dir, &xds, &admin, &logs, flags);
        let envoy = envoy(tag, &xds, true, &logs);
        Edge {
            _agent: agent,
            _envoy: envoy,
            dirs: vec![dir, logs],
        }
    }
}

impl Drop for Edge {
    fn drop(&mut self) {
        for d in &self.dirs {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// The CA's PEM (`<name>.crt`) as a ConfigMap `ca.crt`.
fn ca_config_map(name: &str, ca: &str) -> String {
    let indented: String = ca.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\ndata:\n  ca.crt: |\n{indented}"
    )
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}

#[test]
fn wss_reaches_a_tls_websocket_backend_offering_http11_and_echoes() {
    let certs = temp_dir("xb-wss-certs");
    let ca = make_ca_and_client(&certs, "ours");
    let backend = TlsBackend::start(
        "wss",
        &read(&certs, "ours-server.crt"),
        &read(&certs, "ours-server.key"),
        None,
    );
    let port = free_port();
    let tls = "  protocol: WSS\n  tls:\n    mode: ServerOnly\n    validation:\n      hostname: backend.example.com\n      \
               caCertificateRefs: [{group: \"\", kind: ConfigMap, name: backend-ca}]\n";
    let _edge = Edge::start(
        "xb-wss",
        &[
            CLASS.into(),
            gateway(port),
            ca_config_map("backend-ca", &ca),
            selector_xbackend("wss", backend.port, tls),
            owned_service("wss", backend.port, &["127.0.0.1"]),
            route(&[("/ws", "wss")]),
        ],
    );
    let addr = format!("127.0.0.1:{port}");
    let answer = wait_until(Duration::from_secs(30), "the WSS backend", || {
        http_get(&addr, "www.example.com", "/ws/plain", &[])
            .ok()
            .filter(|r| r.status == 200)
    });
    // TLS verified against the ConfigMap's CA, http/1.1 offered and chosen.
    assert_eq!(answer.body, "wss /ws/plain alpn=http/1.1 client=none");
    let target = Target {
        addr: addr.clone(),
        host: "www.example.com".into(),
        path: "/ws".into(),
        sni: None,
    };
    let mut ws = WebSocket::open(&target, "/ws").expect("a WebSocket upgrade through Envoy");
    for i in 0..5 {
        assert!(ws.exchange(i), "message {i} echoed over TLS");
    }
    let _ = std::fs::remove_dir_all(&certs);
}

#[test]
fn client_and_server_presents_our_certificate_and_server_only_none() {
    let certs = temp_dir("xb-mtls-certs");
    let ca = make_ca_and_client(&certs, "ours");
    let backend = TlsBackend::start(
        "mtls",
        &read(&certs, "ours-server.crt"),
        &read(&certs, "ours-server.key"),
        Some(&ca),
    );
    let port = free_port();
    let validation = "    validation:\n      hostname: backend.example.com\n      \
                      caCertificateRefs: [{group: \"\", kind: ConfigMap, name: backend-ca}]\n";
    let client = (
        read(&certs, "ours-client.crt"),
        read(&certs, "ours-client.key"),
    );
    let _edge = Edge::start(
        "xb-mtls",
        &[
            CLASS.into(),
            gateway(port),
            ca_config_map("backend-ca", &ca),
            secret_yaml("client-cert", &client),
            selector_xbackend(
                "mtls",
                backend.port,
                &format!(
                    "  tls:\n    mode: ClientAndServer\n    clientCertificateRef: {{name: client-cert}}\n{validation}"
                ),
            ),
            owned_service("mtls", backend.port, &["127.0.0.1"]),
            selector_xbackend(
                "no-cert",
                backend.port,
                &format!("  tls:\n    mode: ServerOnly\n{validation}"),
            ),
            owned_service("no-cert", backend.port, &["127.0.0.1"]),
            route(&[("/mtls", "mtls"), ("/no-cert", "no-cert")]),
        ],
    );
    let addr = format!("127.0.0.1:{port}");
    let answer = wait_until(Duration::from_secs(30), "the mTLS backend", || {
        http_get(&addr, "www.example.com", "/mtls", &[])
            .ok()
            .filter(|r| r.status == 200)
    });
    assert_eq!(answer.body, "mtls /mtls alpn=http/1.1 client=ours client");
    let refused = http_get(&addr, "www.example.com", "/no-cert", &[]).map(|r| r.status);
    assert!(refused.as_ref().is_ok_and(|s| *s != 200), "{refused:?}");
    let _ = std::fs::remove_dir_all(&certs);
}

/// Two backends on one port, "one" on 127.0.0.1 and "two" on 127.0.0.2: one
/// XBackend's two endpoints. They serve until the test process ends.
fn two_endpoints() -> u16 {
    loop {
        let first = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = first.local_addr().unwrap().port();
        let Ok(second) = TcpListener::bind(("127.0.0.2", port)) else {
            continue;
        };
        std::thread::spawn(move || serve_forever(&first, "one"));
        std::thread::spawn(move || serve_forever(&second, "two"));
        return port;
    }
}

#[test]
fn a_session_keeps_to_one_endpoint_and_requests_without_it_reach_both() {
    let backend_port = two_endpoints();
    let port = free_port();
    let _edge = Edge::start(
        "xb-session",
        &[
            CLASS.into(),
            gateway(port),
            selector_xbackend(
                "cookie",
                backend_port,
                "  sessionPersistence:\n    cookie: {name: sticky}\n",
            ),
            owned_service("cookie", backend_port, &["127.0.0.1", "127.0.0.2"]),
            selector_xbackend(
                "header",
                backend_port,
                "  sessionPersistence:\n    type: Header\n    header: {name: x-session}\n",
            ),
            owned_service("header", backend_port, &["127.0.0.1", "127.0.0.2"]),
            route(&[("/cookie", "cookie"), ("/header", "header")]),
        ],
    );
    let addr = format!("127.0.0.1:{port}");
    let get = |path: &str, headers: &[(&str, &str)]| {
        http_get(&addr, "www.example.com", path, headers).expect("an answer")
    };
    wait_until(Duration::from_secs(30), "both routes", || {
        let ok = |p| http_get(&addr, "www.example.com", p, &[]).is_ok_and(|r| r.status == 200);
        (ok("/cookie") && ok("/header")).then_some(())
    });
    let reached = |path: &str, headers: &[(&str, &str)]| -> BTreeSet<String> {
        (0..20)
            .map(|_| get(path, headers).backend().unwrap_or("none").to_string())
            .collect()
    };
    let both: BTreeSet<String> = ["one".to_string(), "two".to_string()].into();
    assert_eq!(reached("/cookie", &[]), both, "without a session: both");
    assert_eq!(reached("/header", &[]), both, "without a session: both");

    // Cookie: the first answer sets it; 20 requests carrying it reach one backend.
    let first = get("/cookie", &[]);
    let set_cookie = first.header("set-cookie").expect("a session cookie");
    let cookie = set_cookie.split(';').next().unwrap().trim().to_string();
    assert!(cookie.starts_with("sticky="), "{set_cookie}");
    let stuck = reached("/cookie", &[("cookie", &cookie)]);
    assert_eq!(stuck.len(), 1, "one backend for the session: {stuck:?}");
    assert!(stuck.contains(first.backend().unwrap()), "{stuck:?}");

    // Header: the first answer carries it; sent back, it keeps to one backend.
    let first = get("/header", &[]);
    let session = first
        .header("x-session")
        .expect("a session header")
        .to_string();
    let stuck = reached("/header", &[("x-session", &session)]);
    assert_eq!(stuck.len(), 1, "one backend for the session: {stuck:?}");
    assert!(stuck.contains(first.backend().unwrap()), "{stuck:?}");
}

#[test]
fn an_external_hostname_is_resolved_by_envoy_where_the_edge_allows_it() {
    // In a namespace of its own, where POD_HOSTNAME names the backend's
    // address (a `localhost` name is refused: the edge node itself).
    if !isolated_standalone() {
        return;
    }
    let ext = Backend::on(POD_IP, "ext");
    let port = free_port();
    let _edge = Edge::start_with(
        "xb-external",
        &[
            CLASS.into(),
            gateway(port),
            format!(
                "apiVersion: gateway.networking.x-k8s.io/v1alpha1\nkind: XBackend\nmetadata: {{name: ext, namespace: default}}\nspec:\n  \
                 type: ExternalHostname\n  externalHostname: {{hostname: {POD_HOSTNAME}}}\n  port: {{number: {}}}\n",
                ext.port
            ),
            route(&[("/external", "ext")]),
        ],
        &["--allow-external-hostname-backends"],
    );
    let addr = format!("127.0.0.1:{port}");
    let answer = wait_until(Duration::from_secs(30), "the external hostname", || {
        http_get(&addr, "www.example.com", "/external", &[])
            .ok()
            .filter(|r| r.status == 200)
    });
    assert_eq!(answer.body, "ext /external www.example.com");
}

#[test]
fn a_route_rule_session_keeps_to_one_endpoint_of_a_service() {
    let backend_port = two_endpoints();
    let port = free_port();
    let service = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: pair, namespace: default}}\nspec:\n  ports:\n  - {{name: http, port: 80, targetPort: {backend_port}}}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: pair-1\n  namespace: default\n  labels: {{kubernetes.io/service-name: pair}}\n\
         addressType: IPv4\nports:\n- {{name: http, port: {backend_port}}}\nendpoints:\n- addresses: [\"127.0.0.1\", \"127.0.0.2\"]\n"
    );
    let route = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: default}\nspec:\n  parentRefs: [{name: edge}]\n  rules:\n  \
         - sessionPersistence: {cookie: {name: rule-session}}\n    backendRefs: [{name: pair, port: 80}]\n";
    let _edge = Edge::start(
        "xb-rule-session",
        &[CLASS.into(), gateway(port), service, route.into()],
    );
    let addr = format!("127.0.0.1:{port}");
    let get = |headers: &[(&str, &str)]| {
        http_get(&addr, "www.example.com", "/", headers).expect("an answer")
    };
    wait_until(Duration::from_secs(30), "the route", || {
        http_get(&addr, "www.example.com", "/", &[])
            .is_ok_and(|r| r.status == 200)
            .then_some(())
    });
    let reached = |headers: &[(&str, &str)]| -> BTreeSet<String> {
        (0..20)
            .map(|_| get(headers).backend().unwrap_or("none").to_string())
            .collect()
    };
    assert_eq!(reached(&[]).len(), 2, "without a session: both");
    let first = get(&[]);
    let set_cookie = first.header("set-cookie").expect("a session cookie");
    let cookie = set_cookie.split(';').next().unwrap().trim().to_string();
    assert!(cookie.starts_with("rule-session="), "{set_cookie}");
    let stuck = reached(&[("cookie", &cookie)]);
    assert_eq!(stuck.len(), 1, "one backend for the session: {stuck:?}");
    assert!(stuck.contains(first.backend().unwrap()), "{stuck:?}");
}
