use super::*;
use crate::service::REQUESTED_IPS_ANNOTATION;
use crate::service::allocate::parse;
use crate::service::reconcile::{diff, up_to_date};
use serde_json::json;

const NS: &str = "aether-ingress";

fn mk_class(name: &str, controller: &str) -> GatewayClass {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": name},
        "spec": {"controllerName": controller},
    }))
    .unwrap()
}

/// A Gateway with listeners given as (name, protocol, port).
fn mk_gateway(name: &str, class: &str, listeners: &[(&str, &str, u16)]) -> Gateway {
    let listeners: Vec<_> = listeners
        .iter()
        .map(|(n, proto, port)| json!({"name": n, "protocol": proto, "port": port}))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"namespace": "infra", "name": name},
        "spec": {"gatewayClassName": class, "listeners": listeners},
    }))
    .unwrap()
}

fn mk_store(gateways: Vec<Gateway>) -> Store {
    let mut store = Store::default();
    store.insert(mk_class("aether", "gateway.aether.io/edge"));
    store.insert(mk_class("other", "example.com/other"));
    for g in gateways {
        store.insert(g);
    }
    store
}

/// A store with our class (and another) and one Gateway `infra/name` of ours.
fn mk_store_of(name: &str, listeners: &[(&str, &str, u16)]) -> Store {
    mk_store(vec![mk_gateway(name, "aether", listeners)])
}

/// The Services `store` wants, with the default config and no IR.
fn desired(store: &Store) -> Vec<Service> {
    desired_services(store, &Ir::default(), &ServiceConfig::default())
}

fn ports_of(svc: &Service) -> Vec<(String, i32, String, IntOrString)> {
    let spec = svc.spec.as_ref().unwrap();
    spec.ports
        .iter()
        .flatten()
        .map(|p| {
            (
                p.name.clone().unwrap(),
                p.port,
                p.protocol.clone().unwrap(),
                p.target_port.clone().unwrap(),
            )
        })
        .collect()
}

#[test]
fn listeners_sharing_a_port_share_one_service_port() {
    let got = desired(&mk_store_of(
        "web",
        &[
            ("http-1", "HTTP", 80),
            ("http-2", "HTTP", 80),
            ("https-1", "HTTPS", 443),
            ("https-2", "HTTPS", 443),
        ],
    ));
    assert_eq!(got.len(), 1);
    let svc = &got[0];
    assert_eq!(
        ports_of(svc),
        vec![
            ("p-80".into(), 80, "TCP".into(), IntOrString::Int(20000)),
            ("p-443".into(), 443, "TCP".into(), IntOrString::Int(20001)),
        ]
    );
    let gw = ObjectRef::new("infra", "web");
    assert_eq!(svc.metadata.name, Some(service_name(&gw)));
    assert_eq!(svc.metadata.namespace.as_deref(), Some(NS));
    let labels = svc.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[GATEWAY_LABEL], "infra.web");
    let ann = svc.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann[GATEWAY_NAMESPACE_ANNOTATION], "infra");
    assert_eq!(ann[GATEWAY_NAME_ANNOTATION], "web");
    assert_eq!(
        parse(&ann[ALLOCATIONS_ANNOTATION]),
        Some(BTreeMap::from([(80, 20000), (443, 20001)]))
    );
    let spec = svc.spec.as_ref().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(
        spec.selector.as_ref(),
        Some(&ServiceConfig::default().selector)
    );
}

#[test]
fn ports_are_unique_sorted_and_named_after_the_port() {
    // Many listeners, shuffled ports, some shared: names and ports never repeat.
    let listeners: Vec<(String, &str, u16)> = (0..40u16)
        .map(|i| {
            (
                format!("l{i}"),
                ["HTTP", "HTTPS", "TLS"][usize::from(i % 3)],
                8000 + (i * 7) % 13,
            )
        })
        .collect();
    let refs: Vec<(&str, &str, u16)> = listeners
        .iter()
        .map(|(n, p, port)| (n.as_str(), *p, *port))
        .collect();
    let got = desired(&mk_store_of("many", &refs));
    let ports = ports_of(&got[0]);
    assert_eq!(ports.len(), 13);
    let mut names: Vec<&String> = ports.iter().map(|p| &p.0).collect();
    names.dedup();
    assert_eq!(names.len(), 13);
    assert!(ports.windows(2).all(|w| w[0].1 < w[1].1), "sorted by port");
    assert!(
        ports
            .iter()
            .all(|p| p.0 == port_name(u16::try_from(p.1).unwrap(), L4::Tcp))
    );
}

