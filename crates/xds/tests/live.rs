//! Live check: a real Envoy runs our resources (as the static validation bootstrap)
//! in front of a tiny echo backend, on 127.0.0.1 only. It proves on the wire what
//! the golden files can only show as config: prefix rewrites never make `//`, the
//! query survives rewrites, invalid backends answer 500, redirects carry the port
//! the spec asks for, and the Host header reaches the backend with its port.

mod common;

use aether_ir as ir;
use common::live::{Envoy, free_port, get, spawn_echo_backend};
use std::net::SocketAddr;

fn route(name: &str, path: ir::PathMatch, action: ir::RouteAction) -> ir::Route {
    ir::Route {
        name: name.into(),
        matcher: ir::RouteMatch {
            path,
            method: None,
            headers: vec![],
            query_params: vec![],
        },
        action,
        request_headers: Default::default(),
        response_headers: Default::default(),
    }
}

fn forward(
    backends: &[&str],
    invalid_weight: u32,
    rewrite: Option<ir::UrlRewrite>,
) -> ir::RouteAction {
    ir::RouteAction::Forward(ir::Forward {
        backends: backends
            .iter()
            .map(|c| ir::WeightedBackend {
                cluster: c.to_string(),
                weight: 1,
            })
            .collect(),
        invalid_weight,
        rewrite,
    })
}

fn prefix(p: &str) -> ir::PathMatch {
    ir::PathMatch::Prefix(p.into())
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

fn live_ir(port: u16, backend: SocketAddr) -> ir::Ir {
    let cluster = ir::names::cluster("app", "echo", 80);
    let c = cluster.as_str();
    let mut root = route("root", prefix("/"), forward(&[c], 0, None));
    root.request_headers.set.push(ir::Header {
        name: "x-set".into(),
        value: "by-envoy".into(),
    });
    root.request_headers.remove.push("x-remove-me".into());
    root.response_headers.add.push(ir::Header {
        name: "x-response".into(),
        value: "added".into(),
    });
    let star = vec![
        route(
            "strip",
            prefix("/strip"),
            forward(
                &[c],
                0,
                Some(ir::UrlRewrite {
                    hostname: None,
                    path: Some(ir::PathRewrite::ReplacePrefixMatch("/".into())),
                }),
            ),
        ),
        route(
            "prefix-one",
            prefix("/prefix/one"),
            forward(
                &[c],
                0,
                Some(ir::UrlRewrite {
                    hostname: Some("rewritten.example".into()),
                    path: Some(ir::PathRewrite::ReplacePrefixMatch("/one".into())),
                }),
            ),
        ),
        route(
            "full",
            prefix("/full"),
            forward(
                &[c],
                0,
                Some(ir::UrlRewrite {
                    hostname: None,
                    path: Some(ir::PathRewrite::ReplaceFullPath("/one".into())),
                }),
            ),
        ),
        route("all-invalid", prefix("/all-invalid"), forward(&[], 1, None)),
        route(
            "half-invalid",
            prefix("/half-invalid"),
            forward(&[c], 1, None),
        ),
        route(
            "scheme",
            prefix("/scheme"),
            redirect(Some("https"), None, None),
        ),
        route(
            "redirect-prefix",
            prefix("/redirect-prefix"),
            redirect(
                None,
                Some("example.org"),
                Some(ir::PathRewrite::ReplacePrefixMatch("/".into())),
            ),
        ),
        root,
    ];
    let exact = vec![route(
        "exact-scheme",
        prefix("/"),
        redirect(Some("https"), None, None),
    )];
    ir::Ir {
        gateways: vec![ir::Gateway {
            namespace: "infra".into(),
            name: "live".into(),
            addresses: vec!["127.0.0.1".into()],
            ports: vec![ir::Port {
                port,
                protocol: ir::PortProtocol::Http,
                listener_name: ir::names::listener("infra", "live", port),
                route_table: Some(ir::RouteTable {
                    name: ir::names::route_table("infra", "live", port, None),
                    virtual_hosts: vec![
                        ir::VirtualHost {
                            name: "*".into(),
                            domains: vec!["*".into()],
                            routes: star,
                        },
                        ir::VirtualHost {
                            name: "redirect.example".into(),
                            domains: vec!["redirect.example".into()],
                            routes: exact,
                        },
                    ],
                }),
                tls_chains: vec![],
                forward: None,
            }],
        }],
        clusters: vec![ir::Cluster {
            name: cluster.clone(),
            service: ir::ObjectRef::new("app", "echo"),
            port: 80,
            protocol: ir::UpstreamProtocol::Http1,
            endpoints: vec![ir::Endpoint {
                address: backend.ip().to_string(),
                port: backend.port(),
                weight: 0,
            }],
        }],
    }
}

#[test]
fn envoy_serves_rewrites_redirects_and_invalid_backends() {
    let backend = spawn_echo_backend();
    let port = free_port();
    let bootstrap = aether_xds::validation_bootstrap(&aether_xds::build(&live_ir(port, backend)))
        .expect("rendering the bootstrap");
    let file = common::scratch_file("live.yaml");
    std::fs::write(&file, bootstrap).unwrap();
    let _envoy = Envoy::start(
        &file,
        || matches!(get(port, "example.com", "/"), Ok(r) if r.status == 200),
    );

    let ok = |host: &str, path: &str| {
        let r = get(port, host, path).unwrap();
        assert_eq!(r.status, 200, "{host}{path}: {}", r.body);
        r
    };
    // Host reaches the backend as sent, port included; header modifiers apply.
    let r = ok("example.com:8080", "/anything");
    assert!(r.body.starts_with("GET /anything HTTP/1.1\n"), "{}", r.body);
    assert!(r.body.contains("host: example.com:8080\n"), "{}", r.body);
    assert!(r.body.contains("x-set: by-envoy\n"), "{}", r.body);
    // The edge takes the peer as the client (`use_remote_address`).
    assert!(
        r.body.contains("x-envoy-external-address: 127.0.0.1\n"),
        "{}",
        r.body
    );
    assert!(!r.body.contains("x-remove-me"), "{}", r.body);
    assert_eq!(r.header("x-response"), Some("added"));

    // ReplacePrefixMatch "/" never yields "//"; the query survives.
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

    // Invalid backends answer 500: all of them, or their share.
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

    // Redirects: a scheme change never keeps the request's non-default port.
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
    let _ = std::fs::remove_file(&file);
}
