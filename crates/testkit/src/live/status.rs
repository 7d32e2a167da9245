//! What the agent writes, read back from the API server as JSON: conditions, our
//! route parent entries, the Gateway's `Programmed`, the edge Services; and the
//! objects every Kubernetes-mode test starts from.

use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::time::Duration;

use super::eventually;
use crate::ApiServer;

/// The edge namespace: the agents, their Lease and the edge Services.
const EDGE: &str = "aether-ingress";
const CONTROLLER: &str = "gateway.aether.io/edge";

/// The namespaces (`aether-ingress` and `namespaces`) and the `aether`
/// GatewayClass: what every Kubernetes test needs first.
pub fn base_yaml(namespaces: &[&str]) -> String {
    let mut y = String::new();
    for ns in std::iter::once(&EDGE).chain(namespaces) {
        y.push_str(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\n"
        ));
    }
    y.push_str(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: aether}}\nspec: {{controllerName: {CONTROLLER}}}\n"
    ));
    y
}

/// A test API server with `objects` (YAML documents) applied, as `kubectl apply
/// --server-side` would; the YAML is in the panic message if the server refuses it.
pub async fn given_cluster(objects: &[String]) -> ApiServer {
    let server = ApiServer::start().await;
    let yaml = objects.join("\n---\n");
    if let Err(e) = server.apply(&yaml).await {
        panic!("{e}\n{yaml}");
    }
    server
}

/// A namespaced kind the readers here take: read through `kube::Api`, seen as JSON.
pub trait NamespacedKind:
    kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType: Default>
    + Clone
    + serde::de::DeserializeOwned
    + serde::Serialize
    + std::fmt::Debug
{
}

impl<K> NamespacedKind for K where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType: Default>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
{
}

/// An object as JSON (`None` while it does not exist or cannot be read).
pub async fn get_json<K: NamespacedKind>(
    client: &kube::Client,
    ns: Option<&str>,
    name: &str,
) -> Option<Value> {
    let api: kube::Api<K> = kube::Api::namespaced(client.clone(), ns.unwrap_or("default"));
    let obj = api.get_opt(name).await.ok()??;
    serde_json::to_value(obj).ok()
}

/// The condition of `type_` in a `conditions` array.
pub fn condition<'a>(conditions: &'a Value, type_: &str) -> Option<&'a Value> {
    conditions.as_array()?.iter().find(|c| c["type"] == type_)
}

/// `(status, reason)` of a condition, for terse assertions.
pub fn status_reason(conditions: &Value, type_: &str) -> Option<(String, String)> {
    let c = condition(conditions, type_)?;
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
    ))
}

/// Our route parent entry for Gateway `gateway` (and section, if any).
pub fn our_parent<'a>(route: &'a Value, gateway: &str, section: Option<&str>) -> Option<&'a Value> {
    route["status"]["parents"].as_array()?.iter().find(|p| {
        p["controllerName"] == CONTROLLER
            && p["parentRef"]["name"] == gateway
            && p["parentRef"]["sectionName"].as_str() == section
    })
}

/// `Some((status, reason))`, to compare with [`status_reason`]'s answer.
pub fn cond(status: &str, reason: &str) -> Option<(String, String)> {
    Some((status.to_string(), reason.to_string()))
}

/// `(status, reason)` of `Accepted` in our parent entry for `gateway` (and section).
pub fn parent_accepted(
    route: &Value,
    gateway: &str,
    section: Option<&str>,
) -> Option<(String, String)> {
    our_parent(route, gateway, section).and_then(|p| status_reason(&p["conditions"], "Accepted"))
}

/// Polls object `ns/name` of kind `K` (as JSON) until `check` takes it, and returns
/// what `check` made of it; on the deadline, panics naming `what` and the last `Err`.
pub async fn until_object<K: NamespacedKind, T>(
    client: &kube::Client,
    ns: &str,
    name: &str,
    timeout: Duration,
    what: &str,
    check: impl Fn(&Value) -> Result<T, String>,
) -> T {
    eventually(timeout, what, || async {
        let obj = get_json::<K>(client, Some(ns), name)
            .await
            .ok_or(format!("no {ns}/{name}"))?;
        check(&obj)
    })
    .await
}

/// `Ok` once route `ns/name` has our parent entry for Gateway `gateway` with
/// Accepted=True/Accepted; otherwise what it has (for `eventually`'s message).
pub async fn route_accepted(
    client: &kube::Client,
    ns: &str,
    name: &str,
    gateway: &str,
) -> Result<(), String> {
    let r = get_json::<HttpRoute>(client, Some(ns), name)
        .await
        .ok_or("no such route")?;
    let a = parent_accepted(&r, gateway, None);
    if a == cond("True", "Accepted") {
        Ok(())
    } else {
        Err(format!("{a:?}"))
    }
}

/// `(status, reason)` of a Gateway's `Programmed` condition.
pub fn programmed(gw: &Value) -> Option<(String, String)> {
    status_reason(&gw["status"]["conditions"], "Programmed")
}

