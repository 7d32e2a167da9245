//! The Location a redirect answers with, as Envoy builds it from the request.

use crate::request::{Request, Scheme};
use aether_ir::{PathMatch, PathRewrite, Redirect};

/// The Location of a redirect: the request's URL with the redirect's parts.
pub(crate) fn location(redirect: &Redirect, matched: &PathMatch, r: &Request) -> String {
    let request_scheme = if r.scheme == Scheme::Https {
        "https"
    } else {
        "http"
    };
    let scheme = redirect.scheme.as_deref().unwrap_or(request_scheme);
    let host = redirect.hostname.as_deref().unwrap_or(&r.host);
    let port = match (redirect.port, &redirect.scheme) {
        (Some(p), _) => Some(p),
        (None, Some(_)) => None,
        (None, None) => Some(r.port),
    };
    let port = port
        .filter(|p| !matches!((scheme, p), ("http", 80) | ("https", 443)))
        .map(|p| format!(":{p}"))
        .unwrap_or_default();
    let path = match (&redirect.path, matched) {
        (Some(PathRewrite::ReplaceFullPath(p)), _) => p.clone(),
        (Some(PathRewrite::ReplacePrefixMatch(to)), PathMatch::Prefix(from)) => {
            let rest = r
                .path
                .strip_prefix(from.trim_end_matches('/'))
                .unwrap_or("");
            let joined = format!("{}{}", to.trim_end_matches('/'), rest);
            if joined.is_empty() {
                "/".into()
            } else {
                joined
            }
        }
        _ => r.path.clone(),
    };
    // Envoy keeps the query (strip_query is false).
    let query = r.query_string();
    format!("{scheme}://{host}{port}{path}{query}")
}
