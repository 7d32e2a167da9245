//! Envoy's own verdict: every golden case, as a static bootstrap, must pass
//! `envoy --mode validate`; a config Envoy would NACK fails here, not in a cluster.

mod common;

use aether_ir as ir;
use common::{case_dirs, case_name, envoy_validate, load_ir};
use std::sync::Mutex;

/// Two validations at a time: the machine is small and each takes about a second.
const PARALLELISM: usize = 2;

#[test]
fn every_case_passes_envoy_validate() {
    let cases = case_dirs();
    assert!(!cases.is_empty(), "no golden cases found");
    let queue = Mutex::new(cases.clone());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLELISM {
            s.spawn(|| {
                loop {
                    let Some(dir) = queue.lock().unwrap().pop() else {
                        break;
                    };
                    let name = case_name(&dir);
                    let snapshot = aether_xds::build(&load_ir(&dir));
                    let bootstrap = aether_xds::validation_bootstrap(&snapshot)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                    if let Err(e) = envoy_validate(&name, &bootstrap) {
                        failures.lock().unwrap().push(format!("{name}: {e}"));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "Envoy rejected {} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    eprintln!("envoy --mode validate: {} cases passed", cases.len());
}

/// The check above can fail: RE2 caps repetition counts at 1000, so Envoy must
/// reject a route whose path regex asks for 1001. Its accepted twin is an everyday
/// regex (one UUID) that Envoy's default program size limit of 100 would reject,
/// proving our bootstraps raise it.
#[test]
fn envoy_rejects_an_invalid_regex() {
    let route = |path: &str| ir::Route {
        name: "httproute/app/bad/rule/0/match/0".into(),
        matcher: ir::RouteMatch {
            path: ir::PathMatch::RegularExpression(path.into()),
            method: None,
            headers: vec![],
            query_params: vec![],
        },
        action: ir::RouteAction::DirectResponse { status: 200 },
        request_headers: Default::default(),
        response_headers: Default::default(),
    };
    let ir_with = |path: &str| ir::Ir {
        gateways: vec![std::sync::Arc::new(ir::Gateway {
            namespace: "infra".into(),
            name: "gw".into(),
            addresses: vec!["127.0.0.1".into()],
            ports: vec![ir::Port {
                port: 8080,
                protocol: ir::PortProtocol::Http,
                listener_name: ir::names::listener("infra", "gw", 8080),
                route_table: Some(ir::RouteTable {
                    name: ir::names::route_table("infra", "gw", 8080, None),
                    virtual_hosts: vec![std::sync::Arc::new(ir::VirtualHost {
                        pre_routing: Vec::new(),
                        name: "*".into(),
                        domains: vec!["*".into()],
                        routes: vec![std::sync::Arc::new(route(path))],
                    })],
                }),
                tls_chains: vec![],
                forward: None,
            }],
        })],
        clusters: vec![],
    };
    let ok = aether_xds::validation_bootstrap(&aether_xds::build(&ir_with("^/x{10}$"))).unwrap();
    envoy_validate("regex-10", &ok).expect("a small bounded repetition is accepted");
    let bad = aether_xds::validation_bootstrap(&aether_xds::build(&ir_with("^/x{1001}$"))).unwrap();
    let err = envoy_validate("regex-1001", &bad).expect_err("Envoy must reject x{1001}");
    assert!(err.contains("x{1001}") || err.contains("regex"), "{err}");
}

#[test]
fn the_ads_bootstrap_passes_envoy_validate() {
    for (xds, admin, delta, stats) in [
        ("127.0.0.1:18000", "127.0.0.1:9901", false, None),
        (
            "xds.aether-system.svc:18000",
            "localhost:9901",
            true,
            Some("0.0.0.0:19004"),
        ),
        ("unix:/run/aether-edge/xds.sock", "[::1]:9901", false, None),
    ] {
        let yaml = aether_xds::bootstrap(&aether_xds::BootstrapOptions {
            node_id: "edge-test".into(),
            cluster: "aether-edge".into(),
            xds_address: xds.into(),
            admin_address: admin.into(),
            delta,
            max_heap_bytes: aether_xds::bootstrap::DEFAULT_MAX_HEAP_BYTES,
            stats_address: stats.map(String::from),
        });
        envoy_validate(
            &format!("bootstrap-{}", xds.replace([':', '/'], "_")),
            &yaml,
        )
        .unwrap_or_else(|e| panic!("bootstrap for {xds}: {e}"));
    }
}
