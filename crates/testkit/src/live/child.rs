//! A backend that is a process of its own, so a test can SIGKILL it: the kernel
//! then closes its sockets under whoever holds them, as when a pod's container
//! dies. A few lines of Python (`python3`, HTTP/1.1 keep-alive), answering as
//! [`Backend`](super::Backend) does: `<name> <path> <host>`.

use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::{Proc, free_port, wait_until};

/// The server: one thread per connection, HTTP/1.1 so that Envoy keeps its
/// upstream connections (they are what a SIGKILL cuts).
const SERVER: &str = r#"
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

name, port = sys.argv[1], int(sys.argv[2])

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = f"{name} {self.path} {self.headers.get('Host')}".encode()
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        pass

ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"#;

/// A backend process on 127.0.0.1; SIGKILLed when dropped.
pub struct ChildBackend {
    pub name: String,
    pub ip: String,
    pub port: u16,
    proc: Proc,
}

impl ChildBackend {
    /// Started and accepting connections; its output in `<log_dir>/<name>.log`.
    pub fn start(name: &str, log_dir: &Path) -> ChildBackend {
        let port = free_port();
        let proc = Proc::spawn(
            name,
            Command::new("python3")
                .args(["-c", SERVER, name])
                .arg(port.to_string()),
            log_dir,
        );
        wait_until(
            Duration::from_secs(10),
            "a backend process listening",
            || TcpStream::connect(("127.0.0.1", port)).ok(),
        );
        ChildBackend {
            name: name.to_string(),
            ip: "127.0.0.1".to_string(),
            port,
            proc,
        }
    }

    /// `kill -9`: gone without a word, its connections reset or closed by the kernel.
    pub fn kill(&mut self) {
        self.proc.kill();
    }
}
