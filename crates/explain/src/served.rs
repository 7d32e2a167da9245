//! Live: whether each Envoy serves what an explanation describes.
//!
//! ```text
//!  computed Gateway hash ──┬── node ACKed the same hash      → "serves it"
//!                          ├── node ACKed another hash       → caveat: older config (+ its NACK)
//!                          └── some resource not ACKed at all → caveat: not this config yet
//! ```

use crate::{Explanation, Step};

/// What one Envoy serves of the Gateway, for [`Explanation::served_by`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAck {
    pub node: String,
    /// The Gateway's content hash over what the node ACKed; `None` while some
    /// resource of the Gateway is not ACKed at all.
    pub acked: Option<String>,
    /// The node's last NACK not since followed by an ACK: (type, version, message).
    pub nack: Option<(String, String, String)>,
}

impl Explanation {
    /// Live: says, per Envoy node, whether it serves what this explanation
    /// describes — the Gateway's content hash `computed` (at snapshot
    /// `version`) — and adds a caveat for every node that does not.
    pub fn served_by(&mut self, version: &str, computed: Option<&str>, nodes: &[NodeAck]) {
        let Some(gw) = self.gateway.clone() else {
            return;
        };
        let Some(computed) = computed else {
            return;
        };
        let mut step = Step::new(
            "envoy",
            format!(
                "computed at version {version}, Gateway {gw} hash {}",
                short(computed)
            ),
        );
        if nodes.is_empty() {
            step.notes.push("no Envoy is connected".into());
            self.caveats
                .push("no Envoy is connected: nothing serves this yet".into());
        }
        for n in nodes {
            let nack = n
                .nack
                .as_ref()
                .map(|(ty, v, msg)| format!("; NACKed {ty} version {v} with: {msg}"));
            let nack = nack.unwrap_or_default();
            match n.acked.as_deref() {
                Some(h) if h == computed => step.notes.push(format!(
                    "node {} serves it (ACKed hash {})",
                    n.node,
                    short(h)
                )),
                Some(h) => {
                    let text = format!(
                        "node {} still serves an older config of Gateway {gw} (ACKed hash {}){nack}",
                        n.node,
                        short(h)
                    );
                    step.notes.push(text.clone());
                    self.caveats.push(format!(
                        "{text}: it answers by that config, not by the one above"
                    ));
                }
                None => {
                    let text = format!(
                        "node {} does not serve this config of Gateway {gw} yet (some of its resources are not ACKed at all){nack}",
                        n.node
                    );
                    step.notes.push(text.clone());
                    self.caveats.push(text);
                }
            }
        }
        self.steps.push(step);
    }
}

/// The first 12 characters of a hash.
fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Answer;
    use aether_ir::ObjectRef;

    fn forwarded() -> Explanation {
        Explanation {
            request: "GET http://127.0.0.1:80/ (Host: a)".into(),
            gateway: Some(ObjectRef::new("default", "gw")),
            steps: vec![],
            answer: Answer::Respond {
                status: 404,
                why: "no attached route matches".into(),
            },
            caveats: vec![],
        }
    }

    fn node(name: &str, acked: Option<&str>, nack: Option<&str>) -> NodeAck {
        NodeAck {
            node: name.into(),
            acked: acked.map(Into::into),
            nack: nack.map(|m| ("RDS".to_string(), "v9".to_string(), m.to_string())),
        }
    }

    #[test]
    fn every_node_that_does_not_serve_the_config_is_a_caveat() {
        let mut e = forwarded();
        e.served_by(
            "v9",
            Some("hash-now"),
            &[
                node("a", Some("hash-now"), None),
                node("b", Some("hash-old"), Some("bad regex")),
                node("c", None, None),
            ],
        );
        let step = e.steps.last().unwrap();
        assert_eq!(step.stage, "envoy");
        assert_eq!(step.notes.len(), 3);
        assert!(
            step.notes[0].starts_with("node a serves it"),
            "{:?}",
            step.notes
        );
        assert_eq!(e.caveats.len(), 2, "{:?}", e.caveats);
        assert!(e.caveats[0].contains("node b still serves an older config"));
        assert!(e.caveats[0].contains("NACKed RDS version v9 with: bad regex"));
        assert!(e.caveats[1].contains("node c does not serve this config"));
        assert!(e.to_text().contains("  ! node b still serves"));
    }

    #[test]
    fn no_envoy_connected_is_a_caveat_and_no_gateway_adds_nothing() {
        let mut e = forwarded();
        e.served_by("v1", Some("h"), &[]);
        assert_eq!(
            e.caveats,
            vec!["no Envoy is connected: nothing serves this yet".to_string()]
        );
        let mut none = forwarded();
        none.gateway = None;
        none.served_by("v1", Some("h"), &[node("a", None, None)]);
        assert!(none.steps.is_empty() && none.caveats.is_empty());
    }
}
