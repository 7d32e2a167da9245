//! Live: frontend mTLS whose client CA is a ClusterTrustBundle, through a real
//! Envoy served by `aether-edge standalone`.
//!
//! ```text
//!  ClusterTrustBundle clients (trustBundle: CA "ours") ◄── Gateway spec.tls.frontend caCertificateRefs
//!  client cert signed by "ours"   ─TLS─► Envoy :P (HTTPS) ─► "web"
//!  client cert signed by "theirs" ─TLS─► refused in the handshake; no certificate: refused too
//!
//!  BackendTLSPolicy (CA: the same ClusterTrustBundle, hostname backend.example.com)
//!  Envoy ─TLS─► openssl s_server, certificate signed by "ours"   → 200
//!  Envoy ─TLS─► openssl s_server, certificate signed by "theirs" → refused (not 200)
//! ```

use crate::live_l4::{make_cert, secret_yaml};
use crate::support::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `openssl` with `args`, which must succeed.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the `openssl` command");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

/// A CA `<name>.crt` / `<name>.key` and a client certificate it signed,
/// `<name>-client.crt` / `.key`, in `dir`; returns the CA's PEM.
pub(crate) fn make_ca_and_client(dir: &Path, name: &str) -> String {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let (ca_crt, ca_key) = (format!("{name}.crt"), format!("{name}.key"));
    let (crt, key, csr) = (
        format!("{name}-client.crt"),
        format!("{name}-client.key"),
        format!("{name}-client.csr"),
    );
    let subject = format!("/CN={name} CA");
    let mut args = vec!["req", "-x509", "-days", "2", "-subj", &subject];
    args.extend(ec);
    args.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
    args.extend(["-addext", "keyUsage=critical,keyCertSign"]);
    args.extend(["-keyout", &ca_key, "-out", &ca_crt]);
    openssl(dir, &args);
    let client = format!("/CN={name} client");
    let mut args = vec!["req", "-subj", &client, "-keyout", &key, "-out", &csr];
    args.extend(ec);
    openssl(dir, &args);
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_crt,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "client.ext",
            "-out",
            &crt,
        ],
    );
    // And a server certificate for backend.example.com.
    let (crt, key, csr) = (
        format!("{name}-server.crt"),
        format!("{name}-server.key"),
        format!("{name}-server.csr"),
    );
    let server = format!("/CN={name} server");
    let mut args = vec!["req", "-subj", &server, "-keyout", &key, "-out", &csr];
    args.extend(ec);
    openssl(dir, &args);
    std::fs::write(
        dir.join("server.ext"),
        "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:backend.example.com\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_crt,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            &crt,
        ],
    );
    std::fs::read_to_string(dir.join(&ca_crt)).unwrap()
}

fn edge_yaml(port: u16, cert: &(String, String), bundle: &str, web: &Backend) -> String {
    let indented: String = bundle.lines().map(|l| format!("    {l}\n")).collect();
    [
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n".to_string(),
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: default}}\nspec:\n  gatewayClassName: aether\n  \
             tls:\n    frontend:\n      default:\n        validation:\n          caCertificateRefs:\n          \
             - {{group: certificates.k8s.io, kind: ClusterTrustBundle, name: clients}}\n  listeners:\n  \
             - {{name: https, protocol: HTTPS, port: {port}, hostname: www.example.com, tls: {{certificateRefs: [{{name: www-cert}}]}}}}\n"
        ),
        format!(
            "apiVersion: certificates.k8s.io/v1beta1\nkind: ClusterTrustBundle\nmetadata: {{name: clients}}\nspec:\n  trustBundle: |\n{indented}"
        ),
        secret_yaml("www-cert", cert),
        web.yaml("default"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: default}\nspec:\n  parentRefs: [{name: edge}]\n  rules:\n  - backendRefs: [{name: web, port: 80}]\n".to_string(),
    ]
    .join("---\n")
}

