//! Edge Services against a real kube-apiserver: valid by construction (the API
//! server's own validation accepts them), one port per distinct (listener port,
//! L4 protocol) — TCP 53 and UDP 53 on one Service included —
//! no write when nothing changed, infrastructure labels in and out, 20 Gateways
//! at once with distinct allocations, addresses from load-balancer ingress written
//! by the test acting as the load balancer, garbage collection, and allocations
//! kept across a restart.

use crate::support::{
    EDGE, addressed, create, edge_services, load, mk_gateway, pass, ports, public_pass,
    public_services, seed, service_mode,
};
use aether_gateway::status::condition;
use aether_gateway::translate;
use aether_gateway::vocabulary::gateway::{Reason, Type};
use aether_ir::ObjectRef;
use aether_k8s::service::{
    self, ALLOCATIONS_ANNOTATION, ServiceConfig, allocations, apply_allocations, public_name,
    service_name,
};
use aether_testkit::ApiServer;
use gateway_api::apis::experimental::gateways::Gateway;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// (listener name, protocol, port)
type Listener = (&'static str, &'static str, u16);

/// An API server with the edge namespace, the class, and Gateways `gateways` in
/// namespace `ns`, created at once.
async fn given_gateways(ns: &str, gateways: &[(&str, &[Listener])]) -> (ApiServer, kube::Client) {
    let server = ApiServer::start().await;
    let client = server.client();
    seed(&client, &[ns]).await;
    let api = Api::<Gateway>::namespaced(client.clone(), ns);
    futures::future::join_all(
        gateways
            .iter()
            .map(|(name, listeners)| create(&api, mk_gateway(ns, name, listeners))),
    )
    .await;
    (server, client)
}

fn edge_name(ns: &str, gateway: &str) -> String {
    service_name(&ObjectRef::new(ns, gateway))
}

fn public(ns: &str, gateway: &str) -> String {
    public_name(&ObjectRef::new(ns, gateway))
}

/// Every port of `svc`'s spec has a node port: the API server took the
/// LoadBalancer Service as it is.
fn then_a_load_balancer_with_node_ports(svc: &Service, what: &str) {
    let spec = svc.spec.as_ref().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
    assert!(
        spec.ports.iter().flatten().all(|p| p.node_port.is_some()),
        "node ports allocated{what}"
    );
}

#[tokio::test]
async fn listeners_sharing_ports_give_a_service_the_api_server_accepts() {
    let listeners: &[Listener] = &[
        ("http-a", "HTTP", 80),
        ("http-b", "HTTP", 80),
        ("https-a", "HTTPS", 443),
        ("https-b", "HTTPS", 443),
    ];
    let (_server, client) = given_gateways("infra", &[("web", listeners)]).await;
    let version = the_first_pass_writes_one_port_per_listener_port(&client).await;
    nothing_changed_means_no_write(&client, version).await;
    infrastructure_labels_go_in_and_out(&client).await;
}

/// Returns the Service's resourceVersion.
async fn the_first_pass_writes_one_port_per_listener_port(client: &kube::Client) -> Option<String> {
    let report = pass(client, &ServiceConfig::default())
        .await
        .expect("the API server accepts the Service");
    let name = edge_name("infra", "web");
    assert_eq!(report.applied, vec![name.clone()]);
    let svc = &edge_services(client).await[&name];
    assert_eq!(
        ports(svc),
        vec![
            ("p-80".into(), 80, "TCP".into(), 20000),
            ("p-443".into(), 443, "TCP".into(), 20001),
        ]
    );
    assert_eq!(
        svc.spec.as_ref().unwrap().type_.as_deref(),
        Some("ClusterIP")
    );
    let report = public_pass(client, &ServiceConfig::default())
        .await
        .expect("the API server accepts the public Service and its slice");
    assert_eq!(report.applied.len(), 2, "{report:?}");
    let outside = &public_services(client).await[&public("infra", "web")];
    assert_eq!(outside.metadata.namespace.as_deref(), Some("infra"));
    assert_eq!(ports(outside), ports(svc), "the record's ports");
    then_a_load_balancer_with_node_ports(outside, "");
    let ann = svc.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann[ALLOCATIONS_ANNOTATION], "80=20000,443=20001");
    let managers: Vec<_> = svc
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.as_deref())
        .collect();
    assert!(managers.contains(&service::FIELD_MANAGER), "{managers:?}");
    svc.metadata.resource_version.clone()
}

