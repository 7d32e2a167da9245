//! Kubernetes mode, the watches (issue point 1): an API server restart whose watch
//! history was compacted away (every resumed watch gets `410 Gone`) is survived by
//! relisting, and the relist replaces what the agent knew: a route deleted and a
//! route added while the agent could not watch are both seen afterwards.
//!
//! The agent is frozen (SIGSTOP) while the changes happen, so its watches cannot see
//! them as events; the API server is then restarted on an etcd compacted past the
//! watches' resourceVersions, and the agent thawed. No traffic: the Envoy resources
//! the agent would serve (`/debug/snapshot`) show what it knows.

use crate::support::*;
use std::time::Duration;

const NS: &str = "app";

fn route_yaml(name: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /{name}}}}}]\n    backendRefs: [{{name: b0, port: 80}}]\n"
    )
}

/// The HTTPRoutes whose routes the agent would serve, by name.
fn served_routes(agent: &KubeAgent) -> Option<Vec<String>> {
    let snapshot = agent.snapshot()?;
    let text = snapshot["resources"]["routes"].to_string();
    let mut names: Vec<String> = ["r1", "r2"]
        .into_iter()
        .filter(|r| text.contains(&format!("HTTPRoute/{NS}/{r}/")))
        .map(String::from)
        .collect();
    names.sort();
    Some(names)
}

#[test]
fn a_compacted_watch_history_is_survived_by_relisting() {
    runtime().block_on(async {
        let logs = temp_dir("kube-410");
        let mut server = aether_testkit::ApiServer::start().await;
        let yaml = [
            base_yaml(&[NS]),
            format!(
                "apiVersion: v1\nkind: Service\nmetadata: {{name: b0, namespace: {NS}}}\nspec:\n  ports: [{{name: http, port: 80}}]\n---\n\
                 apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n"
            ),
            route_yaml("r1"),
        ]
        .join("---\n");
        server.apply(&yaml).await.unwrap();
        let agent = kube_agent(
            server.kubeconfig_path(),
            &["--leader-elect=false", "--address-mode", "static"],
            &logs,
        );
        eventually(Duration::from_secs(30), "r1 served", || async {
            match served_routes(&agent) {
                Some(r) if r == ["r1"] => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;

        // While the agent cannot watch: r1 goes, r2 comes, and the history of both
        // is compacted away.
        agent.proc.signal("STOP");
        server.apply(&route_yaml("r2")).await.unwrap();
        let routes: kube::Api<gateway_api::apis::experimental::httproutes::HttpRoute> =
            kube::Api::namespaced(server.client(), NS);
        routes.delete("r1", &Default::default()).await.unwrap();
        server.stop_apiserver().await;
        server.compact_etcd().await.unwrap();
        server.start_apiserver().await;
        agent.proc.signal("CONT");

        eventually(Duration::from_secs(60), "the relist: r2 only", || async {
            match served_routes(&agent) {
                Some(r) if r == ["r2"] => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        // r1's deletion can only have been learnt by relisting: the restarted API
        // server cannot replay history older than the compaction (a resumed watch
        // gets 410 Gone, which kube-runtime answers with a fresh list).
    });
}