/// One GET over TLS to www.example.com with the client certificate `client`
/// (`None`: none): everything `openssl s_client` printed.
fn get_with(port: u16, dir: &Path, client: Option<&str>) -> String {
    let mut cmd = Command::new("openssl");
    cmd.current_dir(dir)
        .args(["s_client", "-ign_eof", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-servername", "www.example.com"]);
    if let Some(name) = client {
        let (crt, key) = (format!("{name}-client.crt"), format!("{name}-client.key"));
        cmd.args(["-cert", &crt, "-key", &key]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the `openssl` command");
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin
        .write_all(b"GET /mtls HTTP/1.1\r\nhost: www.example.com\r\nconnection: close\r\n\r\n");
    // TLS 1.3: the server judges the client certificate after the handshake;
    // give the answer (or the alert) time to come back.
    std::thread::sleep(Duration::from_millis(1000));
    drop(stdin);
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_client_ca_from_a_cluster_trust_bundle_admits_its_clients_and_no_others() {
    let (dir, logs, certs) = (temp_dir("ctb"), temp_dir("ctb-logs"), temp_dir("ctb-certs"));
    let ours = make_ca_and_client(&certs, "ours");
    make_ca_and_client(&certs, "theirs");
    let server = make_cert(&certs, "www.example.com");
    let web = Backend::start("web");
    let port = free_port();
    std::fs::write(dir.join("edge.yaml"), edge_yaml(port, &server, &ours, &web)).unwrap();
    let (xds, admin) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let _agent = Agent::start(agent_bin(), &dir, &xds, &admin, &logs, &[]);
    let _envoy = envoy("ctb", &xds, true, &logs);

    wait_until(
        Duration::from_secs(30),
        "a client of the bundle's CA",
        || {
            get_with(port, &certs, Some("ours"))
                .contains("web /mtls")
                .then_some(())
        },
    );
    let theirs = get_with(port, &certs, Some("theirs"));
    assert!(
        !theirs.contains("web /mtls") && theirs.contains("alert unknown ca"),
        "{theirs}"
    );
    let none = get_with(port, &certs, None);
    assert!(!none.contains("web /mtls"), "{none}");
    for d in [&dir, &logs, &certs] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// `openssl s_server -www` with `<name>-server.crt`: a 200 status page for
/// every request; killed when dropped.
struct TlsBackend(std::process::Child, u16);

impl TlsBackend {
    fn start(dir: &Path, name: &str) -> TlsBackend {
        let port = free_port();
        let child = Command::new("openssl")
            .current_dir(dir)
            .args(["s_server", "-quiet", "-www", "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["-cert", &format!("{name}-server.crt")])
            .args(["-key", &format!("{name}-server.key")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the `openssl` command");
        let backend = TlsBackend(child, port);
        wait_until(Duration::from_secs(5), "openssl s_server", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        });
        backend
    }

    /// Service `<service>` (port 443 → it), its EndpointSlice, and a
    /// BackendTLSPolicy whose CA is the ClusterTrustBundle `clients`.
    fn yaml(&self, service: &str) -> String {
        let port = self.1;
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {service}, namespace: default}}\nspec:\n  ports:\n  - {{name: https, port: 443, targetPort: {port}}}\n---\n\
             apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {service}-1\n  namespace: default\n  labels: {{kubernetes.io/service-name: {service}}}\naddressType: IPv4\nports:\n- {{name: https, port: {port}}}\nendpoints:\n- addresses: [\"127.0.0.1\"]\n---\n\
             apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata: {{name: {service}, namespace: default}}\nspec:\n  targetRefs: [{{group: \"\", kind: Service, name: {service}}}]\n  validation:\n    hostname: backend.example.com\n    caCertificateRefs: [{{group: certificates.k8s.io, kind: ClusterTrustBundle, name: clients}}]\n"
        )
    }
}

impl Drop for TlsBackend {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_backend_ca_from_a_cluster_trust_bundle_verifies_its_backends_and_no_others() {
    let (dir, logs, certs) = (
        temp_dir("ctb-backend"),
        temp_dir("ctb-backend-logs"),
        temp_dir("ctb-backend-certs"),
    );
    let ours = make_ca_and_client(&certs, "ours");
    make_ca_and_client(&certs, "theirs");
    let (good, stranger) = (
        TlsBackend::start(&certs, "ours"),
        TlsBackend::start(&certs, "theirs"),
    );
    let port = free_port();
    let indented: String = ours.lines().map(|l| format!("    {l}\n")).collect();
    let yaml = [
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n".to_string(),
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  \
             - {{name: http, protocol: HTTP, port: {port}}}\n"
        ),
        format!(
            "apiVersion: certificates.k8s.io/v1beta1\nkind: ClusterTrustBundle\nmetadata: {{name: clients}}\nspec:\n  trustBundle: |\n{indented}"
        ),
        good.yaml("good"),
        stranger.yaml("stranger"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: default}\nspec:\n  parentRefs: [{name: edge}]\n  rules:\n  \
         - matches: [{path: {type: PathPrefix, value: /good}}]\n    backendRefs: [{name: good, port: 443}]\n  \
         - matches: [{path: {type: PathPrefix, value: /stranger}}]\n    backendRefs: [{name: stranger, port: 443}]\n".to_string(),
    ]
    .join("---\n");
    std::fs::write(dir.join("edge.yaml"), yaml).unwrap();
    let (xds, admin) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let _agent = Agent::start(agent_bin(), &dir, &xds, &admin, &logs, &[]);
    let _envoy = envoy("ctb-backend", &xds, true, &logs);
    let addr = format!("127.0.0.1:{port}");
    let status = |path: &str| {
        http_get(&addr, "www.example.com", path, &[])
            .ok()
            .map(|r| r.status)
    };
    wait_until(
        Duration::from_secs(30),
        "the backend the bundle's CA signed",
        || (status("/good") == Some(200)).then_some(()),
    );
    let other = status("/stranger");
    assert!(other.is_some_and(|s| s != 200), "{other:?}");
    for d in [&dir, &logs, &certs] {
        let _ = std::fs::remove_dir_all(d);
    }
}
