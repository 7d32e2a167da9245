//! Planned conditions as Kubernetes conditions, and comparing them.
//!
//! `lastTransitionTime` means "when the status last flipped", so a condition whose
//! status (True/False/Unknown) is what the object already says keeps the stored
//! timestamp, even if its reason or message changed; only a flip (or a new
//! condition) is stamped with `now`. Comparison ignores the timestamp and the
//! order of the list (conditions are a map keyed by type).
//!
//! Messages are cut to the API's limit ([`MESSAGE_MAX`] bytes): an Envoy NACK can
//! carry a long text, and an over-long message would get the whole status write
//! refused.

use aether_gateway::status::Condition as Planned;
use aether_gateway::vocabulary::Word;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// `metav1.Condition.message` maxLength.
pub(crate) const MESSAGE_MAX: usize = 32768;

fn bounded(message: &str) -> String {
    if message.len() <= MESSAGE_MAX {
        return message.to_string();
    }
    const MORE: &str = "...";
    let mut end = MESSAGE_MAX - MORE.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MORE}", &message[..end])
}

/// The planned conditions, sorted by type, with timestamps carried over from
/// `current` where the status did not flip.
pub(crate) fn from_plan<T: Word, R: Word>(
    planned: &[Planned<T, R>],
    current: &[Condition],
    now: &Time,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = planned
        .iter()
        .map(|p| {
            let (type_, status) = (p.type_.as_str(), p.status_str());
            let kept = current
                .iter()
                .find(|c| c.type_ == type_ && c.status == status)
                .map(|c| c.last_transition_time.clone());
            Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason: p.reason.as_str().to_string(),
                message: bounded(&p.message),
                observed_generation: Some(p.observed_generation),
                last_transition_time: kept.unwrap_or_else(|| now.clone()),
            }
        })
        .collect();
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}

/// Equal as a map keyed by type, ignoring `lastTransitionTime`.
pub(crate) fn same(a: &[Condition], b: &[Condition]) -> bool {
    let key = |c: &Condition| {
        (
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone(),
            c.message.clone(),
            c.observed_generation,
        )
    };
    let mut a: Vec<_> = a.iter().map(key).collect();
    let mut b: Vec<_> = b.iter().map(key).collect();
    a.sort();
    b.sort();
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;
    use aether_gateway::vocabulary::listener::{Reason, Type};
    use k8s_openapi::jiff::Timestamp;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn mk(type_: &str, status: &str, reason: &str, t: i64) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: "m".into(),
            observed_generation: Some(1),
            last_transition_time: at(t),
        }
    }

    #[test]
    fn timestamp_is_kept_unless_the_status_flips() {
        let current = vec![
            mk("Accepted", "True", "Accepted", 10),
            mk("Programmed", "Unknown", "Pending", 0),
        ];
        let planned = vec![
            Planned::new(Type::Programmed, true, Reason::Programmed, "m", 1),
            // Same status, new reason: still no transition.
            Planned::new(Type::Accepted, true, Reason::UnsupportedValue, "m", 1),
            // New: stamped now.
            Planned::new(Type::ResolvedRefs, true, Reason::ResolvedRefs, "m", 1),
        ];
        let got = from_plan(&planned, &current, &at(99));
        let times: Vec<(&str, i64)> = got
            .iter()
            .map(|c| (c.type_.as_str(), c.last_transition_time.0.as_second()))
            .collect();
        assert_eq!(
            times,
            vec![("Accepted", 10), ("Programmed", 99), ("ResolvedRefs", 99)]
        );
        assert!(got.iter().all(|c| c.observed_generation == Some(1)));
    }

    #[test]
    fn long_messages_are_cut_to_the_api_limit_on_a_char_boundary() {
        // Planned messages are bounded where they are made (1 KiB); the cut
        // here is the API's own limit, for a message set any other way.
        let mut planned = vec![Planned::new(
            Type::Programmed,
            false,
            Reason::Invalid,
            "",
            1,
        )];
        planned[0].message = "é".repeat(MESSAGE_MAX);
        let got = from_plan(&planned, &[], &at(1));
        assert!(got[0].message.len() <= MESSAGE_MAX);
        assert!(got[0].message.ends_with("é..."));
        let fine = Planned::new(Type::Accepted, true, Reason::Accepted, "fine", 1);
        let short = from_plan(&[fine], &[], &at(1));
        assert_eq!(short[0].message, "fine");
    }

    #[test]
    fn comparison_ignores_timestamps_and_order() {
        let a = vec![mk("A", "True", "R", 1), mk("B", "False", "R", 2)];
        let b = vec![mk("B", "False", "R", 7), mk("A", "True", "R", 8)];
        assert!(same(&a, &b));
        let mut c = b.clone();
        c[0].observed_generation = Some(2);
        assert!(!same(&a, &c));
        assert!(!same(&a, &b[..1]));
    }
}
