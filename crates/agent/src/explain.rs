//! `aether-edge explain`: what the edge does with one request, and why.
//!
//! ```text
//!  explain [METHOD] URL [-H 'k: v']... [--sni NAME] --config-dir DIR   offline: translate DIR
//!  explain [METHOD] URL ... --admin http://127.0.0.1:19001             live: ask a running
//!        aether-edge (GET /debug/explain), which explains against what it serves and
//!        adds, per Envoy node, whether that node ACKed it (or NACKed it, and why)
//! ```

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use std::io::{Read, Write};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct ExplainArgs {
    /// `[METHOD] URL`: `GET http://127.0.0.1:80/path`, `https://host/…`,
    /// `tls://addr:port`, `tcp://addr:port` (the method defaults to GET).
    #[arg(num_args = 1..=2, required = true, value_name = "[METHOD] URL")]
    request: Vec<String>,
    /// A request header, `'Name: value'` (repeatable; `Host:` sets the Host).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    /// The TLS server name (default: the URL's host, when it is a name).
    #[arg(long)]
    sni: Option<String>,
    /// Explain against the Gateway API YAML in this directory (offline).
    #[arg(long, conflicts_with = "admin", required_unless_present = "admin")]
    config_dir: Option<PathBuf>,
    /// Explain against a running aether-edge: its admin address
    /// (`http://127.0.0.1:19001` or `127.0.0.1:19001`).
    #[arg(long)]
    admin: Option<String>,
    /// Offline: serve only Gateways whose GatewayClass names this controllerName.
    #[arg(long, default_value = crate::args::DEFAULT_CONTROLLER_NAME)]
    controller_name: String,
    /// Offline: the address listeners bind on when a Gateway has no `spec.addresses`.
    #[arg(long, default_value = "127.0.0.1")]
    default_address: String,
    /// Offline: serve XBackends of type ExternalHostname, as an agent started
    /// with this flag does.
    #[arg(long)]
    allow_external_hostname_backends: bool,
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
}

impl ExplainArgs {
    fn method_and_url(&self) -> (&str, &str) {
        match self.request.as_slice() {
            [url] => ("GET", url.as_str()),
            [method, url, ..] => (method.as_str(), url.as_str()),
            [] => ("GET", ""),
        }
    }
}

pub fn run(args: ExplainArgs) -> anyhow::Result<()> {
    let (method, url) = args.method_and_url();
    let request = aether_explain::Request::parse(method, url, &args.headers, args.sni.as_deref())?;
    let body = match (&args.config_dir, &args.admin) {
        (Some(dir), _) => {
            let config = crate::args::ConfigArgs {
                config_dir: dir.clone(),
                controller_name: args.controller_name.clone(),
                default_address: args.default_address.clone(),
                max_file_bytes: crate::source::DEFAULT_MAX_FILE_BYTES,
                max_total_bytes: crate::source::DEFAULT_MAX_TOTAL_BYTES,
                allow_external_hostname_backends: args.allow_external_hostname_backends,
            };
            let store = config.load_once()?;
            let translation = aether_gateway::translate(&store, &config.translate_config());
            let e = aether_explain::explain(&store, &translation.ir, &translation.status, &request);
            match args.output {
                Output::Text => e.to_text(),
                Output::Json => format!("{}\n", serde_json::to_string_pretty(&e)?),
            }
        }
        (None, Some(admin)) => {
            let output = if args.output == Output::Json {
                "json"
            } else {
                "text"
            };
            let mut query = vec![("method", method), ("url", url), ("output", output)];
            query.extend(args.headers.iter().map(|h| ("header", h.as_str())));
            if let Some(sni) = &args.sni {
                query.push(("sni", sni));
            }
            get(admin, "/debug/explain", &query)?
        }
        (None, None) => bail!("give --config-dir DIR or --admin ADDRESS"),
    };
    print!("{body}");
    Ok(())
}

/// A GET to the admin address (plain HTTP on loopback), the body if 200.
fn get(admin: &str, path: &str, query: &[(&str, &str)]) -> anyhow::Result<String> {
    let address = admin.trim_start_matches("http://").trim_end_matches('/');
    if admin.starts_with("https://") {
        bail!("--admin {admin}: the admin address is plain HTTP on loopback");
    }
    let q: Vec<String> = query
        .iter()
        .map(|(k, v)| format!("{k}={}", percent_encode(v)))
        .collect();
    let mut stream = std::net::TcpStream::connect(address)
        .with_context(|| format!("connecting to the admin address {address}"))?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    write!(
        stream,
        "GET {path}?{} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n",
        q.join("&")
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("the admin address answered something that is not HTTP")?;
    let status = head.split_whitespace().nth(1).unwrap_or_default();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_string()
    };
    if status != "200" {
        bail!("{address}{path} answered {status}: {}", body.trim());
    }
    Ok(body)
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn unchunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_percent_encoded_and_chunks_joined() {
        assert_eq!(percent_encode("Host: a b/c"), "Host%3A%20a%20b%2Fc");
        assert_eq!(
            unchunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "hello world"
        );
    }
}
