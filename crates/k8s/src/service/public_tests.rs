use super::*;
use crate::service::reconcile_public::plan;
use crate::service::{
    ALLOCATIONS_ANNOTATION, GATEWAY_LABEL, desired_services, is_public_service, service_name,
};
use aether_ir::Ir;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use serde_json::json;

const EDGE: &str = "aether-ingress";

fn mk_gateway(name: &str, extra: serde_json::Value) -> Gateway {
    let mut spec = json!({"gatewayClassName": "aether",
        "listeners": [{"name": "http", "protocol": "HTTP", "port": 80},
                      {"name": "dns", "protocol": "UDP", "port": 53}]});
    spec.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"namespace": "infra", "name": name, "uid": format!("uid-{name}")},
        "spec": spec,
    }))
    .unwrap()
}

fn mk_slice(
    ns: &str,
    name: &str,
    service: &str,
    family: &str,
    eps: serde_json::Value,
) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name,
            "labels": {SERVICE_NAME_LABEL: service}},
        "addressType": family, "endpoints": eps,
    }))
    .unwrap()
}

fn given(gateways: Vec<Gateway>, slices: Vec<EndpointSlice>) -> (Store, Vec<Service>) {
    let mut store = Store::default();
    store.insert::<GatewayClass>(
        serde_json::from_value(json!({"metadata": {"name": "aether"},
            "spec": {"controllerName": "gateway.aether.io/edge"}}))
        .unwrap(),
    );
    gateways.into_iter().for_each(|g| store.insert(g));
    slices.into_iter().for_each(|s| store.insert(s));
    let records = desired_services(&store, &Ir::default(), &ServiceConfig::default());
    (store, records)
}

fn public_of(store: &Store, records: &[Service]) -> Public {
    desired_public(store, records, &ServiceConfig::default())
}

#[test]
fn the_public_service_sits_beside_the_gateway_with_its_infrastructure() {
    let gw = mk_gateway(
        "web",
        json!({
            "infrastructure": {
                "labels": {"team": "edge", PUBLIC_LABEL: "spoofed", GATEWAY_NAME_LABEL: "x"},
                "annotations": {"note": "hi", REQUESTED_IPS_ANNOTATION: "10.250.0.1"},
            },
            "addresses": [{"value": "10.250.0.9"}],
        }),
    );
    let (store, records) = given(vec![gw], vec![]);
    let public = public_of(&store, &records);
    assert_eq!(public.services.len(), 1);
    let svc = &public.services[0];
    let gw = ObjectRef::new("infra", "web");
    assert_eq!(svc.metadata.namespace.as_deref(), Some("infra"));
    assert_eq!(
        svc.metadata.name.as_deref(),
        Some(public_name(&gw).as_str())
    );
    let labels = svc.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["team"], "edge");
    assert_eq!(labels[PUBLIC_LABEL], "infra.web", "ours win");
    assert_eq!(labels[GATEWAY_NAME_LABEL], "web", "ours win");
    assert!(!labels.contains_key(GATEWAY_LABEL), "not a record");
    let ann = svc.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann["note"], "hi");
    assert_eq!(
        ann[REQUESTED_IPS_ANNOTATION], "10.250.0.9",
        "spec.addresses, not infrastructure"
    );
    assert!(!ann.contains_key(ALLOCATIONS_ANNOTATION));
    let owner = &svc.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("Gateway", "web", "uid-web")
    );
    let spec = svc.spec.as_ref().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
    assert_eq!(spec.selector, None, "its endpoints are ours to write");
    assert_eq!(
        spec.ports,
        records[0].spec.as_ref().unwrap().ports,
        "the record's ports"
    );
    assert!(is_public_service(svc));
}

#[test]
fn a_long_gateway_name_gets_no_gateway_name_label() {
    let long = "g".repeat(64);
    let (store, records) = given(vec![mk_gateway(&long, json!({}))], vec![]);
    let labels = public_of(&store, &records).services[0]
        .metadata
        .labels
        .clone()
        .unwrap();
    assert!(
        !labels.contains_key(GATEWAY_NAME_LABEL),
        "label values stop at 63"
    );
}

