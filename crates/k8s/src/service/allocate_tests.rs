use super::*;
use crate::service::{GATEWAY_LABEL, GATEWAY_NAME_ANNOTATION, GATEWAY_NAMESPACE_ANNOTATION};
use aether_ir::{Gateway, Port, PortProtocol, names};
use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const NS: &str = "aether-ingress";

fn gw(name: &str) -> ObjectRef {
    ObjectRef::new("infra", name)
}

/// An edge Service for `g` recording `annotation` (if any) and targeting `targets`.
fn mk_edge_svc(g: &ObjectRef, annotation: Option<&str>, targets: &[(u16, u16)]) -> Service {
    let mut annotations = BTreeMap::from([
        (
            GATEWAY_NAMESPACE_ANNOTATION.to_string(),
            g.namespace.clone(),
        ),
        (GATEWAY_NAME_ANNOTATION.to_string(), g.name.clone()),
    ]);
    if let Some(a) = annotation {
        annotations.insert(ALLOCATIONS_ANNOTATION.into(), a.into());
    }
    Service {
        metadata: ObjectMeta {
            name: Some(service_name(g)),
            namespace: Some(NS.into()),
            labels: Some([(GATEWAY_LABEL.to_string(), "x".to_string())].into()),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(
                targets
                    .iter()
                    .map(|(p, t)| ServicePort {
                        port: i32::from(*p),
                        target_port: Some(IntOrString::Int(i32::from(*t))),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        status: None,
    }
}

fn mk_ir_gateway(name: &str, ports: &[u16]) -> Gateway {
    Gateway {
        namespace: "infra".into(),
        name: name.into(),
        addresses: vec!["127.0.0.1".into()],
        ports: ports
            .iter()
            .map(|p| Port {
                port: *p,
                protocol: PortProtocol::Http,
                listener_name: names::listener("infra", name, *p),
                route_table: None,
                tls_chains: vec![],
                forward: None,
            })
            .collect(),
    }
}

fn wanted(entries: &[(&str, &[u16])]) -> BTreeMap<ObjectRef, BTreeSet<u16>> {
    entries
        .iter()
        .map(|(n, ports)| (gw(n), ports.iter().copied().collect()))
        .collect()
}

fn cfg(range: (u16, u16)) -> ServiceConfig {
    ServiceConfig {
        port_range: range,
        ..ServiceConfig::default()
    }
}

#[test]
fn the_annotation_round_trips_and_rejects_garbage() {
    let m = BTreeMap::from([(443, 20001), (80, 20000)]);
    assert_eq!(format(&m), "80=20000,443=20001");
    assert_eq!(parse("80=20000,443=20001"), Some(m));
    assert_eq!(parse(""), Some(BTreeMap::new()));
    assert_eq!(parse("80=20000,443"), None);
    assert_eq!(parse("80=x"), None);
    assert_eq!(parse("80=70000"), None);
}

#[test]
fn allocations_are_read_back_from_edge_services() {
    let mut store = Store::default();
    store.insert(mk_edge_svc(
        &gw("a"),
        Some("80=20000,443=20001"),
        &[(80, 1), (443, 2)],
    ));
    // No annotation: the targetPorts are the record.
    store.insert(mk_edge_svc(&gw("b"), None, &[(8080, 20005)]));
    // Not an edge Service: wrong namespace, no label, or not the Gateway's own name.
    let mut elsewhere = mk_edge_svc(&gw("c"), Some("80=20002"), &[]);
    elsewhere.metadata.namespace = Some("default".into());
    store.insert(elsewhere);
    let mut unlabelled = mk_edge_svc(&gw("d"), Some("80=20003"), &[]);
    unlabelled.metadata.labels = None;
    store.insert(unlabelled);
    let mut misnamed = mk_edge_svc(&gw("e"), Some("80=20004"), &[]);
    misnamed.metadata.name = Some("copy-of-e".into());
    store.insert(misnamed);

    let got = allocations(&store, NS);
    let want: Allocations = BTreeMap::from([
        (gw("a"), BTreeMap::from([(80, 20000), (443, 20001)])),
        (gw("b"), BTreeMap::from([(8080, 20005)])),
    ]);
    assert_eq!(got, want);
    // Every port an edge Service uses is taken, stray copies included.
    assert_eq!(
        used_ports(&store, NS).into_iter().collect::<Vec<_>>(),
        vec![1, 2, 20000, 20001, 20004, 20005]
    );
}

#[test]
fn existing_allocations_are_kept_and_new_ones_take_the_lowest_free_port() {
    let mut store = Store::default();
    store.insert(mk_edge_svc(&gw("b"), Some("80=20001"), &[(80, 20001)]));
    store.insert(mk_edge_svc(&gw("old"), Some("80=20003"), &[(80, 20003)]));
    let want = wanted(&[("a", &[80, 443]), ("b", &[80, 8080]), ("c", &[80])]);
    let got = allocate(&store, &want, &cfg((20000, 20010)));
    let expect: Allocations = BTreeMap::from([
        (gw("a"), BTreeMap::from([(80, 20000), (443, 20002)])),
        (gw("b"), BTreeMap::from([(80, 20001), (8080, 20004)])),
        // 20003 still belongs to a Service not yet garbage-collected.
        (gw("c"), BTreeMap::from([(80, 20005)])),
    ]);
    assert_eq!(got, expect);
    // Same inputs, same answer.
    assert_eq!(allocate(&store, &want, &cfg((20000, 20010))), expect);
}

#[test]
fn allocations_are_stable_when_recorded_and_read_again() {
    // Allocate, record on Services, then allocate again from what was recorded
    // (a restart, or a new leader): nothing moves, and a new Gateway fills in.
    let want = wanted(&[("a", &[80, 443]), ("b", &[80])]);
    let first = allocate(&Store::default(), &want, &cfg((20000, 29999)));
    let mut store = Store::default();
    for (g, m) in &first {
        let targets: Vec<(u16, u16)> = m.iter().map(|(p, e)| (*p, *e)).collect();
        store.insert(mk_edge_svc(g, Some(&format(m)), &targets));
    }
    assert_eq!(allocations(&store, NS), first);
    let more = wanted(&[("a", &[80, 443]), ("aa", &[80]), ("b", &[80])]);
    let second = allocate(&store, &more, &cfg((20000, 29999)));
    for (g, m) in &first {
        assert_eq!(&second[g], m, "{g} kept its ports");
    }
    assert_eq!(second[&gw("aa")], BTreeMap::from([(80, 20003)]));
}

#[test]
fn a_port_no_longer_listened_on_is_dropped() {
    let mut store = Store::default();
    store.insert(mk_edge_svc(&gw("a"), Some("80=20000,443=20001"), &[]));
    let got = allocate(&store, &wanted(&[("a", &[80])]), &cfg((20000, 20010)));
    assert_eq!(
        got,
        BTreeMap::from([(gw("a"), BTreeMap::from([(80, 20000)]))])
    );
}

#[test]
fn a_doubly_recorded_port_goes_to_the_first_gateway_and_the_other_moves() {
    let mut store = Store::default();
    store.insert(mk_edge_svc(&gw("a"), Some("80=20000"), &[]));
    store.insert(mk_edge_svc(&gw("b"), Some("80=20000"), &[]));
    let got = allocate(
        &store,
        &wanted(&[("a", &[80]), ("b", &[80])]),
        &cfg((20000, 20010)),
    );
    assert_eq!(got[&gw("a")], BTreeMap::from([(80, 20000)]));
    assert_eq!(got[&gw("b")], BTreeMap::from([(80, 20001)]));
}

#[test]
fn an_exhausted_range_leaves_ports_unallocated() {
    let got = allocate(
        &Store::default(),
        &wanted(&[("a", &[80, 443]), ("b", &[80])]),
        &cfg((20000, 20001)),
    );
    assert_eq!(
        got,
        BTreeMap::from([(gw("a"), BTreeMap::from([(80, 20000), (443, 20001)]))])
    );
}

#[test]
fn apply_allocations_rewrites_ports_and_keeps_names() {
    let mut ir = Ir::new(
        vec![mk_ir_gateway("a", &[80, 443]), mk_ir_gateway("b", &[80])],
        vec![],
    );
    let allocs: Allocations = BTreeMap::from([
        (gw("a"), BTreeMap::from([(80, 20005), (443, 20001)])),
        (gw("b"), BTreeMap::from([(80, 20002), (9999, 20003)])),
    ]);
    let dropped = apply_allocations(&mut ir, &allocs, "0.0.0.0");
    assert!(dropped.is_empty(), "{dropped:?}");
    let a = &ir.gateways[0];
    assert_eq!(a.addresses, vec!["0.0.0.0".to_string()]);
    let ports: Vec<(u16, &str)> = a
        .ports
        .iter()
        .map(|p| (p.port, p.listener_name.as_str()))
        .collect();
    assert_eq!(
        ports,
        vec![
            (20001, "edge_ls_infra_a_443"),
            (20005, "edge_ls_infra_a_80")
        ]
    );
    assert_eq!(ir.gateways[1].ports[0].port, 20002);
}

#[test]
fn apply_allocations_takes_out_unallocated_and_conflicting_ports() {
    let mut ir = Ir::new(
        vec![
            mk_ir_gateway("a", &[80]),
            mk_ir_gateway("b", &[80, 443]),
            mk_ir_gateway("c", &[80, 8080]),
            mk_ir_gateway("d", &[80]),
        ],
        vec![],
    );
    let allocs: Allocations = BTreeMap::from([
        (gw("a"), BTreeMap::from([(80, 20000)])),
        // b's new listener on 443 is not allocated yet: 80 keeps serving.
        (gw("b"), BTreeMap::from([(80, 20001)])),
        // c's 80 collides with a's; 8080 is fine.
        (gw("c"), BTreeMap::from([(80, 20000), (8080, 20002)])),
    ]);
    let dropped = apply_allocations(&mut ir, &allocs, "0.0.0.0");
    let kept: Vec<(&str, Vec<(u16, &str)>)> = ir
        .gateways
        .iter()
        .map(|g| {
            let ports = g.ports.iter().map(|p| (p.port, p.listener_name.as_str()));
            (g.name.as_str(), ports.collect())
        })
        .collect();
    assert_eq!(
        kept,
        vec![
            ("a", vec![(20000, "edge_ls_infra_a_80")]),
            ("b", vec![(20001, "edge_ls_infra_b_80")]),
            ("c", vec![(20002, "edge_ls_infra_c_8080")]),
        ]
    );
    assert_eq!(
        dropped,
        vec![
            Unallocated::Missing {
                gateway: gw("b"),
                ports: vec![443]
            },
            Unallocated::Conflict {
                gateway: gw("c"),
                port: 80,
                envoy_port: 20000,
                other: gw("a")
            },
            Unallocated::Missing {
                gateway: gw("d"),
                ports: vec![80]
            },
        ]
    );
    assert!(dropped[1].to_string().contains("infra/a"));
}

/// An IR port of `gateway` on listener `port`: TCP, or UDP with its own listener name.
fn mk_l4_port(gateway: &str, port: u16, udp: bool) -> Port {
    let (protocol, listener_name) = if udp {
        (
            PortProtocol::Udp,
            names::udp_listener("infra", gateway, port),
        )
    } else {
        (PortProtocol::Tcp, names::listener("infra", gateway, port))
    };
    Port {
        port,
        protocol,
        listener_name,
        route_table: None,
        tls_chains: vec![],
        forward: None,
    }
}

#[test]
fn tcp_and_udp_on_one_listener_port_both_bind_its_envoy_port() {
    let mut dns = mk_ir_gateway("dns", &[]);
    dns.ports = vec![
        mk_l4_port("dns", 53, true),
        mk_l4_port("dns", 53, false),
        mk_l4_port("dns", 5353, true),
    ];
    // Another Gateway holding the same Envoy port (a corrupt record) conflicts
    // on the protocol it shares.
    let mut other = mk_ir_gateway("other", &[]);
    other.ports = vec![mk_l4_port("other", 54, true)];
    let mut ir = Ir::new(vec![dns, other], vec![]);
    let allocs: Allocations = BTreeMap::from([
        (gw("dns"), BTreeMap::from([(53, 20000)])),
        (gw("other"), BTreeMap::from([(54, 20000)])),
    ]);
    let dropped = apply_allocations(&mut ir, &allocs, "0.0.0.0");
    let bound: Vec<(u16, bool, &str)> = ir.gateways[0]
        .ports
        .iter()
        .map(|p| (p.port, p.protocol.is_udp(), p.listener_name.as_str()))
        .collect();
    assert_eq!(
        bound,
        vec![
            (20000, false, "edge_ls_infra_dns_53"),
            (20000, true, "edge_ls_infra_dns_53_udp"),
        ]
    );
    assert_eq!(
        dropped,
        vec![
            Unallocated::Missing {
                gateway: gw("dns"),
                ports: vec![5353]
            },
            Unallocated::Conflict {
                gateway: gw("other"),
                port: 54,
                envoy_port: 20000,
                other: gw("dns")
            },
        ]
    );
    assert_eq!(
        ir.gateways.len(),
        1,
        "a Gateway left with no port is removed"
    );
}