#[test]
fn only_gateways_of_our_class_with_a_served_listener_get_a_service() {
    let store = mk_store(vec![
        mk_gateway(
            "ours",
            "aether",
            &[("http", "HTTP", 80), ("sctp", "SCTP", 9)],
        ),
        mk_gateway("theirs", "other", &[("http", "HTTP", 80)]),
        mk_gateway("udp-only", "aether", &[("udp", "UDP", 53)]),
        mk_gateway("unknown-only", "aether", &[("x", "example.com/x", 7)]),
        mk_gateway("no-class", "missing", &[("http", "HTTP", 80)]),
    ]);
    let got = desired(&store);
    let by_name: BTreeMap<String, &Service> = got
        .iter()
        .map(|s| (s.metadata.name.clone().unwrap(), s))
        .collect();
    let ours = service_name(&ObjectRef::new("infra", "ours"));
    let udp = service_name(&ObjectRef::new("infra", "udp-only"));
    assert_eq!(by_name.keys().collect::<Vec<_>>(), {
        let mut want = vec![&ours, &udp];
        want.sort();
        want
    });
    assert_eq!(
        ports_of(by_name[&ours]),
        vec![("p-80".into(), 80, "TCP".into(), IntOrString::Int(20000))],
        "an unknown protocol gets no port"
    );
    assert_eq!(
        ports_of(by_name[&udp]),
        vec![("p-53-udp".into(), 53, "UDP".into(), IntOrString::Int(20001))]
    );
}

#[test]
fn tcp_and_udp_on_one_port_are_two_service_ports_on_one_envoy_port() {
    let got = desired(&mk_store_of(
        "dns",
        &[
            ("udp", "UDP", 53),
            ("tcp", "TCP", 53),
            ("tls", "TLS", 853),
            ("udp-2", "UDP", 5353),
            ("http", "HTTP", 80),
        ],
    ));
    let int = IntOrString::Int;
    assert_eq!(
        ports_of(&got[0]),
        vec![
            ("p-53".into(), 53, "TCP".into(), int(20000)),
            ("p-53-udp".into(), 53, "UDP".into(), int(20000)),
            ("p-80".into(), 80, "TCP".into(), int(20001)),
            ("p-853".into(), 853, "TCP".into(), int(20002)),
            ("p-5353-udp".into(), 5353, "UDP".into(), int(20003)),
        ]
    );
    let ann = got[0].metadata.annotations.as_ref().unwrap();
    assert_eq!(
        ann[ALLOCATIONS_ANNOTATION],
        "53=20000,80=20001,853=20002,5353=20003"
    );
}

#[test]
fn a_udp_listener_joining_a_tcp_port_keeps_its_envoy_port_across_restarts() {
    let cfg = ServiceConfig::default();
    let mut store = mk_store(vec![mk_gateway(
        "dns",
        "aether",
        &[("http", "HTTP", 80), ("tcp", "TCP", 53)],
    )]);
    let first = desired_services(&store, &Ir::default(), &cfg);
    let int = IntOrString::Int;
    assert_eq!(
        ports_of(&first[0]),
        vec![
            ("p-53".into(), 53, "TCP".into(), int(20000)),
            ("p-80".into(), 80, "TCP".into(), int(20001)),
        ]
    );
    store.insert(first[0].clone());
    store.insert(mk_gateway(
        "dns",
        "aether",
        &[("http", "HTTP", 80), ("tcp", "TCP", 53), ("udp", "UDP", 53)],
    ));
    let grown = desired_services(&store, &Ir::default(), &cfg);
    assert_eq!(
        ports_of(&grown[0]),
        vec![
            ("p-53".into(), 53, "TCP".into(), int(20000)),
            ("p-53-udp".into(), 53, "UDP".into(), int(20000)),
            ("p-80".into(), 80, "TCP".into(), int(20001)),
        ]
    );
    // A restart reads the allocation back from the Service: nothing moves, and
    // the applied Service is up to date whatever order the API server keeps.
    store.insert(grown[0].clone());
    assert_eq!(desired_services(&store, &Ir::default(), &cfg), grown);
    let mut reordered = grown[0].clone();
    reordered
        .spec
        .as_mut()
        .unwrap()
        .ports
        .as_mut()
        .unwrap()
        .reverse();
    assert!(up_to_date(&grown[0], &reordered));
    // The TCP listener goes: the UDP port keeps 20000.
    store.insert(mk_gateway(
        "dns",
        "aether",
        &[("http", "HTTP", 80), ("udp", "UDP", 53)],
    ));
    let shrunk = desired_services(&store, &Ir::default(), &cfg);
    assert_eq!(
        ports_of(&shrunk[0]),
        vec![
            ("p-53-udp".into(), 53, "UDP".into(), int(20000)),
            ("p-80".into(), 80, "TCP".into(), int(20001)),
        ]
    );
}