async fn nothing_changed_means_no_write(client: &kube::Client, version: Option<String>) {
    let name = edge_name("infra", "web");
    let report = pass(client, &ServiceConfig::default()).await.unwrap();
    assert!(report.applied.is_empty(), "{report:?}");
    assert_eq!(report.unchanged, vec![name.clone()]);
    let again = &edge_services(client).await[&name];
    assert_eq!(again.metadata.resource_version, version);
    let report = public_pass(client, &ServiceConfig::default())
        .await
        .unwrap();
    assert!(report.applied.is_empty(), "{report:?}");
    assert_eq!(report.unchanged.len(), 2, "{report:?}");
}

/// Infrastructure labels propagate to the public Service, and go away when the
/// Gateway drops them.
async fn infrastructure_labels_go_in_and_out(client: &kube::Client) {
    let (name, cfg) = (public("infra", "web"), ServiceConfig::default());
    let gateways = Api::<Gateway>::namespaced(client.clone(), "infra");
    let gateways = &gateways;
    let set_labels = |v: Value| async move {
        let labels = json!({"spec": {"infrastructure": {"labels": v}}});
        gateways
            .patch("web", &PatchParams::default(), &Patch::Merge(labels))
            .await
            .unwrap();
    };
    let applied = |r: service::ReconcileReport| r.applied;
    set_labels(json!({"team": "edge"})).await;
    assert_eq!(
        applied(public_pass(client, &cfg).await.unwrap()),
        vec![format!("Service infra/{name}")]
    );
    let svc = &public_services(client).await[&name];
    assert_eq!(svc.metadata.labels.as_ref().unwrap()["team"], "edge");
    set_labels(json!({"team": null})).await;
    assert_eq!(
        applied(public_pass(client, &cfg).await.unwrap()),
        vec![format!("Service infra/{name}")]
    );
    let svc = &public_services(client).await[&name];
    assert!(!svc.metadata.labels.as_ref().unwrap().contains_key("team"));
    assert!(public_pass(client, &cfg).await.unwrap().applied.is_empty());
    assert!(
        pass(client, &cfg).await.unwrap().applied.is_empty(),
        "the record keeps none"
    );
}

#[tokio::test]
async fn tcp_and_udp_on_one_port_give_a_service_the_api_server_accepts() {
    let dns: &[Listener] = &[
        ("dns-udp", "UDP", 53),
        ("dns-tcp", "TCP", 53),
        ("http", "HTTP", 80),
    ];
    let syslog: &[Listener] = &[("syslog", "UDP", 514)];
    let (_server, client) = given_gateways("infra", &[("dns", dns), ("udp-only", syslog)]).await;
    one_pass_puts_both_protocols_of_a_port_on_one_service(&client).await;
    every_agent_reads_the_same_allocations_and_a_second_pass_writes_nothing(&client).await;
    the_udp_port_keeps_its_envoy_port_when_the_tcp_listener_goes(&client).await;
}

async fn one_pass_puts_both_protocols_of_a_port_on_one_service(client: &kube::Client) {
    let report = pass(client, &ServiceConfig::default())
        .await
        .expect("the API server accepts TCP 53 + UDP 53 on one LoadBalancer Service");
    assert_eq!(report.applied.len(), 2, "{report:?}");
    let services = edge_services(client).await;
    let dns = &services[&edge_name("infra", "dns")];
    assert_eq!(
        ports(dns),
        vec![
            ("p-53".into(), 53, "TCP".into(), 20000),
            ("p-53-udp".into(), 53, "UDP".into(), 20000),
            ("p-80".into(), 80, "TCP".into(), 20001),
        ]
    );
    public_pass(client, &ServiceConfig::default())
        .await
        .expect("the API server accepts TCP 53 + UDP 53 on one LoadBalancer Service");
    let outside = &public_services(client).await[&public("infra", "dns")];
    then_a_load_balancer_with_node_ports(outside, " for both protocols");
    let udp_only = &services[&edge_name("infra", "udp-only")];
    assert_eq!(
        ports(udp_only),
        vec![("p-514-udp".into(), 514, "UDP".into(), 20002)]
    );
}

