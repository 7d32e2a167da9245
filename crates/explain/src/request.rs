//! The request to explain, as a user types it: `METHOD URL`, `-H 'Name: value'`,
//! and `--sni` for TLS and TCP.
//!
//! ```text
//!  http://host[:port]/path?query    HTTP, port 80 by default
//!  https://host[:port]/path?query   HTTPS, port 443, SNI = host unless --sni
//!  tls://host:port  (--sni name)    a TLS connection (TLSRoute, passthrough)
//!  tcp://host:port                  a TCP connection (TCPRoute)
//! ```
//!
//! The URL's host is the address dialled; the Host header (`-H 'Host: …'`)
//! overrides the name routing sees, as curl's `-H` does.

use serde::Serialize;

/// How the connection is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    Http,
    Https,
    Tls,
    Tcp,
}

impl Scheme {
    /// The scheme of a URL (`http`, `https`, `tls`, `tcp`, any case).
    fn of_url(scheme: &str, url: &str) -> Result<Scheme, RequestError> {
        match scheme.to_ascii_lowercase().as_str() {
            "http" => Ok(Scheme::Http),
            "https" => Ok(Scheme::Https),
            "tls" => Ok(Scheme::Tls),
            "tcp" => Ok(Scheme::Tcp),
            other => Err(RequestError::Scheme(url.into(), other.into())),
        }
    }

    fn default_port(self) -> Option<u16> {
        match self {
            Scheme::Http => Some(80),
            Scheme::Https => Some(443),
            Scheme::Tls | Scheme::Tcp => None,
        }
    }

    /// Whether the request has HTTP on top (a method, a path, headers).
    pub fn is_http(self) -> bool {
        matches!(self, Scheme::Http | Scheme::Https)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Request {
    pub scheme: Scheme,
    pub method: String,
    /// The address dialled (the URL's host, brackets of an IPv6 address removed).
    pub address: String,
    pub port: u16,
    /// The name routing sees: the Host header, else the URL's host; lower case,
    /// without a port.
    pub host: String,
    /// The path, without the query.
    pub path: String,
    /// Query parameters in order, undecoded.
    pub query: Vec<(String, String)>,
    /// Header names lower case, in order (Host included).
    pub headers: Vec<(String, String)>,
    /// The TLS server name sent, if any.
    pub sni: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("URL {0:?}: give a scheme (http://, https://, tls:// or tcp://)")]
    NoScheme(String),
    #[error("URL {0:?}: scheme {1:?} is not http, https, tls or tcp")]
    Scheme(String, String),
    #[error("URL {0:?}: no host")]
    NoHost(String),
    #[error("URL {0:?}: port {1:?} is not a port number")]
    Port(String, String),
    #[error("URL {0:?}: a {1} URL needs a port")]
    NeedsPort(String, &'static str),
    #[error("header {0:?}: write it as 'Name: value'")]
    Header(String),
}

impl Request {
    /// `method` is ignored for `tls://` and `tcp://`.
    pub fn parse(
        method: &str,
        url: &str,
        headers: &[String],
        sni: Option<&str>,
    ) -> Result<Request, RequestError> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| RequestError::NoScheme(url.into()))?;
        let scheme = Scheme::of_url(scheme, url)?;
        let (authority, target) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (address, port) = split_host_port(authority);
        if address.is_empty() {
            return Err(RequestError::NoHost(url.into()));
        }
        let port = port_of(port, scheme, url)?;
        let (path, query) = path_and_query(target);
        let mut parsed = parse_headers(headers)?;
        let host_header = parsed
            .iter()
            .find(|(n, _)| n == "host")
            .map(|(_, v)| v.clone());
        if host_header.is_none() && scheme.is_http() {
            parsed.insert(0, ("host".into(), authority.to_string()));
        }
        let host = split_host_port(host_header.as_deref().unwrap_or(authority))
            .0
            .to_ascii_lowercase();
        // Without one given, a TLS client sends the URL's host name as SNI.
        let sni = match (sni, scheme) {
            (Some(s), _) => Some(s.to_ascii_lowercase()),
            (None, Scheme::Https | Scheme::Tls) if address.parse::<std::net::IpAddr>().is_err() => {
                Some(address.to_ascii_lowercase())
            }
            (None, _) => None,
        };
        Ok(Request {
            scheme,
            method: if scheme.is_http() {
                method.to_ascii_uppercase()
            } else {
                String::new()
            },
            address: address.to_string(),
            port,
            host,
            path,
            query,
            headers: parsed,
            sni,
        })
    }

    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// One line: `GET http://127.0.0.1:80/a?b=c (Host: example.com)`.
    /// The query as sent: `?a=1&b` (a parameter without a value stays bare),
    /// or nothing.
    pub fn query_string(&self) -> String {
        let query: Vec<String> = self
            .query
            .iter()
            .map(|(k, v)| {
                if v.is_empty() {
                    k.clone()
                } else {
                    format!("{k}={v}")
                }
            })
            .collect();
        if query.is_empty() {
            String::new()
        } else {
            format!("?{}", query.join("&"))
        }
    }

