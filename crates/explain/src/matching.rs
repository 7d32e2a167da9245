//! Envoy's choices, replayed on the IR: the virtual host a Host selects, whether
//! a route's match takes a request (and if not, why), the TLS chain an SNI picks.
//!
//! ```text
//!  Host ──► exact domain ──► longest `*.suffix` ──► `*`          (virtual host)
//!  request ──► path (Exact | element-wise Prefix | RE2 regex) ──► :method
//!          ──► every header ──► every query parameter             (route match)
//!  SNI ──► exact server name ──► longest `*.suffix` ──► the chain without names
//! ```
//!
//! The same rules as the Envoy config `aether-xds` builds from the IR: a regex is
//! a full match, header names are lower case, the Host's port is ignored.

use crate::request::Request;
use aether_ir::{PathMatch, RouteMatch, RouteTable, StringMatch, TlsChain, VirtualHost, names};

/// How a virtual host's domain took the Host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostMatch {
    Exact,
    Wildcard(String),
    CatchAll,
}

/// Whether `pattern` (`*.example.com`) covers `host`: one or more labels in
/// front of the suffix, as Envoy's suffix wildcard does.
fn wildcard_covers(pattern: &str, host: &str) -> bool {
    pattern.strip_prefix('*').is_some_and(|suffix| {
        suffix.starts_with('.') && host.len() > suffix.len() && host.ends_with(suffix)
    })
}

/// The virtual host Envoy gives `host` (lower case, no port).
pub fn virtual_host<'a>(table: &'a RouteTable, host: &str) -> Option<(&'a VirtualHost, HostMatch)> {
    let domains = || {
        table
            .virtual_hosts
            .iter()
            .flat_map(|v| v.domains.iter().map(move |d| (&**v, d)))
    };
    if let Some((v, _)) = domains().find(|(_, d)| d.as_str() == host) {
        return Some((v, HostMatch::Exact));
    }
    let wildcard = domains()
        .filter(|(_, d)| d.as_str() != names::CATCH_ALL_VHOST && wildcard_covers(d, host))
        .max_by_key(|(_, d)| d.len());
    if let Some((v, d)) = wildcard {
        return Some((v, HostMatch::Wildcard(d.clone())));
    }
    domains()
        .find(|(_, d)| d.as_str() == names::CATCH_ALL_VHOST)
        .map(|(v, _)| (v, HostMatch::CatchAll))
}

/// The chain a TLS handshake with `sni` lands on, and how it was chosen.
pub fn tls_chain<'a>(
    chains: &'a [TlsChain],
    sni: Option<&str>,
) -> Option<(&'a TlsChain, HostMatch)> {
    if let Some(sni) = sni {
        if let Some(c) = chains
            .iter()
            .find(|c| c.server_names.iter().any(|n| n == sni))
        {
            return Some((c, HostMatch::Exact));
        }
        let wildcard = chains
            .iter()
            .flat_map(|c| c.server_names.iter().map(move |n| (c, n)))
            .filter(|(_, n)| wildcard_covers(n, sni))
            .max_by_key(|(_, n)| n.len());
        if let Some((c, n)) = wildcard {
            return Some((c, HostMatch::Wildcard(n.clone())));
        }
    }
    chains
        .iter()
        .find(|c| c.server_names.is_empty())
        .map(|c| (c, HostMatch::CatchAll))
}

/// `Ok` when `m` takes the request, else why not (the first reason).
pub fn route_matches(m: &RouteMatch, r: &Request) -> Result<(), String> {
    path_matches(&m.path, &r.path)?;
    if let Some(method) = &m.method
        && *method != r.method
    {
        return Err(format!("method {} is not {method}", r.method));
    }
    for h in &m.headers {
        let Some(have) = r.header(&h.name) else {
            return Err(format!("no header {}", h.name));
        };
        string_matches(&h.value, have).map_err(|why| format!("header {}: {why}", h.name))?;
    }
    for q in &m.query_params {
        let Some((_, have)) = r.query.iter().find(|(k, _)| *k == q.name) else {
            return Err(format!("no query parameter {}", q.name));
        };
        string_matches(&q.value, have)
            .map_err(|why| format!("query parameter {}: {why}", q.name))?;
    }
    Ok(())
}

/// How a match reads in one line: `PathPrefix /a, method GET, header x=1`.
pub fn describe(m: &RouteMatch) -> String {
    let mut parts = vec![match &m.path {
        PathMatch::Exact(p) => format!("Exact {p}"),
        PathMatch::Prefix(p) => format!("PathPrefix {p}"),
        PathMatch::RegularExpression(r) => format!("RegularExpression {r}"),
    }];
    if let Some(method) = &m.method {
        parts.push(format!("method {method}"));
    }
    let value = |v: &StringMatch| match v {
        StringMatch::Exact(s) => format!("={s}"),
        StringMatch::RegularExpression(r) => format!("~{r}"),
    };
    for h in &m.headers {
        parts.push(format!("header {}{}", h.name, value(&h.value)));
    }
    for q in &m.query_params {
        parts.push(format!("query {}{}", q.name, value(&q.value)));
    }
    parts.join(", ")
}