async fn every_agent_reads_the_same_allocations_and_a_second_pass_writes_nothing(
    client: &kube::Client,
) {
    let recorded = allocations(&load(client).await, EDGE);
    assert_eq!(
        recorded[&ObjectRef::new("infra", "dns")],
        BTreeMap::from([(53, 20000), (80, 20001)])
    );
    let report = pass(client, &ServiceConfig::default()).await.unwrap();
    assert!(report.applied.is_empty(), "{report:?}");
    assert_eq!(report.unchanged.len(), 2);
}

async fn the_udp_port_keeps_its_envoy_port_when_the_tcp_listener_goes(client: &kube::Client) {
    let udp_only_listeners = json!({"spec": {"listeners": [
        {"name": "dns-udp", "protocol": "UDP", "port": 53},
        {"name": "http", "protocol": "HTTP", "port": 80, "hostname": "http.example.com"}]}});
    Api::<Gateway>::namespaced(client.clone(), "infra")
        .patch(
            "dns",
            &PatchParams::default(),
            &Patch::Merge(udp_only_listeners),
        )
        .await
        .unwrap();
    pass(client, &ServiceConfig::default()).await.unwrap();
    let dns = &edge_services(client).await[&edge_name("infra", "dns")];
    assert_eq!(
        ports(dns),
        vec![
            ("p-53-udp".into(), 53, "UDP".into(), 20000),
            ("p-80".into(), 80, "TCP".into(), 20001),
        ]
    );
}

const CONFORMANCE: &str = "gateway-conformance-infra";

#[tokio::test]
async fn twenty_gateways_get_services_addresses_gc_and_keep_allocations() {
    // 20 at once; one with a name long enough to need the hash-truncated form.
    let mut names: Vec<String> = (0..19).map(|i| format!("gw-{i:02}")).collect();
    names.push("same-namespace-with-https-listener-and-a-much-longer-name".into());
    let listeners: &[Listener] = &[
        ("http", "HTTP", 80),
        ("alt", "HTTP", 8080),
        ("alt-2", "HTTP", 8080),
    ];
    let gateways: Vec<(&str, &[Listener])> =
        names.iter().map(|n| (n.as_str(), listeners)).collect();
    let (_server, client) = given_gateways(CONFORMANCE, &gateways).await;
    let services = twenty_services_with_distinct_ports_from_the_start_of_the_range(&client).await;
    every_agent_binds_the_allocations_it_reads_back(&client).await;
    no_load_balancer_means_no_address_and_not_programmed(&client).await;
    let report = public_pass(&client, &ServiceConfig::default())
        .await
        .unwrap();
    assert_eq!(report.applied.len(), 40, "a Service and a slice each");
    load_balancer_addresses_program_each_gateway(&client, &public_services(&client).await).await;
    let before = a_restart_keeps_every_allocation_and_writes_nothing(&client, &services).await;
    a_deleted_gateways_ports_go_to_a_new_listener_elsewhere(&client, &before).await;
}

async fn twenty_services_with_distinct_ports_from_the_start_of_the_range(
    client: &kube::Client,
) -> BTreeMap<String, Service> {
    let report = pass(client, &ServiceConfig::default()).await.unwrap();
    assert_eq!(report.applied.len(), 20, "{report:?}");
    let services = edge_services(client).await;
    assert_eq!(services.len(), 20);
    let mut envoy_ports = BTreeSet::new();
    for svc in services.values() {
        let p = ports(svc);
        assert_eq!(p.iter().map(|p| p.1).collect::<Vec<_>>(), vec![80, 8080]);
        for (_, _, _, target) in &p {
            assert!((20000..=29999).contains(target));
            assert!(
                envoy_ports.insert(*target),
                "Envoy port {target} allocated twice"
            );
        }
    }
    assert_eq!(envoy_ports.len(), 40);
    // Lowest free first: the range is used from its start, without holes.
    assert_eq!(envoy_ports.last(), Some(&20039));
    services
}

