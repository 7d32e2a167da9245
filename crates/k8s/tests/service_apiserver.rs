//! Edge Services against a real kube-apiserver: valid by construction (the API
//! server's own validation accepts them), one port per distinct listener port,
//! 20 Gateways at once with distinct allocations, addresses from load-balancer
//! ingress written by the test acting as the load balancer, garbage collection,
//! allocations kept across a restart, failures reported per Gateway while the
//! rest still go through, and all of it under the deploy RBAC (and no more).

use aether_gateway::status::condition;
use aether_gateway::{Config, Store, translate};
use aether_ir::ObjectRef;
use aether_k8s::service::{
    self, ALLOCATIONS_ANNOTATION, ReconcileReport, ServiceConfig, allocations, apply_addresses,
    apply_allocations, desired_services, reconcile, service_name,
};
use aether_testkit::ApiServer;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

const EDGE: &str = "aether-ingress";

async fn create<K>(api: &Api<K>, value: Value)
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

async fn seed(client: &Client, namespaces: &[&str]) {
    for ns in namespaces.iter().chain(&[EDGE]) {
        create(
            &Api::<Namespace>::all(client.clone()),
            json!({"metadata": {"name": ns}}),
        )
        .await;
    }
    create(
        &Api::<GatewayClass>::all(client.clone()),
        json!({"metadata": {"name": "aether"}, "spec": {"controllerName": "gateway.aether.io/edge"}}),
    )
    .await;
}

/// Listeners as (name, protocol, port); each gets hostname `<name>.example.com`
/// (the CRD wants (port, protocol, hostname) unique) and HTTPS a certificate ref.
fn mk_gateway(ns: &str, name: &str, listeners: &[(&str, &str, u16)]) -> Value {
    let listeners: Vec<Value> = listeners
        .iter()
        .map(|(n, proto, port)| {
            let mut l = json!({"name": n, "protocol": proto, "port": port,
                               "hostname": format!("{n}.example.com")});
            if *proto == "HTTPS" {
                l["tls"] = json!({"certificateRefs": [{"name": "cert"}]});
            }
            l
        })
        .collect();
    json!({"metadata": {"namespace": ns, "name": name},
           "spec": {"gatewayClassName": "aether", "listeners": listeners}})
}

/// A fresh list of what the Service code reads (as the watches would have it).
async fn load(client: &Client) -> Store {
    let mut store = Store::default();
    let lp = ListParams::default();
    for o in Api::<GatewayClass>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        store.insert(o);
    }
    for o in Api::<Gateway>::all(client.clone()).list(&lp).await.unwrap() {
        store.insert(o);
    }
    for o in Api::<Service>::all(client.clone()).list(&lp).await.unwrap() {
        store.insert(o);
    }
    store
}

/// One leader pass: desired Services from the store, reconciled against the
/// store's edge Services.
async fn pass(
    client: &Client,
    cfg: &ServiceConfig,
) -> Result<ReconcileReport, service::ReconcileErrors> {
    let store = load(client).await;
    let translation = translate(&store, &Config::default());
    let desired = desired_services(&store, &translation.ir, cfg);
    let existing = store.all::<Service>().values();
    reconcile(client, desired, existing, &cfg.namespace).await
}

async fn edge_services(client: &Client) -> BTreeMap<String, Service> {
    Api::<Service>::namespaced(client.clone(), EDGE)
        .list(&ListParams::default().labels(service::GATEWAY_LABEL))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| (s.metadata.name.clone().unwrap(), s))
        .collect()
}

