//! ClusterTrustBundles (certificates.k8s.io, cluster-scoped): the CAs a
//! `caCertificateRef` of kind ClusterTrustBundle names.
//!
//! ```text
//!  GET /apis/certificates.k8s.io/v1beta1 ── lists ClusterTrustBundle? ──yes──► watch (for good)
//!        │ no (API off: Kubernetes 1.34 serves it only with the beta API enabled)
//!        │ or discovery fails
//!        ▼
//!  listed as empty (once), asked again every `rediscover`
//! ```
//!
//! A cluster without the API must not hold up the first publish: the kind then
//! counts as listed and empty, and a ref to a bundle is `InvalidCACertificateRef`
//! (the listener fails closed, as with a missing ConfigMap).

use crate::index::Index;
use crate::watch::{list_empty, watch_kind};
use k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle;
use kube::Client;
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};

/// The group version we read: the one Kubernetes 1.34 serves (v1alpha1 is older).
pub const GROUP_VERSION: &str = "certificates.k8s.io/v1beta1";

/// Watches ClusterTrustBundles once the API server serves them; until then they
/// are listed as empty. Runs until dropped.
pub async fn run(client: Client, index: Arc<Index>, rediscover: Duration) {
    let mut listed_empty = false;
    loop {
        match served(&client).await {
            Ok(true) => {
                info!(
                    kind = "ClusterTrustBundle",
                    version = GROUP_VERSION,
                    "watching"
                );
                return watch_kind::<ClusterTrustBundle>(client, index, None).await;
            }
            Ok(false) if !listed_empty => {
                warn!(
                    kind = "ClusterTrustBundle",
                    version = GROUP_VERSION,
                    "API not served: no ClusterTrustBundles (refs to one do not resolve)"
                );
            }
            Ok(false) => {}
            Err(e) => warn!(error = %e, version = GROUP_VERSION, "API discovery failed; retrying"),
        }
        if !listed_empty {
            list_empty::<ClusterTrustBundle>(&index);
            listed_empty = true;
        }
        tokio::time::sleep(rediscover).await;
    }
}

/// Does the API server list ClusterTrustBundle at [`GROUP_VERSION`]? `Err` only
/// when it cannot answer.
async fn served(client: &Client) -> Result<bool, kube::Error> {
    match client.list_api_group_resources(GROUP_VERSION).await {
        Ok(list) => Ok(list
            .resources
            .iter()
            .any(|r| r.kind == "ClusterTrustBundle")),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}
