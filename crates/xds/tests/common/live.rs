//! A tiny echo backend and an Envoy process guard for the live tests (127.0.0.1
//! only); the HTTP/1.1 client is the testkit's.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use aether_testkit::live::{Response, free_port, http_get, read_response, request_text};

/// Answers every request with 200 and a body echoing the request line and Host.
pub fn spawn_echo_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding the backend");
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || echo(conn));
        }
    });
    addr
}

/// Records the first line of every connection's request, then hangs up: shows which
/// protocol Envoy speaks upstream (`PRI * HTTP/2.0` is the HTTP/2 preface).
pub fn spawn_recording_backend() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding the backend");
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let head = read_head(&mut conn);
            let first = head.split("\r\n").next().unwrap_or_default().to_string();
            record.lock().unwrap().push(first);
        }
    });
    (addr, seen)
}

fn echo(mut conn: TcpStream) {
    let head = read_head(&mut conn);
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_string();
    let mut body = format!("{request_line}\n");
    for line in lines {
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("host:") || lower.starts_with("x-") {
            body.push_str(&lower);
            body.push('\n');
        }
    }
    let _ = write!(
        conn,
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn read_head(conn: &mut impl Read) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// One GET on a fresh connection to 127.0.0.1:`port`, with a header the routes remove.
pub fn get(port: u16, host: &str, path: &str) -> std::io::Result<Response> {
    let addr = format!("127.0.0.1:{port}");
    http_get(&addr, host, path, &[("x-remove-me", "yes")])
}

pub struct Envoy(Child);

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Envoy {
    /// Runs Envoy on a static bootstrap and waits until `ready` says it serves.
    pub fn start(bootstrap: &Path, ready: impl Fn() -> bool) -> Envoy {
        let envoy = Envoy(
            Command::new(super::envoy_bin())
                .args(["--disable-hot-restart", "--log-level", "error", "-c"])
                .arg(bootstrap)
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("starting envoy"),
        );
        let deadline = Instant::now() + Duration::from_secs(8);
        while !ready() {
            assert!(
                Instant::now() < deadline,
                "Envoy did not start serving within 8 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        envoy
    }
}
