//! XBackends (gateway.networking.x-k8s.io/v1alpha1) in the Kubernetes tests: the
//! objects as YAML, and the headless Services the leader keeps for them.

use aether_testkit::live::eventually;
use k8s_openapi::api::core::v1::Service;
use kube::api::ListParams;
use std::time::Duration;

/// An EndpointSelector XBackend `ns/name` selecting `labels` (a YAML flow map)
/// on port `port`.
pub fn mk_xbackend(ns: &str, name: &str, labels: &str, port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.x-k8s.io/v1alpha1\nkind: XBackend\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  type: EndpointSelector\n  port: {{number: {port}}}\n  endpointSelector:\n    matchLabels: {labels}\n"
    )
}

/// The same XBackend made an ExternalHostname one (no Service of ours then).
pub fn mk_external_xbackend(ns: &str, name: &str, port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.x-k8s.io/v1alpha1\nkind: XBackend\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  type: ExternalHostname\n  port: {{number: {port}}}\n  externalHostname: {{hostname: api.example.com}}\n"
    )
}

/// The Services in `ns` an XBackend owns and we manage, sorted by name.
pub async fn xbackend_services_now(
    client: &kube::Client,
    ns: &str,
) -> Result<Vec<Service>, String> {
    let api: kube::Api<Service> = kube::Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels("app.kubernetes.io/managed-by=aether-edge");
    let mut items: Vec<Service> = api
        .list(&lp)
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .filter(|s| {
            s.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.kind == "XBackend")
        })
        .collect();
    items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(items)
}

/// Waits until the XBackend Services in `ns` pass `check`, and returns them.
pub async fn until_xbackend_services(
    client: &kube::Client,
    ns: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&[Service]) -> bool,
) -> Vec<Service> {
    let check = &check;
    eventually(timeout, what, || async move {
        let items = xbackend_services_now(client, ns).await?;
        if check(&items) {
            Ok(items)
        } else {
            Err(format!("{:#?}", summary(&items)))
        }
    })
    .await
}

/// Per Service: name, selector, ports and owner uids, for failure messages.
fn summary(items: &[Service]) -> Vec<String> {
    items
        .iter()
        .map(|s| {
            let spec = s.spec.clone().unwrap_or_default();
            let owners: Vec<_> = s
                .metadata
                .owner_references
                .iter()
                .flatten()
                .map(|r| r.uid.clone())
                .collect();
            format!(
                "{:?} selector {:?} ports {:?} owners {owners:?}",
                s.metadata.name, spec.selector, spec.ports
            )
        })
        .collect()
}

/// What the EndpointSlice controller would write for XBackend Service `svc`:
/// one ready endpoint `ip:port`, its port named like the Service's.
pub fn mk_slice_for(svc: &Service, ip: &str, port: u16) -> String {
    let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
    let name = svc.metadata.name.as_deref().unwrap_or_default();
    let port_name = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p[0].name.clone())
        .unwrap_or_default();
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports:\n- {{name: {port_name}, port: {port}, protocol: TCP}}\nendpoints:\n- addresses: [\"{ip}\"]\n  conditions: {{ready: true}}\n"
    )
}
