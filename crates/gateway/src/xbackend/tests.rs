//! Tests of `xbackend.rs` and `resolve.rs`: the owned Service, what the CRD
//! refuses, and how each protocol is spoken per route kind.

use super::*;
use crate::backend::{BackendRef, Backends, Upstream};
use crate::vocabulary::route;
use aether_ir::{Discovery, RouteKind, UpstreamProtocol};

fn store(yaml: &str) -> Store {
    let mut s = Store::default();
    s.add_yaml("t.yaml", yaml).unwrap();
    s
}

fn xbackend(ns: &str, name: &str, uid: Option<&str>, spec: &str) -> String {
    let uid = uid.map_or(String::new(), |u| format!(", uid: {u}"));
    format!(
        "apiVersion: gateway.networking.x-k8s.io/v1alpha1\nkind: XBackend\nmetadata: {{name: {name}, namespace: {ns}{uid}}}\nspec:\n{spec}---\n"
    )
}

const SELECTOR: &str = "  type: EndpointSelector\n  endpointSelector: {matchLabels: {app: a}}\n  port: {number: 8080}\n";

fn service(ns: &str, name: &str, owner: &str, uid: &str, created: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\n  creationTimestamp: \"{created}\"\n  \
         ownerReferences: [{{apiVersion: gateway.networking.x-k8s.io/v1alpha1, kind: XBackend, name: {owner}, uid: \"{uid}\"}}]\n\
         spec: {{ports: [{{port: 8080}}]}}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: {name}}}\n\
         addressType: IPv4\nports: [{{port: 8080}}]\nendpoints: [{{addresses: [\"10.0.0.1\"]}}]\n---\n"
    )
}

fn owner_of(s: &Store, ns: &str, name: &str) -> Option<String> {
    let key = ObjectRef::new(ns, name);
    owned_service(s, &key, s.get::<XBackend>(ns, name).unwrap()).map(|k| k.name)
}

#[test]
fn the_owned_service_is_found_by_uid_else_by_name_and_the_oldest_wins() {
    let s = store(&format!(
        "{}{}{}{}{}{}",
        xbackend("apps", "by-uid", Some("u1"), SELECTOR),
        xbackend("apps", "by-name", None, SELECTOR),
        service("apps", "stale", "by-uid", "u0", "2026-01-01T00:00:00Z"),
        service("apps", "current", "by-uid", "u1", "2026-02-01T00:00:00Z"),
        service("apps", "newer", "by-name", "", "2026-03-01T00:00:00Z"),
        service("apps", "older", "by-name", "", "2026-01-01T00:00:00Z"),
    ));
    assert_eq!(owner_of(&s, "apps", "by-uid").as_deref(), Some("current"));
    assert_eq!(owner_of(&s, "apps", "by-name").as_deref(), Some("older"));
    // Another namespace's Service owns nothing here.
    let s = store(&format!(
        "{}{}",
        xbackend("apps", "x", None, SELECTOR),
        service("other", "x-svc", "x", "", "2026-01-01T00:00:00Z"),
    ));
    assert_eq!(owner_of(&s, "apps", "x"), None);
}

#[test]
fn an_external_hostname_is_a_dns_name_outside_the_cluster() {
    for bad in [
        "10.0.0.1",
        "::1",
        "[::1]",
        "web.apps.svc.cluster.local",
        "web.apps.svc.Cluster.Local.",
        "*.example.com",
    ] {
        let r = external_hostname(bad);
        assert_eq!(r.map_err(|e| e.0), Err(Reason::Invalid), "{bad}");
    }
    assert_eq!(
        external_hostname("API.example.com"),
        Ok("api.example.com".into())
    );
    for local in ["localhost", "LocalHost.", "admin.localhost"] {
        let r = external_hostname(local);
        assert_eq!(r.map_err(|e| e.0), Err(Reason::UnsupportedValue), "{local}");
    }
}

/// Off by default: a tenant's XBackend could name any host the edge reaches.
#[test]
fn external_hostnames_are_served_only_where_the_edge_allows_them() {
    let s = store(&xbackend("apps", "x", None, EXTERNAL_TLS));
    let x = s.get::<XBackend>("apps", "x").unwrap();
    let key = ObjectRef::new("apps", "x");
    let off = model(&s, &key, x, false);
    let (reason, message) = off.not_accepted.unwrap();
    assert_eq!(reason, Reason::UnsupportedValue);
    assert!(
        message.contains("--allow-external-hostname-backends"),
        "{message}"
    );
    let on = model(&s, &key, x, true);
    assert_eq!(on.not_accepted, None);
    let r = BackendRef {
        group: Some(GROUP),
        kind: Some(KIND),
        name: "x",
        namespace: None,
        port: None,
    };
    let got = Backends::new(&s).resolve(RouteKind::Http, "apps", r, Upstream::Http);
    assert!(got.is_err(), "served without the edge's allowance: {got:?}");
}

