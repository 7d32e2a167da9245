//! Forward, rewrite and redirect mapping, with rewrites applied to sample paths.

use super::*;
use route_action::ClusterSpecifier;

fn backend(cluster: &str, weight: u32) -> ir::WeightedBackend {
    ir::WeightedBackend::new(cluster, weight)
}

fn fwd(backends: Vec<ir::WeightedBackend>, invalid_weight: u32) -> RouteAction {
    forward(
        &ir::Forward {
            backends,
            invalid_weight,
            rewrite: None,
            ..Default::default()
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

const NOT_FOUND_500: i32 = route_action::ClusterNotFoundResponseCode::InternalServerError as i32;

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

/// Paths and what a rule makes of them.
type Rewritten = &'static [(&'static str, &'static str)];

#[test]
fn replacing_a_prefix_never_doubles_slashes() {
    // Per rule (the matched prefix and its replacement): paths and what they become.
    let rules: [(&str, &str, Rewritten); 7] = [
        (
            "/foo",
            "/",
            &[
                ("/foo", "/"),
                ("/foo/", "/"),
                ("/foo/bar", "/bar"),
                ("/foo/bar?x=1", "/bar?x=1"),
            ],
        ),
        (
            "/foo",
            "/x",
            &[("/foo", "/x"), ("/foo/", "/x/"), ("/foo/bar", "/x/bar")],
        ),
        ("/foo", "/x/", &[("/foo", "/x/"), ("/foo/bar", "/x/bar")]),
        ("/prefix/one", "/one", &[("/prefix/one/two", "/one/two")]),
        ("/", "/root", &[("/a/b", "/root/a/b")]),
        ("/", "/", &[("/a/b", "/a/b")]),
        ("/a.b", "/c", &[("/a.b/d", "/c/d")]),
    ];
    for (prefix, replacement, paths) in rules {
        for &(path, want) in paths {
            assert_eq!(
                prefix_rewrite(prefix, replacement, path),
                want,
                "prefix {prefix} → {replacement} on {path}"
            );
        }
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
        pre_routing: Vec::new(),
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
    let old_prefix = ir::PathMatch::Prefix("/old".into());
    let from_old = |r: &ir::Redirect| redirect(r, &old_prefix, &any, Scheme::Http);
    let mut r = rd(None, Some("h"), None);
    r.path = Some(ir::PathRewrite::ReplaceFullPath("/new".into()));
    let got = from_old(&r);
    assert_eq!(
        got.path_rewrite_specifier,
        Some(redirect_action::PathRewriteSpecifier::PathRedirect(
            "/new".into()
        ))
    );
    r.path = Some(ir::PathRewrite::ReplacePrefixMatch("/".into()));
    let got = from_old(&r);
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

fn with(f: ir::Forward) -> RouteAction {
    forward(&f, &ir::PathMatch::Prefix("/".into()))
}

fn timeouts(request_ms: Option<u64>, backend_request_ms: Option<u64>) -> RouteAction {
    with(ir::Forward {
        backends: vec![backend("edge_cl_a", 1)],
        timeouts: ir::Timeouts {
            request_ms,
            backend_request_ms,
        },
        ..Default::default()
    })
}

/// (seconds, nanos) of a protobuf Duration.
type Secs = Option<(i64, i32)>;

/// The route timeout and the per-try timeout.
fn secs(a: &RouteAction) -> (Secs, Secs) {
    let d = |d: &Duration| (d.seconds, d.nanos);
    let per_try = a
        .retry_policy
        .as_ref()
        .and_then(|p| p.per_try_timeout.as_ref());
    (a.timeout.as_ref().map(d), per_try.map(d))
}

#[test]
fn timeouts_are_the_route_timeout_and_the_per_try_timeout() {
    // Unset: Envoy's own default route timeout, no retry policy.
    assert_eq!(secs(&timeouts(None, None)), (None, None));
    assert_eq!(
        secs(&timeouts(Some(1_500), None)),
        (Some((1, 500_000_000)), None)
    );
    // 0s disables the route timeout.
    assert_eq!(secs(&timeouts(Some(0), None)), (Some((0, 0)), None));
    // A backend timeout alone: each try bounded, the whole request not cut at 15 s.
    assert_eq!(
        secs(&timeouts(None, Some(90_000))),
        (Some((0, 0)), Some((90, 0)))
    );
    assert_eq!(
        secs(&timeouts(Some(10_000), Some(2_000))),
        (Some((10, 0)), Some((2, 0)))
    );
    // backendRequest 0s: no per-try bound.
    assert_eq!(
        secs(&timeouts(Some(10_000), Some(0))),
        (Some((10, 0)), None)
    );
    let retry = timeouts(None, Some(500)).retry_policy.unwrap();
    assert_eq!(
        retry.retry_on, UNSENT_RETRY_ON,
        "a timeout alone retries only tries that never reached a backend, not a try that timed out"
    );
}

#[test]
fn mirrors_copy_all_or_a_share_per_million() {
    let a = with(ir::Forward {
        backends: vec![backend("edge_cl_a", 1)],
        mirrors: vec![
            ir::Mirror {
                cluster: "edge_cl_m".into(),
                fraction: None,
            },
            ir::Mirror {
                cluster: "edge_cl_n".into(),
                fraction: Some((1, 3)),
            },
            ir::Mirror {
                cluster: "edge_cl_o".into(),
                fraction: Some((20, 100)),
            },
        ],
        ..Default::default()
    });
    let shares: Vec<(&str, Option<u32>)> = a
        .request_mirror_policies
        .iter()
        .map(|m| {
            let share = m.runtime_fraction.as_ref().map(|f| {
                let p = f.default_value.as_ref().unwrap();
                assert_eq!(p.denominator, DenominatorType::Million as i32);
                p.numerator
            });
            (m.cluster.as_str(), share)
        })
        .collect();
    assert_eq!(
        shares,
        vec![
            ("edge_cl_m", None),
            ("edge_cl_n", Some(333_333)),
            ("edge_cl_o", Some(200_000))
        ]
    );
}

#[test]
fn a_backend_with_its_own_headers_is_a_weighted_cluster_even_alone() {
    let mut b = backend("edge_cl_a", 1);
    b.request_headers.set.push(ir::Header {
        name: "backend".into(),
        value: "a".into(),
    });
    b.response_headers.remove.push("server".into());
    let a = with(ir::Forward {
        backends: vec![b],
        ..Default::default()
    });
    let Some(ClusterSpecifier::WeightedClusters(w)) = &a.cluster_specifier else {
        panic!("expected weighted clusters, got {:?}", a.cluster_specifier);
    };
    let c = &w.clusters[0];
    assert_eq!(c.name, "edge_cl_a");
    let added: Vec<(&str, &str)> = c
        .request_headers_to_add
        .iter()
        .map(|h| {
            let h = h.header.as_ref().unwrap();
            (h.key.as_str(), h.value.as_str())
        })
        .collect();
    assert_eq!(added, vec![("backend", "a")]);
    assert_eq!(c.response_headers_to_remove, vec!["server".to_string()]);
}

#[test]
fn retries_name_codes_attempts_and_backoff_and_keep_the_per_try_timeout() {
    let a = with(ir::Forward {
        backends: vec![backend("edge_cl_a", 1)],
        timeouts: ir::Timeouts {
            request_ms: None,
            backend_request_ms: Some(250),
        },
        retry: Some(Box::new(ir::Retry {
            attempts: Some(3),
            backoff_ms: Some(100),
            codes: vec![500, 503],
        })),
        ..Default::default()
    });
    let p = a.retry_policy.unwrap();
    // With a backend timeout, `reset` too: Envoy counts a try passing it as one.
    assert_eq!(
        p.retry_on,
        "retriable-status-codes,connect-failure,refused-stream,reset-before-request,reset"
    );
    assert_eq!(p.retriable_status_codes, vec![500, 503]);
    assert_eq!(p.num_retries, Some(UInt32Value { value: 3 }));
    let base = p.retry_back_off.unwrap().base_interval.unwrap();
    assert_eq!((base.seconds, base.nanos), (0, 100_000_000));
    let per_try = p.per_try_timeout.unwrap();
    assert_eq!((per_try.seconds, per_try.nanos), (0, 250_000_000));

    // No codes, no backend timeout: only what never reached the backend (a
    // reset after the request went out is not retried); defaults left to Envoy.
    let a = with(ir::Forward {
        backends: vec![backend("edge_cl_a", 1)],
        retry: Some(Box::new(ir::Retry::default())),
        ..Default::default()
    });
    let p = a.retry_policy.unwrap();
    assert_eq!(
        p.retry_on,
        "connect-failure,refused-stream,reset-before-request"
    );
    assert_eq!((p.num_retries, p.retry_back_off), (None, None));
    assert_eq!(
        p.retry_host_predicate.len(),
        1,
        "retries go to other endpoints"
    );
}

#[test]
fn zero_attempts_disable_every_retry_ours_included() {
    let a = with(ir::Forward {
        backends: vec![backend("edge_cl_a", 1)],
        timeouts: ir::Timeouts {
            request_ms: None,
            backend_request_ms: Some(250),
        },
        retry: Some(Box::new(ir::Retry {
            attempts: Some(0),
            backoff_ms: Some(100),
            codes: vec![500],
        })),
        ..Default::default()
    });
    let p = a.retry_policy.unwrap();
    assert_eq!(p.num_retries, Some(UInt32Value { value: 0 }));
    assert_eq!(p.retry_on, "", "no condition to retry on");
    assert!(p.retriable_status_codes.is_empty() && p.retry_back_off.is_none());
    let per_try = p.per_try_timeout.unwrap();
    assert_eq!(
        (per_try.seconds, per_try.nanos),
        (0, 250_000_000),
        "the backend timeout still bounds the one try"
    );
}

#[test]
fn a_rule_without_retries_retries_only_what_never_reached_a_backend() {
    let a = with(ir::Forward {
        backends: vec![backend("edge_cl_a", 1)],
        ..Default::default()
    });
    assert_eq!(
        a.retry_policy, None,
        "the route leaves its virtual host's policy in force"
    );
    let p = unsent_retry_policy();
    assert_eq!(
        p.retry_on,
        "connect-failure,refused-stream,reset-before-request"
    );
    assert_eq!(p.num_retries, Some(UInt32Value { value: 2 }));
    assert_eq!(
        p.retry_host_predicate[0].name,
        "envoy.retry_host_predicates.previous_hosts"
    );
    assert!(p.per_try_timeout.is_none() && p.retriable_status_codes.is_empty());
}
