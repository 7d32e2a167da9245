//! Who must serve a Gateway (service mode): the nodes its edge Service sends
//! traffic to, read from the Service's EndpointSlices.
//!
//! ```text
//!  EndpointSlice (edge namespace, kubernetes.io/service-name = S)
//!    endpoints[].nodeName where conditions.ready is not false
//!  Service S ──gateway_of──► Gateway
//! ```
//!
//! An endpoint is Ready once its edge pod's readiness probe passes, which the
//! agent grants only after its Envoy has caught up (see the agent's `/readyz`),
//! so a joining node is a member from the moment it takes traffic, and a node
//! that leaves (or fails its probe) stops holding status back.

use super::{gateway_of, is_edge_service};
use aether_gateway::Store;
use aether_ir::ObjectRef;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::collections::{BTreeMap, BTreeSet};

/// The label the EndpointSlice controller puts on a Service's slices.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Per Gateway with an edge Service in `namespace`, the nodes of its Ready
/// endpoints. A Gateway whose Service has no Ready endpoint (yet) is absent.
pub fn members(store: &Store, namespace: &str) -> BTreeMap<ObjectRef, BTreeSet<String>> {
    let services = store.all::<Service>();
    let mut out: BTreeMap<ObjectRef, BTreeSet<String>> = BTreeMap::new();
    for (key, slice) in store.all::<EndpointSlice>() {
        if key.namespace != namespace {
            continue;
        }
        let Some(service) = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
        else {
            continue;
        };
        let Some(gw) = services
            .get(&ObjectRef::new(namespace, service))
            .filter(|s| is_edge_service(s, namespace))
            .and_then(|s| gateway_of(s))
        else {
            continue;
        };
        // Kubernetes: a nil `ready` is to be read as ready.
        let nodes = slice
            .endpoints
            .iter()
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
            .filter_map(|e| e.node_name.clone());
        out.entry(gw).or_default().extend(nodes);
    }
    out.retain(|_, nodes| !nodes.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{GATEWAY_LABEL, GATEWAY_NAME_ANNOTATION, GATEWAY_NAMESPACE_ANNOTATION};
    use serde_json::json;

    fn edge_service(name: &str, gw: &str) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "edge",
                "labels": {GATEWAY_LABEL: gw},
                "annotations": {GATEWAY_NAMESPACE_ANNOTATION: "apps", GATEWAY_NAME_ANNOTATION: gw}},
        }))
        .unwrap()
    }

    fn slice(ns: &str, name: &str, service: &str, endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns, "labels": {SERVICE_NAME_LABEL: service}},
            "addressType": "IPv4",
            "endpoints": endpoints,
        }))
        .unwrap()
    }

    fn store(services: Vec<Service>, slices: Vec<EndpointSlice>) -> Store {
        let mut store = Store::default();
        services.into_iter().for_each(|s| store.insert(s));
        slices.into_iter().for_each(|s| store.insert(s));
        store
    }

    fn nodes(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn the_ready_endpoints_of_each_edge_service() {
        let s = store(
            vec![
                edge_service("edge-web", "web"),
                edge_service("edge-api", "api"),
            ],
            vec![
                slice(
                    "edge",
                    "edge-web-1",
                    "edge-web",
                    json!([
                        {"addresses": ["10.0.0.1"], "nodeName": "node-a", "conditions": {"ready": true}},
                        {"addresses": ["10.0.0.2"], "nodeName": "node-b", "conditions": {"ready": false}},
                        {"addresses": ["10.0.0.3"], "nodeName": "node-c"},
                        {"addresses": ["10.0.0.4"], "conditions": {"ready": true}},
                    ]),
                ),
                slice(
                    "edge",
                    "edge-web-2",
                    "edge-web",
                    json!([{"addresses": ["10.0.0.5"], "nodeName": "node-d"}]),
                ),
                // Every endpoint of api's Service is unready: no member known.
                slice(
                    "edge",
                    "edge-api-1",
                    "edge-api",
                    json!([{"addresses": ["10.0.0.1"], "nodeName": "node-a", "conditions": {"ready": false}}]),
                ),
                // Another namespace's Service of the same name, and a slice of a
                // Service that is not ours.
                slice(
                    "apps",
                    "edge-web-x",
                    "edge-web",
                    json!([{"addresses": ["10.0.1.1"], "nodeName": "node-x"}]),
                ),
                slice(
                    "edge",
                    "other-1",
                    "other",
                    json!([{"addresses": ["10.0.1.2"], "nodeName": "node-y"}]),
                ),
            ],
        );
        let m = members(&s, "edge");
        assert_eq!(
            m,
            BTreeMap::from([(
                ObjectRef::new("apps", "web"),
                nodes(&["node-a", "node-c", "node-d"])
            )])
        );
    }
}