#[test]
fn a_protocol_change_on_a_port_is_not_up_to_date() {
    let want_tcp = desired(&mk_store_of("a", &[("l", "TCP", 53)])).remove(0);
    let want_udp = desired(&mk_store_of("a", &[("l", "UDP", 53)])).remove(0);
    assert!(!up_to_date(&want_udp, &want_tcp));
    assert!(!up_to_date(&want_tcp, &want_udp));
}

#[test]
fn ports_come_from_listeners_even_with_an_allocated_ir() {
    // The published IR carries Envoy ports: they must not become Service ports.
    let mut store = mk_store(vec![mk_gateway("web", "aether", &[("http", "HTTP", 80)])]);
    let cfg = ServiceConfig::default();
    let first = desired_services(&store, &Ir::default(), &cfg);
    for s in &first {
        store.insert(s.clone());
    }
    let ir: Ir = serde_json::from_value(json!({
        "gateways": [{"namespace": "infra", "name": "web", "addresses": ["0.0.0.0"], "ports": [
            {"port": 20000, "protocol": "HTTP", "listener_name": "edge_ls_infra_web_80"}
        ]}],
        "clusters": [],
    }))
    .unwrap();
    let again = desired_services(&store, &ir, &cfg);
    assert_eq!(again, first);
    let ports: Vec<i32> = ports_of(&again[0]).iter().map(|p| p.1).collect();
    assert_eq!(ports, vec![80]);
}

#[test]
fn the_record_carries_only_what_we_decide() {
    let mut gw = mk_gateway("web", "aether", &[("http", "HTTP", 80)]);
    gw.spec.infrastructure = Some(
        serde_json::from_value(json!({
            "labels": {"team": "edge", GATEWAY_LABEL: "spoofed"},
            "annotations": {"note": "hi", ALLOCATIONS_ANNOTATION: "80=1"},
        }))
        .unwrap(),
    );
    gw.spec.addresses = Some(serde_json::from_value(json!([{"value": "10.250.0.9"}])).unwrap());
    let got = desired(&mk_store(vec![gw]));
    let meta = &got[0].metadata;
    let labels = meta.labels.as_ref().unwrap();
    let ann = meta.annotations.as_ref().unwrap();
    assert_eq!(labels.keys().collect::<Vec<_>>(), vec![GATEWAY_LABEL]);
    assert_eq!(labels[GATEWAY_LABEL], "infra.web");
    assert_eq!(ann[ALLOCATIONS_ANNOTATION], "80=20000");
    assert!(!ann.contains_key("note") && !ann.contains_key(REQUESTED_IPS_ANNOTATION));
    // Not what clients reach: the public Service is (see public.rs).
    let spec = got[0].spec.as_ref().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
}

