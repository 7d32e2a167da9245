//! What the agent writes, read back from the API server as JSON: conditions, our
//! route parent entries, the Gateway's `Programmed`, the edge Services; and the
//! objects every Kubernetes-mode test starts from.

use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use k8s_openapi::api::core::v1::Service;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::time::Duration;

use super::eventually;

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

/// An object as JSON (`None` while it does not exist or cannot be read).
pub async fn get_json<K>(client: &kube::Client, ns: Option<&str>, name: &str) -> Option<Value>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
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
    let a = our_parent(&r, gateway, None).and_then(|p| status_reason(&p["conditions"], "Accepted"));
    if a == Some(("True".into(), "Accepted".into())) {
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
    eventually(timeout, what, || async {
        let gw = get_json::<Gateway>(client, Some(ns), name)
            .await
            .ok_or("no such Gateway")?;
        let p = programmed(&gw);
        if p != Some(("True".into(), "Programmed".into())) {
            return Err(format!("Programmed {p:?}"));
        }
        also(&gw).map(|()| gw)
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

/// Plays the load balancer: writes `ip` as edge Service `svc`'s ingress address.
pub async fn assign_load_balancer(client: &kube::Client, svc: &Service, ip: &str) {
    let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), EDGE);
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
