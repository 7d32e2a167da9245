//! Kubernetes mode, one status write refused among many (issue point 2): a
//! ValidatingAdmissionPolicy denies status writes to one HTTPRoute. The writer keeps
//! going over the other objects (their status lands), reports the failure (a log
//! line naming the route, the error counter on `/metrics`), retries it with backoff,
//! and writes it once the policy is gone.

mod support;

use gateway_api::apis::standard::httproutes::HttpRoute;
use std::time::Duration;
use support::*;

const NS: &str = "app";

fn yaml() -> String {
    let route = |name: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /{name}}}}}]\n    backendRefs: [{{name: b0, port: 80}}]\n"
        )
    };
    [
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n"
        ),
        route("r1"),
        route("blocked"),
        route("r2"),
    ]
    .join("---\n")
}

/// Denies every status write to the HTTPRoute named `blocked`.
const POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: block-route-status}\nspec:\n  failurePolicy: Fail\n  matchConstraints:\n    resourceRules:\n    - apiGroups: [gateway.networking.k8s.io]\n      apiVersions: [\"*\"]\n      operations: [CREATE, UPDATE]\n      resources: [httproutes/status]\n  validations:\n  - expression: \"object.metadata.name != 'blocked'\"\n    message: test policy refuses this status\n---\n\
apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: block-route-status}\nspec:\n  policyName: block-route-status\n  validationActions: [Deny]\n";

async fn accepted(c: &kube::Client, name: &str) -> Result<(), String> {
    route_accepted(c, NS, name, "gw").await
}

#[test]
fn one_refused_status_write_does_not_stop_the_others_and_is_retried() {
    if !isolated() {
        return;
    }
    runtime().block_on(refused());
}

async fn refused() {
    let logs = temp_dir("kube-refused");
    let server = aether_testkit::ApiServer::start().await;
    let client = server.client();
    let c = &client;
    let b0 = Backend::on(POD_IP, "b0");
    server
        .apply(&[base_yaml(&[NS]), b0.yaml(NS), POLICY.to_string()].join("---\n"))
        .await
        .unwrap();
    // The policy is enforced once the API server has compiled it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.apply(&yaml()).await.unwrap();
    let agent = kube_agent(
        server.kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--address-mode",
            "static",
            "--default-address",
            POD_IP,
        ],
        &logs,
    );
    let _envoy = envoy("node-a", &agent.xds, true, &logs);

    for name in ["r1", "r2"] {
        eventually(Duration::from_secs(30), &format!("{name} accepted"), || {
            accepted(c, name)
        })
        .await;
    }
    let m = eventually(Duration::from_secs(30), "the refused write counted", || {
        let m = agent.metrics();
        async move {
            if metric_sum(
                &m,
                "aether_edge_status_writes_total",
                &["kind=\"HTTPRoute\"", "result=\"error\""],
            ) > 0
            {
                Ok(m)
            } else {
                Err(m)
            }
        }
    })
    .await;
    let blocked = get_json::<HttpRoute>(c, Some(NS), "blocked").await.unwrap();
    assert!(
        our_parent(&blocked, "gw", None).is_none(),
        "{}",
        blocked["status"]
    );
    let log = agent.proc.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("status write failed") && l.contains("app/blocked")),
        "a log line names the route:\n{log}"
    );
    // Retried with backoff, not in a hot loop and not given up.
    let first = metric_sum(
        &m,
        "aether_edge_status_writes_total",
        &["kind=\"HTTPRoute\"", "result=\"error\""],
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = metric_sum(
        &agent.metrics(),
        "aether_edge_status_writes_total",
        &["kind=\"HTTPRoute\"", "result=\"error\""],
    );
    println!("refused writes: {first}, 3 s later {later}");
    assert!(
        later > first && later < first + 20,
        "retries: {first} → {later}"
    );

    let policies: kube::Api<
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
    > = kube::Api::all(client.clone());
    policies
        .delete("block-route-status", &Default::default())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(30),
        "blocked accepted once allowed",
        || accepted(c, "blocked"),
    )
    .await;
}