    pub fn summary(&self) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
            Scheme::Tls => "tls",
            Scheme::Tcp => "tcp",
        };
        let address = if self.address.contains(':') {
            format!("[{}]", self.address)
        } else {
            self.address.clone()
        };
        let mut out = if self.scheme.is_http() {
            let q = self.query_string();
            format!(
                "{} {scheme}://{address}:{}{}{q}",
                self.method, self.port, self.path
            )
        } else {
            format!("{scheme}://{address}:{}", self.port)
        };
        if self.scheme.is_http() {
            out.push_str(&format!(" (Host: {})", self.host));
        }
        if let Some(sni) = &self.sni {
            out.push_str(&format!(" (SNI: {sni})"));
        }
        out
    }
}

/// The port of a URL's authority, else the scheme's default (TLS and TCP
/// have none).
fn port_of(port: Option<&str>, scheme: Scheme, url: &str) -> Result<u16, RequestError> {
    match port {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| RequestError::Port(url.into(), p.into())),
        None => scheme.default_port().ok_or(RequestError::NeedsPort(
            url.into(),
            if scheme == Scheme::Tls { "tls" } else { "tcp" },
        )),
    }
}

/// A request target's path (`/` when empty) and its query parameters, in order.
fn path_and_query(target: &str) -> (String, Vec<(String, String)>) {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, q),
        None => (target, ""),
    };
    let path = if path.is_empty() { "/" } else { path };
    let query = query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (kv.to_string(), String::new()),
        })
        .collect();
    (path.to_string(), query)
}

/// `Name: value` headers, names lower-cased, both trimmed.
fn parse_headers(headers: &[String]) -> Result<Vec<(String, String)>, RequestError> {
    let mut parsed = Vec::new();
    for h in headers {
        let (name, value) = h
            .split_once(':')
            .filter(|(n, _)| !n.trim().is_empty())
            .ok_or_else(|| RequestError::Header(h.clone()))?;
        parsed.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    Ok(parsed)
}

/// `host:port`, `[v6]:port`, `host` → (host, port).
fn split_host_port(authority: &str) -> (&str, Option<&str>) {
    if let Some(rest) = authority.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((h, tail)) => (h, tail.strip_prefix(':')),
            None => (rest, None),
        };
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, Some(p)),
        _ => (authority, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, url: &str, headers: &[&str]) -> Request {
        let headers: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
        Request::parse(method, url, &headers, None).unwrap()
    }

    #[test]
    fn urls_give_address_port_path_query_and_host() {
        let r = req(
            "get",
            "http://127.0.0.1:8080/a/b?x=1&y",
            &["Host: Example.COM:8080", "X-A: v"],
        );
        assert_eq!((r.address.as_str(), r.port), ("127.0.0.1", 8080));
        assert_eq!((r.method.as_str(), r.path.as_str()), ("GET", "/a/b"));
        assert_eq!(
            r.query,
            vec![("x".into(), "1".into()), ("y".into(), String::new())]
        );
        assert_eq!(r.host, "example.com");
        assert_eq!(r.header("x-a"), Some("v"));
        assert_eq!(r.sni, None);
        let r = req("GET", "https://web.example.com", &[]);
        assert_eq!((r.port, r.path.as_str()), (443, "/"));
        assert_eq!(r.host, "web.example.com");
        assert_eq!(r.sni.as_deref(), Some("web.example.com"));
        assert_eq!(r.header("host"), Some("web.example.com"));
        let r = req("GET", "http://[::1]:81?q=1", &[]);
        assert_eq!(
            (r.address.as_str(), r.port, r.path.as_str()),
            ("::1", 81, "/")
        );
        assert_eq!(r.summary(), "GET http://[::1]:81/?q=1 (Host: ::1)");
    }

    #[test]
    fn l4_urls_need_a_port_and_take_an_sni() {
        let r = Request::parse("GET", "tls://10.0.0.1:8443", &[], Some("A.example.com")).unwrap();
        assert_eq!(r.summary(), "tls://10.0.0.1:8443 (SNI: a.example.com)");
        assert_eq!(
            Request::parse("GET", "tcp://10.0.0.1", &[], None),
            Err(RequestError::NeedsPort("tcp://10.0.0.1".into(), "tcp"))
        );
    }

    #[test]
    fn bad_input_says_what_is_wrong() {
        let bad = |url: &str, h: &[&str]| {
            let h: Vec<String> = h.iter().map(|s| s.to_string()).collect();
            Request::parse("GET", url, &h, None)
                .unwrap_err()
                .to_string()
        };
        assert!(bad("example.com/", &[]).contains("give a scheme"));
        assert!(bad("ftp://x/", &[]).contains("not http"));
        assert!(bad("http://x:99999/", &[]).contains("not a port number"));
        assert!(bad("http:///a", &[]).contains("no host"));
        assert!(bad("http://x/", &["nocolon"]).contains("'Name: value'"));
    }
}