/// (name, port, protocol, targetPort) of each Service port, in order.
fn ports(svc: &Service) -> Vec<(String, i32, String, i32)> {
    let spec = svc.spec.as_ref().unwrap();
    spec.ports
        .iter()
        .flatten()
        .map(|p| {
            let IntOrString::Int(t) = p.target_port.clone().unwrap() else {
                panic!("named targetPort")
            };
            (
                p.name.clone().unwrap(),
                p.port,
                p.protocol.clone().unwrap(),
                t,
            )
        })
        .collect()
}

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
    let mut plan = translation.status.clone();
    apply_addresses(&mut plan, &store, &cfg, &BTreeMap::new());
    for (gw, status) in &plan.gateways {
        let p = condition(&status.conditions, "Programmed").unwrap();
        assert_eq!(p.reason, "AddressNotAssigned", "{gw}");
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
    let mut plan = translate(&store, &Config::default()).status;
    apply_addresses(&mut plan, &store, &cfg, &BTreeMap::new());
    assert_eq!(plan.gateways.len(), 20);
    for (gw, status) in &plan.gateways {
        let got: Vec<(&str, &str)> = status
            .addresses
            .iter()
            .map(|a| (a.type_.as_str(), a.value.as_str()))
            .collect();
        assert_eq!(got, vec![("IPAddress", assigned[gw].as_str())], "{gw}");
        assert!(
            condition(&status.conditions, "Programmed")
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

#[tokio::test]
async fn failures_are_reported_per_gateway_and_the_rest_go_through() {
    let mut server = ApiServer::start().await;
    let client = server.client();
    seed(&client, &["infra"]).await;
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), "infra");
    for n in ["a", "b", "c"] {
        create(&gateways, mk_gateway("infra", n, &[("http", "HTTP", 80)])).await;
    }
    // Someone made a headless Service under b's name: its clusterIP (None) and IP
    // families are not ours to change, and a LoadBalancer cannot keep them.
    let blocker = service_name(&ObjectRef::new("infra", "b"));
    create(
        &Api::<Service>::namespaced(client.clone(), EDGE),
        json!({"metadata": {"name": blocker, "namespace": EDGE},
               "spec": {"clusterIP": "None", "ports": [{"port": 1}]}}),
    )
    .await;
    let cfg = ServiceConfig::default();

    let err = pass(&client, &cfg)
        .await
        .expect_err("b's Service is rejected");
    assert_eq!(err.errors.keys().collect::<Vec<_>>(), vec![&blocker]);
    let mut applied = err.report.applied.clone();
    applied.sort();
    let want: Vec<String> = ["a", "c"]
        .iter()
        .map(|n| service_name(&ObjectRef::new("infra", *n)))
        .collect();
    assert_eq!(applied, want);
    let problems = err.by_gateway();
    let b = ObjectRef::new("infra", "b");
    assert_eq!(problems.keys().collect::<Vec<_>>(), vec![&b]);
    assert!(problems[&b].contains("is invalid"), "{}", problems[&b]);

    let store = load(&client).await;
    let mut plan = translate(&store, &Config::default()).status;
    apply_addresses(&mut plan, &store, &cfg, &problems);
    let programmed = condition(&plan.gateways[&b].conditions, "Programmed").unwrap();
    assert_eq!(programmed.reason, "AddressNotAssigned");
    assert!(
        programmed.message.contains(&problems[&b]),
        "{}",
        programmed.message
    );

    // The blocker goes; an outage makes every write fail, reported, not swallowed.
    Api::<Service>::namespaced(client.clone(), EDGE)
        .delete(&blocker, &DeleteParams::default())
        .await
        .unwrap();
    let store = load(&client).await;
    let translation = translate(&store, &Config::default());
    let desired = desired_services(&store, &translation.ir, &cfg);
    server.stop_apiserver().await;
    let existing: Vec<Service> = store.all::<Service>().values().cloned().collect();
    let err = reconcile(&client, desired.clone(), &existing, EDGE)
        .await
        .expect_err("the API server is down");
    assert_eq!(err.errors.keys().collect::<Vec<_>>(), vec![&blocker]);
    assert!(err.report.applied.is_empty());
    server.start_apiserver().await;
    let report = reconcile(&client, desired, &existing, EDGE).await.unwrap();
    assert_eq!(report.applied, vec![blocker]);
    assert_eq!(edge_services(&client).await.len(), 3);
}

/// Creates every object of the deploy RBAC manifest (ServiceAccount, roles, bindings).
async fn install_rbac(client: &Client) {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/10-rbac.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value: Value = serde::Deserialize::deserialize(doc).unwrap();
        if value.is_null() {
            continue;
        }
        let ns = value["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let c = client.clone();
        match value["kind"].as_str().unwrap() {
            "ServiceAccount" => create(&Api::<ServiceAccount>::namespaced(c, &ns), value).await,
            "ClusterRole" => create(&Api::<ClusterRole>::all(c), value).await,
            "ClusterRoleBinding" => create(&Api::<ClusterRoleBinding>::all(c), value).await,
            "Role" => create(&Api::<Role>::namespaced(c, &ns), value).await,
            "RoleBinding" => create(&Api::<RoleBinding>::namespaced(c, &ns), value).await,
            other => panic!("unexpected kind {other} in {}", path.display()),
        }
    }
}

#[tokio::test]
async fn the_deploy_rbac_is_enough_to_create_update_and_collect_services() {
    let server = ApiServer::start().await;
    let admin = server.client();
    seed(&admin, &["infra"]).await;
    install_rbac(&admin).await;
    let agent = server.client_as(
        "system:serviceaccount:aether-ingress:aether-edge",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:aether-ingress",
            "system:authenticated",
        ],
    );
    let gateways: Api<Gateway> = Api::namespaced(admin.clone(), "infra");
    for n in ["a", "b"] {
        create(&gateways, mk_gateway("infra", n, &[("http", "HTTP", 80)])).await;
    }
    let cfg = ServiceConfig::default();
    // Reads (Gateways, Services) and writes both as the agent.
    let report = pass(&agent, &cfg)
        .await
        .expect("created under the deploy RBAC");
    assert_eq!(report.applied.len(), 2);
    let grow = json!({"spec": {"listeners": [
        {"name": "http", "protocol": "HTTP", "port": 80},
        {"name": "alt", "protocol": "HTTP", "port": 8080}]}});
    gateways
        .patch("a", &PatchParams::default(), &Patch::Merge(grow))
        .await
        .unwrap();
    gateways
        .delete("b", &DeleteParams::default())
        .await
        .unwrap();
    let report = pass(&agent, &cfg)
        .await
        .expect("updated and collected under the deploy RBAC");
    assert_eq!(
        report.applied,
        vec![service_name(&ObjectRef::new("infra", "a"))]
    );
    assert_eq!(
        report.deleted,
        vec![service_name(&ObjectRef::new("infra", "b"))]
    );

    // And nothing beyond: the agent cannot make Services outside the edge namespace.
    let mut elsewhere = desired_services(&load(&admin).await, &Default::default(), &cfg).remove(0);
    elsewhere.metadata.namespace = Some("infra".into());
    let name = elsewhere.metadata.name.clone().unwrap();
    let refused = Api::<Service>::namespaced(agent.clone(), "infra")
        .patch(
            &name,
            &PatchParams::apply(service::FIELD_MANAGER),
            &Patch::Apply(&elsewhere),
        )
        .await
        .expect_err("no Service writes outside the edge namespace");
    assert!(matches!(refused, kube::Error::Api(s) if s.code == 403));
}
