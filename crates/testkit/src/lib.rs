//! Test support for Kubernetes mode: a real kube-apiserver + etcd on loopback with the
//! Gateway API CRDs the conformance module pins (experimental channel) installed,
//! nothing else.
//!
//! ```text
//!   conformance/build-tools apiserver ─▶ etcd, kube-apiserver   (cached build, see locate.rs)
//!   Go module cache ─▶ gateway-api/config/crd/experimental       (never copied into the repo)
//!
//!   ApiServer::start() ─▶ etcd ◀── kube-apiserver https://127.0.0.1:<random>
//!        │                        token auth (system:masters), RBAC, own CA, SA keys
//!        ├─ client() / client_as(user, groups)        kube::Client
//!        ├─ kubeconfig_path()                           for child processes
//!        ├─ service_account_client / _kubeconfig        real SA tokens, for RBAC tests
//!        ├─ apply(yaml)                                 server-side apply, like kubectl
//!        ├─ delete_crds(names) / install_crds(dir, names) another release's CRDs, or none
//!        ├─ stop_apiserver() / start_apiserver()        outage: same port, same etcd
//!        ├─ compact_etcd()                              with a restart: watches get 410
//!        └─ drop                                        kills both, removes the directory
//! ```
//!
//! ```no_run
//! # async fn demo() {
//! let server = aether_testkit::ApiServer::start().await;
//! let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
//!     kube::Api::all(server.client());
//! # }
//! ```
//!
//! [`live`] is the kit of the tests that run the real `aether-edge` binary: Envoy, the
//! agent in either mode, backends, a network namespace per Kubernetes-mode test, and
//! readers of the status the agent writes.
//!
//! Environment: `AETHER_KUBE_BIN_DIR` (skip `build-tools`), `AETHER_GATEWAY_API_CRD_DIR`
//! (skip `go list`), `AETHER_TESTKIT_KEEP=1` (keep the directory with the process logs),
//! `AETHER_TESTKIT_SEED=0` (install the CRDs on every start instead of copying a seeded
//! etcd, see `seed.rs`).

mod apiserver;
mod crds;
mod error;
mod etcd;
pub mod live;
mod locate;
mod manifests;
mod objects;
mod pki;
mod process;
mod run_dir;
mod seed;
mod service_account;

pub use apiserver::ApiServer;
pub use error::Error;
pub use locate::{envoy_bin, gateway_api_crd_dir, gateway_api_crd_dir_at, kube_bin_dir, repo_root};
pub use objects::{create, gateway_api_resource, list_all};

/// The sum of the samples of metric `name` in Prometheus text `text` whose
/// line contains every one of `labels` (e.g. `r#"reason="wrong_node""#`); 0 when
/// there are none.
pub fn metric_sum(text: &str, name: &str, labels: &[&str]) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(name) && labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Status writes the status writer counted (`aether_edge_status_writes_total`)
/// for objects of `kind` (e.g. `Gateway`) with `result` (`ok` or `error`).
pub fn status_writes(metrics: &str, kind: &str, result: &str) -> u64 {
    let kind = format!("kind=\"{kind}\"");
    let result = format!("result=\"{result}\"");
    metric_sum(
        metrics,
        "aether_edge_status_writes_total",
        &[&kind, &result],
    )
}

/// `(controllerName, parentRef.name)` of each entry of a route status's `parents`,
/// in order: who says what about which parent, for terse assertions.
pub fn parent_controllers(status: &serde_json::Value) -> Vec<(String, String)> {
    status["parents"]
        .as_array()
        .expect("a route status with parents")
        .iter()
        .map(|p| {
            (
                p["controllerName"].as_str().unwrap().into(),
                p["parentRef"]["name"].as_str().unwrap().into(),
            )
        })
        .collect()
}
