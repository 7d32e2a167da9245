//! Kubernetes mode, one status write refused among many (issue point 2): a
//! ValidatingAdmissionPolicy denies status writes to one HTTPRoute. The writer keeps
//! going over the other objects (their status lands), reports the failure (a log
//! line naming the route, the error counter on `/metrics`), retries it with backoff,
//! and writes it once the policy is gone.

use crate::support::*;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use std::time::Duration;

const NS: &str = "app";
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn one_refused_status_write_does_not_stop_the_others_and_is_retried() {
    in_netns(async {
        let w = given_a_policy_refusing_one_routes_status().await;
        the_other_routes_status_lands(&w).await;
        let first = the_refused_write_is_counted_and_logged(&w).await;
        it_is_retried_with_backoff(&w, first).await;
        it_lands_once_the_policy_is_gone(&w).await;
    });
}

type World = OneNode;

/// Denies every status write to the HTTPRoute named `blocked`.
const POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: block-route-status}\nspec:\n  failurePolicy: Fail\n  matchConstraints:\n    resourceRules:\n    - apiGroups: [gateway.networking.k8s.io]\n      apiVersions: [\"*\"]\n      operations: [CREATE, UPDATE]\n      resources: [httproutes/status]\n  validations:\n  - expression: \"object.metadata.name != 'blocked'\"\n    message: test policy refuses this status\n---\n\
apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: block-route-status}\nspec:\n  policyName: block-route-status\n  validationActions: [Deny]\n";

async fn given_a_policy_refusing_one_routes_status() -> World {
    let logs = temp_dir("kube-refused");
    let b0 = Backend::on(POD_IP, "b0");
    let server = given_cluster(&[base_yaml(&[NS]), b0.yaml(NS), POLICY.to_string()]).await;
    // The policy is enforced once the API server has compiled it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let routes = ["r1", "blocked", "r2"].map(|r| mk_prefix_route(NS, r, "b0"));
    let yaml = [&[mk_gateway(NS, "gw", &[HTTP_80])][..], &routes].concat();
    server.apply(&yaml.join("---\n")).await.unwrap();
    OneNode::start(server, b0, &STATIC_AT_POD_IP, &logs)
}

/// HTTPRoute status writes the API server refused, from the agent's metrics.
fn refused_writes(metrics: &str) -> u64 {
    status_writes(metrics, "HTTPRoute", "error")
}

async fn the_other_routes_status_lands(w: &World) {
    let c = &w.client;
    for name in ["r1", "r2"] {
        eventually(WAIT, &format!("{name} accepted"), || {
            route_accepted(c, NS, name, "gw")
        })
        .await;
    }
}

/// Counted on `/metrics`, the route named in the log, nothing written on it.
/// Returns the count.
async fn the_refused_write_is_counted_and_logged(w: &World) -> u64 {
    let m = eventually(WAIT, "the refused write counted", || {
        let m = w.agent.metrics();
        async move {
            if refused_writes(&m) > 0 {
                Ok(m)
            } else {
                Err(m)
            }
        }
    })
    .await;
    let blocked = get_json::<HttpRoute>(&w.client, Some(NS), "blocked")
        .await
        .unwrap();
    assert!(
        our_parent(&blocked, "gw", None).is_none(),
        "{}",
        blocked["status"]
    );
    let log = w.agent.proc.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("status write failed") && l.contains("app/blocked")),
        "a log line names the route:\n{log}"
    );
    refused_writes(&m)
}

/// Retried with backoff, not in a hot loop and not given up.
async fn it_is_retried_with_backoff(w: &World, first: u64) {
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = refused_writes(&w.agent.metrics());
    println!("refused writes: {first}, 3 s later {later}");
    assert!(
        later > first && later < first + 20,
        "retries: {first} → {later}"
    );
}

async fn it_lands_once_the_policy_is_gone(w: &World) {
    let policies: kube::Api<
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
    > = kube::Api::all(w.client.clone());
    policies
        .delete("block-route-status", &Default::default())
        .await
        .unwrap();
    let c = &w.client;
    eventually(WAIT, "blocked accepted once allowed", || {
        route_accepted(c, NS, "blocked", "gw")
    })
    .await;
}
