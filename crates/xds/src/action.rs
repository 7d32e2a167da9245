//! What a matched route does: forward to weighted backends (with URL rewrites),
//! redirect, or answer directly.
//!
//! ```text
//!  Forward ─ 1 backend, no invalid share ──► cluster
//!          ─ otherwise ──────────────────────► weighted_clusters (+ INVALID_BACKEND share)
//!  Redirect ─► scheme / host / port / path (+ the spec's port rules)
//!  DirectResponse ─► status
//! ```
//!
//! Invalid backendRefs must answer 500 for their share of the traffic. Their weight
//! goes to [`INVALID_BACKEND`], a cluster that is never defined, and the route's
//! `cluster_not_found_response_code` turns "no such cluster" into a 500.
//!
//! Prefix replacement (`ReplacePrefixMatch`) uses a regex rewrite rather than
//! `prefix_rewrite`: replacing `/foo` with `/` on `/foo/bar` must give `/bar`, and
//! `prefix_rewrite` gives `//bar`.

use aether_ir as ir;
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, RedirectAction, RouteAction, WeightedCluster, redirect_action,
    route::Action, route_action, weighted_cluster::ClusterWeight,
};
use envoy_types::pb::envoy::r#type::matcher::v3::RegexMatchAndSubstitute;
use envoy_types::pb::google::protobuf::UInt32Value;

/// The cluster that invalid backendRefs route to; it never exists, so Envoy answers
/// with the route's `cluster_not_found_response_code` (500).
pub const INVALID_BACKEND: &str = "edge_invalid_backend";

