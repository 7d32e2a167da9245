//! The report port over a real loopback gRPC connection over TLS, with a table
//! of tokens standing in for the API server: who is refused, who is heard, and
//! that neither end speaks plain text or to a server it was not told to trust.

use crate::auth::{Authenticator, Refusal, Refusals, Verdict};
use crate::client::LeaderEndpoint;
use crate::pb::AckReport;
use crate::tls::ServingCertificate;
use crate::{Reports, server::ReportService, test_support};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tonic::Code;

/// token → node; "down" stands for an API server that does not answer. Counts
/// the tokens it was asked about.
struct Tokens(BTreeMap<&'static str, &'static str>, Arc<AtomicUsize>);

impl Authenticator for Tokens {
    fn node_of<'a>(&'a self, token: &'a str) -> Verdict<'a> {
        self.1.fetch_add(1, Ordering::SeqCst);
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
    /// Where it listens and the certificate it serves, as its Lease says.
    endpoint: LeaderEndpoint,
    reports: Reports,
    refusals: Arc<Refusals>,
    /// How many tokens reached the authenticator.
    tokens_seen: Arc<AtomicUsize>,
}

async fn mk_leader() -> Leader {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let reports = Reports::default();
    let refusals = Arc::new(Refusals::default());
    let tokens_seen = Arc::new(AtomicUsize::new(0));
    let auth = Arc::new(Tokens([("tok-a", "node-a")].into(), tokens_seen.clone()));
    let service = ReportService::new(reports.clone(), auth, refusals.clone());
    let certificate = ServingCertificate::generate().unwrap();
    tokio::spawn(crate::server::serve(listener, service, &certificate).unwrap());
    Leader {
        endpoint: LeaderEndpoint {
            address,
            certificate: certificate.certificate_pem().to_string(),
        },
        reports,
        refusals,
        tokens_seen,
    }
}

/// `node`'s report that its Envoy holds Gateway ns/gw at hash h1.
fn mk_report(node: &str) -> AckReport {
    let mut report = test_support::mk_report(node, true);
    report.acked.insert("ns/gw".into(), "h1".into());
    report
}

/// One stream to `leader` carrying `token` (if any) and `reports`: how many
/// reports the leader took, or the code it ended the stream with.
async fn report(
    leader: &LeaderEndpoint,
    token: Option<&str>,
    reports: impl tokio_stream::Stream<Item = AckReport> + Send + 'static,
) -> Result<u64, Code> {
    let channel = crate::client::connect(leader).await.unwrap();
    let mut client = crate::client::with_token(channel, token).unwrap();
    client
        .report(reports)
        .await
        .map(|r| r.into_inner().reports)
        .map_err(|s| s.code())
}

/// Sends `reports` on one stream with `token` (if any); the stream's outcome.
async fn send(leader: &Leader, token: Option<&str>, reports: Vec<AckReport>) -> Result<u64, Code> {
    report(&leader.endpoint, token, tokio_stream::iter(reports)).await
}

/// A stream with `token` that stays open while the returned sender lives; it
/// ends with the stream's outcome.
fn given_an_open_stream(
    leader: &Leader,
    token: &'static str,
) -> (
    tokio::sync::mpsc::Sender<AckReport>,
    tokio::task::JoinHandle<Result<u64, Code>>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let endpoint = leader.endpoint.clone();
    let reports = tokio_stream::wrappers::ReceiverStream::new(rx);
    let open = tokio::spawn(async move { report(&endpoint, Some(token), reports).await });
    (tx, open)
}

/// A stream with `token` reporting for `node` is refused with `code`, and the
/// leader has counted `count` refusals for `reason`.
async fn then_refused(
    leader: &Leader,
    token: Option<&str>,
    node: &str,
    code: Code,
    (reason, count): (&str, u64),
) {
    assert_eq!(
        send(leader, token, vec![mk_report(node)]).await,
        Err(code),
        "token {token:?} reporting for {node}"
    );
    assert_eq!(leader.refusals.get(reason), count, "refused as {reason}");
}

/// Waits a second at most for a report to be applied: it is [`mk_report`] of `node`.
async fn then_reported(leader: &Leader, node: &str) {
    for _ in 0..200 {
        if !leader.reports.nodes().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(leader.reports.nodes()[node], mk_report(node));
}

#[tokio::test]
async fn only_an_agent_with_a_token_reports_and_only_for_its_own_node() {
    let leader = mk_leader().await;
    // Each refused and counted, the last one a real agent's token naming
    // another node: the stream ends there.
    for (token, node, code, reason) in [
        (None, "node-a", Code::Unauthenticated, "no_token"),
        (
            Some("forged"),
            "node-a",
            Code::Unauthenticated,
            "not_an_agent",
        ),
        (Some("down"), "node-a", Code::Unavailable, "unverified"),
        (
            Some("tok-a"),
            "node-b",
            Code::PermissionDenied,
            "wrong_node",
        ),
    ] {
        then_refused(&leader, token, node, code, (reason, 1)).await;
    }
    assert!(
        leader.reports.nodes().is_empty(),
        "nothing refused was applied"
    );

    // node-a's own agent is heard; its report stays while the stream is open
    // and goes when it ends.
    a_closed_stream_leaves_no_report(&leader).await;
    an_open_stream_is_heard_until_it_names_another_node(&leader).await;
}

async fn a_closed_stream_leaves_no_report(leader: &Leader) {
    assert_eq!(
        send(leader, Some("tok-a"), vec![mk_report("node-a")]).await,
        Ok(1)
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(
        leader.reports.nodes().is_empty(),
        "removed when its stream ended"
    );
}

/// node-a's report on an open stream is applied; the same stream may not
/// switch to another node's name.
async fn an_open_stream_is_heard_until_it_names_another_node(leader: &Leader) {
    let (tx, open) = given_an_open_stream(leader, "tok-a");
    tx.send(mk_report("node-a")).await.unwrap();
    then_reported(leader, "node-a").await;
    tx.send(mk_report("node-b")).await.unwrap();
    assert_eq!(open.await.unwrap().err(), Some(Code::PermissionDenied));
    assert_eq!(leader.refusals.get("wrong_node"), 2);
    assert!(!leader.reports.nodes().contains_key("node-b"));
}

/// The agent's end refuses a server it was not told to trust (another
/// certificate, or plain text) before sending anything; the leader's end
/// refuses a plain-text client before any gRPC. No token crosses either way.
#[tokio::test]
async fn reports_travel_over_tls_to_the_certificate_the_lease_names_only() {
    let leader = mk_leader().await;
    let impostor = ServingCertificate::generate().unwrap();
    let pinned_elsewhere = LeaderEndpoint {
        certificate: impostor.certificate_pem().to_string(),
        ..leader.endpoint.clone()
    };
    let refused = crate::client::connect(&pinned_elsewhere).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused}");
    assert!(refused.message().contains("certificate"), "{refused}");

    // A plain-text server (a leader of before, or anyone on the node network).
    let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let plain_address = plain.local_addr().unwrap().to_string();
    let service = ReportService::new(
        Reports::default(),
        Arc::new(Tokens(BTreeMap::new(), leader.tokens_seen.clone())),
        Arc::new(Refusals::default()),
    );
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(plain)),
    );
    let plain_leader = LeaderEndpoint {
        address: plain_address,
        ..leader.endpoint.clone()
    };
    assert!(crate::client::connect(&plain_leader).await.is_err());

    // A plain-text client of the TLS leader.
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", leader.endpoint.address))
            .unwrap()
            .connect()
            .await;
    if let Ok(channel) = channel {
        let mut client = crate::client::with_token(channel, Some("tok-a")).unwrap();
        let sent = client
            .report(tokio_stream::iter([mk_report("node-a")]))
            .await;
        assert!(sent.is_err(), "a plain-text report was taken: {sent:?}");
    }
    assert_eq!(leader.tokens_seen.load(Ordering::SeqCst), 0);
    assert!(leader.reports.nodes().is_empty());

    // The certificate its Lease names: heard.
    assert_eq!(
        send(&leader, Some("tok-a"), vec![mk_report("node-a")]).await,
        Ok(1)
    );
}
