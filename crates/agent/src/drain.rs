//! `aether-edge drain`: the edge pod's stop, step one. Kubernetes stops taking
//! the pod's endpoints at once; this tells the Envoy beside us to drain its
//! listeners gracefully (HTTP/1.1 answers say `Connection: close`, HTTP/2
//! connections get a GOAWAY, spread over Envoy's `--drain-time-s`) and then
//! waits, so that keep-alive and streaming clients move to another node before
//! Envoy gets its SIGTERM.
//!
//! ```text
//!  preStop (agent container):  aether-edge drain --envoy-admin 127.0.0.1:19000 --seconds N
//!      POST /drain_listeners?graceful ──► Envoy      then wait N s (ADS keeps serving)
//!  preStop (envoy container):  sleep N+2 s, then SIGTERM ends Envoy
//! ```

use anyhow::{Context, bail};
use clap::Args;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

#[derive(Debug, Clone, Args)]
pub struct DrainArgs {
    /// Envoy's admin address (as given to `bootstrap --admin-address`).
    #[arg(long, default_value = "127.0.0.1:19000")]
    envoy_admin: String,
    /// How long to wait once Envoy drains (Envoy's `--drain-time-s`).
    #[arg(long, default_value_t = 15)]
    seconds: u64,
}

pub fn run(args: DrainArgs) -> anyhow::Result<()> {
    let status = post(&args.envoy_admin, "/drain_listeners?graceful")
        .with_context(|| format!("asking Envoy at {} to drain", args.envoy_admin))?;
    if status != 200 {
        bail!(
            "Envoy at {} answered {status} to /drain_listeners",
            args.envoy_admin
        );
    }
    eprintln!(
        "Envoy at {} drains its listeners; waiting {} s",
        args.envoy_admin, args.seconds
    );
    std::thread::sleep(Duration::from_secs(args.seconds));
    Ok(())
}

/// POSTs to Envoy's admin interface; returns the status code.
fn post(address: &str, path: &str) -> anyhow::Result<u16> {
    let to = address
        .to_socket_addrs()?
        .next()
        .context("no address to connect to")?;
    let mut conn = TcpStream::connect_timeout(&to, Duration::from_secs(5))?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        conn,
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 64];
    let n = conn.read(&mut head)?;
    let line = String::from_utf8_lossy(&head[..n]);
    line.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("not an HTTP answer: {line:?}"))
}