fn path_matches(want: &PathMatch, path: &str) -> Result<(), String> {
    match want {
        PathMatch::Exact(p) if p == path => Ok(()),
        PathMatch::Exact(p) => Err(format!("path {path} is not {p}")),
        PathMatch::Prefix(p) => {
            let prefix = p.trim_end_matches('/');
            let under = prefix.is_empty()
                || path == prefix
                || path
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with('/'));
            if under {
                Ok(())
            } else {
                Err(format!("path {path} is not under {p}"))
            }
        }
        PathMatch::RegularExpression(re) => full_match(re, path)
            .then_some(())
            .ok_or_else(|| format!("path {path} does not match {re}")),
    }
}

fn string_matches(want: &StringMatch, have: &str) -> Result<(), String> {
    match want {
        StringMatch::Exact(s) if s == have => Ok(()),
        StringMatch::Exact(s) => Err(format!("{have:?} is not {s:?}")),
        StringMatch::RegularExpression(re) => full_match(re, have)
            .then_some(())
            .ok_or_else(|| format!("{have:?} does not match {re}")),
    }
}

/// RE2's full match, with Rust's regex engine (the same syntax for what
/// translation lets through; a regex it cannot compile matches nothing).
fn full_match(re: &str, s: &str) -> bool {
    regex::Regex::new(&format!("^(?:{re})$")).is_ok_and(|r| r.is_match(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aether_ir::HeaderMatch;

    fn req(url: &str, headers: &[&str]) -> Request {
        let h: Vec<String> = headers.iter().map(|s| s.to_string()).collect();
        Request::parse("GET", url, &h, None).unwrap()
    }

    fn m(path: PathMatch) -> RouteMatch {
        RouteMatch {
            path,
            method: None,
            headers: vec![],
            query_params: vec![],
        }
    }

    #[test]
    fn prefixes_are_element_wise_and_regexes_full() {
        let prefix = m(PathMatch::Prefix("/abc".into()));
        assert!(route_matches(&prefix, &req("http://x/abc", &[])).is_ok());
        assert!(route_matches(&prefix, &req("http://x/abc/d", &[])).is_ok());
        assert_eq!(
            route_matches(&prefix, &req("http://x/abcd", &[])),
            Err("path /abcd is not under /abc".into())
        );
        let root = m(PathMatch::Prefix("/".into()));
        assert!(route_matches(&root, &req("http://x/anything", &[])).is_ok());
        let re = m(PathMatch::RegularExpression("/v[0-9]+".into()));
        assert!(route_matches(&re, &req("http://x/v2", &[])).is_ok());
        assert!(
            route_matches(&re, &req("http://x/v2/x", &[])).is_err(),
            "a full match"
        );
    }

    #[test]
    fn method_headers_and_query_each_say_why() {
        let mut want = m(PathMatch::Prefix("/".into()));
        want.method = Some("POST".into());
        assert_eq!(
            route_matches(&want, &req("http://x/", &[])),
            Err("method GET is not POST".into())
        );
        want.method = None;
        want.headers = vec![HeaderMatch {
            name: "version".into(),
            value: StringMatch::Exact("two".into()),
        }];
        assert_eq!(
            route_matches(&want, &req("http://x/", &[])),
            Err("no header version".into())
        );
        assert_eq!(
            route_matches(&want, &req("http://x/", &["Version: one"])),
            Err("header version: \"one\" is not \"two\"".into())
        );
        assert!(route_matches(&want, &req("http://x/", &["Version: two"])).is_ok());
    }

    #[test]
    fn virtual_hosts_exact_then_longest_wildcard_then_catch_all() {
        let vh = |d: &str| {
            std::sync::Arc::new(VirtualHost {
                pre_routing: Vec::new(),
                name: d.into(),
                domains: vec![d.into()],
                routes: vec![],
            })
        };
        let table = RouteTable {
            name: "t".into(),
            virtual_hosts: vec![
                vh("*"),
                vh("*.example.com"),
                vh("*.a.example.com"),
                vh("a.example.com"),
            ],
        };
        let pick = |h: &str| virtual_host(&table, h).map(|(v, m)| (v.name.clone(), m));
        assert_eq!(
            pick("a.example.com"),
            Some(("a.example.com".into(), HostMatch::Exact))
        );
        assert_eq!(
            pick("x.a.example.com"),
            Some((
                "*.a.example.com".into(),
                HostMatch::Wildcard("*.a.example.com".into())
            ))
        );
        assert_eq!(
            pick("b.example.com"),
            Some((
                "*.example.com".into(),
                HostMatch::Wildcard("*.example.com".into())
            ))
        );
        assert_eq!(pick("example.com"), Some(("*".into(), HostMatch::CatchAll)));
    }
}
