//! Who must serve the Gateways (static mode): the nodes whose edge pod is Ready.
//!
//! In static mode no Service stands between clients and the edge: every edge
//! pod binds every Gateway's addresses, so every Ready edge pod takes every
//! Gateway's traffic. Readiness is the agent's `/readyz`, granted once its Envoy
//! has caught up.

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, Client};
use std::collections::{BTreeMap, BTreeSet};
use tokio::sync::watch;
use tracing::warn;

/// Watches the pods of `namespace` that match `selector` (a label selector,
/// `k=v,...`) and sends the nodes of the Ready ones on every change.
pub fn ready_nodes(
    client: Client,
    namespace: &str,
    selector: String,
) -> watch::Receiver<BTreeSet<String>> {
    let (tx, rx) = watch::channel(BTreeSet::new());
    let api: Api<Pod> = Api::namespaced(client, namespace);
    tokio::spawn(async move {
        let config = watcher::Config::default().labels(&selector);
        let mut stream = std::pin::pin!(watcher(api, config).default_backoff());
        // Pod name → its node while the pod is Ready.
        let mut pods: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut listing: Option<BTreeMap<String, Option<String>>> = None;
        while let Some(event) = futures::StreamExt::next(&mut stream).await {
            match event {
                Ok(watcher::Event::Init) => listing = Some(BTreeMap::new()),
                Ok(watcher::Event::InitApply(pod)) => {
                    if let Some(l) = listing.as_mut() {
                        l.insert(name(&pod), ready_node(&pod));
                    }
                }
                Ok(watcher::Event::InitDone) => pods = listing.take().unwrap_or_default(),
                Ok(watcher::Event::Apply(pod)) => {
                    pods.insert(name(&pod), ready_node(&pod));
                }
                Ok(watcher::Event::Delete(pod)) => {
                    pods.remove(&name(&pod));
                }
                Err(e) => {
                    warn!(error = %e, "watching the edge pods failed; retrying with backoff");
                    continue;
                }
            }
            if listing.is_some() {
                continue;
            }
            let nodes: BTreeSet<String> = pods.values().flatten().cloned().collect();
            tx.send_if_modified(|current| {
                let changed = *current != nodes;
                if changed {
                    *current = nodes;
                }
                changed
            });
        }
    });
    rx
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// The pod's node, if the pod is Ready and not being deleted.
fn ready_node(pod: &Pod) -> Option<String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let ready = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    ready
        .then(|| pod.spec.as_ref()?.node_name.clone())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(node: Option<&str>, ready: &str, deleting: bool) -> Pod {
        let mut meta = json!({"name": "p", "namespace": "edge"});
        if deleting {
            meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({
            "metadata": meta,
            "spec": {"nodeName": node, "containers": []},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        }))
        .unwrap()
    }

    #[test]
    fn only_a_ready_scheduled_pod_that_stays_names_its_node() {
        assert_eq!(
            ready_node(&pod(Some("n1"), "True", false)).as_deref(),
            Some("n1")
        );
        assert_eq!(ready_node(&pod(Some("n1"), "False", false)), None);
        assert_eq!(ready_node(&pod(None, "True", false)), None);
        assert_eq!(ready_node(&pod(Some("n1"), "True", true)), None);
    }
}
