//! Applying YAML manifests (e.g. the deploy/ RBAC) the way `kubectl apply --server-side`
//! does: each document in order, its kind resolved through API discovery, server-side
//! applied with field manager `aether-testkit`. Order matters as in kubectl: a Namespace
//! before the objects in it.

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use kube::{Api, Client};
use serde::Deserialize;

use crate::Error;

pub(crate) const FIELD_MANAGER: &str = "aether-testkit";

/// Applies every non-empty document of `yaml`; returns `Kind namespace/name` (or
/// `Kind name` for cluster-scoped objects) per object, in document order.
pub(crate) async fn apply(client: &Client, yaml: &str) -> Result<Vec<String>, Error> {
    let mut applied = Vec::new();
    for (index, doc) in serde_norway::Deserializer::from_str(yaml).enumerate() {
        let invalid = |reason: String| Error::Manifest { index, reason };
        let value = serde_norway::Value::deserialize(doc).map_err(|e| invalid(e.to_string()))?;
        if value.is_null() {
            continue;
        }
        let object: DynamicObject =
            serde_norway::from_value(value).map_err(|e| invalid(e.to_string()))?;
        let types = object
            .types
            .as_ref()
            .ok_or_else(|| invalid("no apiVersion/kind".into()))?;
        let gvk = GroupVersionKind::try_from(types).map_err(|e| invalid(e.to_string()))?;
        let name = object
            .metadata
            .name
            .clone()
            .ok_or_else(|| invalid("no metadata.name".into()))?;
        let (resource, capabilities) =
            pinned_kind(client, &gvk).await.map_err(|e| Error::Apply {
                object: format!("{} {name} (document {index})", gvk.kind),
                source: Box::new(e),
            })?;
        let (api, label) = match capabilities.scope {
            Scope::Namespaced => {
                let ns = object.metadata.namespace.as_deref().unwrap_or("default");
                (
                    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource),
                    format!("{} {ns}/{name}", gvk.kind),
                )
            }
            Scope::Cluster => (
                Api::<DynamicObject>::all_with(client.clone(), &resource),
                format!("{} {name}", gvk.kind),
            ),
        };
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(&name, &params, &Patch::Apply(&object))
            .await
            .map_err(|e| Error::Apply {
                object: format!("{label} (document {index})"),
                source: Box::new(e),
            })?;
        applied.push(label);
    }
    Ok(applied)
}
