//! Live: a certificate rotation through aether-edge's Delta ADS and a real
//! Envoy changes the SDS secret alone.
//!
//! ```text
//!  client ─TLS(www.example.com)─► Envoy :P (HTTPS listener, cert over SDS) ─► HTTP backend "web"
//!  Secret www-cert rewritten ─► new handshakes get the new certificate; the listener
//!                               is never modified, a connection opened before goes on
//! ```

use crate::live_l4::{make_cert, secret_yaml};
use crate::support::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

fn edge_yaml(port: u16, cert: &(String, String), web: &Backend) -> String {
    [
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: aether}}\nspec: {{controllerName: gateway.aether.io/edge}}\n---\n\
             apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  \
             - {{name: https, protocol: HTTPS, port: {port}, hostname: www.example.com, tls: {{mode: Terminate, certificateRefs: [{{name: www-cert}}]}}}}\n"
        ),
        secret_yaml("www-cert", cert),
        web.yaml("default"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: default}\nspec:\n  parentRefs: [{name: edge, sectionName: https}]\n  rules:\n  - backendRefs: [{name: web, port: 80}]\n".to_string(),
    ]
    .join("---\n")
}

/// An `openssl s_client` session to www.example.com, kept open.
struct Session {
    child: Child,
    stdin: ChildStdin,
}

impl Session {
    fn open(port: u16) -> Session {
        let mut child = Command::new("openssl")
            .args(["s_client", "-ign_eof", "-connect"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["-servername", "www.example.com"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the rotation live test needs the `openssl` command");
        let stdin = child.stdin.take().unwrap();
        Session { child, stdin }
    }

    fn get(&mut self, path: &str, close: bool) {
        let connection = if close { "close" } else { "keep-alive" };
        let req = format!(
            "GET {path} HTTP/1.1\r\nhost: www.example.com\r\nconnection: {connection}\r\n\r\n"
        );
        self.stdin.write_all(req.as_bytes()).unwrap();
        // Give the answer time to come back.
        std::thread::sleep(Duration::from_millis(1500));
    }

    /// Everything the session printed (the server certificate, the answers).
    fn close(mut self) -> String {
        drop(self.stdin);
        let _ = self.child.kill();
        let out = self.child.wait_with_output().unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}

/// Does `out` (an s_client transcript) show the certificate `pem`?
fn shows(out: &str, pem: &str) -> bool {
    let squash = |s: &str| s.split_whitespace().collect::<String>();
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    squash(out).contains(&body)
}

/// The counters of Envoy's stats whose names match `filter` (a regex).
fn envoy_stats(admin: &str, filter: &str) -> BTreeMap<String, u64> {
    let r = http_get(admin, "envoy", &format!("/stats?filter={filter}"), &[]).unwrap();
    r.body
        .lines()
        .filter_map(|l| l.split_once(": "))
        .filter_map(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?)))
        .collect()
}

struct Dirs(Vec<PathBuf>);

impl Drop for Dirs {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

#[test]
fn a_rotated_certificate_reaches_new_handshakes_and_drains_nothing() {
    let (dir, logs, certs, next) = (
        temp_dir("rotation"),
        temp_dir("rotation-logs"),
        temp_dir("rotation-certs"),
        temp_dir("rotation-next"),
    );
    let _dirs = Dirs(vec![dir.clone(), logs.clone(), certs.clone(), next.clone()]);
    let web = Backend::start("web");
    let port = free_port();
    let first = make_cert(&certs, "www.example.com");
    let file = dir.join("edge.yaml");
    std::fs::write(&file, edge_yaml(port, &first, &web)).unwrap();
    let (xds, admin) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let _agent = Agent::start(agent_bin(), &dir, &xds, &admin, &logs, &[]);
    let envoy = envoy("rotation", &xds, true, &logs);

    // A session on the first certificate, one answer in, kept open.
    wait_until(Duration::from_secs(30), "the first certificate", || {
        let mut s = Session::open(port);
        s.get("/before", false);
        let out = s.close();
        (shows(&out, &first.0) && out.contains("web /before")).then_some(())
    });
    let mut session = Session::open(port);
    session.get("/before", false);
    let listeners = envoy_stats(&envoy.admin, "^listener_manager\\.listener_");
    assert_eq!(
        listeners.get("listener_manager.listener_added"),
        Some(&1),
        "{listeners:?}"
    );
    let secret = "^sds\\.edge_cert_default_www-cert\\.update_success$";
    let updates = envoy_stats(&envoy.admin, secret);

    let second = make_cert(&next, "www.example.com");
    assert_ne!(first.0, second.0);
    std::fs::write(&file, edge_yaml(port, &second, &web)).unwrap();
    wait_until(Duration::from_secs(30), "the rotated certificate", || {
        let mut s = Session::open(port);
        s.get("/after", true);
        let out = s.close();
        (shows(&out, &second.0) && out.contains("web /after")).then_some(())
    });

    // The secret moved...
    let now = envoy_stats(&envoy.admin, secret);
    assert!(
        now.values().sum::<u64>() > updates.values().sum::<u64>() && !updates.is_empty(),
        "{updates:?} then {now:?}"
    );
    // ... and the listener was neither modified nor drained.
    assert_eq!(
        envoy_stats(&envoy.admin, "^listener_manager\\.listener_"),
        listeners
    );
    let draining = envoy_stats(
        &envoy.admin,
        "^listener_manager\\.total_listeners_draining$",
    );
    assert_eq!(draining.values().sum::<u64>(), 0, "{draining:?}");
    // The session opened before goes on, on its certificate.
    session.get("/still", true);
    let out = session.close();
    assert!(shows(&out, &first.0), "{out}");
    assert!(
        out.contains("web /before") && out.contains("web /still"),
        "{out}"
    );
}
