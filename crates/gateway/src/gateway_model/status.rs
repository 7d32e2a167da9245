//! Gateway status, as planned: Accepted, Programmed, ResolvedRefs, the
//! addresses and each listener's status (the fleet's ACKs come later, in
//! `assemble`).

use super::GatewayModel;
use crate::attachments::Attachments;
use crate::certificate::CertificateError;
use crate::listener::status::listener_status;
use crate::routability;
use crate::status::{
    Condition, GatewayCondition, GatewayStatus, GatewayStatusAddress, set_condition,
};
use crate::vocabulary::gateway::{Reason, Type};

impl GatewayModel {
    /// Its status as planned; `attachments` count each listener's routes.
    pub fn status(&self, attachments: &Attachments) -> GatewayStatus {
        let g = self.of.generation;
        let served = self.is_served();
        let mut conditions = Vec::new();
        set_condition(&mut conditions, self.accepted(g));
        let (addresses, assigned) = self.planned_addresses(served);
        set_condition(
            &mut conditions,
            self.programmed(served, assigned.as_ref(), g),
        );
        if let Some(resolved) = self.resolved_refs(g) {
            set_condition(&mut conditions, resolved);
        }
        if self.insecure_frontend_validation {
            let insecure = Condition::new(
                Type::InsecureFrontendValidationMode,
                true,
                Reason::ConfigurationChanged,
                "spec.tls.frontend allows clients without a valid certificate (AllowInsecureFallback)",
                g,
            );
            set_condition(&mut conditions, insecure);
        }
        let addresses = match &assigned {
            Some(a) => {
                set_condition(&mut conditions, routability::condition(a, g));
                a.addresses.clone()
            }
            None => addresses,
        };
        let attached_sets = self
            .listener_sets
            .iter()
            .filter(|s| s.is_attached(self))
            .count();
        GatewayStatus {
            addresses,
            conditions,
            listeners: self
                .listeners
                .iter()
                .enumerate()
                .filter(|(_, l)| l.origin.is_none())
                .map(|(li, l)| listener_status(l, attachments.counted_on(li), served, g))
                .collect(),
            attached_listener_sets: (!self.listener_sets.is_empty() || self.allows_listener_sets)
                .then(|| i32::try_from(attached_sets).unwrap_or(i32::MAX)),
            of: self.of.clone(),
        }
    }

    /// Accepted: its parametersRef, its addresses, then its own listeners.
    fn accepted(&self, g: i64) -> GatewayCondition {
        let own = || self.listeners.iter().filter(|l| l.origin.is_none());
        let accepted_count = own().filter(|l| l.is_accepted()).count();
        let invalid: Vec<&str> = own()
            .filter(|l| !l.is_accepted())
            .map(|l| l.name.as_str())
            .collect();
        let accepted = |ok: bool, reason: Reason, message: String| {
            GatewayCondition::new(Type::Accepted, ok, reason, message, g)
        };
        match &self.addresses {
            _ if let Some(why) = &self.invalid_parameters => {
                accepted(false, Reason::InvalidParameters, why.clone())
            }
            Err(why) => accepted(false, Reason::UnsupportedAddress, why.clone()),
            Ok(_) if invalid.is_empty() => {
                accepted(true, Reason::Accepted, "Gateway is accepted".into())
            }
            Ok(_) => accepted(
                accepted_count > 0,
                Reason::ListenersNotValid,
                format!("invalid listeners: {}", invalid.join(", ")),
            ),
        }
    }

    /// The addresses it binds while served, and — when those are final
    /// (standalone, static mode) — each `spec.addresses` entry matched now;
    /// in service mode `assemble` does that with the Service's.
    fn planned_addresses(
        &self,
        served: bool,
    ) -> (Vec<GatewayStatusAddress>, Option<routability::Assigned>) {
        let planned: Vec<GatewayStatusAddress> = match (&self.addresses, served) {
            (Ok(a), true) => a
                .iter()
                .map(|v| GatewayStatusAddress {
                    type_: routability::IP_ADDRESS.into(),
                    value: v.clone(),
                    routability: None,
                })
                .collect(),
            _ => vec![],
        };
        let assigned = (served && self.addresses_final).then(|| {
            let offer = routability::Offer {
                default: planned.clone(),
                cluster_ip: None,
            };
            routability::assign(&self.address_requests, &offer)
        });
        (planned, assigned)
    }

    /// Programmed as planned (the fleet's ACKs come later).
    fn programmed(
        &self,
        served: bool,
        assigned: Option<&routability::Assigned>,
        g: i64,
    ) -> GatewayCondition {
        let unassigned = assigned.is_some_and(routability::Assigned::none);
        let (ok, reason, message) = if served && unassigned {
            (
                false,
                Reason::AddressNotAssigned,
                "no requested address can be assigned (see AddressesAssigned)",
            )
        } else if served {
            (true, Reason::Programmed, "Gateway is programmed")
        } else if self.invalid_parameters.is_some() {
            (
                false,
                Reason::Invalid,
                "the Gateway is not accepted: invalid parametersRef",
            )
        } else if self.addresses.is_err() {
            (false, Reason::AddressNotUsable, "no usable address")
        } else {
            (false, Reason::Invalid, "no listener can be programmed")
        };
        Condition::new(Type::Programmed, ok, reason, message, g)
    }

    /// ResolvedRefs, when `spec.tls.backend.clientCertificateRef` is set.
    fn resolved_refs(&self, g: i64) -> Option<GatewayCondition> {
        let resolved = match self.backend_client_certificate.as_ref()? {
            Ok(_) => Condition::new(
                Type::ResolvedRefs,
                true,
                Reason::ResolvedRefs,
                "all references resolved",
                g,
            ),
            Err(e) => {
                let reason = match e {
                    CertificateError::RefNotPermitted(_) => Reason::RefNotPermitted,
                    CertificateError::Invalid(..) => Reason::InvalidClientCertificateRef,
                };
                let message = format!("spec.tls.backend.clientCertificateRef: {e}");
                Condition::new(Type::ResolvedRefs, false, reason, message, g)
            }
        };
        Some(resolved)
    }
}
