//! A rule's CORS policy → the per-route config of Envoy's CORS filter, which
//! every HTTP connection manager runs before the router.
//!
//! Envoy answers preflights itself (`forward_not_matching_preflights: false`:
//! a preflight from an origin not allowed gets 200 without
//! `Access-Control-Allow-Origin` and never reaches the backend), always echoes
//! the request's `Origin` rather than writing `*` (what the spec requires with
//! credentials and allows without), and echoes the requested method and headers
//! for `allowMethods: ["*"]` / `allowHeaders: ["*"]`. Verified against Envoy
//! 1.40 with the upstream conformance cases.
//!
//! ```text
//!  "*"                  → exact "*"      (Envoy: any origin)
//!  https://www.foo.com  → exact
//!  https://*.bar.com    → safe_regex https://([a-zA-Z0-9-]+\.)+bar\.com
//!                         (the wildcard spans one or more labels, never none)
//! ```

use crate::any::pack;
use aether_ir as ir;
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::{Cors, CorsPolicy};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern};
use envoy_types::pb::google::protobuf::{Any, BoolValue};

/// The CORS filter's name in the HTTP filter chain, and the key of per-route policies.
pub const FILTER: &str = "envoy.filters.http.cors";

/// The filter itself (its config is empty: policies are per route).
pub fn filter_config() -> Any {
    pack(&Cors::default())
}

pub fn policy(c: &ir::Cors) -> Any {
    let list = |v: &[String]| v.join(", ");
    pack(&CorsPolicy {
        allow_origin_string_match: c.allow_origins.iter().map(|o| origin(o)).collect(),
        allow_methods: list(&c.allow_methods),
        allow_headers: list(&c.allow_headers),
        expose_headers: list(&c.expose_headers),
        max_age: c.max_age_seconds.map(|s| s.to_string()).unwrap_or_default(),
        allow_credentials: c.allow_credentials.then_some(BoolValue { value: true }),
        forward_not_matching_preflights: Some(BoolValue { value: false }),
        ..Default::default()
    })
}

fn origin(o: &str) -> StringMatcher {
    let pattern = match o.split_once("://*.") {
        Some((scheme, rest)) => MatchPattern::SafeRegex(crate::values::regex(&format!(
            "{scheme}://([a-zA-Z0-9-]+\\.)+{}",
            rest.replace('.', "\\.")
        ))),
        None => match o.split_once("://*") {
            // A host that is only the wildcard: any host, the port as given.
            Some((scheme, port)) => MatchPattern::SafeRegex(crate::values::regex(&format!(
                "{scheme}://[^/:]+{}",
                port.replace('.', "\\.")
            ))),
            None => MatchPattern::Exact(o.to_string()),
        },
    };
    StringMatcher {
        match_pattern: Some(pattern),
        ignore_case: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(m: &StringMatcher, s: &str) -> bool {
        match m.match_pattern.as_ref().unwrap() {
            MatchPattern::Exact(e) => e == s,
            MatchPattern::SafeRegex(r) => regex::Regex::new(&format!("^(?:{})$", r.regex))
                .unwrap()
                .is_match(s),
            other => panic!("unexpected matcher {other:?}"),
        }
    }

    #[test]
    fn a_wildcard_host_spans_labels_but_never_none_and_keeps_scheme_and_port() {
        let m = origin("https://*.bar.com");
        for ok in ["https://www.bar.com", "https://xpto.www.bar.com"] {
            assert!(matches(&m, ok), "{ok}");
        }
        for no in [
            "https://bar.com",
            "https://xbar.com",
            "http://www.bar.com",
            "https://a.bar.com:8443",
            "https://a.bar.com.evil.com",
            "https://a.barxcom",
        ] {
            assert!(!matches(&m, no), "{no}");
        }
        let any_host = origin("http://*:8080");
        assert!(matches(&any_host, "http://a.b:8080"));
        assert!(!matches(&any_host, "http://a.b:8081"));
        assert!(matches(
            &origin("https://www.foo.com"),
            "https://www.foo.com"
        ));
        assert!(!matches(
            &origin("https://www.foo.com"),
            "https://wwwxfoo.com"
        ));
    }
}
