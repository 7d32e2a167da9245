//! Backends: an HTTP one answering `<name> <path> <host>` (and echoing the bytes
//! of an upgraded connection), and TCP / UDP echoes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// An HTTP/1.1 backend answering every request with `<name> <path> <host>`; it
/// stops accepting when dropped. A request asking for an `upgrade` gets a 101,
/// and from then on every byte is echoed back (Envoy relays a WebSocket's bytes
/// after the 101 without reading them, so an echo is all a test needs).
pub struct Backend {
    pub name: String,
    pub ip: String,
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl Backend {
    /// On 127.0.0.1 (standalone mode; the API server refuses loopback endpoints).
    pub fn start(name: &str) -> Backend {
        Backend::on("127.0.0.1", name)
    }

    /// On `ip`: [`POD_IP`](super::POD_IP) for Kubernetes mode.
    pub fn on(ip: &str, name: &str) -> Backend {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let (n, s) = (name.to_string(), stop.clone());
        std::thread::spawn(move || accept(&listener, &n, &s, Some(Duration::from_secs(10))));
        Backend {
            name: name.to_string(),
            ip: ip.to_string(),
            port,
            stop,
        }
    }

    /// Its Service `<name>` in `ns` (port 80 → the backend port) and EndpointSlice.
    pub fn yaml(&self, ns: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  ports:\n  - {{name: http, port: 80, targetPort: {port}}}\n---\n\
             apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports:\n- {{name: http, port: {port}}}\nendpoints:\n- addresses: [\"{ip}\"]\n  conditions: {{ready: true}}\n",
            name = self.name,
            port = self.port,
            ip = self.ip,
        )
    }
}

/// Serves `listener` as a [`Backend`] named `name` until the process ends,
/// keeping idle connections open (a proxy's pool must never race a backend's
/// idle close): the backend of a long-running traffic driver.
pub fn serve_forever(listener: &TcpListener, name: &str) {
    accept(listener, name, &AtomicBool::new(false), None);
}

fn accept(listener: &TcpListener, name: &str, stop: &AtomicBool, idle: Option<Duration>) {
    for conn in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(conn) = conn else { continue };
        let n = name.to_string();
        std::thread::spawn(move || serve(conn, &n, idle));
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect((self.ip.as_str(), self.port));
    }
}

/// Requests on one connection until it closes.
fn serve(conn: TcpStream, name: &str, idle: Option<Duration>) {
    let _ = conn.set_read_timeout(idle);
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut conn = conn;
    while let Some((path, host, upgrade)) = read_request(&mut reader) {
        if let Some(protocol) = upgrade {
            return echo_upgraded(reader, conn, &protocol);
        }
        let answer = format!("{name} {path} {host}");
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if conn.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// After a 101 for `protocol`, every byte read is written back.
fn echo_upgraded(mut reader: BufReader<TcpStream>, mut conn: TcpStream, protocol: &str) {
    let _ = conn.set_read_timeout(None);
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: {protocol}\r\nconnection: Upgrade\r\n\r\n"
    );
    if conn.write_all(head.as_bytes()).is_err() {
        return;
    }
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = reader.read(&mut buf) {
        if conn.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// One request's path, Host and `upgrade` header, its body read and dropped;
/// `None` at the end.
fn read_request(reader: &mut impl BufRead) -> Option<(String, String, Option<String>)> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return None;
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .to_string();
    let (mut content_length, mut host, mut upgrade) = (0usize, String::new(), None);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            match k.to_ascii_lowercase().as_str() {
                "content-length" => content_length = v.trim().parse().unwrap_or(0),
                "host" => host = v.trim().to_string(),
                "upgrade" => upgrade = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    let mut body = vec![0; content_length];
    reader.read_exact(&mut body).ok()?;
    Some((path, host, upgrade))
}

/// A TCP server on `ip` answering each line with `<name> <line>`; its port.
pub fn tcp_echo(ip: &str, name: &'static str) -> u16 {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut out = conn.try_clone().unwrap();
                for line in BufReader::new(conn).lines() {
                    let Ok(line) = line else { return };
                    if writeln!(out, "{name} {line}").is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A UDP server on `ip` answering each datagram with `<name> <datagram>`; its port.
pub fn udp_echo(ip: &str, name: &'static str) -> u16 {
    let socket = UdpSocket::bind((ip, 0)).unwrap();
    let port = socket.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let reply = format!("{name} {}", String::from_utf8_lossy(&buf[..n]));
            let _ = socket.send_to(reply.as_bytes(), from);
        }
    });
    port
}