/// Resolves a ref to XBackend apps/x (spec `spec`) from a route of `kind`,
/// its endpoints filled as a translation's last phase does.
fn resolve_x(
    spec: &str,
    kind: RouteKind,
    upstream: Upstream,
    port: Option<i32>,
) -> Result<Arc<aether_ir::Cluster>, route::Reason> {
    let s = store(&format!(
        "{}{}",
        xbackend("apps", "x", None, spec),
        service("apps", "x-svc", "x", "", "2026-01-01T00:00:00Z"),
    ));
    let backends = Backends::new(&s).allowing_external_hostnames(true);
    let r = BackendRef {
        group: Some(GROUP),
        kind: Some(KIND),
        name: "x",
        namespace: None,
        port,
    };
    let index = crate::backend::BackendIndex::new(&s);
    backends
        .resolve(kind, "apps", r, upstream)
        .map(|c| {
            Arc::new(aether_ir::Cluster {
                endpoints: index.endpoints(&c.endpoints_from),
                ..aether_ir::Cluster::clone(&c)
            })
        })
        .map_err(|e| e.reason())
}

use std::sync::Arc;

const EXTERNAL_TLS: &str = "  type: ExternalHostname\n  externalHostname: {hostname: api.example.com}\n  port: {number: 443}\n  \
     tls: {mode: ServerOnly, validation: {hostname: api.example.com, wellKnownCACertificates: System}}\n";

#[test]
fn each_protocol_is_spoken_as_its_route_kind_allows() {
    let with = |p: &str| format!("{EXTERNAL_TLS}  protocol: {p}\n");
    let alpn = |c: &aether_ir::Cluster| c.tls.as_ref().unwrap().alpn.clone();
    let h2 = resolve_x(&with("HTTP2"), RouteKind::Http, Upstream::Http, None).unwrap();
    assert_eq!(
        (h2.protocol, alpn(&h2)),
        (UpstreamProtocol::H2c, vec!["h2".into()])
    );
    let wss = resolve_x(&with("WSS"), RouteKind::Http, Upstream::Http, None).unwrap();
    assert_eq!(
        (wss.protocol, alpn(&wss)),
        (UpstreamProtocol::Http1, vec!["http/1.1".into()])
    );
    assert_eq!(
        wss.discovery,
        Discovery::Dns {
            hostname: "api.example.com".into()
        }
    );
    let grpc = resolve_x(EXTERNAL_TLS, RouteKind::Grpc, Upstream::Grpc, None).unwrap();
    assert_eq!(grpc.protocol, UpstreamProtocol::H2c);
    let stream = resolve_x(&with("TCP"), RouteKind::Tcp, Upstream::Tcp, None).unwrap();
    assert_eq!(alpn(&stream), Vec::<String>::new());
    for (p, kind, upstream) in [
        ("TCP", RouteKind::Http, Upstream::Http),
        ("HTTP11", RouteKind::Grpc, Upstream::Grpc),
        ("WSS", RouteKind::Grpc, Upstream::Grpc),
        ("HTTP2", RouteKind::Tcp, Upstream::Tcp),
        ("MCP", RouteKind::Http, Upstream::Http),
        ("TCP", RouteKind::Udp, Upstream::Udp),
    ] {
        let got = resolve_x(&with(p), kind, upstream, None);
        assert_eq!(
            got.err(),
            Some(route::Reason::UnsupportedProtocol),
            "{p} {kind}"
        );
    }
    // TLS passthrough carries the client's TLS: no second TLS around it.
    let passthrough = resolve_x(&with("TCP"), RouteKind::Tls, Upstream::Tcp, None);
    assert_eq!(passthrough.err(), Some(route::Reason::UnsupportedValue));
}

#[test]
fn a_ref_port_must_be_the_xbackends_and_endpoints_come_by_its_number() {
    let c = resolve_x(SELECTOR, RouteKind::Http, Upstream::Http, Some(8080)).unwrap();
    assert_eq!(c.name, "edge_xb_apps_x_8080");
    assert_eq!(c.endpoints.len(), 1);
    let other = resolve_x(SELECTOR, RouteKind::Http, Upstream::Http, Some(9090));
    assert_eq!(other.err(), Some(route::Reason::BackendNotFound));
}

#[test]
fn across_namespaces_a_grant_must_name_the_xbackend_kind() {
    let grant = |to_kind: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: g, namespace: backends}}\nspec:\n  \
             from: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: apps}}]\n  \
             to: [{{group: gateway.networking.x-k8s.io, kind: {to_kind}}}]\n---\n"
        )
    };
    for (to_kind, ok) in [("XBackend", true), ("Service", false)] {
        let s = store(&format!(
            "{}{}{}",
            xbackend("backends", "x", None, SELECTOR),
            service("backends", "x-svc", "x", "", "2026-01-01T00:00:00Z"),
            grant(to_kind),
        ));
        let r = BackendRef {
            group: Some(GROUP),
            kind: Some(KIND),
            name: "x",
            namespace: Some("backends"),
            port: None,
        };
        let got = Backends::new(&s).resolve(RouteKind::Http, "apps", r, Upstream::Http);
        assert_eq!(got.is_ok(), ok, "{to_kind}: {got:?}");
    }
}
