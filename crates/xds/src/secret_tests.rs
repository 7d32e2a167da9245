//! Certificates as SDS secrets, through the whole build: a rotation moves the
//! secret alone, no listener or cluster carries a key, and the status gate
//! waits for the secrets each object reads.

use crate::{Part, ResourceType, Snapshot, build};
use aether_ir as ir;

const CLUSTER: &str = "edge_cl_app_web_443_for_infra_gw";
const LISTENER: &str = "edge_ls_infra_gw_443";
const CERT: &str = "edge_cert_infra_cert";
const CA: &str = "edge_ca_infra_ca";
const BACKEND_CA: &str = "edge_ca_app_backend-ca";
const ROUTE: &str = "HTTPRoute/app/web";

/// Gateway infra/gw: an HTTPS listener presenting Secret infra/cert and asking
/// for client certificates from ConfigMap infra/ca, its route to a TLS backend
/// that gets the same certificate as the Gateway's client certificate.
fn tls_ir(key: &str) -> ir::Ir {
    let cert = ir::Certificate {
        secret: "infra/cert".into(),
        certificate_chain: "-----CHAIN-----".into(),
        private_key: key.into(),
    };
    let route = ir::Route {
        name: format!("{ROUTE}/rule/0/match/0"),
        matcher: ir::RouteMatch::prefix("/"),
        action: ir::RouteAction::Forward(ir::Forward {
            backends: vec![ir::WeightedBackend::new(CLUSTER, 1)],
            ..Default::default()
        }),
        request_headers: Default::default(),
        response_headers: Default::default(),
    };
    let chain = ir::TlsChain {
        listener: "https".into(),
        server_names: vec![],
        certificates: vec![cert.clone()],
        client_validation: Some(ir::ClientValidation {
            trusted_ca: ir::CaBundle {
                sources: vec![ir::ObjectRef::new("infra", "ca")],
                pem: "-----CLIENT CA-----".into(),
            },
            allow_insecure_fallback: false,
        }),
        route_table: Some(ir::RouteTable {
            name: "edge_rt_infra_gw_443_https".into(),
            virtual_hosts: vec![std::sync::Arc::new(ir::VirtualHost {
                pre_routing: Vec::new(),
                name: "*".into(),
                domains: vec!["*".into()],
                routes: vec![std::sync::Arc::new(route)],
            })],
        }),
        forward: None,
    };
    let gateway = ir::Gateway {
        namespace: "infra".into(),
        name: "gw".into(),
        addresses: vec!["10.0.0.1".into()],
        ports: vec![ir::Port {
            port: 443,
            protocol: ir::PortProtocol::Https,
            listener_name: LISTENER.into(),
            route_table: None,
            tls_chains: vec![chain],
            forward: None,
        }],
    };
    let cluster = ir::Cluster {
        name: CLUSTER.into(),
        service: ir::ObjectRef::new("app", "web"),
        port: 443,
        protocol: ir::UpstreamProtocol::Http1,
        endpoints: vec![ir::Endpoint {
            address: "10.1.0.1".into(),
            port: 8443,
            weight: 0,
        }],
        endpoints_from: ir::EndpointsFrom::Nowhere,
        tls: Some(ir::UpstreamTls {
            sni: "web.example.com".into(),
            trusted_ca: ir::TrustedCa::Pem(ir::CaBundle {
                sources: vec![ir::ObjectRef::new("app", "backend-ca")],
                pem: "-----BACKEND CA-----".into(),
            }),
            subject_alt_names: vec![ir::SubjectAltName::Dns("web.example.com".into())],
            client_certificate: Some(cert),
            alpn: vec![],
        }),
        backend_kind: ir::BackendKind::Service,
        discovery: ir::Discovery::Eds,
        session: None,
    };
    ir::Ir::new(vec![gateway], vec![cluster])
}

fn body(s: &Snapshot, ty: ResourceType, name: &str) -> Vec<u8> {
    s.resources[&ty][name].body.value.clone()
}

