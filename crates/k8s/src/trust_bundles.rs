//! ClusterTrustBundles (certificates.k8s.io, cluster-scoped): the CAs a
//! `caCertificateRef` of kind ClusterTrustBundle names.
//!
//! ```text
//!  GET /apis/certificates.k8s.io/v1beta1: ClusterTrustBundle listed?
//!    ├─ yes, and a list of them is allowed ──► watch (for good)
//!    ├─ yes, but RBAC forbids reading them ──┐
//!    ├─ no (Kubernetes 1.34: the beta API off)├─► listed as empty (once),
//!    └─ discovery fails ──────────────────────┘   asked again every `rediscover`
//! ```
//!
//! A cluster without the API (or without our right to read it) must not hold up
//! the first publish: the kind then counts as listed and empty, and a ref to a
//! bundle is `InvalidCACertificateRef` (the listener fails closed, as with a
//! missing ConfigMap).

use crate::index::Index;
use crate::watch::{list_empty, watch_kind};
use k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle;
use kube::api::ListParams;
use kube::{Api, Client};
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};

/// The group version we read: the one Kubernetes 1.34 serves (v1alpha1 is older).
pub const GROUP_VERSION: &str = "certificates.k8s.io/v1beta1";

const KIND: &str = "ClusterTrustBundle";

/// Watches ClusterTrustBundles once the API server serves them and lets us
/// read them; until then they are listed as empty. Runs until dropped.
pub async fn run(client: Client, index: Arc<Index>, rediscover: Duration) {
    let mut listed_empty = false;
    loop {
        match served(&client).await {
            Ok(Served::Readable) => {
                info!(kind = KIND, version = GROUP_VERSION, "watching");
                return watch_kind::<ClusterTrustBundle>(client, index, None).await;
            }
            Ok(Served::No) if !listed_empty => warn!(
                kind = KIND,
                version = GROUP_VERSION,
                "API not served: no ClusterTrustBundles (refs to one do not resolve)"
            ),
            Ok(Served::Forbidden(why)) if !listed_empty => warn!(
                kind = KIND,
                error = %why,
                "served but not readable (RBAC): no ClusterTrustBundles (refs to one do not resolve)"
            ),
            Ok(_) => {}
            Err(e) => warn!(error = %e, version = GROUP_VERSION, "API discovery failed; retrying"),
        }
        if !listed_empty {
            list_empty::<ClusterTrustBundle>(&index);
            listed_empty = true;
        }
        tokio::time::sleep(rediscover).await;
    }
}

/// What the API server says of ClusterTrustBundles.
enum Served {
    No,
    /// Served, and we may not list them: a watch would never complete its
    /// first list, and would hold up every publish.
    Forbidden(String),
    Readable,
}

/// Does the API server serve ClusterTrustBundle at [`GROUP_VERSION`], and may
/// we list them? `Err` only when it cannot answer.
async fn served(client: &Client) -> Result<Served, kube::Error> {
    match client.list_api_group_resources(GROUP_VERSION).await {
        Ok(list) if list.resources.iter().any(|r| r.kind == KIND) => {}
        Ok(_) => return Ok(Served::No),
        Err(kube::Error::Api(s)) if s.is_not_found() => return Ok(Served::No),
        Err(e) => return Err(e),
    }
    let api: Api<ClusterTrustBundle> = Api::all(client.clone());
    match api.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(Served::Readable),
        Err(kube::Error::Api(s)) if s.code == 401 || s.code == 403 => {
            Ok(Served::Forbidden(format!("{}: {}", s.reason, s.message)))
        }
        Err(e) => Err(e),
    }
}
