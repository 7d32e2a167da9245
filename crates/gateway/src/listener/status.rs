//! A listener's status, as planned: Accepted, Conflicted, ResolvedRefs,
//! OverlappingTLSConfig, Programmed and the routes it counts.

use super::{Listener, Unresolved};
use crate::status::{Condition, ListenerCondition, ListenerStatus, set_condition};
use crate::vocabulary::listener;
use std::collections::BTreeSet;
use std::sync::Arc;

/// A listener's status; `attached` are the routes its `attachedRoutes` counts.
pub(crate) fn listener_status(
    l: &Listener,
    attached: BTreeSet<Arc<str>>,
    gateway_served: bool,
    g: i64,
) -> ListenerStatus {
    let mut c = Vec::new();
    for condition in l.acceptance(g) {
        set_condition(&mut c, condition);
    }
    set_condition(&mut c, l.resolved_refs(g));
    if let Some(why) = &l.overlapping_tls {
        let reason = listener::Reason::OverlappingHostnames;
        let overlap = Condition::new(
            listener::Type::OverlappingTLSConfig,
            true,
            reason,
            why.clone(),
            g,
        );
        set_condition(&mut c, overlap);
    }
    set_condition(&mut c, l.programmed(gateway_served, g));
    ListenerStatus {
        name: l.name.clone(),
        supported_kinds: l.supported_kinds.clone(),
        attached_routes: i32::try_from(attached.len()).unwrap_or(i32::MAX),
        conditions: c,
        attached,
    }
}

impl Listener {
    /// Accepted and Conflicted: a conflict names its reason on both.
    fn acceptance(&self, g: i64) -> [ListenerCondition; 2] {
        use listener::{Reason, Type};
        if let Some(conflict) = &self.conflicted {
            let (reason, message) = conflict.reason_message();
            return [
                Condition::new(Type::Accepted, false, reason, message, g),
                Condition::new(Type::Conflicted, true, reason, message, g),
            ];
        }
        let accepted = match &self.not_accepted {
            Some(problem) => problem.condition(g),
            None => Condition::new(
                Type::Accepted,
                true,
                Reason::Accepted,
                "listener is accepted",
                g,
            ),
        };
        let none = Condition::new(
            Type::Conflicted,
            false,
            Reason::NoConflicts,
            "no conflicts",
            g,
        );
        [accepted, none]
    }

    /// ResolvedRefs: the first unresolved reference's reason, every one in the message.
    fn resolved_refs(&self, g: i64) -> ListenerCondition {
        let kind = (listener::Type::ResolvedRefs, listener::Reason::ResolvedRefs);
        crate::status::resolved_refs(
            kind,
            &self.unresolved,
            Unresolved::reason,
            Unresolved::message,
            g,
        )
    }

    /// Programmed, as planned (the fleet's ACKs come later, in `assemble`).
    fn programmed(&self, gateway_served: bool, g: i64) -> ListenerCondition {
        use listener::{Reason, Type};
        let not_programmed = if !self.is_accepted() {
            Some("the listener is not accepted")
        } else if !self.resolved_refs_ok() {
            Some("the listener's references do not resolve")
        } else if self.supported_kinds.is_empty() {
            Some("the listener supports no route kind")
        } else if !gateway_served {
            Some("the Gateway is not served")
        } else {
            None
        };
        let (ok, reason, message) = match not_programmed {
            None => (true, Reason::Programmed, "listener is programmed"),
            // A ListenerSet's listener that loses a conflict says which (the
            // conformance suite asks for the conflict reason there).
            Some(why) => match (&self.origin, &self.conflicted) {
                (Some(_), Some(conflict)) => (false, conflict.reason_message().0, why),
                _ => (false, Reason::Invalid, why),
            },
        };
        Condition::new(Type::Programmed, ok, reason, message, g)
    }
}
