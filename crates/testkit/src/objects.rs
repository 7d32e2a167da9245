//! Objects in a test API server by the shortest road: created from JSON, listed whole.

use kube::Api;
use kube::api::{ApiResource, ListParams, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Creates `value` (JSON of a `K`) through `api`; panics if the server refuses it.
pub async fn create<K>(api: &Api<K>, value: Value)
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

/// Every `K` in the cluster.
pub async fn list_all<K>(client: &kube::Client) -> Vec<K>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// Gateway API kind `kind` (resource `plural`) as served at `version`, for a
/// dynamic `Api` on a version no typed model has (e.g. TCPRoute at v1alpha2).
pub fn gateway_api_resource(kind: &str, plural: &str, version: &str) -> ApiResource {
    let group = "gateway.networking.k8s.io";
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}
