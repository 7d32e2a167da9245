//! Manifests applied like `kubectl apply --server-side`, and ServiceAccount credentials
//! that get exactly what RBAC grants: what the deploy/ RBAC tests will build on.

use aether_testkit::ApiServer;
use gateway_api::apis::experimental::gateways::Gateway;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};

const RBAC: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: edge-system
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: agent
  namespace: edge-system
---
# an empty document, as kubectl tolerates
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: gateway-reader
rules:
  - apiGroups: [gateway.networking.k8s.io]
    resources: [gateways]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: gateway-reader
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: gateway-reader
subjects:
  - kind: ServiceAccount
    name: agent
    namespace: edge-system
"#;

fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>) {
    match result {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("expected 403 Forbidden, got {other:?}"),
    }
}

async fn whoami(client: Client) -> (String, Vec<String>) {
    let review: SelfSubjectReview = serde_json::from_value(serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
    }))
    .unwrap();
    let review = Api::<SelfSubjectReview>::all(client)
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    let info = review.status.unwrap().user_info.unwrap();
    let mut groups = info.groups.unwrap_or_default();
    groups.sort();
    (info.username.unwrap(), groups)
}

#[tokio::test]
async fn manifests_apply_and_service_accounts_get_exactly_their_rbac() {
    let server = ApiServer::start().await;
    manifests_apply_idempotently_under_the_kits_field_manager(&server).await;
    a_refused_document_is_named(&server).await;
    a_service_account_gets_exactly_its_rbac(&server).await;
    its_kubeconfig_carries_the_same_identity(&server).await;
    // A ServiceAccount nobody bound: authenticated, but granted nothing.
    let stranger = server
        .service_account_client("elsewhere", "nobody")
        .await
        .unwrap();
    forbidden(
        Api::<Gateway>::all(stranger)
            .list(&ListParams::default())
            .await,
    );
}

async fn manifests_apply_idempotently_under_the_kits_field_manager(server: &ApiServer) {
    let applied = server.apply(RBAC).await.unwrap();
    assert_eq!(
        applied,
        [
            "Namespace edge-system",
            "ServiceAccount edge-system/agent",
            "ClusterRole gateway-reader",
            "ClusterRoleBinding gateway-reader",
        ]
    );
    assert_eq!(server.apply(RBAC).await.unwrap(), applied);
    let role = Api::<ClusterRole>::all(server.client())
        .get("gateway-reader")
        .await
        .unwrap();
    let managers: Vec<_> = role
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["aether-testkit"]);
}

/// A document the API server does not know is an error naming nothing silently;
/// an object the API server refuses names itself, not just the server's message.
async fn a_refused_document_is_named(server: &ApiServer) {
    let unknown = "apiVersion: example.com/v1\nkind: Nothing\nmetadata: {name: x}\n";
    let err = server.apply(unknown).await.unwrap_err().to_string();
    assert!(err.starts_with("apply Nothing x (document 0)"), "{err}");
    let invalid = "apiVersion: v1\nkind: Namespace\nmetadata: {name: ok}\n---\n\
                   apiVersion: v1\nkind: Namespace\nmetadata: {name: Not_Valid}\n";
    let err = server.apply(invalid).await.unwrap_err().to_string();
    assert!(
        err.starts_with("apply Namespace Not_Valid (document 1)"),
        "{err}"
    );
}

/// It reads Gateways, and may neither read Secrets nor write Gateways.
async fn a_service_account_gets_exactly_its_rbac(server: &ApiServer) {
    let agent = server
        .service_account_client("edge-system", "agent")
        .await
        .unwrap();
    let (user, groups) = whoami(agent.clone()).await;
    assert_eq!(user, "system:serviceaccount:edge-system:agent");
    assert_eq!(
        groups,
        [
            "system:authenticated",
            "system:serviceaccounts",
            "system:serviceaccounts:edge-system"
        ]
    );
    Api::<Gateway>::all(agent.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    forbidden(
        Api::<Secret>::all(agent.clone())
            .list(&ListParams::default())
            .await,
    );
    let gateway: Gateway = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gw", "namespace": "edge-system"},
        "spec": {"gatewayClassName": "x", "listeners": [{"name": "h", "port": 80, "protocol": "HTTP"}]},
    }))
    .unwrap();
    forbidden(
        Api::<Gateway>::namespaced(agent, "edge-system")
            .create(&PostParams::default(), &gateway)
            .await,
    );
}

/// The kubeconfig a child process would get: same identity, SA namespace as default.
async fn its_kubeconfig_carries_the_same_identity(server: &ApiServer) {
    let path = server
        .service_account_kubeconfig("edge-system", "agent")
        .await
        .unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&path).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(config.default_namespace, "edge-system");
    let (user, _) = whoami(Client::try_from(config).unwrap()).await;
    assert_eq!(user, "system:serviceaccount:edge-system:agent");
}
