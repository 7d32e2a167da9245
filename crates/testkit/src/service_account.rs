//! Real ServiceAccount credentials for RBAC tests: the ServiceAccount (and its Namespace)
//! are created if missing, and a token is issued through the TokenRequest API, signed with
//! the run's service-account key. Requests made with it authenticate exactly as a pod's
//! would: user `system:serviceaccount:<ns>:<name>`, groups `system:serviceaccounts`,
//! `system:serviceaccounts:<ns>`, `system:authenticated`.

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::PostParams;
use kube::{Api, Client};

use crate::Error;

/// Long enough for any test; the API server accepts up to its maximum (none is set).
const TOKEN_SECONDS: i64 = 24 * 3600;

/// Ensures `namespace/name` exists and returns a fresh token for it.
pub(crate) async fn token(client: &Client, namespace: &str, name: &str) -> Result<String, Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(namespace).await?.is_none() {
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(namespace.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        create_if_absent(namespaces.create(&PostParams::default(), &ns).await)?;
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    if accounts.get_opt(name).await?.is_none() {
        let sa = ServiceAccount {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        create_if_absent(accounts.create(&PostParams::default(), &sa).await)?;
    }
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(TOKEN_SECONDS),
            ..Default::default()
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

/// A concurrent caller may have created it first; that is as good.
fn create_if_absent<T>(result: Result<T, kube::Error>) -> Result<(), Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
