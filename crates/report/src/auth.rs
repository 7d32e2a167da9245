//! Who may report, and for which node.
//!
//! ```text
//!  agent ── report stream, `authorization: Bearer <token>` ──► leader
//!                                                               │ Authenticator: token → node
//!                                                               ▼
//!                         every report on the stream must name that node
//! ```
//!
//! The node a stream speaks for comes from its credential, never from its
//! messages: a peer that cannot prove it is an edge agent reports nothing, and
//! an agent can speak only for its own node. In Kubernetes mode the token is
//! the agent pod's projected ServiceAccount token for [`AUDIENCE`], and the
//! leader asks the API server (TokenReview) which pod holds it, and on which
//! node that pod runs.

use aether_metrics::Series;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use std::future::Future;
use std::pin::Pin;
use tonic::Status;
use tonic::metadata::MetadataMap;

/// The audience an agent's report token is issued for: a token for the API
/// server (or anything else) is not accepted here, and ours is useless there.
pub const AUDIENCE: &str = "aether-edge-report";

/// What [`Authenticator::node_of`] returns.
pub type Verdict<'a> = Pin<Box<dyn Future<Output = Result<String, Refusal>> + Send + 'a>>;

/// Turns a bearer token into the node whose agent holds it.
pub trait Authenticator: Send + Sync + 'static {
    fn node_of<'a>(&'a self, token: &'a str) -> Verdict<'a>;
}

/// Why a report stream was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no bearer token")]
    NoToken,
    /// The credential is not an edge agent's (invalid, expired, another
    /// audience, another identity, a pod that no longer exists).
    #[error("not an edge agent's token: {0}")]
    NotAnAgent(String),
    /// The stream's credential names one node and a report another.
    #[error("this stream's credential is node {credential}'s, a report names node {report}")]
    WrongNode { credential: String, report: String },
    /// The token could not be checked (the API server did not answer): the
    /// agent retries.
    #[error("the token could not be checked: {0}")]
    Unverified(String),
}

impl Refusal {
    /// The `reason` label of `aether_edge_reports_refused_total`.
    pub fn reason(&self) -> &'static str {
        REASONS[self.index()]
    }

    /// Its place in [`REASONS`] (and in [`Refusals`]' counters).
    fn index(&self) -> usize {
        match self {
            Refusal::NoToken => 0,
            Refusal::NotAnAgent(_) => 1,
            Refusal::WrongNode { .. } => 2,
            Refusal::Unverified(_) => 3,
        }
    }

    pub fn status(&self) -> Status {
        match self {
            Refusal::NoToken | Refusal::NotAnAgent(_) => Status::unauthenticated(self.to_string()),
            Refusal::WrongNode { .. } => Status::permission_denied(self.to_string()),
            Refusal::Unverified(_) => Status::unavailable(self.to_string()),
        }
    }
}

/// The bearer token of a request, if it carries one.
pub fn bearer(metadata: &MetadataMap) -> Option<&str> {
    let value = metadata.get("authorization")?.to_str().ok()?;
    let token = value.strip_prefix("Bearer ")?.trim();
    (!token.is_empty()).then_some(token)
}

/// Refused report streams by reason: a counter per reason, each present
/// (at zero) from the start; registered by the binary.
#[derive(Debug, Clone)]
pub struct Refusals {
    counts: Series<[(&'static str, &'static str); 1], Counter>,
}

/// The `reason` label of each refusal, in [`Refusal::index`] order.
const REASONS: [&str; 4] = ["no_token", "not_an_agent", "wrong_node", "unverified"];

impl Default for Refusals {
    fn default() -> Self {
        Refusals {
            counts: Series::new(REASONS.map(|r| [("reason", r)])),
        }
    }
}

impl Refusals {
    /// As `aether_edge_reports_refused_total` under a registry prefixed `aether_edge`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "reports_refused",
            "Report streams refused, by reason",
            self.counts.clone(),
        );
    }

    pub fn count(&self, refusal: &Refusal) {
        self.counts
            .get(&[("reason", REASONS[refusal.index()])])
            .inc();
    }

    pub fn get(&self, reason: &str) -> u64 {
        REASONS
            .iter()
            .find(|r| **r == reason)
            .map_or(0, |r| self.counts.get(&[("reason", r)]).get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bearer_token_counts() {
        let mut m = MetadataMap::new();
        assert_eq!(bearer(&m), None);
        m.insert("authorization", "Basic dXNlcjpwdw==".parse().unwrap());
        assert_eq!(bearer(&m), None);
        m.insert("authorization", "Bearer ".parse().unwrap());
        assert_eq!(bearer(&m), None);
        m.insert("authorization", "Bearer abc.def".parse().unwrap());
        assert_eq!(bearer(&m), Some("abc.def"));
    }

    #[test]
    fn every_refusal_is_counted_under_its_reason() {
        let refusals = Refusals::default();
        for r in [
            Refusal::NoToken,
            Refusal::NotAnAgent("x".into()),
            Refusal::WrongNode {
                credential: "a".into(),
                report: "b".into(),
            },
            Refusal::Unverified("down".into()),
            Refusal::NoToken,
        ] {
            refusals.count(&r);
        }
        assert_eq!(refusals.get("no_token"), 2);
        assert_eq!(refusals.get("wrong_node"), 1);
        assert_eq!(refusals.get("unverified"), 1);
        assert_eq!(refusals.get("not_an_agent"), 1);
    }
}
