//! The report port over a real loopback gRPC connection, with a table of tokens
//! standing in for the API server: who is refused, who is heard.

use crate::auth::{Authenticator, Refusal, Refusals, Verdict};
use crate::pb::AckReport;
use crate::{Reports, server::ReportService};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

/// token → node; "down" stands for an API server that does not answer.
struct Tokens(BTreeMap<&'static str, &'static str>);

impl Authenticator for Tokens {
    fn node_of<'a>(&'a self, token: &'a str) -> Verdict<'a> {
        Box::pin(async move {
            match (token, self.0.get(token)) {
                ("down", _) => Err(Refusal::Unverified("connection refused".into())),
                (_, Some(node)) => Ok(node.to_string()),
                (_, None) => Err(Refusal::NotAnAgent("unknown token".into())),
            }
        })
    }
}

struct Leader {
    address: String,
    reports: Reports,
    refusals: Arc<Refusals>,
}

async fn mk_leader() -> Leader {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let reports = Reports::default();
    let refusals = Arc::new(Refusals::default());
    let auth = Arc::new(Tokens([("tok-a", "node-a")].into()));
    let service = ReportService::new(reports.clone(), auth, refusals.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    Leader {
        address,
        reports,
        refusals,
    }
}

fn mk_report(node: &str) -> AckReport {
    AckReport {
        node: node.into(),
        envoy_connected: true,
        acked: [("ns/gw".to_string(), "h1".to_string())].into(),
        ..Default::default()
    }
}

/// Sends `reports` on one stream with `token` (if any); the stream's outcome.
async fn send(leader: &Leader, token: Option<&str>, reports: Vec<AckReport>) -> Result<u64, Code> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", leader.address))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = crate::client::with_token(channel, token).unwrap();
    client
        .report(tokio_stream::iter(reports))
        .await
        .map(|r| r.into_inner().reports)
        .map_err(|s| s.code())
}

#[tokio::test]
async fn only_an_agent_with_a_token_reports_and_only_for_its_own_node() {
    let leader = mk_leader().await;
    let refused = |reason| leader.refusals.get(reason);

    assert_eq!(
        send(&leader, None, vec![mk_report("node-a")]).await,
        Err(Code::Unauthenticated)
    );
    assert_eq!(refused("no_token"), 1);
    assert_eq!(
        send(&leader, Some("forged"), vec![mk_report("node-a")]).await,
        Err(Code::Unauthenticated)
    );
    assert_eq!(refused("not_an_agent"), 1);
    assert_eq!(
        send(&leader, Some("down"), vec![mk_report("node-a")]).await,
        Err(Code::Unavailable)
    );
    assert_eq!(refused("unverified"), 1);
    // A real agent's token, naming another node: the stream ends there.
    assert_eq!(
        send(&leader, Some("tok-a"), vec![mk_report("node-b")]).await,
        Err(Code::PermissionDenied)
    );
    assert_eq!(refused("wrong_node"), 1);
    assert!(
        leader.reports.nodes().is_empty(),
        "nothing refused was applied"
    );

    // node-a's own agent is heard; its report stays while the stream is open
    // and goes when it ends.
    assert_eq!(
        send(&leader, Some("tok-a"), vec![mk_report("node-a")]).await,
        Ok(1)
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(
        leader.reports.nodes().is_empty(),
        "removed when its stream ended"
    );
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let open = {
        let address = leader.address.clone();
        tokio::spawn(async move {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
                .unwrap()
                .connect()
                .await
                .unwrap();
            let mut client = crate::client::with_token(channel, Some("tok-a")).unwrap();
            client
                .report(tokio_stream::wrappers::ReceiverStream::new(rx))
                .await
        })
    };
    tx.send(mk_report("node-a")).await.unwrap();
    for _ in 0..200 {
        if !leader.reports.nodes().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(leader.reports.nodes()["node-a"], mk_report("node-a"));
    // The same stream may not switch to another node's name.
    tx.send(mk_report("node-b")).await.unwrap();
    let ended = open.await.unwrap().map_err(|s| s.code());
    assert_eq!(ended.err(), Some(Code::PermissionDenied));
    assert_eq!(refused("wrong_node"), 2);
    assert!(!leader.reports.nodes().contains_key("node-b"));
}