/// Waits until Gateway `ns/name` is `Programmed=True/Programmed` and `also` takes
/// it (`Err` says what is still missing), and returns it.
pub async fn until_programmed(
    client: &kube::Client,
    ns: &str,
    name: &str,
    timeout: Duration,
    what: &str,
    also: impl Fn(&Value) -> Result<(), String>,
) -> Value {
    until_object::<Gateway, _>(client, ns, name, timeout, what, |gw| {
        let p = programmed(gw);
        if p != cond("True", "Programmed") {
            return Err(format!("Programmed {p:?}"));
        }
        also(gw).map(|()| gw.clone())
    })
    .await
}

/// The holder of the agents' Lease (`aether-ingress/aether-edge`), if any.
pub async fn lease_holder(client: &kube::Client) -> Option<String> {
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), EDGE);
    leases
        .get_opt("aether-edge")
        .await
        .ok()??
        .spec?
        .holder_identity
}

/// Waits until agent `pod` holds the agents' Lease.
pub async fn until_leader(client: &kube::Client, pod: &str, timeout: Duration) {
    eventually(timeout, &format!("{pod} leads"), || async move {
        let h = lease_holder(client).await;
        (h.as_deref() == Some(pod))
            .then_some(())
            .ok_or(format!("{h:?}"))
    })
    .await
}

/// Waits until exactly `n` edge Services exist (labelled `aether.io/edge-gateway`
/// in `aether-ingress`) and returns them.
pub async fn edge_services(client: &kube::Client, n: usize, timeout: Duration) -> Vec<Service> {
    let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), EDGE);
    let lp = ListParams::default().labels("aether.io/edge-gateway");
    eventually(timeout, &format!("{n} edge Services"), || {
        let (services, lp) = (services.clone(), lp.clone());
        async move {
            let items = services.list(&lp).await.map_err(|e| e.to_string())?.items;
            if items.len() == n {
                Ok(items)
            } else {
                Err(format!("{} Services", items.len()))
            }
        }
    })
    .await
}

/// The one edge Service, once it exists (30 s).
pub async fn edge_service(client: &kube::Client) -> Service {
    let mut one = edge_services(client, 1, Duration::from_secs(30)).await;
    one.remove(0)
}

/// Waits until exactly `n` public Services exist (labelled
/// `aether.io/edge-gateway-public`, beside their Gateways) and returns them.
pub async fn public_services(client: &kube::Client, n: usize, timeout: Duration) -> Vec<Service> {
    let services: kube::Api<Service> = kube::Api::all(client.clone());
    let lp = ListParams::default().labels("aether.io/edge-gateway-public");
    eventually(timeout, &format!("{n} public Services"), || {
        let (services, lp) = (services.clone(), lp.clone());
        async move {
            let items = services.list(&lp).await.map_err(|e| e.to_string())?.items;
            if items.len() == n {
                Ok(items)
            } else {
                Err(format!("{} Services", items.len()))
            }
        }
    })
    .await
}

/// The one public Service (the load balancer's), once it exists (30 s).
pub async fn public_service(client: &kube::Client) -> Service {
    let mut one = public_services(client, 1, Duration::from_secs(30)).await;
    one.remove(0)
}

/// `(name, port, protocol, targetPort)` of each port of `svc`, in order (a named
/// targetPort panics: edge Services have numbers).
pub fn service_ports(svc: &Service) -> Vec<(String, i32, String, i32)> {
    let spec = svc.spec.as_ref().expect("a Service spec");
    spec.ports
        .iter()
        .flatten()
        .map(|p| {
            let Some(IntOrString::Int(target)) = p.target_port.clone() else {
                panic!("targetPort {:?}", p.target_port)
            };
            let name = p.name.clone().unwrap_or_default();
            (name, p.port, p.protocol.clone().unwrap_or_default(), target)
        })
        .collect()
}

/// Plays the load balancer: writes `ip` as (public) Service `svc`'s ingress address.
pub async fn assign_load_balancer(client: &kube::Client, svc: &Service, ip: &str) {
    let ns = svc.metadata.namespace.as_deref().unwrap_or(EDGE);
    let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), ns);
    let ingress = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
    services
        .patch_status(
            svc.metadata.name.as_deref().unwrap(),
            &PatchParams::default(),
            &Patch::Merge(ingress),
        )
        .await
        .unwrap();
}

/// Waits until an Event in `ns` passes `check` (e.g. its reason and what it
/// regards); panics naming `what` and the reasons seen.
pub async fn until_event(
    client: &kube::Client,
    ns: &str,
    what: &str,
    check: impl Fn(&k8s_openapi::api::events::v1::Event) -> bool,
) {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(client.clone(), ns);
    let check = &check;
    eventually(Duration::from_secs(20), what, || {
        let events = events.clone();
        async move {
            let list = events
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let reasons: Vec<_> = list.items.iter().map(|e| e.reason.clone()).collect();
            list.items
                .iter()
                .any(check)
                .then_some(())
                .ok_or(format!("events seen: {reasons:?}"))
        }
    })
    .await;
}

/// The name of the object an Event regards.
pub fn regarding(e: &k8s_openapi::api::events::v1::Event) -> Option<&str> {
    e.regarding.as_ref().and_then(|r| r.name.as_deref())
}