/// How clients reached the route table: the scheme a redirect keeps when it does
/// not set one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn default_port(name: &str) -> Option<u16> {
        match name {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

pub(crate) fn action(r: &ir::Route, vh: &ir::VirtualHost, scheme: Scheme) -> Action {
    match &r.action {
        ir::RouteAction::Forward(f) => Action::Route(forward(f, &r.matcher.path)),
        ir::RouteAction::Redirect(rd) => {
            Action::Redirect(redirect(rd, &r.matcher.path, vh, scheme))
        }
        ir::RouteAction::DirectResponse { status } => direct_response(u32::from(*status)),
    }
}

fn direct_response(status: u32) -> Action {
    Action::DirectResponse(DirectResponseAction {
        status,
        ..Default::default()
    })
}

pub(crate) fn forward(f: &ir::Forward, path: &ir::PathMatch) -> RouteAction {
    let valid: Vec<&ir::WeightedBackend> = f.backends.iter().filter(|b| b.weight > 0).collect();
    let mut action = RouteAction::default();
    action.cluster_specifier = Some(match (valid.as_slice(), f.invalid_weight) {
        ([only], 0) => route_action::ClusterSpecifier::Cluster(only.cluster.clone()),
        // Only invalid backends, every weight zero, or nothing at all: no request
        // may reach a backend, so all of them answer 500.
        ([], _) => invalid_backend(&mut action),
        _ => {
            let mut clusters: Vec<ClusterWeight> = valid
                .iter()
                .map(|b| cluster_weight(&b.cluster, b.weight))
                .collect();
            if f.invalid_weight > 0 {
                invalid_backend(&mut action);
                clusters.push(cluster_weight(INVALID_BACKEND, f.invalid_weight));
            }
            route_action::ClusterSpecifier::WeightedClusters(WeightedCluster {
                clusters,
                ..Default::default()
            })
        }
    });
    if let Some(rewrite) = &f.rewrite {
        if let Some(host) = &rewrite.hostname {
            action.host_rewrite_specifier = Some(
                route_action::HostRewriteSpecifier::HostRewriteLiteral(host.clone()),
            );
        }
        action.regex_rewrite = rewrite.path.as_ref().and_then(|p| path_rewrite(p, path));
    }
    action
}

/// Sends the route to [`INVALID_BACKEND`] and makes "no such cluster" a 500.
fn invalid_backend(action: &mut RouteAction) -> route_action::ClusterSpecifier {
    action.cluster_not_found_response_code =
        route_action::ClusterNotFoundResponseCode::InternalServerError as i32;
    route_action::ClusterSpecifier::Cluster(INVALID_BACKEND.to_string())
}

fn cluster_weight(name: &str, weight: u32) -> ClusterWeight {
    ClusterWeight {
        name: name.to_string(),
        weight: Some(UInt32Value { value: weight }),
        ..Default::default()
    }
}

/// A path rewrite as a regex substitution on the path (Envoy keeps the query
/// string aside and appends it back). `None` when the rewrite cannot apply: a prefix
/// replacement on a route whose path match is a regular expression (the translator
/// rejects those).
pub(crate) fn path_rewrite(
    rewrite: &ir::PathRewrite,
    path: &ir::PathMatch,
) -> Option<RegexMatchAndSubstitute> {
    let (pattern, substitution) = match rewrite {
        ir::PathRewrite::ReplaceFullPath(full) => ("^/.*$".to_string(), escape_substitution(full)),
        ir::PathRewrite::ReplacePrefixMatch(replacement) => {
            let prefix = match path {
                ir::PathMatch::Prefix(p) | ir::PathMatch::Exact(p) => p.trim_end_matches('/'),
                ir::PathMatch::RegularExpression(_) => return None,
            };
            prefix_replacement(prefix, replacement)
        }
    };
    Some(RegexMatchAndSubstitute {
        pattern: Some(crate::route::regex(&pattern)),
        substitution,
    })
}

/// The regex and substitution that replace the element-wise `prefix` (no trailing
/// slash; empty for the root prefix) of a path with `replacement`:
///
/// | prefix | replacement | `/foo` | `/foo/` | `/foo/bar` |
/// |--------|-------------|--------|---------|------------|
/// | `/foo` | `/`         | `/`    | `/`     | `/bar`     |
/// | `/foo` | `/x`        | `/x`   | `/x/`   | `/x/bar`   |
/// | `/foo` | `/x/`       | `/x/`  | `/x/`   | `/x/bar`   |
///
/// The rest after the prefix is empty or starts with `/`. A replacement ending in
/// `/` swallows the rest's leading `/`, so the two never make `//`.
fn prefix_replacement(prefix: &str, replacement: &str) -> (String, String) {
    let prefix = regex_escape(prefix);
    let substitution = format!("{}\\1", escape_substitution(replacement));
    if replacement.ends_with('/') {
        (format!("^{prefix}/?(.*)$"), substitution)
    } else {
        (format!("^{prefix}(/.*)?$"), substitution)
    }
}

/// Escapes RE2 metacharacters so that a literal path prefix matches itself.
fn regex_escape(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len());
    for c in literal.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// In an RE2 substitution, `\` introduces a group reference; a literal one is `\\`.
fn escape_substitution(literal: &str) -> String {
    literal.replace('\\', "\\\\")
}

/// A redirect with the spec's port rules. Envoy keeps the request's port in the
/// Location unless told otherwise (verified against Envoy 1.40), while the IR's
/// `port: None` means "no port in the Location":
///
/// - hostname set: `host_redirect` replaces host *and* port, so the Location carries
///   exactly `hostname[:port]`;
/// - no hostname, but the virtual host has one exact domain: that domain is the host
///   (the request matched it, port aside), so the same holds;
/// - otherwise (`*` or wildcard virtual host) a missing port becomes the scheme's
///   default port, which Envoy then writes explicitly (`https://h:443/`): the same
///   URL, and the only way to drop a non-default port from the Host.
pub(crate) fn redirect(
    r: &ir::Redirect,
    path: &ir::PathMatch,
    vh: &ir::VirtualHost,
    listener_scheme: Scheme,
) -> RedirectAction {
    let scheme = r.scheme.as_deref().unwrap_or(listener_scheme.name());
    let exact_domain = match vh.domains.as_slice() {
        [d] if !d.contains('*') => Some(d.clone()),
        _ => None,
    };
    let host_redirect = r.hostname.clone().or(exact_domain).unwrap_or_default();
    let port = match r.port {
        Some(p) => Some(p),
        None if host_redirect.is_empty() => Scheme::default_port(scheme),
        None => None,
    };
    RedirectAction {
        scheme_rewrite_specifier: r
            .scheme
            .as_ref()
            .map(|s| redirect_action::SchemeRewriteSpecifier::SchemeRedirect(s.clone())),
        host_redirect,
        port_redirect: port.map(u32::from).unwrap_or(0),
        path_rewrite_specifier: r.path.as_ref().and_then(|p| match p {
            ir::PathRewrite::ReplaceFullPath(full) => Some(
                redirect_action::PathRewriteSpecifier::PathRedirect(full.clone()),
            ),
            ir::PathRewrite::ReplacePrefixMatch(_) => {
                path_rewrite(p, path).map(redirect_action::PathRewriteSpecifier::RegexRewrite)
            }
        }),
        response_code: match r.status_code {
            301 => redirect_action::RedirectResponseCode::MovedPermanently,
            303 => redirect_action::RedirectResponseCode::SeeOther,
            307 => redirect_action::RedirectResponseCode::TemporaryRedirect,
            308 => redirect_action::RedirectResponseCode::PermanentRedirect,
            _ => redirect_action::RedirectResponseCode::Found,
        } as i32,
        strip_query: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use route_action::ClusterSpecifier;

    fn backend(cluster: &str, weight: u32) -> ir::WeightedBackend {
        ir::WeightedBackend {
            cluster: cluster.into(),
            weight,
        }
    }

    fn fwd(backends: Vec<ir::WeightedBackend>, invalid_weight: u32) -> RouteAction {
        forward(
            &ir::Forward {
                backends,
                invalid_weight,
                rewrite: None,
            },
            &ir::PathMatch::Prefix("/".into()),
        )
    }

    fn weights(action: &RouteAction) -> Vec<(String, u32)> {
        match &action.cluster_specifier {
            Some(ClusterSpecifier::WeightedClusters(w)) => w
                .clusters
                .iter()
                .map(|c| (c.name.clone(), c.weight.unwrap().value))
                .collect(),
            other => panic!("expected weighted clusters, got {other:?}"),
        }
    }

    const NOT_FOUND_500: i32 =
        route_action::ClusterNotFoundResponseCode::InternalServerError as i32;

    #[test]
    fn a_single_backend_is_a_plain_cluster() {
        let a = fwd(vec![backend("edge_cl_a", 1)], 0);
        assert_eq!(
            a.cluster_specifier,
            Some(ClusterSpecifier::Cluster("edge_cl_a".into()))
        );
        assert_eq!(a.cluster_not_found_response_code, 0);
    }

    #[test]
    fn several_backends_are_weighted_and_zero_weights_dropped() {
        let a = fwd(
            vec![
                backend("edge_cl_a", 3),
                backend("edge_cl_z", 0),
                backend("edge_cl_b", 1),
            ],
            0,
        );
        assert_eq!(
            weights(&a),
            vec![("edge_cl_a".into(), 3), ("edge_cl_b".into(), 1)]
        );
    }

    #[test]
    fn the_invalid_share_goes_to_a_missing_cluster_answering_500() {
        let a = fwd(vec![backend("edge_cl_a", 1)], 2);
        assert_eq!(
            weights(&a),
            vec![("edge_cl_a".into(), 1), (INVALID_BACKEND.into(), 2)]
        );
        assert_eq!(a.cluster_not_found_response_code, NOT_FOUND_500);
    }

    #[test]
    fn nothing_valid_means_every_request_answers_500() {
        for a in [fwd(vec![], 1), fwd(vec![backend("edge_cl_a", 0)], 0)] {
            assert_eq!(
                a.cluster_specifier,
                Some(ClusterSpecifier::Cluster(INVALID_BACKEND.into()))
            );
            assert_eq!(a.cluster_not_found_response_code, NOT_FOUND_500);
        }
    }

    /// Applies a regex rewrite the way Envoy does (on the path without query),
    /// with the `regex` crate standing in for RE2 on these simple patterns.
    fn apply(rewrite: &RegexMatchAndSubstitute, path: &str) -> String {
        let re = regex::Regex::new(&rewrite.pattern.as_ref().unwrap().regex).unwrap();
        let (just_path, query) = match path.find('?') {
            Some(i) => path.split_at(i),
            None => (path, ""),
        };
        // RE2 writes group references as \1; the regex crate as ${1}.
        let substitution = rewrite
            .substitution
            .replace("\\1", "${1}")
            .replace("\\\\", "\\");
        format!(
            "{}{query}",
            re.replace_all(just_path, substitution.as_str())
        )
    }

    fn prefix_rewrite(prefix: &str, replacement: &str, path: &str) -> String {
        let rw = path_rewrite(
            &ir::PathRewrite::ReplacePrefixMatch(replacement.into()),
            &ir::PathMatch::Prefix(prefix.into()),
        )
        .unwrap();
        apply(&rw, path)
    }

    #[test]
    fn replacing_a_prefix_never_doubles_slashes() {
        let cases = [
            ("/foo", "/", "/foo", "/"),
            ("/foo", "/", "/foo/", "/"),
            ("/foo", "/", "/foo/bar", "/bar"),
            ("/foo", "/", "/foo/bar?x=1", "/bar?x=1"),
            ("/foo", "/x", "/foo", "/x"),
            ("/foo", "/x", "/foo/", "/x/"),
            ("/foo", "/x", "/foo/bar", "/x/bar"),
            ("/foo", "/x/", "/foo", "/x/"),
            ("/foo", "/x/", "/foo/bar", "/x/bar"),
            ("/prefix/one", "/one", "/prefix/one/two", "/one/two"),
            ("/", "/root", "/a/b", "/root/a/b"),
            ("/", "/", "/a/b", "/a/b"),
            ("/a.b", "/c", "/a.b/d", "/c/d"),
        ];
        for (prefix, replacement, path, want) in cases {
            assert_eq!(
                prefix_rewrite(prefix, replacement, path),
                want,
                "prefix {prefix} → {replacement} on {path}"
            );
        }
        // A regex-escaped prefix does not match other characters.
        assert_eq!(prefix_rewrite("/a.b", "/c", "/axb/d"), "/axb/d");
    }

    #[test]
    fn replacing_the_full_path_keeps_the_query() {
        let rw = path_rewrite(
            &ir::PathRewrite::ReplaceFullPath("/one".into()),
            &ir::PathMatch::Prefix("/full".into()),
        )
        .unwrap();
        assert_eq!(apply(&rw, "/full/path?q=1"), "/one?q=1");
        assert_eq!(apply(&rw, "/"), "/one");
    }

    fn vhost(domains: &[&str]) -> ir::VirtualHost {
        ir::VirtualHost {
            name: domains[0].into(),
            domains: domains.iter().map(|d| d.to_string()).collect(),
            routes: vec![],
        }
    }

    fn rd(scheme: Option<&str>, hostname: Option<&str>, port: Option<u16>) -> ir::Redirect {
        ir::Redirect {
            scheme: scheme.map(Into::into),
            hostname: hostname.map(Into::into),
            port,
            path: None,
            status_code: 302,
        }
    }

    #[test]
    fn redirect_fields_and_the_port_rules() {
        let any = vhost(&["*"]);
        let exact = vhost(&["example.com"]);
        let root = ir::PathMatch::Prefix("/".into());
        let scheme = |r: &RedirectAction| r.scheme_rewrite_specifier.clone();
        let https = Some(redirect_action::SchemeRewriteSpecifier::SchemeRedirect(
            "https".into(),
        ));

        // Hostname given: it replaces host and port, no port unless asked.
        let r = redirect(
            &rd(None, Some("example.org"), None),
            &root,
            &any,
            Scheme::Http,
        );
        assert_eq!(
            (r.host_redirect.as_str(), r.port_redirect),
            ("example.org", 0)
        );
        assert_eq!(scheme(&r), None);

        // Scheme only, exact virtual host: the domain stands in for the host.
        let r = redirect(&rd(Some("https"), None, None), &root, &exact, Scheme::Http);
        assert_eq!(
            (r.host_redirect.as_str(), r.port_redirect),
            ("example.com", 0)
        );
        assert_eq!(scheme(&r), https);

        // Scheme only, `*` virtual host: the scheme's default port, explicitly.
        let r = redirect(&rd(Some("https"), None, None), &root, &any, Scheme::Http);
        assert_eq!((r.host_redirect.as_str(), r.port_redirect), ("", 443));
        // Nothing at all on an HTTPS chain: https's default port.
        let r = redirect(&rd(None, None, None), &root, &any, Scheme::Https);
        assert_eq!(r.port_redirect, 443);

        // An explicit port always wins.
        let r = redirect(&rd(None, None, Some(8443)), &root, &exact, Scheme::Http);
        assert_eq!(
            (r.host_redirect.as_str(), r.port_redirect),
            ("example.com", 8443)
        );

        let codes = [(301, 0), (302, 1), (303, 2), (307, 3), (308, 4)];
        for (status, code) in codes {
            let mut ir_rd = rd(None, Some("h"), None);
            ir_rd.status_code = status;
            assert_eq!(
                redirect(&ir_rd, &root, &any, Scheme::Http).response_code,
                code
            );
        }
    }

    #[test]
    fn redirect_paths() {
        let any = vhost(&["*"]);
        let mut r = rd(None, Some("h"), None);
        r.path = Some(ir::PathRewrite::ReplaceFullPath("/new".into()));
        let got = redirect(
            &r,
            &ir::PathMatch::Prefix("/old".into()),
            &any,
            Scheme::Http,
        );
        assert_eq!(
            got.path_rewrite_specifier,
            Some(redirect_action::PathRewriteSpecifier::PathRedirect(
                "/new".into()
            ))
        );
        r.path = Some(ir::PathRewrite::ReplacePrefixMatch("/".into()));
        let got = redirect(
            &r,
            &ir::PathMatch::Prefix("/old".into()),
            &any,
            Scheme::Http,
        );
        match got.path_rewrite_specifier {
            Some(redirect_action::PathRewriteSpecifier::RegexRewrite(rw)) => {
                assert_eq!(apply(&rw, "/old/x?y=1"), "/x?y=1");
                assert_eq!(apply(&rw, "/old"), "/");
            }
            other => panic!("expected a regex rewrite, got {other:?}"),
        }
    }

    #[test]
    fn direct_responses_carry_the_status() {
        assert_eq!(
            direct_response(500),
            Action::DirectResponse(DirectResponseAction {
                status: 500,
                ..Default::default()
            })
        );
    }
}
