//! Edge Services against a real kube-apiserver: valid by construction (the API
//! server's own validation accepts them), one port per distinct (listener port,
//! L4 protocol) — TCP 53 and UDP 53 on one Service included —
//! no write when nothing changed, infrastructure labels in and out, 20 Gateways
//! at once with distinct allocations, addresses from load-balancer ingress written
//! by the test acting as the load balancer, garbage collection, and allocations
//! kept across a restart.

mod service_support;

use aether_gateway::status::condition;
use aether_gateway::vocabulary::gateway::{Reason, Type};
use aether_gateway::{Config, translate};
use aether_ir::ObjectRef;
use aether_k8s::service::{
    self, ALLOCATIONS_ANNOTATION, ServiceConfig, allocations, apply_allocations, service_name,
};
use aether_testkit::ApiServer;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use service_support::{
    EDGE, addressed, create, edge_services, load, mk_gateway, pass, ports, seed,
};
use std::collections::{BTreeMap, BTreeSet};

#[tokio::test]
async fn listeners_sharing_ports_give_a_service_the_api_server_accepts() {
    let server = ApiServer::start().await;
    let client = server.client();
    seed(&client, &["infra"]).await;
    let listeners = [
        ("http-a", "HTTP", 80),
        ("http-b", "HTTP", 80),
        ("https-a", "HTTPS", 443),
        ("https-b", "HTTPS", 443),
    ];
    create(
        &Api::<Gateway>::namespaced(client.clone(), "infra"),
        mk_gateway("infra", "web", &listeners),
    )
    .await;
    let cfg = ServiceConfig::default();

    let report = pass(&client, &cfg)
        .await
        .expect("the API server accepts the Service");
    let name = service_name(&ObjectRef::new("infra", "web"));
    assert_eq!(report.applied, vec![name.clone()]);
    let svc = &edge_services(&client).await[&name];
    assert_eq!(
        ports(svc),
        vec![
            ("p-80".into(), 80, "TCP".into(), 20000),
            ("p-443".into(), 443, "TCP".into(), 20001),
        ]
    );
    let spec = svc.spec.as_ref().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
    assert!(
        spec.ports.iter().flatten().all(|p| p.node_port.is_some()),
        "node ports allocated"
    );
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

    // Nothing changed: no write at all.
    let version = svc.metadata.resource_version.clone();
    let report = pass(&client, &cfg).await.unwrap();
    assert!(report.applied.is_empty(), "{report:?}");
    assert_eq!(report.unchanged, vec![name.clone()]);
    let again = &edge_services(&client).await[&name];
    assert_eq!(again.metadata.resource_version, version);

    // Infrastructure labels propagate, and go away when the Gateway drops them.
    let gateways = Api::<Gateway>::namespaced(client.clone(), "infra");
    let labels = |v: Value| json!({"spec": {"infrastructure": {"labels": v}}});
    let merge = |v| Patch::Merge(labels(v));
    let pp = PatchParams::default();
    gateways
        .patch("web", &pp, &merge(json!({"team": "edge"})))
        .await
        .unwrap();
    assert_eq!(
        pass(&client, &cfg).await.unwrap().applied,
        vec![name.clone()]
    );
    let svc = &edge_services(&client).await[&name];
    assert_eq!(svc.metadata.labels.as_ref().unwrap()["team"], "edge");
    gateways
        .patch("web", &pp, &merge(json!({"team": null})))
        .await
        .unwrap();
    assert_eq!(
        pass(&client, &cfg).await.unwrap().applied,
        vec![name.clone()]
    );
    let svc = &edge_services(&client).await[&name];
    assert!(!svc.metadata.labels.as_ref().unwrap().contains_key("team"));
    assert!(pass(&client, &cfg).await.unwrap().applied.is_empty());
}

#[tokio::test]
async fn tcp_and_udp_on_one_port_give_a_service_the_api_server_accepts() {
    let server = ApiServer::start().await;
    let client = server.client();
    seed(&client, &["infra"]).await;
    let gateways = Api::<Gateway>::namespaced(client.clone(), "infra");
    let listeners = [
        ("dns-udp", "UDP", 53),
        ("dns-tcp", "TCP", 53),
        ("http", "HTTP", 80),
    ];
    create(&gateways, mk_gateway("infra", "dns", &listeners)).await;
    create(
        &gateways,
        mk_gateway("infra", "udp-only", &[("syslog", "UDP", 514)]),
    )
    .await;
    let cfg = ServiceConfig::default();

    let report = pass(&client, &cfg)
        .await
        .expect("the API server accepts TCP 53 + UDP 53 on one LoadBalancer Service");
    assert_eq!(report.applied.len(), 2, "{report:?}");
    let services = edge_services(&client).await;
    let dns = &services[&service_name(&ObjectRef::new("infra", "dns"))];
    assert_eq!(
        ports(dns),
        vec![
            ("p-53".into(), 53, "TCP".into(), 20000),
            ("p-53-udp".into(), 53, "UDP".into(), 20000),
            ("p-80".into(), 80, "TCP".into(), 20001),
        ]
    );
    let spec = dns.spec.as_ref().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
    assert!(
        spec.ports.iter().flatten().all(|p| p.node_port.is_some()),
        "node ports allocated for both protocols"
    );
    let udp_only = &services[&service_name(&ObjectRef::new("infra", "udp-only"))];
    assert_eq!(
        ports(udp_only),
        vec![("p-514-udp".into(), 514, "UDP".into(), 20002)]
    );

    // Read back as every agent would, and stable: a second pass writes nothing.
    let recorded = allocations(&load(&client).await, EDGE);
    assert_eq!(
        recorded[&ObjectRef::new("infra", "dns")],
        BTreeMap::from([(53, 20000), (80, 20001)])
    );
    let report = pass(&client, &cfg).await.unwrap();
    assert!(report.applied.is_empty(), "{report:?}");
    assert_eq!(report.unchanged.len(), 2);

    // The TCP listener goes: the UDP port stays on its Envoy port.
    let udp_only_listeners = json!({"spec": {"listeners": [
        {"name": "dns-udp", "protocol": "UDP", "port": 53},
        {"name": "http", "protocol": "HTTP", "port": 80, "hostname": "http.example.com"}]}});
    gateways
        .patch(
            "dns",
            &PatchParams::default(),
            &Patch::Merge(udp_only_listeners),
        )
        .await
        .unwrap();
    pass(&client, &cfg).await.unwrap();
    let dns = &edge_services(&client).await[&service_name(&ObjectRef::new("infra", "dns"))];
    assert_eq!(
        ports(dns),
        vec![
            ("p-53-udp".into(), 53, "UDP".into(), 20000),
            ("p-80".into(), 80, "TCP".into(), 20001),
        ]
    );
}