async fn every_agent_binds_the_allocations_it_reads_back(client: &kube::Client) {
    let store = load(client).await;
    let recorded = allocations(&store, EDGE);
    assert_eq!(recorded.len(), 20);
    let mut translation = translate(&store, &service_mode());
    assert_eq!(translation.ir.gateways.len(), 20);
    let dropped = apply_allocations(&mut translation.ir, &recorded, "0.0.0.0");
    assert!(dropped.is_empty(), "{dropped:?}");
    for gw in &translation.ir.gateways {
        let want: BTreeSet<u16> = recorded[&gw.object_ref()].values().copied().collect();
        let bound: BTreeSet<u16> = gw.ports.iter().map(|p| p.port).collect();
        assert_eq!(bound, want, "{}", gw.name);
    }
}

/// The status plan with the addresses the Services' load-balancer ingress gives.
async fn plan_with_addresses(client: &kube::Client) -> aether_gateway::status::StatusPlan {
    let store = load(client).await;
    let planned = translate(&store, &service_mode()).status;
    addressed(&planned, &store, &BTreeMap::new())
}

async fn no_load_balancer_means_no_address_and_not_programmed(client: &kube::Client) {
    for (gw, status) in &plan_with_addresses(client).await.gateways {
        let p = condition(&status.conditions, Type::Programmed).unwrap();
        assert_eq!(p.reason, Reason::AddressNotAssigned, "{gw}");
        assert!(status.addresses.is_empty());
    }
}

/// The test is the load balancer: one ingress address per Service.
async fn load_balancer_addresses_program_each_gateway(
    client: &kube::Client,
    services: &BTreeMap<String, Service>,
) {
    let api: Api<Service> = Api::namespaced(client.clone(), CONFORMANCE);
    let mut assigned = BTreeMap::new();
    for (i, (name, svc)) in services.iter().enumerate() {
        let ip = format!("127.0.10.{}", i + 1);
        let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap();
        assigned.insert(service::gateway_of(svc).unwrap(), ip);
    }
    let plan = plan_with_addresses(client).await;
    assert_eq!(plan.gateways.len(), 20);
    for (gw, status) in &plan.gateways {
        let got: Vec<(&str, &str)> = status
            .addresses
            .iter()
            .map(|a| (a.type_.as_str(), a.value.as_str()))
            .collect();
        assert_eq!(got, vec![("IPAddress", assigned[gw].as_str())], "{gw}");
        assert!(
            condition(&status.conditions, Type::Programmed)
                .unwrap()
                .is_true(),
            "{gw}"
        );
    }
}

type PortsByService = BTreeMap<String, Vec<(String, i32, String, i32)>>;

/// A fresh store, a fresh reconcile: every allocation is kept and nothing is
/// written. Returns the ports before.
async fn a_restart_keeps_every_allocation_and_writes_nothing(
    client: &kube::Client,
    services: &BTreeMap<String, Service>,
) -> PortsByService {
    let before: PortsByService = services
        .iter()
        .map(|(n, s)| (n.clone(), ports(s)))
        .collect();
    let report = pass(client, &ServiceConfig::default()).await.unwrap();
    assert!(
        report.applied.is_empty() && report.deleted.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.unchanged.len(), 20);
    let after: PortsByService = edge_services(client)
        .await
        .iter()
        .map(|(n, s)| (n.clone(), ports(s)))
        .collect();
    assert_eq!(after, before);
    before
}

