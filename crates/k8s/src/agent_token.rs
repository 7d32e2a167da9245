//! Which node an edge agent's token speaks for, as the API server says.
//!
//! ```text
//!  token ─► TokenReview (audience) ─► system:serviceaccount:<edge ns>:<account>, bound to pod P (uid U)
//!                                                        │
//!            Pod <edge ns>/P, uid U ◄─── GET ────────────┘ ─► spec.nodeName
//! ```
//!
//! A projected ServiceAccount token is bound to its pod: it stops being valid
//! when the pod is deleted, and the pod says which node it runs on. So the
//! node comes from the API server, never from what the agent claims.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};

/// The pod a pod-bound token names, in the token's `extra`.
const POD_NAME: &str = "authentication.kubernetes.io/pod-name";
const POD_UID: &str = "authentication.kubernetes.io/pod-uid";

/// Why a token does not name an edge node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a token of our agents (or no longer valid).
    #[error("{0}")]
    Refused(String),
    /// The API server could not be asked.
    #[error("{0}")]
    Unverified(String),
}

/// Checks tokens against the API server for the agents' ServiceAccount.
#[derive(Clone)]
pub struct AgentTokens {
    client: Client,
    namespace: String,
    service_account: String,
    audience: String,
}

impl AgentTokens {
    /// Tokens of `namespace/service_account` issued for `audience`.
    pub fn new(client: Client, namespace: &str, service_account: &str, audience: &str) -> Self {
        AgentTokens {
            client,
            namespace: namespace.to_string(),
            service_account: service_account.to_string(),
            audience: audience.to_string(),
        }
    }

    /// The node the pod holding `token` runs on.
    pub async fn node_of(&self, token: &str) -> Result<String, TokenError> {
        let unverified = |e: kube::Error| TokenError::Unverified(e.to_string());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: Some(vec![self.audience.clone()]),
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(unverified)?;
        let (pod, uid) = self.bound_pod(&reviewed.status.unwrap_or_default())?;
        let found = Api::<Pod>::namespaced(self.client.clone(), &self.namespace)
            .get_opt(&pod)
            .await
            .map_err(unverified)?;
        node_of_pod(found.as_ref(), &pod, &uid)
    }

    /// The (name, uid) of the pod the reviewed token is bound to, if it is a
    /// token of our agents for our audience.
    fn bound_pod(&self, status: &TokenReviewStatus) -> Result<(String, String), TokenError> {
        let refused = |why: String| Err(TokenError::Refused(why));
        if status.authenticated != Some(true) {
            let why = status.error.as_deref().unwrap_or("not authenticated");
            return refused(format!("the API server refused the token: {why}"));
        }
        if !status
            .audiences
            .as_ref()
            .is_some_and(|a| a.contains(&self.audience))
        {
            return refused(format!("not issued for audience {}", self.audience));
        }
        let user = status.user.clone().unwrap_or_default();
        let username = user.username.unwrap_or_default();
        let want = format!(
            "system:serviceaccount:{}:{}",
            self.namespace, self.service_account
        );
        if username != want {
            return refused(format!("{username:?} is not {want}"));
        }
        let extra = user.extra.unwrap_or_default();
        let one = |key: &str| extra.get(key).and_then(|v| v.first()).cloned();
        match (one(POD_NAME), one(POD_UID)) {
            (Some(pod), Some(uid)) => Ok((pod, uid)),
            _ => refused(format!("{username} token is not bound to a pod")),
        }
    }
}

/// The node of `pod` (looked up by `name`), if it is the pod the token was bound to.
fn node_of_pod(pod: Option<&Pod>, name: &str, uid: &str) -> Result<String, TokenError> {
    let refused = |why: String| Err(TokenError::Refused(why));
    let Some(pod) = pod else {
        return refused(format!("pod {name} no longer exists"));
    };
    if pod.metadata.uid.as_deref() != Some(uid) {
        return refused(format!("pod {name} is not the pod the token was issued to"));
    }
    match pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
        Some(node) if !node.is_empty() => Ok(node),
        _ => refused(format!("pod {name} is not on a node")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::UserInfo;
    use std::collections::BTreeMap;

    fn mk_tokens() -> AgentTokens {
        // Never called: bound_pod is pure.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = Client::try_from(config).unwrap();
        AgentTokens::new(
            client,
            "aether-ingress",
            "aether-edge",
            "aether-edge-report",
        )
    }

    fn mk_status(user: &str, audiences: &[&str], pod: Option<(&str, &str)>) -> TokenReviewStatus {
        let mut extra = BTreeMap::new();
        if let Some((name, uid)) = pod {
            extra.insert(POD_NAME.to_string(), vec![name.to_string()]);
            extra.insert(POD_UID.to_string(), vec![uid.to_string()]);
        }
        TokenReviewStatus {
            authenticated: Some(true),
            audiences: Some(audiences.iter().map(|a| a.to_string()).collect()),
            user: Some(UserInfo {
                username: Some(user.to_string()),
                extra: Some(extra),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    const AGENT: &str = "system:serviceaccount:aether-ingress:aether-edge";

    #[tokio::test]
    async fn only_our_agents_pod_bound_tokens_for_our_audience_pass() {
        let t = mk_tokens();
        let ok = mk_status(AGENT, &["aether-edge-report"], Some(("edge-x", "u1")));
        assert_eq!(t.bound_pod(&ok), Ok(("edge-x".into(), "u1".into())));
        let refused = |s: TokenReviewStatus| t.bound_pod(&s).unwrap_err();
        let not_authenticated = TokenReviewStatus {
            authenticated: Some(false),
            error: Some("token has expired".into()),
            ..Default::default()
        };
        assert!(
            refused(not_authenticated)
                .to_string()
                .contains("token has expired")
        );
        let api_audience = mk_status(
            AGENT,
            &["https://kubernetes.default.svc"],
            Some(("edge-x", "u1")),
        );
        assert!(refused(api_audience).to_string().contains("audience"));
        let other_account = mk_status(
            "system:serviceaccount:aether-ingress:default",
            &["aether-edge-report"],
            Some(("edge-x", "u1")),
        );
        assert!(refused(other_account).to_string().contains("is not"));
        let other_namespace = mk_status(
            "system:serviceaccount:tenant:aether-edge",
            &["aether-edge-report"],
            Some(("edge-x", "u1")),
        );
        assert!(refused(other_namespace).to_string().contains("is not"));
        let unbound = mk_status(AGENT, &["aether-edge-report"], None);
        assert!(refused(unbound).to_string().contains("not bound to a pod"));
    }

    #[test]
    fn the_node_is_the_bound_pods_own() {
        let mut pod = Pod::default();
        pod.metadata.uid = Some("u1".into());
        pod.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            node_name: Some("node-a".into()),
            ..Default::default()
        });
        assert_eq!(node_of_pod(Some(&pod), "edge-x", "u1"), Ok("node-a".into()));
        // A pod of that name created after the token's: not the same pod.
        assert!(node_of_pod(Some(&pod), "edge-x", "u0").is_err());
        assert!(node_of_pod(None, "edge-x", "u1").is_err());
        pod.spec.as_mut().unwrap().node_name = None;
        assert!(node_of_pod(Some(&pod), "edge-x", "u1").is_err());
    }
}
