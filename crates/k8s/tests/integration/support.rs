//! Shared pieces of the tests against a real kube-apiserver: objects in, the store
//! the watches would have out, and the edge Service passes.

use aether_gateway::{
    AckState, Config, Served, StatusPlan, Store, StoreObject, assemble, translate,
};
use aether_k8s::service::{self, ReconcileReport, ServiceConfig, desired_services, reconcile};
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::ListParams;
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub const EDGE: &str = "aether-ingress";

/// `plan` as written with every Envoy ACKed: the addresses (and what their
/// absence does) from the edge Services in `store`.
/// Translation as the agent runs it in service address mode: each Gateway
/// gets Envoy ports of its own, so none is taken by another (`port_claims`).
pub fn service_mode() -> Config {
    Config {
        shared_ports: false,
        ..Config::default()
    }
}

pub fn addressed(
    plan: &StatusPlan,
    store: &Store,
    problems: &BTreeMap<aether_ir::ObjectRef, String>,
) -> StatusPlan {
    let addresses = service::assignments(plan.gateways.keys(), store, problems);
    assemble(plan, |_| Served::whole(AckState::Acked), &addresses)
}

pub use aether_testkit::create;

/// Every `K` in the cluster, into `store` (as a fresh list of the watches would).
pub async fn list_into<K>(client: &Client, store: &mut Store)
where
    K: StoreObject + kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    for o in aether_testkit::list_all::<K>(client).await {
        store.insert(o);
    }
}

/// `namespaces` and the edge namespace, and our GatewayClass `aether`.
pub async fn seed(client: &Client, namespaces: &[&str]) {
    create_namespaces(client, &[namespaces, &[EDGE]].concat()).await;
    create_class(client).await;
}

pub async fn create_namespaces(client: &Client, names: &[&str]) {
    for ns in names {
        create(
            &Api::<Namespace>::all(client.clone()),
            json!({"metadata": {"name": ns}}),
        )
        .await;
    }
}

/// GatewayClass `aether`, ours.
pub async fn create_class(client: &Client) {
    create(
        &Api::<GatewayClass>::all(client.clone()),
        json!({"metadata": {"name": "aether"}, "spec": {"controllerName": "gateway.aether.io/edge"}}),
    )
    .await;
}

/// Listeners as (name, protocol, port); each but TCP and UDP (which take none)
/// gets hostname `<name>.example.com` (the CRD wants (port, protocol, hostname)
/// unique) and HTTPS a certificate ref.
pub fn mk_gateway(ns: &str, name: &str, listeners: &[(&str, &str, u16)]) -> Value {
    let listeners: Vec<Value> = listeners
        .iter()
        .map(|(n, proto, port)| {
            let mut l = json!({"name": n, "protocol": proto, "port": port});
            if !matches!(*proto, "TCP" | "UDP") {
                l["hostname"] = json!(format!("{n}.example.com"));
            }
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
pub async fn load(client: &Client) -> Store {
    let mut store = Store::default();
    list_into::<GatewayClass>(client, &mut store).await;
    list_into::<Gateway>(client, &mut store).await;
    list_into::<Service>(client, &mut store).await;
    list_into::<k8s_openapi::api::discovery::v1::EndpointSlice>(client, &mut store).await;
    store
}

/// One leader pass: desired Services from the store, reconciled against the
/// store's edge Services.
pub async fn pass(
    client: &Client,
    cfg: &ServiceConfig,
) -> Result<ReconcileReport, service::ReconcileErrors> {
    let store = load(client).await;
    let translation = translate(&store, &service_mode());
    let desired = desired_services(&store, &translation.ir, cfg);
    let existing = store.all::<Service>().values().map(|s| &**s);
    reconcile(client, desired, existing, &cfg.namespace).await
}

/// One public pass as the leader makes it, after [`pass`]: the public Services
/// and slices from the cluster as it is now.
pub async fn public_pass(
    client: &Client,
    cfg: &ServiceConfig,
) -> Result<ReconcileReport, service::ReconcileErrors> {
    let store = load(client).await;
    let translation = translate(&store, &service_mode());
    let records = desired_services(&store, &translation.ir, cfg);
    let public = service::desired_public(&store, &records, cfg);
    service::reconcile_public(client, &public, &store).await
}

pub async fn edge_services(client: &Client) -> BTreeMap<String, Service> {
    Api::<Service>::namespaced(client.clone(), EDGE)
        .list(&ListParams::default().labels(service::GATEWAY_LABEL))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| (s.metadata.name.clone().unwrap(), s))
        .collect()
}

/// Every public Service (any namespace), by name.
pub async fn public_services(client: &Client) -> BTreeMap<String, Service> {
    Api::<Service>::all(client.clone())
        .list(&ListParams::default().labels(service::PUBLIC_LABEL))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| (s.metadata.name.clone().unwrap(), s))
        .collect()
}

/// (name, port, protocol, targetPort) of each Service port, in order.
pub use aether_testkit::live::service_ports as ports;

/// Creates every object of the deploy RBAC manifest (ServiceAccount, roles, bindings).
pub async fn install_rbac(client: &Client) {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/10-rbac.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    for doc in serde_norway::Deserializer::from_str(&text) {
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
