//! Live check: a real Envoy runs our resources (as the static validation bootstrap)
//! in front of a tiny echo backend, on 127.0.0.1 only. It proves on the wire what
//! the golden files can only show as config: prefix rewrites never make `//`, the
//! query survives rewrites, invalid backends answer 500, redirects carry the port
//! the spec asks for, and the Host header reaches the backend with its port.

use crate::common::live::{
    get, mk_cluster, mk_forward, mk_http_port, mk_ir, mk_route, mk_virtual_host, serve,
    spawn_echo_backend,
};
use aether_ir as ir;
use std::net::SocketAddr;

fn prefix(p: &str) -> ir::PathMatch {
    ir::PathMatch::Prefix(p.into())
}

fn rewrite(hostname: Option<&str>, path: ir::PathRewrite) -> Option<ir::UrlRewrite> {
    Some(ir::UrlRewrite {
        hostname: hostname.map(Into::into),
        path: Some(path),
    })
}

fn redirect(
    scheme: Option<&str>,
    hostname: Option<&str>,
    path: Option<ir::PathRewrite>,
) -> ir::RouteAction {
    ir::RouteAction::Redirect(ir::Redirect {
        scheme: scheme.map(Into::into),
        hostname: hostname.map(Into::into),
        port: None,
        path,
        status_code: 302,
    })
}

/// `/` to the echo backend, with a header set, one removed and one added to the
/// response.
fn mk_root(cluster: &str) -> ir::Route {
    let mut root = mk_route("root", prefix("/"), mk_forward(&[cluster], 0, None));
    root.request_headers.set.push(ir::Header {
        name: "x-set".into(),
        value: "by-envoy".into(),
    });
    root.request_headers.remove.push("x-remove-me".into());
    root.response_headers.add.push(ir::Header {
        name: "x-response".into(),
        value: "added".into(),
    });
    root
}

fn prefix_to(to: &str) -> ir::PathRewrite {
    ir::PathRewrite::ReplacePrefixMatch(to.into())
}

/// `/strip`, `/prefix/one` (and the host) and `/full` rewritten on the way to cluster `c`.
fn mk_rewrites(c: &str) -> Vec<ir::Route> {
    vec![
        mk_route(
            "strip",
            prefix("/strip"),
            mk_forward(&[c], 0, rewrite(None, prefix_to("/"))),
        ),
        mk_route(
            "prefix-one",
            prefix("/prefix/one"),
            mk_forward(
                &[c],
                0,
                rewrite(Some("rewritten.example"), prefix_to("/one")),
            ),
        ),
        mk_route(
            "full",
            prefix("/full"),
            mk_forward(
                &[c],
                0,
                rewrite(None, ir::PathRewrite::ReplaceFullPath("/one".into())),
            ),
        ),
    ]
}

/// `/all-invalid`: only an invalid backend; `/half-invalid`: one beside `cluster`.
fn mk_invalid_backends(cluster: &str) -> Vec<ir::Route> {
    vec![
        mk_route(
            "all-invalid",
            prefix("/all-invalid"),
            mk_forward(&[], 1, None),
        ),
        mk_route(
            "half-invalid",
            prefix("/half-invalid"),
            mk_forward(&[cluster], 1, None),
        ),
    ]
}

/// `/scheme` to https, `/redirect-prefix` to example.org with the prefix stripped.
fn mk_redirects() -> Vec<ir::Route> {
    vec![
        mk_route(
            "scheme",
            prefix("/scheme"),
            redirect(Some("https"), None, None),
        ),
        mk_route(
            "redirect-prefix",
            prefix("/redirect-prefix"),
            redirect(None, Some("example.org"), Some(prefix_to("/"))),
        ),
    ]
}

fn live_ir(port: u16, backend: SocketAddr) -> ir::Ir {
    let cluster = mk_cluster("echo", backend, ir::UpstreamProtocol::Http1);
    let c = cluster.name.as_str();
    // In this order: Envoy takes the first route that matches, `/` last.
    let star = [
        mk_rewrites(c),
        mk_invalid_backends(c),
        mk_redirects(),
        vec![mk_root(c)],
    ]
    .concat();
    let exact = vec![mk_route(
        "exact-scheme",
        prefix("/"),
        redirect(Some("https"), None, None),
    )];
    let hosts = vec![
        mk_virtual_host("*", &["*"], star),
        mk_virtual_host("redirect.example", &["redirect.example"], exact),
    ];
    mk_ir("live", mk_http_port("live", port, hosts), vec![cluster])
}

