//! An HTTP authorization server for Envoy's ext_authz (a listener's or a
//! route's ExternalAuth filter): it allows a request that carries
//! `x-allow: yes` (answering 200 with `x-user: alice`, which Envoy copies into
//! the request) and denies any other with 403. It counts the checks it answered.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub struct AuthServer {
    pub port: u16,
    checks: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl AuthServer {
    /// On 127.0.0.1 (standalone mode).
    pub fn start() -> AuthServer {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (checks, stop) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (c, s) = (checks.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let c = c.clone();
                std::thread::spawn(move || serve(conn, &c));
            }
        });
        AuthServer { port, checks, stop }
    }

    /// How many checks it has answered.
    pub fn checks(&self) -> usize {
        self.checks.load(Ordering::Relaxed)
    }

    /// Its Service `<name>` in `ns` (port 80 → the server) and EndpointSlice.
    pub fn yaml(&self, ns: &str, name: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  ports:\n  - {{name: http, port: 80, targetPort: {port}}}\n---\n\
             apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports:\n- {{name: http, port: {port}}}\nendpoints:\n- addresses: [\"127.0.0.1\"]\n  conditions: {{ready: true}}\n",
            port = self.port,
        )
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Checks on one connection until it closes.
fn serve(conn: TcpStream, checks: &AtomicUsize) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut conn = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let (mut allow, mut length) = (false, 0usize);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "x-allow" => allow = v.trim() == "yes",
                    "content-length" => length = v.trim().parse().unwrap_or(0),
                    _ => {}
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        checks.fetch_add(1, Ordering::Relaxed);
        let answer = if allow {
            "HTTP/1.1 200 OK\r\nx-user: alice\r\ncontent-length: 0\r\n\r\n".to_string()
        } else {
            "HTTP/1.1 403 Forbidden\r\ncontent-length: 6\r\n\r\ndenied".to_string()
        };
        if conn.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}
