//! Live-test kit: a real Envoy, the real `aether-edge` binary, tiny HTTP backends
//! and a minimal HTTP/1.1 client, all on 127.0.0.1. Every process is killed when
//! its handle drops, so a failing test leaves nothing running.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use aether_testkit::envoy_bin;

pub fn agent_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_aether-edge"))
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn temp_dir(tag: &str) -> PathBuf {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("aether-edge-live-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A child process killed on drop, its stderr kept in a file for failure messages.
pub struct Proc {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(name: &str, cmd: &mut Command, log_dir: &Path) -> Proc {
        let log = log_dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Proc {
            name: name.to_string(),
            child,
            log,
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Kill with SIGKILL and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal by name (`STOP`, `CONT`, ...) with kill(1).
    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{name} {}", self.pid());
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// aether-edge standalone on a config directory.
pub struct Agent {
    pub proc: Proc,
    pub xds: String,
    pub admin: String,
}

impl Agent {
    pub fn start(config_dir: &Path, xds: &str, admin: &str, log_dir: &Path) -> Agent {
        Agent::start_with(config_dir, xds, admin, log_dir, &[])
    }

    /// [`Agent::start`] with more flags.
    pub fn start_with(
        config_dir: &Path,
        xds: &str,
        admin: &str,
        log_dir: &Path,
        flags: &[&str],
    ) -> Agent {
        let proc = Proc::spawn(
            "aether-edge",
            Command::new(agent_bin())
                .arg("standalone")
                .arg("--config-dir")
                .arg(config_dir)
                .args(["--xds-address", xds, "--admin-address", admin])
                .args(["--log-level", "info,aether_ads=debug"])
                .args(flags),
            log_dir,
        );
        Agent {
            proc,
            xds: xds.to_string(),
            admin: admin.to_string(),
        }
    }

    pub fn admin_get(&self, path: &str) -> Option<Response> {
        http_get(&self.admin, "localhost", path, &[]).ok()
    }
}

/// A real Envoy bootstrapped by `aether-edge bootstrap`.
pub struct Envoy {
    pub proc: Proc,
    pub admin: String,
}

impl Envoy {
    pub fn start(node_id: &str, xds: &str, delta: bool, log_dir: &Path) -> Envoy {
        let admin = format!("127.0.0.1:{}", free_port());
        let mut cmd = Command::new(agent_bin());
        cmd.args(["bootstrap", "--node-id", node_id, "--xds-address", xds])
            .args(["--admin-address", &admin]);
        if delta {
            cmd.arg("--delta");
        }
        let out = cmd.output().expect("aether-edge bootstrap");
        assert!(out.status.success(), "bootstrap failed: {out:?}");
        let path = log_dir.join(format!("envoy-{node_id}.yaml"));
        std::fs::write(&path, &out.stdout).unwrap();
        let proc = Proc::spawn(
            &format!("envoy-{node_id}"),
            Command::new(envoy_bin())
                .arg("-c")
                .arg(&path)
                // Several Envoys run at once: let each pick a free shared-memory id.
                .args(["--log-level", "warn", "--use-dynamic-base-id"])
                .args(["--drain-time-s", "1", "--parent-shutdown-time-s", "2"]),
            log_dir,
        );
        Envoy { proc, admin }
    }
}

/// A backend that answers every request with `<name> <path>`.
pub struct Backend {
    pub name: String,
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl Backend {
    pub fn start(name: &str) -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let (n, s) = (name.to_string(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let n = n.clone();
                std::thread::spawn(move || serve_backend_conn(conn, &n));
            }
        });
        Backend {
            name: name.to_string(),
            port,
            stop,
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve_backend_conn(conn: TcpStream, name: &str) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut conn = conn;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .to_string();
        let mut content_length = 0usize;
        let mut host = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                match k.to_ascii_lowercase().as_str() {
                    "content-length" => content_length = v.trim().parse().unwrap_or(0),
                    "host" => host = v.trim().to_string(),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; content_length];
        if reader.read_exact(&mut body).is_err() {
            return;
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

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The backend name for a response from a test [`Backend`].
    pub fn backend(&self) -> Option<&str> {
        (self.status == 200)
            .then(|| self.body.split_whitespace().next())
            .flatten()
    }
}

/// One HTTP/1.1 request on a fresh connection.
pub fn http_request(
    addr: &str,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    let mut conn = TcpStream::connect(addr)?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("content-length: 0\r\n\r\n");
    conn.write_all(req.as_bytes())?;
    // Read the head, then exactly content-length bytes: waiting for EOF would wait
    // out Envoy's delayed close (1 s) after a local reply such as a 404.
    let mut reader = BufReader::new(conn);
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        if line == "\r\n" || line == "\n" {
            break;
        }
        head.push(line.trim_end().to_string());
    }
    let mut lines = head.iter();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad response head: {head:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok());
    let mut raw = Vec::new();
    match length {
        Some(n) => {
            raw.resize(n, 0);
            reader.read_exact(&mut raw)?;
        }
        None => {
            reader.read_to_end(&mut raw)?;
        }
    }
    let body = String::from_utf8_lossy(&raw).into_owned();
    Ok(Response {
        status,
        headers,
        body,
    })
}

pub fn http_get(
    addr: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    http_request(addr, "GET", host, path, headers)
}

/// Polls `f` until it returns `Some`, or panics with `what` after `timeout`.
pub fn wait_until<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Service + EndpointSlice for a [`Backend`] in namespace `ns`.
pub fn service_yaml(ns: &str, backend: &Backend) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  ports:\n  - name: http\n    port: 80\n    targetPort: {port}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: {ns}\n  labels:\n    kubernetes.io/service-name: {name}\naddressType: IPv4\nports:\n- name: http\n  port: {port}\nendpoints:\n- addresses: [\"127.0.0.1\"]\n  conditions:\n    ready: true\n",
        name = backend.name,
        port = backend.port,
    )
}
pub mod kube;

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
