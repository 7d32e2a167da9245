//! What a stream's state machine hands back: responses to send, and what it learnt
//! about the Envoy on the other end (for the fleet view).

use crate::subscription::Versions;
use aether_xds::ResourceType;

/// The result of feeding one input (a request or a snapshot) to a stream.
#[derive(Debug)]
pub struct Output<R> {
    /// To send, in order (CDS, EDS, LDS, RDS, SDS when several types change).
    pub responses: Vec<R>,
    pub events: Vec<Event>,
}

impl<R> Default for Output<R> {
    fn default() -> Self {
        Output {
            responses: Vec::new(),
            events: Vec::new(),
        }
    }
}

impl<R> Output<R> {
    pub fn is_empty(&self) -> bool {
        self.responses.is_empty() && self.events.is_empty()
    }
}

/// A change in what Envoy holds for one resource type on this stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Envoy accepted a response; `versions` is everything of this type it now
    /// holds from us (the whole state, not the delta).
    Acked {
        ty: ResourceType,
        versions: Versions,
    },
    /// Envoy rejected a response. It keeps serving what it ACKed before.
    Nacked { ty: ResourceType, nack: Nack },
}

impl Event {
    pub fn resource_type(&self) -> ResourceType {
        match self {
            Event::Acked { ty, .. } | Event::Nacked { ty, .. } => *ty,
        }
    }
}

/// A rejected response, as Envoy reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nack {
    /// The version we sent and Envoy refused (SotW `version_info`, Delta
    /// `system_version_info`).
    pub version: String,
    /// Envoy's `error_detail.message`, fit to show: key material redacted,
    /// one line, bounded (`aether_ir::untrusted::message`).
    pub message: String,
    /// The resources the rejection is about: those the response added or changed,
    /// narrowed to the ones Envoy's message names when it names any (see
    /// [`blame`]).
    pub rejected: Versions,
}

/// What a rejected response is blamed for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blame {
    /// The resources the response tried to add or change (versions differing from
    /// what Envoy held), narrowed to the ones Envoy's message names when it names
    /// any. A pure removal blames all of the response.
    pub rejected: Versions,
    /// Envoy's message named the rejected resources. Envoy applies the resources
    /// of one response one by one where it can (listeners and clusters, and every
    /// type in Delta) and then names the failing ones; a failure before that
    /// (decoding, validation) names none, and nothing was applied.
    pub named: bool,
}

/// Blames a rejected response (`sent`), given what Envoy `held` before it and
/// Envoy's `message`, so one broken Gateway is not blamed on every Gateway that
/// changed in the same push.
pub fn blame(sent: &Versions, held: &Versions, message: &str) -> Blame {
    let changed: Versions = sent
        .iter()
        .filter(|(n, v)| held.get(*n) != Some(*v))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    let changed = if changed.is_empty() {
        sent.clone()
    } else {
        changed
    };
    let named: Versions = changed
        .iter()
        .filter(|(n, _)| mentions(message, n))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    if named.is_empty() {
        Blame {
            rejected: changed,
            named: false,
        }
    } else {
        Blame {
            rejected: named,
            named: true,
        }
    }
}

/// Whether `message` contains `name` as a whole word (so `r80` is not found in
/// `r8080`).
fn mentions(message: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    message.match_indices(name).any(|(at, _)| {
        let before = message[..at].chars().next_back();
        let after = message[at + name.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(pairs: &[(&str, &str)]) -> Versions {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn blame_goes_to_changed_resources_named_by_envoy() {
        let sent = v(&[("l80", "2"), ("l8080", "2"), ("l443", "1")]);
        let held = v(&[("l443", "1")]);
        let named = blame(
            &sent,
            &held,
            "Error adding/updating listener(s) l8080: bind failed",
        );
        assert_eq!(named.rejected, v(&[("l8080", "2")]));
        assert!(named.named);
        let unnamed = blame(&sent, &held, "something went wrong");
        assert_eq!(
            unnamed.rejected,
            v(&[("l80", "2"), ("l8080", "2")]),
            "no name in the message: every changed resource"
        );
        assert!(!unnamed.named);
        let unchanged = blame(&sent, &held, "l443 is fine but unchanged");
        assert_eq!(
            unchanged.rejected,
            v(&[("l80", "2"), ("l8080", "2")]),
            "an unchanged resource is never blamed"
        );
        assert!(!unchanged.named);
        let removal = blame(&held, &held, "x");
        assert_eq!(removal.rejected, held, "pure removal: all of it");
    }
}