#[test]
fn slices_copy_the_records_edge_endpoints_at_the_envoy_ports() {
    let record = service_name(&ObjectRef::new("infra", "web"));
    let a =
        json!({"addresses": ["10.0.0.2"], "nodeName": "node-b", "conditions": {"ready": false}});
    let b = json!({"addresses": ["10.0.0.1"], "nodeName": "node-a", "conditions": {"ready": true}});
    let slices = vec![
        mk_slice(EDGE, "r-1", &record, "IPv4", json!([a.clone()])),
        mk_slice(EDGE, "r-2", &record, "IPv4", json!([b.clone(), a.clone()])),
        mk_slice(
            EDGE,
            "r-6",
            &record,
            "IPv6",
            json!([{"addresses": ["fd00::1"]}]),
        ),
        // Not the record's: a tenant's slice naming it, and another Service's.
        mk_slice(
            "infra",
            "forged",
            &record,
            "IPv4",
            json!([{"addresses": ["6.6.6.6"]}]),
        ),
        mk_slice(
            EDGE,
            "other",
            "other",
            "IPv4",
            json!([{"addresses": ["10.9.9.9"]}]),
        ),
    ];
    let (store, records) = given(vec![mk_gateway("web", json!({}))], slices);
    let public = public_of(&store, &records);
    let got: Vec<(&str, &str, Vec<Vec<String>>)> = public
        .slices
        .iter()
        .map(|s| {
            (
                s.metadata.name.as_deref().unwrap(),
                s.address_type.as_str(),
                s.endpoints.iter().map(|e| e.addresses.clone()).collect(),
            )
        })
        .collect();
    let name = public_name(&ObjectRef::new("infra", "web"));
    assert_eq!(
        got,
        vec![
            (
                format!("{name}-ipv4").as_str(),
                "IPv4",
                vec![vec!["10.0.0.1".to_string()], vec!["10.0.0.2".to_string()]]
            ),
            (
                format!("{name}-ipv6").as_str(),
                "IPv6",
                vec![vec!["fd00::1".to_string()]]
            ),
        ]
    );
    let v4 = &public.slices[0];
    assert_eq!(
        v4.endpoints[1].conditions.as_ref().unwrap().ready,
        Some(false)
    );
    assert_eq!(v4.endpoints[0].node_name.as_deref(), Some("node-a"));
    let labels = v4.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[SERVICE_NAME_LABEL], name);
    assert_eq!(labels[SLICE_MANAGER_LABEL], SLICE_MANAGER);
    let ports: Vec<(Option<&str>, Option<i32>, Option<&str>)> = v4
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.as_deref(), p.port, p.protocol.as_deref()))
        .collect();
    assert_eq!(
        ports,
        vec![
            (Some("p-53-udp"), Some(20000), Some("UDP")),
            (Some("p-80"), Some(20001), Some("TCP")),
        ]
    );
    assert!(public.slices.iter().all(is_public_slice));
}

#[test]
fn a_gateway_nobody_serves_yet_has_an_empty_ipv4_slice() {
    let (store, records) = given(vec![mk_gateway("web", json!({}))], vec![]);
    let public = public_of(&store, &records);
    assert_eq!(public.slices.len(), 1);
    assert_eq!(public.slices[0].address_type, "IPv4");
    assert!(public.slices[0].endpoints.is_empty());
}

#[test]
fn only_the_gateways_own_namespace_and_name_make_a_public_service() {
    let (store, records) = given(vec![mk_gateway("web", json!({}))], vec![]);
    let mut svc = public_of(&store, &records).services.remove(0);
    assert!(is_public_service(&svc));
    let mut elsewhere = svc.clone();
    elsewhere.metadata.namespace = Some("tenant".into());
    assert!(
        !is_public_service(&elsewhere),
        "a Service claiming a Gateway of another namespace"
    );
    svc.metadata.name = Some("web".into());
    assert!(!is_public_service(&svc), "not the Gateway's public name");
}

#[test]
fn a_name_held_by_someone_else_is_not_written_and_stale_ones_of_ours_go() {
    let (store, records) = given(
        vec![mk_gateway("api", json!({})), mk_gateway("web", json!({}))],
        vec![],
    );
    let public = public_of(&store, &records);
    assert_eq!(public.services.len(), 2, "sorted: api, web");
    let mut existing: BTreeMap<ObjectRef, std::sync::Arc<Service>> = BTreeMap::new();
    let key = |s: &Service| {
        ObjectRef::new(
            s.metadata.namespace.as_deref().unwrap(),
            s.metadata.name.as_deref().unwrap(),
        )
    };
    // web's public name is taken by a user's Service; api's is ours and as wanted;
    // a Gateway that is gone left one of ours; a user's Service is never touched.
    let mut users = public.services[1].clone();
    users.metadata.labels = None;
    let api = public.services[0].clone();
    let (store_gone, records_gone) = given(vec![mk_gateway("gone", json!({}))], vec![]);
    let gone = public_of(&store_gone, &records_gone).services.remove(0);
    let mut unrelated = users.clone();
    unrelated.metadata.name = Some("unrelated".into());
    for s in [&users, &api, &gone, &unrelated] {
        existing.insert(key(s), std::sync::Arc::new(s.clone()));
    }
    let p = plan(&public.services, &existing, is_public_service, |d, c| {
        crate::service::reconcile::up_to_date(d, c)
    });
    assert!(p.apply.is_empty(), "{:?}", p.apply);
    assert_eq!(p.unchanged, vec![key(&api)]);
    assert_eq!(
        p.taken.iter().map(key).collect::<Vec<_>>(),
        vec![key(&users)]
    );
    assert_eq!(
        p.delete.iter().map(key).collect::<Vec<_>>(),
        vec![key(&gone)]
    );
}