#[test]
fn a_rotated_certificate_changes_its_secret_and_nothing_else() {
    let (before, after) = (
        build(&tls_ir("-----KEY 1-----")),
        build(&tls_ir("-----KEY 2-----")),
    );
    assert_ne!(
        before.version_of(ResourceType::Secret, CERT),
        after.version_of(ResourceType::Secret, CERT)
    );
    for ty in [
        ResourceType::Listener,
        ResourceType::Route,
        ResourceType::Cluster,
        ResourceType::Endpoint,
    ] {
        for r in before.of_type(ty) {
            assert_eq!(
                r.body.value,
                body(&after, ty, &r.name),
                "{} {}",
                ty.short_name(),
                r.name
            );
        }
    }
    for name in [CA, BACKEND_CA] {
        assert_eq!(
            before.version_of(ResourceType::Secret, name),
            after.version_of(ResourceType::Secret, name)
        );
    }
    // Used by the listener and the cluster: one resource.
    let names: Vec<&str> = after
        .of_type(ResourceType::Secret)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(names, vec![BACKEND_CA, CA, CERT]);
}

#[test]
fn no_listener_or_cluster_carries_a_private_key() {
    let s = build(&tls_ir("-----THE PRIVATE KEY-----"));
    let has_key = |ty| {
        s.of_type(ty).any(|r| {
            r.body
                .value
                .windows(b"THE PRIVATE KEY".len())
                .any(|w| w == b"THE PRIVATE KEY")
        })
    };
    for ty in [
        ResourceType::Listener,
        ResourceType::Route,
        ResourceType::Cluster,
        ResourceType::Endpoint,
    ] {
        assert!(!has_key(ty), "a {} resource holds the key", ty.short_name());
    }
    assert!(has_key(ResourceType::Secret), "the secret holds it");
}

#[test]
fn clusters_reference_their_secrets_and_listeners_do_not() {
    let s = build(&tls_ir("K"));
    let refs = |ty: ResourceType, name: &str| -> Vec<String> {
        s.resources[&ty][name]
            .references
            .iter()
            .map(|(ty, name)| format!("{}:{name}", ty.short_name()))
            .collect()
    };
    assert_eq!(
        refs(ResourceType::Cluster, CLUSTER),
        vec![
            format!("EDS:{CLUSTER}"),
            format!("SDS:{BACKEND_CA}"),
            format!("SDS:{CERT}"),
        ]
    );
    // Envoy asks for a listener's secrets only once it has the listener.
    assert!(
        s.resources[&ResourceType::Listener][LISTENER]
            .references
            .is_empty()
    );
}

#[test]
fn the_gateway_and_its_route_wait_for_the_secrets_they_read() {
    let s = build(&tls_ir("K"));
    let gw = &s.gateways[&ir::ObjectRef::new("infra", "gw")];
    for name in [CERT, CA, BACKEND_CA] {
        assert!(
            gw.members
                .contains(&(ResourceType::Secret, name.to_string())),
            "{name} is a member"
        );
    }
    let needs = |parts: &crate::ObjectParts, name: &str| {
        parts.parts.get(ResourceType::Secret, name) == Some(&Part::Whole)
    };
    // The Gateway: its listener's certificate and client CAs.
    assert!(needs(&gw.own, CERT) && needs(&gw.own, CA));
    assert!(!needs(&gw.own, BACKEND_CA));
    // The route: served on that listener, to that TLS backend.
    let route = &gw.routes[ROUTE];
    for name in [CERT, CA, BACKEND_CA] {
        assert!(needs(route, name), "the route needs {name}");
    }
    // A rotation: the same parts, a new fingerprint (the secret's version).
    let rotated = build(&tls_ir("K2"));
    let gw2 = &rotated.gateways[&ir::ObjectRef::new("infra", "gw")];
    assert_eq!(gw.own.parts, gw2.own.parts);
    assert_ne!(gw.own.fingerprint, gw2.own.fingerprint);
    assert_ne!(route.fingerprint, gw2.routes[ROUTE].fingerprint);
    assert_ne!(gw.hash, gw2.hash);
}

#[test]
fn a_warm_builder_gives_what_a_fresh_build_gives_after_a_rotation() {
    let mut warm = crate::Builder::default();
    warm.build(&tls_ir("K1"));
    assert_eq!(warm.build(&tls_ir("K2")), build(&tls_ir("K2")));
}
