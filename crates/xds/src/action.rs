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

use crate::any::pack;
use aether_ir as ir;
use envoy_types::pb::envoy::config::core::v3::RuntimeFractionalPercent;
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, RedirectAction, RetryPolicy, RouteAction, WeightedCluster,
    redirect_action, retry_policy::RetryBackOff, retry_policy::RetryHostPredicate,
    retry_policy::retry_host_predicate, route::Action, route_action,
    route_action::RequestMirrorPolicy, weighted_cluster::ClusterWeight,
};
use envoy_types::pb::envoy::extensions::retry::host::previous_hosts::v3::PreviousHostsPredicate;
use envoy_types::pb::envoy::r#type::matcher::v3::RegexMatchAndSubstitute;
use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, fractional_percent::DenominatorType};
use envoy_types::pb::google::protobuf::{Duration, UInt32Value};

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
        // One backend with filters of its own keeps them on a weighted cluster.
        ([only], 0) if only.request_headers.is_empty() && only.response_headers.is_empty() => {
            route_action::ClusterSpecifier::Cluster(only.cluster.clone())
        }
        // Only invalid backends, every weight zero, or nothing at all: no request
        // may reach a backend, so all of them answer 500.
        ([], _) => invalid_backend(&mut action),
        _ => {
            let mut clusters: Vec<ClusterWeight> = valid
                .iter()
                .map(|b| ClusterWeight {
                    request_headers_to_add: crate::values::headers_to_add(&b.request_headers),
                    request_headers_to_remove: b.request_headers.remove.to_vec(),
                    response_headers_to_add: crate::values::headers_to_add(&b.response_headers),
                    response_headers_to_remove: b.response_headers.remove.to_vec(),
                    ..cluster_weight(&b.cluster, b.weight)
                })
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
    timeouts(&mut action, &f.timeouts);
    match (&f.retry, action.retry_policy.as_mut()) {
        (Some(r), _) => retry(
            &mut action,
            r,
            f.timeouts.backend_request_ms.is_some_and(|ms| ms > 0),
        ),
        // Envoy takes a route's retry policy whole, instead of its virtual host's:
        // one with a per-try timeout must carry the default retries itself.
        (None, Some(policy)) => unsent_retry(policy),
        // The virtual host's policy applies (see `unsent_retry_policy`).
        (None, None) => {}
    }
    action.request_mirror_policies = f.mirrors.iter().map(mirror).collect();
    action
}

/// `request` is the route timeout (0 disables it). `backendRequest` bounds each
/// try (Envoy answers 504 when it passes); with no `request` timeout set, the
/// route timeout is disabled rather than left at Envoy's 15 s, so that a longer
/// backend timeout holds.
fn timeouts(action: &mut RouteAction, t: &ir::Timeouts) {
    let request = match (t.request_ms, t.backend_request_ms) {
        (Some(ms), _) => Some(ms),
        (None, Some(_)) => Some(0),
        (None, None) => None,
    };
    action.timeout = request.map(duration);
    if let Some(ms) = t.backend_request_ms.filter(|ms| *ms > 0) {
        action.retry_policy = Some(RetryPolicy {
            per_try_timeout: Some(duration(ms)),
            ..Default::default()
        });
    }
}

/// What Envoy retries on its own: only tries that never reached a backend
/// (no connection, a refused HTTP/2 stream, a reset before the request went
/// out), so any method is safe to retry, each on another endpoint. A backend
/// that dies without notice then costs the requests it held, not the ones
/// after (Istio's defaults do the same; the route's own retry replaces it).
pub const UNSENT_RETRY_ON: &str = "connect-failure,refused-stream,reset-before-request";

/// Retries of a try that never reached a backend, when the rule sets none.
const UNSENT_RETRIES: u32 = 2;

/// The default retries, which every virtual host carries for the routes whose
/// rule sets neither retries nor a backend timeout. Once per virtual host
/// rather than once per route: Envoy then applies a 10,000-route table in less
/// than half the time, with 30 MiB less memory (benches/README.md, "Where a
/// change's time goes").
pub(crate) fn unsent_retry_policy() -> RetryPolicy {
    let mut policy = RetryPolicy::default();
    unsent_retry(&mut policy);
    policy
}

fn unsent_retry(policy: &mut RetryPolicy) {
    policy.retry_on = UNSENT_RETRY_ON.to_string();
    policy.num_retries = Some(UInt32Value {
        value: UNSENT_RETRIES,
    });
    other_hosts(policy);
}

/// Each retry goes to an endpoint not tried yet, when there is one.
fn other_hosts(policy: &mut RetryPolicy) {
    policy.retry_host_predicate = vec![RetryHostPredicate {
        name: "envoy.retry_host_predicates.previous_hosts".to_string(),
        config_type: Some(retry_host_predicate::ConfigType::TypedConfig(pack(
            &PreviousHostsPredicate {},
        ))),
    }];
    policy.host_selection_retry_max_attempts = 3;
}

/// A rule's retries: on the configured codes, and always on what never reached
/// the backend (a failed connect, a refused stream, a reset before the request
/// went out), at most `attempts` times, waiting `backoff` at least (Envoy backs
/// off exponentially up to ten times that, with jitter). `attempts: 0` turns
/// retries off, ours too.
///
/// A reset after the request went out may mean the backend processed it, so it
/// is retried only on a rule with a `backendRequest` timeout: Envoy counts a try
/// passing that timeout as a reset, and the spec asks for the next try then
/// (README, "Edge defaults", says so for users: unsafe for non-idempotent
/// requests on such rules).
fn retry(action: &mut RouteAction, r: &ir::Retry, per_try_timeout: bool) {
    let policy = action.retry_policy.get_or_insert_with(RetryPolicy::default);
    if r.attempts == Some(0) {
        policy.retry_on = String::new();
        policy.num_retries = Some(UInt32Value { value: 0 });
        return;
    }
    let mut on = vec!["connect-failure", "refused-stream", "reset-before-request"];
    if per_try_timeout {
        on.push("reset");
    }
    if !r.codes.is_empty() {
        on.insert(0, "retriable-status-codes");
    }
    policy.retry_on = on.join(",");
    policy.retriable_status_codes = r.codes.clone();
    policy.num_retries = r.attempts.map(|n| UInt32Value { value: n });
    policy.retry_back_off = r.backoff_ms.filter(|ms| *ms > 0).map(|ms| RetryBackOff {
        base_interval: Some(duration(ms)),
        max_interval: None,
    });
    other_hosts(policy);
}

fn duration(ms: u64) -> Duration {
    Duration {
        seconds: i64::try_from(ms / 1000).unwrap_or(i64::MAX),
        nanos: i32::try_from(ms % 1000).unwrap_or(0) * 1_000_000,
    }
}

/// A mirror: copies of the requests (all, or the given share) go to the
/// cluster, whose answers Envoy discards.
fn mirror(m: &ir::Mirror) -> RequestMirrorPolicy {
    RequestMirrorPolicy {
        cluster: m.cluster.clone(),
        runtime_fraction: m.fraction.map(|(numerator, denominator)| {
            // Per million: the finest denominator Envoy has.
            let per_million = u64::from(numerator) * 1_000_000 / u64::from(denominator.max(1));
            RuntimeFractionalPercent {
                default_value: Some(FractionalPercent {
                    numerator: u32::try_from(per_million).unwrap_or(1_000_000),
                    denominator: DenominatorType::Million as i32,
                }),
                runtime_key: String::new(),
            }
        }),
        ..Default::default()
    }
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
        pattern: Some(crate::values::regex(&pattern)),
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
mod tests;
