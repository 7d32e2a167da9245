//! A minimal HTTP/1.1 client: one request per fresh connection, the response read
//! by its content-length (waiting for EOF would wait out Envoy's delayed close,
//! 1 s, after a local reply such as a 404).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

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

    /// The backend name for a response from a test [`Backend`](super::Backend).
    pub fn backend(&self) -> Option<&str> {
        (self.status == 200)
            .then(|| self.body.split_whitespace().next())
            .flatten()
    }
}

/// The text of a request without a body that asks the server to close afterwards.
pub fn request_text(method: &str, host: &str, path: &str, headers: &[(&str, &str)]) -> String {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("content-length: 0\r\n\r\n");
    req
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
    conn.write_all(request_text(method, host, path, headers).as_bytes())?;
    read_response(&mut BufReader::new(conn))
}

pub fn http_get(
    addr: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    http_request(addr, "GET", host, path, headers)
}

/// Status line, headers, then exactly content-length bytes of body (all that comes
/// when there is no content-length).
pub fn read_response(reader: &mut impl BufRead) -> std::io::Result<Response> {
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
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
    Ok(Response {
        status,
        headers,
        body: String::from_utf8_lossy(&raw).into_owned(),
    })
}
