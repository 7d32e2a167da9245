//! Kubernetes mode, the report port as an attacker on the node network sees it:
//! it speaks TLS only, with the certificate the leader's Lease names (a
//! plain-text stream gets nowhere); a report stream is taken only with an edge
//! agent's pod-bound token for the report audience, checked by the real API
//! server (TokenReview), and speaks only for the node that pod runs on.
//! Everything else is refused and counted. The controller runs as deployed:
//! `--role controller`, the writer identity, exactly the RBAC of `deploy/`.

use crate::support::*;
use aether_report::client::LeaderEndpoint;
use aether_report::pb::AckReport;
use k8s_openapi::api::core::v1::Pod;
use std::time::Duration;
use tonic::Code;

const EDGE: &str = "aether-ingress";
const AGENTS: &str = "aether-edge";
const AUDIENCE: &str = aether_report::auth::AUDIENCE;

fn mk_report(node: &str) -> AckReport {
    AckReport {
        node: node.into(),
        envoy_connected: true,
        acked: [("app/gw".to_string(), "forged".to_string())].into(),
        ..Default::default()
    }
}

/// One stream to `leader` (over TLS, trusting the certificate its Lease
/// names) carrying `token` (if any) and `report`: how many reports the leader
/// took, or the code it refused the stream with.
async fn report(
    leader: &LeaderEndpoint,
    token: Option<&str>,
    report: AckReport,
) -> Result<u64, Code> {
    let channel = aether_report::client::connect(leader)
        .await
        .map_err(|_| Code::Unavailable)?;
    let mut client = aether_report::client::with_token(channel, token).unwrap();
    client
        .report(tokio_stream::iter([report]))
        .await
        .map(|r| r.into_inner().reports)
        .map_err(|s| s.code())
}

fn refused(metrics: &str, reason: &str) -> u64 {
    let reason = format!("reason=\"{reason}\"");
    metric_sum(metrics, "aether_edge_reports_refused_total", &[&reason])
}

#[test]
fn the_report_port_takes_only_edge_agents_each_for_its_own_node() {
    in_netns(async {
        let w = given_a_leader_under_the_deployed_rbac().await;
        the_port_speaks_only_tls(&w).await;
        the_port_takes_only_an_agent_speaking_for_its_own_node(&w).await;
        every_refusal_is_counted_and_logged_but_no_token(&w);
        a_pod_bound_token_dies_with_its_pod(&w).await;
    });
}

/// Tokens as a kubelet would project them, and the ones an attacker could get.
struct Tokens {
    agent_b: String,
    api_audience: String,
    other_account: String,
}

/// Fields drop in order: the API server last.
struct World {
    leader: Controller,
    /// Its report address and certificate, as its Lease names them.
    endpoint: LeaderEndpoint,
    tokens: Tokens,
    server: aether_testkit::ApiServer,
}

async fn given_a_leader_under_the_deployed_rbac() -> World {
    let logs = temp_dir("kube-report-auth");
    let server = aether_testkit::ApiServer::start().await;
    for file in ["00-namespace.yaml", "10-rbac.yaml"] {
        server.apply(&deploy_file(file)).await.unwrap();
    }
    server.apply(&base_yaml(&["app"])).await.unwrap();
    let leader = deployed_controller(&server, "report-auth", &logs).await;
    let client = server.client();
    let endpoint = leader_endpoint(&client).await;
    let token = |ns, pod, node, audience| server.pod_token(ns, AGENTS, pod, node, audience);
    let api = "https://kubernetes.default.svc.cluster.local";
    let tokens = Tokens {
        agent_b: token(EDGE, "edge-b", "node-b", AUDIENCE).await.unwrap(),
        api_audience: token(EDGE, "edge-c", "node-c", api).await.unwrap(),
        other_account: token("app", "tenant-pod", "node-b", AUDIENCE)
            .await
            .unwrap(),
    };
    World {
        leader,
        endpoint,
        tokens,
        server,
    }
}

/// A plain-text stream (even with a real agent's token) and a client pinned
/// to another certificate get nowhere: no report taken, no token reviewed.
async fn the_port_speaks_only_tls(w: &World) {
    let address = &w.endpoint.address;
    // Until the port is up, connecting fails too: wait for a TLS stream first.
    eventually(
        Duration::from_secs(30),
        "the report port up",
        || async move {
            match report(&w.endpoint, None, mk_report("node-b")).await {
                Err(Code::Unauthenticated) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let plain = async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .unwrap()
            .connect()
            .await
            .map_err(|e| e.to_string())?;
        let mut client =
            aether_report::client::with_token(channel, Some(&w.tokens.agent_b)).unwrap();
        client
            .report(tokio_stream::iter([mk_report("node-b")]))
            .await
            .map(|r| r.into_inner().reports)
            .map_err(|s| s.to_string())
    };
    assert!(plain.await.is_err(), "a plain-text report was taken");
    let impostor = aether_report::tls::ServingCertificate::generate().unwrap();
    let pinned_elsewhere = LeaderEndpoint {
        address: address.clone(),
        certificate: impostor.certificate_pem().to_string(),
    };
    assert_eq!(
        report(
            &pinned_elsewhere,
            Some(&w.tokens.agent_b),
            mk_report("node-b")
        )
        .await,
        Err(Code::Unavailable),
        "a server showing another certificate"
    );
}

async fn the_port_takes_only_an_agent_speaking_for_its_own_node(w: &World) {
    let (at, t) = (&w.endpoint, &w.tokens);
    let unauthenticated = Code::Unauthenticated;
    let cases = [
        ("a forged token", "x.y.z", "node-b", unauthenticated),
        (
            "the cluster admin's token",
            w.server.token(),
            "node-b",
            unauthenticated,
        ),
        (
            "our account's token for the API server",
            &t.api_audience,
            "node-c",
            unauthenticated,
        ),
        (
            "another namespace's account of that name",
            &t.other_account,
            "node-b",
            unauthenticated,
        ),
        (
            "node b's agent speaking for node a",
            &t.agent_b,
            "node-a",
            Code::PermissionDenied,
        ),
    ];
    for (what, token, node, code) in cases {
        assert_eq!(
            report(at, Some(token), mk_report(node)).await,
            Err(code),
            "{what}"
        );
    }
    // node b's own agent is heard.
    assert_eq!(
        report(at, Some(&t.agent_b), mk_report("node-b")).await,
        Ok(1)
    );
}

fn every_refusal_is_counted_and_logged_but_no_token(w: &World) {
    let m = w.leader.metrics();
    assert_eq!(refused(&m, "no_token"), 1, "{m}");
    assert_eq!(refused(&m, "not_an_agent"), 4, "{m}");
    assert_eq!(refused(&m, "wrong_node"), 1, "{m}");
    let log = w.leader.proc.log_text();
    assert!(
        log.contains("report stream refused") && !log.contains(&w.tokens.agent_b),
        "refusals are logged, tokens never:\n{log}"
    );
}

async fn a_pod_bound_token_dies_with_its_pod(w: &World) {
    let pods: kube::Api<Pod> = kube::Api::namespaced(w.server.client(), EDGE);
    // No kubelet here confirms a graceful deletion: remove it at once.
    let now = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    pods.delete("edge-b", &now).await.unwrap();
    let at = &w.endpoint;
    eventually(Duration::from_secs(30), "edge-b's token refused", || {
        let token = w.tokens.agent_b.clone();
        async move {
            match report(at, Some(&token), mk_report("node-b")).await {
                Err(Code::Unauthenticated) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
}