/// Its Service is collected. Its ports are taken again only once the store has
/// seen them freed; a new listener port on another Gateway gets a port nobody
/// uses and the old ones stay.
async fn a_deleted_gateways_ports_go_to_a_new_listener_elsewhere(
    client: &kube::Client,
    before: &PortsByService,
) {
    let (cfg, gateways) = (
        ServiceConfig::default(),
        Api::<Gateway>::namespaced(client.clone(), CONFORMANCE),
    );
    gateways
        .delete("gw-00", &DeleteParams::default())
        .await
        .unwrap();
    let gone = edge_name(CONFORMANCE, "gw-00");
    let freed: BTreeSet<i32> = before[&gone].iter().map(|p| p.3).collect();
    let report = pass(client, &cfg).await.unwrap();
    assert_eq!(report.deleted, vec![gone.clone()]);
    let report = public_pass(client, &cfg).await.unwrap();
    let gone_public = public(CONFORMANCE, "gw-00");
    assert_eq!(
        report.deleted,
        vec![
            format!("EndpointSlice {CONFORMANCE}/{gone_public}-ipv4"),
            format!("Service {CONFORMANCE}/{gone_public}"),
        ]
    );
    let services = edge_services(client).await;
    assert_eq!(services.len(), 19);
    assert!(!services.contains_key(&gone));
    let grow = json!({"spec": {"listeners": [
        {"name": "http", "protocol": "HTTP", "port": 80},
        {"name": "alt", "protocol": "HTTP", "port": 8080},
        {"name": "extra", "protocol": "HTTP", "port": 9090}]}});
    gateways
        .patch("gw-01", &PatchParams::default(), &Patch::Merge(grow))
        .await
        .unwrap();
    let report = pass(client, &cfg).await.unwrap();
    let grown = edge_name(CONFORMANCE, "gw-01");
    assert_eq!(report.applied, vec![grown.clone()]);
    let now = ports(&edge_services(client).await[&grown]);
    assert_eq!(now[..2], before[&grown][..]);
    assert_eq!(now[2].1, 9090);
    assert_eq!(
        now[2].3,
        *freed.first().unwrap(),
        "lowest free port, freed by gw-00"
    );
}

/// An edge Service as earlier versions wrote it (a LoadBalancer in the edge
/// namespace, with node ports) becomes the record in one apply, keeping its
/// allocations; the public Service takes over the load balancer.
#[tokio::test]
async fn an_old_load_balancer_record_is_turned_into_a_cluster_ip_one() {
    let listeners: &[Listener] = &[("http", "HTTP", 80), ("dns", "UDP", 53)];
    let (_server, client) = given_gateways("infra", &[("web", listeners)]).await;
    let name = edge_name("infra", "web");
    let old = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": EDGE,
            "labels": {service::GATEWAY_LABEL: "infra.web", "team": "edge"},
            "annotations": {service::GATEWAY_NAMESPACE_ANNOTATION: "infra",
                service::GATEWAY_NAME_ANNOTATION: "web", ALLOCATIONS_ANNOTATION: "53=20007,80=20003",
                service::REQUESTED_IPS_ANNOTATION: "10.250.0.9"}},
        "spec": {"type": "LoadBalancer", "selector": {"app.kubernetes.io/name": "aether-edge"},
            "allocateLoadBalancerNodePorts": true,
            "ports": [{"name": "p-53-udp", "port": 53, "protocol": "UDP", "targetPort": 20007},
                      {"name": "p-80", "port": 80, "protocol": "TCP", "targetPort": 20003}]},
    });
    Api::<Service>::namespaced(client.clone(), EDGE)
        .patch(
            &name,
            &PatchParams::apply(service::FIELD_MANAGER),
            &Patch::Apply(&old),
        )
        .await
        .expect("the old form");
    let report = pass(&client, &ServiceConfig::default())
        .await
        .expect("the API server takes LoadBalancer → ClusterIP in one apply");
    assert_eq!(report.applied, vec![name.clone()]);
    let record = &edge_services(&client).await[&name];
    let spec = record.spec.as_ref().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert!(spec.ports.iter().flatten().all(|p| p.node_port.is_none()));
    let ann = record.metadata.annotations.as_ref().unwrap();
    assert_eq!(
        ann[ALLOCATIONS_ANNOTATION], "53=20007,80=20003",
        "allocations kept"
    );
    assert!(!ann.contains_key(service::REQUESTED_IPS_ANNOTATION));
    assert!(
        !record
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key("team")
    );
    public_pass(&client, &ServiceConfig::default())
        .await
        .unwrap();
    let outside = &public_services(&client).await[&public("infra", "web")];
    assert_eq!(ports(outside), ports(record));
    then_a_load_balancer_with_node_ports(outside, " on the public Service");
}