#[tokio::test]
async fn twenty_gateways_get_services_addresses_gc_and_keep_allocations() {
    let server = ApiServer::start().await;
    let client = server.client();
    let ns = "gateway-conformance-infra";
    seed(&client, &[ns]).await;
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), ns);
    // 20 at once; one with a name long enough to need the hash-truncated form.
    let mut names: Vec<String> = (0..19).map(|i| format!("gw-{i:02}")).collect();
    names.push("same-namespace-with-https-listener-and-a-much-longer-name".into());
    futures::future::join_all(names.iter().map(|n| {
        let listeners = [
            ("http", "HTTP", 80),
            ("alt", "HTTP", 8080),
            ("alt-2", "HTTP", 8080),
        ];
        create(&gateways, mk_gateway(ns, n, &listeners))
    }))
    .await;
    let cfg = ServiceConfig::default();

    let report = pass(&client, &cfg).await.unwrap();
    assert_eq!(report.applied.len(), 20, "{report:?}");
    let services = edge_services(&client).await;
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

    // Every agent reads the same allocations back and binds them.
    let store = load(&client).await;
    let recorded = allocations(&store, EDGE);
    assert_eq!(recorded.len(), 20);
    let mut translation = translate(&store, &Config::default());
    assert_eq!(translation.ir.gateways.len(), 20);
    let dropped = apply_allocations(&mut translation.ir, &recorded, "0.0.0.0");
    assert!(dropped.is_empty(), "{dropped:?}");
    for gw in &translation.ir.gateways {
        let want: BTreeSet<u16> = recorded[&gw.object_ref()].values().copied().collect();
        let bound: BTreeSet<u16> = gw.ports.iter().map(|p| p.port).collect();
        assert_eq!(bound, want, "{}", gw.name);
    }

    // Before any load balancer: no address, so not programmed.
    let plan = addressed(&translation.status, &store, &cfg, &BTreeMap::new());
    for (gw, status) in &plan.gateways {
        let p = condition(&status.conditions, Type::Programmed).unwrap();
        assert_eq!(p.reason, Reason::AddressNotAssigned, "{gw}");
        assert!(status.addresses.is_empty());
    }

    // The test is the load balancer: one ingress address per Service.
    let api: Api<Service> = Api::namespaced(client.clone(), EDGE);
    let mut assigned = BTreeMap::new();
    for (i, (name, svc)) in services.iter().enumerate() {
        let ip = format!("127.0.10.{}", i + 1);
        let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap();
        assigned.insert(service::gateway_of(svc).unwrap(), ip);
    }
    let store = load(&client).await;
    let planned = translate(&store, &Config::default()).status;
    let plan = addressed(&planned, &store, &cfg, &BTreeMap::new());
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

    // A restart: a fresh store, a fresh reconcile. Every allocation is kept and
    // nothing is written.
    let before: BTreeMap<_, _> = services
        .iter()
        .map(|(n, s)| (n.clone(), ports(s)))
        .collect();
    let report = pass(&client, &cfg).await.unwrap();
    assert!(
        report.applied.is_empty() && report.deleted.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.unchanged.len(), 20);
    let after: BTreeMap<_, _> = edge_services(&client)
        .await
        .iter()
        .map(|(n, s)| (n.clone(), ports(s)))
        .collect();
    assert_eq!(after, before);

    // A Gateway deleted: its Service is collected. Its ports are taken again only
    // once the store has seen them freed; a new listener port on another Gateway
    // gets a port nobody uses and the old ones stay.
    gateways
        .delete("gw-00", &DeleteParams::default())
        .await
        .unwrap();
    let gone = service_name(&ObjectRef::new(ns, "gw-00"));
    let freed: BTreeSet<i32> = before[&gone].iter().map(|p| p.3).collect();
    let report = pass(&client, &cfg).await.unwrap();
    assert_eq!(report.deleted, vec![gone.clone()]);
    let services = edge_services(&client).await;
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
    let report = pass(&client, &cfg).await.unwrap();
    let grown = service_name(&ObjectRef::new(ns, "gw-01"));
    assert_eq!(report.applied, vec![grown.clone()]);
    let now = ports(&edge_services(&client).await[&grown]);
    assert_eq!(now[..2], before[&grown][..]);
    assert_eq!(now[2].1, 9090);
    assert_eq!(
        now[2].3,
        *freed.first().unwrap(),
        "lowest free port, freed by gw-00"
    );
}