#[test]
fn a_changed_endpoint_is_not_up_to_date() {
    let record = service_name(&ObjectRef::new("infra", "web"));
    let ready = json!([{"addresses": ["10.0.0.1"], "conditions": {"ready": true}}]);
    let unready = json!([{"addresses": ["10.0.0.1"], "conditions": {"ready": false}}]);
    let (s1, r1) = given(
        vec![mk_gateway("web", json!({}))],
        vec![mk_slice(EDGE, "r", &record, "IPv4", ready)],
    );
    let (s2, r2) = given(
        vec![mk_gateway("web", json!({}))],
        vec![mk_slice(EDGE, "r", &record, "IPv4", unready)],
    );
    let (a, b) = (
        public_of(&s1, &r1).slices.remove(0),
        public_of(&s2, &r2).slices.remove(0),
    );
    assert!(slice_up_to_date(&a, &a));
    assert!(!slice_up_to_date(&a, &b));
}

#[test]
fn a_gateway_whose_every_address_is_cluster_scoped_gets_no_load_balancer() {
    let cluster = mk_gateway(
        "internal",
        json!({"addresses": [{"type": "IPAddress", "routability": "Cluster", "value": "10.96.0.10"}]}),
    );
    let mixed = mk_gateway(
        "web",
        json!({"addresses": [{"routability": "Cluster"}, {"value": "10.250.0.9"}]}),
    );
    let (store, records) = given(vec![cluster, mixed], vec![]);
    let public = public_of(&store, &records);
    let by_name = |gw: &str| {
        let name = public_name(&ObjectRef::new("infra", gw));
        public
            .services
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(name.as_str()))
            .unwrap()
    };
    let internal = by_name("internal");
    let spec = internal.spec.as_ref().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(spec.allocate_load_balancer_node_ports, None);
    let ann = internal.metadata.annotations.as_ref().unwrap();
    assert!(
        !ann.contains_key(REQUESTED_IPS_ANNOTATION),
        "a Cluster address is not asked of the load balancer"
    );
    let web = by_name("web");
    assert_eq!(
        web.spec.as_ref().unwrap().type_.as_deref(),
        Some("LoadBalancer")
    );
    let ann = web.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann[REQUESTED_IPS_ANNOTATION], "10.250.0.9");
}

/// The public Service of Gateway `infra/<gw>` in `public`.
fn public_service<'a>(public: &'a Public, gw: &str) -> &'a Service {
    let name = public_name(&ObjectRef::new("infra", gw));
    let mut of_gw = public.services.iter();
    of_gw
        .find(|s| s.metadata.name.as_deref() == Some(name.as_str()))
        .unwrap()
}

#[test]
fn the_traffic_policy_and_class_set_go_on_load_balanced_services_only() {
    let cluster = mk_gateway(
        "internal",
        json!({"addresses": [{"type": "IPAddress", "routability": "Cluster"}]}),
    );
    let (store, records) = given(vec![cluster, mk_gateway("web", json!({}))], vec![]);
    let cfg = ServiceConfig {
        external_traffic_policy: Some("Local".into()),
        load_balancer_class: Some("example.com/lb".into()),
        ..ServiceConfig::default()
    };
    let public = desired_public(&store, &records, &cfg);
    let web = public_service(&public, "web").spec.clone().unwrap();
    assert_eq!(web.external_traffic_policy.as_deref(), Some("Local"));
    assert_eq!(web.load_balancer_class.as_deref(), Some("example.com/lb"));
    let internal = public_service(&public, "internal").spec.clone().unwrap();
    assert_eq!(
        internal.external_traffic_policy, None,
        "a ClusterIP Service"
    );
    assert_eq!(internal.load_balancer_class, None);
    // A Service left at Local once the setting is dropped is applied again.
    let default = desired_public(&store, &records, &ServiceConfig::default());
    let desired = public_service(&default, "web");
    let mut current = desired.clone();
    assert!(crate::service::reconcile::up_to_date(desired, &current));
    current.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
    assert!(!crate::service::reconcile::up_to_date(desired, &current));
}