#[test]
fn applied_services_are_up_to_date_and_gone_gateways_are_collected() {
    let store = mk_store(vec![
        mk_gateway("a", "aether", &[("http", "HTTP", 80)]),
        mk_gateway("b", "aether", &[("http", "HTTP", 80)]),
    ]);
    let cfg = ServiceConfig::default();
    let first = desired_services(&store, &Ir::default(), &cfg);
    // As the API server returns them: defaults added, foreign labels kept.
    let mut existing: Vec<Service> = first.clone();
    for s in &mut existing {
        let spec = s.spec.as_mut().unwrap();
        spec.cluster_ip = Some("10.0.0.1".into());
        spec.session_affinity = Some("None".into());
        for p in spec.ports.iter_mut().flatten() {
            p.node_port = Some(31000);
        }
        s.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("added-by".into(), "someone".into());
    }
    let mut stale = existing[0].clone();
    stale.metadata.name = Some("edge-infra-deleted-0123456789".into());
    let mut foreign = existing[0].clone();
    foreign.metadata.name = Some("not-ours".into());
    foreign.metadata.labels = None;
    existing.push(stale);
    existing.push(foreign);
    let mut store = store;
    for s in &existing {
        store.insert(s.clone());
    }

    // Same store: same Services, nothing to write, the stale one goes.
    let again = desired_services(&store, &Ir::default(), &cfg);
    assert_eq!(again, first);
    let refs: Vec<&Service> = existing.iter().collect();
    let d = diff(&again, &refs, NS);
    assert!(d.apply.is_empty(), "{:?}", d.apply);
    assert_eq!(d.unchanged.len(), 2);
    let deleted: Vec<_> = d
        .delete
        .iter()
        .map(|s| s.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(deleted, vec!["edge-infra-deleted-0123456789".to_string()]);

    // Gateway b deleted: its Service is collected, a's is untouched.
    store.remove::<Gateway>("infra", "b");
    let fewer = desired_services(&store, &Ir::default(), &cfg);
    let d = diff(&fewer, &refs, NS);
    assert!(d.apply.is_empty());
    let deleted: Vec<_> = d
        .delete
        .iter()
        .map(|s| s.metadata.name.clone().unwrap())
        .collect();
    assert!(deleted.contains(&service_name(&ObjectRef::new("infra", "b"))));
    assert!(!deleted.contains(&service_name(&ObjectRef::new("infra", "a"))));
}

#[test]
fn a_changed_port_or_selector_is_not_up_to_date() {
    let want = desired(&mk_store_of("a", &[("http", "HTTP", 80)])).remove(0);
    assert!(up_to_date(&want, &want));
    let mut moved = want.clone();
    moved.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].target_port = Some(IntOrString::Int(1));
    assert!(!up_to_date(&want, &moved));
    let mut selector = want.clone();
    selector.spec.as_mut().unwrap().selector = Some(BTreeMap::new());
    assert!(!up_to_date(&want, &selector));
    let mut annotation = want.clone();
    annotation
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(ALLOCATIONS_ANNOTATION);
    assert!(!up_to_date(&want, &annotation));
}

#[test]
fn a_thousand_gateways_get_distinct_ports_and_keep_them() {
    let gateways: Vec<Gateway> = (0..1000)
        .map(|i| {
            mk_gateway(
                &format!("gw-{i:04}"),
                "aether",
                &[("a", "HTTP", 80), ("b", "HTTPS", 443)],
            )
        })
        .collect();
    let mut store = mk_store(gateways);
    let cfg = ServiceConfig::default();
    let first = desired_services(&store, &Ir::default(), &cfg);
    assert_eq!(first.len(), 1000);
    let targets: BTreeSet<i32> = first
        .iter()
        .flat_map(|s| ports_of(s).into_iter())
        .map(|p| match p.3 {
            IntOrString::Int(t) => t,
            IntOrString::String(s) => panic!("named targetPort {s}"),
        })
        .collect();
    assert_eq!(
        targets.len(),
        2000,
        "every (Gateway, port) has its own Envoy port"
    );
    assert_eq!(targets.last(), Some(&21999));
    for s in &first {
        store.insert(s.clone());
    }
    // Half the Gateways go, then come back: the survivors' ports do not move.
    let mut fewer = store.clone();
    for i in (0..1000).step_by(2) {
        fewer.remove::<Gateway>("infra", &format!("gw-{i:04}"));
    }
    let second = desired_services(&fewer, &Ir::default(), &cfg);
    assert_eq!(second.len(), 500);
    for s in &second {
        assert!(first.contains(s), "{:?} moved", s.metadata.name);
    }
    assert_eq!(desired_services(&store, &Ir::default(), &cfg), first);
}
