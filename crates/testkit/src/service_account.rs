//! Real ServiceAccount credentials for RBAC tests: the ServiceAccount (and its Namespace)
//! are created if missing, and a token is issued through the TokenRequest API, signed with
//! the run's service-account key. Requests made with it authenticate exactly as a pod's
//! would: user `system:serviceaccount:<ns>:<name>`, groups `system:serviceaccounts`,
//! `system:serviceaccounts:<ns>`, `system:authenticated`.

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::PostParams;
use kube::{Api, Client};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{ApiServer, Error};

/// Long enough for any test; the API server accepts up to its maximum (none is set).
const TOKEN_SECONDS: i64 = 24 * 3600;

/// Ensures `namespace/name` exists and returns a fresh token for it.
pub(crate) async fn token(client: &Client, namespace: &str, name: &str) -> Result<String, Error> {
    issue(client, namespace, name, TokenRequestSpec::default()).await
}

impl ApiServer {
    /// A token of ServiceAccount `namespace/name` for `audience`, bound to Pod
    /// `pod` on `node` (both created if missing), as a kubelet projects one (the
    /// API server then names the pod in the token's `extra`).
    pub async fn pod_token(
        &self,
        namespace: &str,
        name: &str,
        pod: &str,
        node: &str,
        audience: &str,
    ) -> Result<String, Error> {
        let client = &self.client();
        ensure_account(client, namespace, name).await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let found = match pods.get_opt(pod).await? {
            Some(p) => p,
            None => {
                let p: Pod = serde_json::from_value(serde_json::json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod, "namespace": namespace},
                    "spec": {"nodeName": node, "serviceAccountName": name,
                             "containers": [{"name": "agent", "image": "aether-edge:dev"}]},
                }))
                .expect("a valid Pod");
                pods.create(&PostParams::default(), &p).await?
            }
        };
        let spec = TokenRequestSpec {
            audiences: vec![audience.to_string()],
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: found.metadata.name.clone(),
                uid: found.metadata.uid.clone(),
            }),
            ..Default::default()
        };
        issue(client, namespace, name, spec).await
    }
}

async fn issue(
    client: &Client,
    namespace: &str,
    name: &str,
    spec: TokenRequestSpec,
) -> Result<String, Error> {
    let accounts = ensure_account(client, namespace, name).await?;
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(TOKEN_SECONDS),
            ..spec
        },
        ..Default::default()
    };
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await?;
    issued
        .status
        .map(|s| s.token)
        .ok_or_else(|| Error::NoToken(format!("{namespace}/{name}")))
}

/// Creates ServiceAccount `namespace/name` (and its Namespace) if missing.
async fn ensure_account(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Api<ServiceAccount>, Error> {
    create_if_absent(&Api::<Namespace>::all(client.clone()), namespace).await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    create_if_absent(&accounts, name).await?;
    Ok(accounts)
}

/// Creates object `name` (nothing but its name set) through `api` unless it
/// exists; a concurrent caller may have created it first, and that is as good.
async fn create_if_absent<K>(api: &Api<K>, name: &str) -> Result<(), Error>
where
    K: kube::Resource + Default + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    if api.get_opt(name).await?.is_some() {
        return Ok(());
    }
    let mut object = K::default();
    object.meta_mut().name = Some(name.to_string());
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