#[test]
fn envoy_serves_rewrites_redirects_and_invalid_backends() {
    let backend = spawn_echo_backend();
    let port = crate::common::live::free_port();
    let ready = || matches!(get(port, "example.com", "/"), Ok(r) if r.status == 200);
    let _envoy = serve("live", &live_ir(port, backend), ready);
    the_host_reaches_the_backend_as_sent_and_header_modifiers_apply(port);
    rewrites_never_make_a_double_slash_and_keep_the_query(port);
    invalid_backends_answer_500_all_or_their_share(port);
    a_scheme_change_never_keeps_a_non_default_port(port);
}

/// A 200 for `host` `path`, its body the request the backend saw.
fn ok(port: u16, host: &str, path: &str) -> crate::common::live::Response {
    let r = get(port, host, path).unwrap();
    assert_eq!(r.status, 200, "{host}{path}: {}", r.body);
    r
}

/// Port included; the edge takes the peer as the client (`use_remote_address`).
fn the_host_reaches_the_backend_as_sent_and_header_modifiers_apply(port: u16) {
    let r = ok(port, "example.com:8080", "/anything");
    assert!(r.body.starts_with("GET /anything HTTP/1.1\n"), "{}", r.body);
    assert!(r.body.contains("host: example.com:8080\n"), "{}", r.body);
    assert!(r.body.contains("x-set: by-envoy\n"), "{}", r.body);
    assert!(
        r.body.contains("x-envoy-external-address: 127.0.0.1\n"),
        "{}",
        r.body
    );
    assert!(!r.body.contains("x-remove-me"), "{}", r.body);
    assert_eq!(r.header("x-response"), Some("added"));
}

/// ReplacePrefixMatch "/" never yields "//"; the query survives.
fn rewrites_never_make_a_double_slash_and_keep_the_query(port: u16) {
    let ok = |host, path| ok(port, host, path);
    assert!(
        ok("example.com", "/strip/bar?x=1")
            .body
            .starts_with("GET /bar?x=1 ")
    );
    assert!(ok("example.com", "/strip").body.starts_with("GET / "));
    assert!(ok("example.com", "/strip/").body.starts_with("GET / "));
    let r = ok("example.com", "/prefix/one/two");
    assert!(r.body.starts_with("GET /one/two "), "{}", r.body);
    assert!(r.body.contains("host: rewritten.example\n"), "{}", r.body);
    assert!(
        ok("example.com", "/full/x/y?q=2")
            .body
            .starts_with("GET /one?q=2 ")
    );
}

fn invalid_backends_answer_500_all_or_their_share(port: u16) {
    assert_eq!(
        get(port, "example.com", "/all-invalid").unwrap().status,
        500
    );
    let statuses: Vec<u16> = (0..24)
        .map(|_| get(port, "example.com", "/half-invalid").unwrap().status)
        .collect();
    assert!(
        statuses.contains(&200) && statuses.contains(&500),
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 500),
        "{statuses:?}"
    );
}

fn a_scheme_change_never_keeps_a_non_default_port(port: u16) {
    let location = |host: &str, path: &str| {
        let r = get(port, host, path).unwrap();
        assert_eq!(r.status, 302, "{host}{path}");
        r.header("location").unwrap_or_default().to_string()
    };
    assert_eq!(
        location("redirect.example:8080", "/a?b=c"),
        "https://redirect.example/a?b=c"
    );
    assert_eq!(
        location("example.com:8080", "/scheme"),
        "https://example.com:443/scheme"
    );
    assert_eq!(
        location("example.com:8080", "/redirect-prefix/x?y=1"),
        "http://example.org/x?y=1"
    );
    assert_eq!(
        location("example.com:8080", "/redirect-prefix"),
        "http://example.org/"
    );
}
