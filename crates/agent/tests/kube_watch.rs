//! Kubernetes mode, the watches (issue point 1): an object the API server accepts but
//! our types cannot read (an HTTPRoute with the experimental-only `ExternalAuth`
//! filter, read through the standard-channel types) is skipped with a warning that
//! names it — in the initial list (which must still complete, or nothing would ever
//! be published) and later on — while every other object keeps flowing. And
//! only `kubernetes.io/tls` Secrets are read at all.

mod support;

use gateway_api::apis::standard::gateways::Gateway;
use std::time::Duration;
use support::*;

const NS: &str = "app";

fn gateway_yaml() -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n"
    )
}

fn route_yaml(name: &str, filters: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /{name}}}}}]\n    filters: {filters}\n    backendRefs: [{{name: b0, port: 80}}]\n"
    )
}

const EXT_AUTH: &str = "[{type: ExternalAuth, externalAuth: {protocol: HTTP, backendRef: {name: b0, port: 80}, http: {}}}]";

async fn accepted(c: &kube::Client, name: &str) -> Result<(), String> {
    route_accepted(c, NS, name, "gw").await
}

#[test]
fn an_unreadable_object_is_skipped_and_named_and_the_watch_goes_on() {
    if !isolated() {
        return;
    }
    runtime().block_on(unreadable());
}

async fn unreadable() {
    let logs = temp_dir("kube-watch");
    let server = aether_testkit::ApiServer::start().await;
    let client = server.client();
    let c = &client;
    let b0 = Backend::on(POD_IP, "b0");
    let yaml = [
        base_yaml(&[NS]),
        b0.yaml(NS),
        gateway_yaml(),
        route_yaml("r1", "[]"),
        route_yaml("early-bad", EXT_AUTH),
    ]
    .join("---\n");
    server.apply(&yaml).await.unwrap();
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
    eventually(
        Duration::from_secs(30),
        "r1 accepted despite early-bad",
        || accepted(c, "r1"),
    )
    .await;

    server
        .apply(&route_yaml("late-bad", EXT_AUTH))
        .await
        .unwrap();
    server.apply(&route_yaml("r2", "[]")).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "r2 accepted after late-bad",
        || accepted(c, "r2"),
    )
    .await;
    let r = http_get(&format!("{POD_IP}:80"), "example.test", "/r2", &[]).unwrap();
    assert_eq!(r.backend(), Some("b0"), "{r:?}");

    let gw = get_json::<Gateway>(c, Some(NS), "gw").await.unwrap();
    assert_eq!(
        gw["status"]["listeners"][0]["attachedRoutes"], 2,
        "only the readable routes count: {}",
        gw["status"]
    );
    let log = agent.proc.log_text();
    for bad in ["early-bad", "late-bad"] {
        assert!(
            log.lines()
                .any(|l| l.contains(&format!("{NS}/{bad}")) && l.contains("WARN")),
            "a warning names {bad}:\n{log}"
        );
    }
}

#[test]
fn only_tls_secrets_are_read() {
    if !isolated() {
        return;
    }
    runtime().block_on(secrets());
}

/// A Gateway whose listeners name an Opaque Secret and a (garbled) TLS one:
/// the TLS one is read (and refused for what it holds); the Opaque one is not
/// even in the agent's memory, so it is "not found". Were every Secret watched,
/// it would be "Secret type is not kubernetes.io/tls".
async fn secrets() {
    let logs = temp_dir("kube-secrets");
    let server = aether_testkit::ApiServer::start().await;
    let client = server.client();
    let c = &client;
    let secret = |name: &str, type_: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {NS}}}\ntype: {type_}\nstringData: {{tls.crt: not-a-cert, tls.key: not-a-key}}\n"
        )
    };
    let https = |l: &str, cert: &str| {
        format!(
            "  - {{name: {l}, protocol: HTTPS, port: 443, hostname: {l}.example.com, tls: {{certificateRefs: [{{name: {cert}}}]}}}}\n"
        )
    };
    let gateway = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n{}{}",
        https("opaque", "opaque"),
        https("garbled", "garbled")
    );
    let yaml = [
        base_yaml(&[NS]),
        secret("opaque", "Opaque"),
        secret("garbled", "kubernetes.io/tls"),
        gateway,
    ]
    .join("---\n");
    server.apply(&yaml).await.unwrap();
    let _agent = kube_agent(
        server.kubeconfig_path(),
        &["--leader-elect=false", "--address-mode", "static"],
        &logs,
    );
    let messages = eventually(Duration::from_secs(30), "listener status", || async move {
        let gw = get_json::<Gateway>(c, Some(NS), "gw").await.ok_or("none")?;
        let listeners = gw["status"]["listeners"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let message = |name: &str| {
            listeners
                .iter()
                .find(|l| l["name"] == name)
                .and_then(|l| condition(&l["conditions"], "ResolvedRefs"))
                .and_then(|c| c["message"].as_str().map(str::to_string))
        };
        match (message("opaque"), message("garbled")) {
            (Some(o), Some(g)) => Ok((o, g)),
            _ => Err(gw["status"].to_string()),
        }
    })
    .await;
    assert!(messages.0.contains("Secret not found"), "{messages:?}");
    assert!(
        messages.1.contains("holds no PEM certificate"),
        "{messages:?}"
    );
}
