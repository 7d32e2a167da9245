//! Live: frontend mTLS whose client CA is a ClusterTrustBundle, through a real
//! Envoy served by `aether-edge standalone`.
//!
//! ```text
//!  ClusterTrustBundle clients (trustBundle: CA "ours") ◄── Gateway spec.tls.frontend caCertificateRefs
//!  client cert signed by "ours"   ─TLS─► Envoy :P (HTTPS) ─► "web"
//!  client cert signed by "theirs" ─TLS─► refused in the handshake; no certificate: refused too
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
fn make_ca_and_client(dir: &Path, name: &str) -> String {
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
