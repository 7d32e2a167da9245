//! Gateway `status.addresses` from the edge Services' load-balancer ingress (pure).
//!
//! ```text
//!  Service status.loadBalancer.ingress[] ── ip → IPAddress, hostname → Hostname ──► Gateway status.addresses
//!  no Service / no ingress / Service apply failed ──► Programmed=False, AddressNotAssigned
//! ```
//!
//! Apply it to the plan that is about to be written (after the ACK gate): a Gateway
//! nobody can reach is not programmed, whatever Envoy ACKed. A Gateway that is not
//! programmed for another reason (invalid listeners, an Envoy NACK) keeps that
//! reason, and gets its addresses all the same.

use super::{
    ReconcileErrors, ServiceConfig, Unallocated, gateway_of, is_edge_service, service_name,
};
use aether_gateway::StatusPlan;
use aether_gateway::Store;
use aether_gateway::status::{Condition, GatewayStatusAddress, set_condition};
use aether_ir::ObjectRef;
use k8s_openapi::api::core::v1::Service;
use std::collections::BTreeMap;

pub const IP_ADDRESS: &str = "IPAddress";
pub const HOSTNAME: &str = "Hostname";
pub const ADDRESS_NOT_ASSIGNED: &str = "AddressNotAssigned";

/// Sets every planned Gateway's addresses from its edge Service. `problems` says,
/// per Gateway, why its Service is not in place (the reconciler's errors,
/// [`super::Unallocated`]); it wins over what the store shows.
pub fn apply_addresses(
    plan: &mut StatusPlan,
    store: &Store,
    cfg: &ServiceConfig,
    problems: &BTreeMap<ObjectRef, String>,
) {
    for (gw, status) in &mut plan.gateways {
        let name = service_name(gw);
        let svc = store
            .get::<Service>(&cfg.namespace, &name)
            .filter(|s| is_edge_service(s, &cfg.namespace) && gateway_of(s).as_ref() == Some(gw));
        status.addresses = svc.map(ingress_addresses).unwrap_or_default();
        let service = format!("Service {}/{name}", cfg.namespace);
        let why = if let Some(problem) = problems.get(gw) {
            Some(format!("{service} could not be put in place: {problem}"))
        } else if svc.is_none() {
            Some(format!("waiting for {service} to be created"))
        } else if status.addresses.is_empty() {
            Some(format!(
                "waiting for a load balancer to assign an address to {service}"
            ))
        } else {
            None
        };
        let Some(message) = why else { continue };
        let programmed = status.conditions.iter().find(|c| c.type_ == "Programmed");
        // Another reason not to be programmed (Invalid, a NACK) stays: it is what
        // the user must fix first.
        if programmed.is_some_and(|c| !c.is_true() && c.reason != "Pending") {
            continue;
        }
        let generation = programmed
            .or(status.conditions.first())
            .map_or(0, |c| c.observed_generation);
        set_condition(
            &mut status.conditions,
            Condition::new(
                "Programmed",
                false,
                ADDRESS_NOT_ASSIGNED,
                message,
                generation,
            ),
        );
    }
}

/// Why each Gateway's Service or Envoy ports are not in place, for
/// [`apply_addresses`]: the last reconcile's apply failures (these win) and the
/// Gateways [`super::apply_allocations`] took out of the IR.
pub fn problems(
    errors: Option<&ReconcileErrors>,
    unallocated: &[Unallocated],
) -> BTreeMap<ObjectRef, String> {
    let mut out: BTreeMap<ObjectRef, String> = BTreeMap::new();
    for u in unallocated {
        let message = out.entry(u.gateway().clone()).or_default();
        if !message.is_empty() {
            message.push_str("; ");
        }
        message.push_str(&u.to_string());
    }
    out.extend(errors.map(ReconcileErrors::by_gateway).unwrap_or_default());
    out
}

/// `ip` as IPAddress, `hostname` as Hostname, in the load balancer's order, once each.
fn ingress_addresses(svc: &Service) -> Vec<GatewayStatusAddress> {
    let ingress = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref());
    let mut out: Vec<GatewayStatusAddress> = Vec::new();
    for i in ingress.into_iter().flatten() {
        let entries = [(IP_ADDRESS, &i.ip), (HOSTNAME, &i.hostname)];
        for (type_, value) in entries {
            let Some(value) = value.as_ref().filter(|v| !v.is_empty()) else {
                continue;
            };
            let a = GatewayStatusAddress {
                type_: type_.into(),
                value: value.clone(),
            };
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{GATEWAY_LABEL, GATEWAY_NAME_ANNOTATION, GATEWAY_NAMESPACE_ANNOTATION};
    use aether_gateway::status::{GatewayStatus, condition};
    use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, ServiceStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn mk_svc(gw: &ObjectRef, ingress: Vec<(Option<&str>, Option<&str>)>) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(service_name(gw)),
                namespace: Some("aether-ingress".into()),
                labels: Some([(GATEWAY_LABEL.to_string(), "x".to_string())].into()),
                annotations: Some(
                    [
                        (
                            GATEWAY_NAMESPACE_ANNOTATION.to_string(),
                            gw.namespace.clone(),
                        ),
                        (GATEWAY_NAME_ANNOTATION.to_string(), gw.name.clone()),
                    ]
                    .into(),
                ),
                ..Default::default()
            },
            spec: None,
            status: Some(ServiceStatus {
                load_balancer: Some(LoadBalancerStatus {
                    ingress: Some(
                        ingress
                            .into_iter()
                            .map(|(ip, host)| LoadBalancerIngress {
                                ip: ip.map(Into::into),
                                hostname: host.map(Into::into),
                                ..Default::default()
                            })
                            .collect(),
                    ),
                }),
                ..Default::default()
            }),
        }
    }

    fn mk_plan(gws: &[(&ObjectRef, bool, &str)]) -> StatusPlan {
        let mut plan = StatusPlan::default();
        for (gw, ok, reason) in gws {
            plan.gateways.insert(
                (*gw).clone(),
                GatewayStatus {
                    addresses: vec![],
                    conditions: vec![
                        Condition::new("Accepted", true, "Accepted", "ok", 3),
                        Condition::new("Programmed", *ok, reason, "planned", 3),
                    ],
                    listeners: vec![],
                    of: Default::default(),
                },
            );
        }
        plan
    }

    fn programmed<'a>(plan: &'a StatusPlan, gw: &ObjectRef) -> &'a Condition {
        condition(&plan.gateways[gw].conditions, "Programmed").unwrap()
    }

    #[test]
    fn addresses_come_from_ingress_with_their_types() {
        let gw = ObjectRef::new("infra", "web");
        let mut store = Store::default();
        store.insert(mk_svc(
            &gw,
            vec![
                (Some("192.0.2.7"), None),
                (None, Some("lb.example.com")),
                (Some("192.0.2.7"), Some("lb.example.com")),
            ],
        ));
        let mut plan = mk_plan(&[(&gw, true, "Programmed")]);
        apply_addresses(
            &mut plan,
            &store,
            &ServiceConfig::default(),
            &BTreeMap::new(),
        );
        let got: Vec<(&str, &str)> = plan.gateways[&gw]
            .addresses
            .iter()
            .map(|a| (a.type_.as_str(), a.value.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![("IPAddress", "192.0.2.7"), ("Hostname", "lb.example.com")]
        );
        assert!(programmed(&plan, &gw).is_true());
    }

    #[test]
    fn no_service_or_no_ingress_is_address_not_assigned() {
        let waiting = ObjectRef::new("infra", "no-ingress");
        let missing = ObjectRef::new("infra", "no-service");
        let mut store = Store::default();
        store.insert(mk_svc(&waiting, vec![]));
        let mut plan = mk_plan(&[(&waiting, true, "Programmed"), (&missing, false, "Pending")]);
        apply_addresses(
            &mut plan,
            &store,
            &ServiceConfig::default(),
            &BTreeMap::new(),
        );
        let w = programmed(&plan, &waiting);
        assert_eq!(
            (w.status.as_str(), w.reason.as_str()),
            ("False", ADDRESS_NOT_ASSIGNED)
        );
        assert!(w.message.contains("load balancer"), "{}", w.message);
        assert_eq!(w.observed_generation, 3);
        let m = programmed(&plan, &missing);
        assert_eq!(m.reason, ADDRESS_NOT_ASSIGNED);
        assert!(m.message.contains(&service_name(&missing)), "{}", m.message);
        assert!(plan.gateways[&missing].addresses.is_empty());
    }

    #[test]
    fn a_failed_service_names_the_error_and_other_reasons_stay() {
        let failed = ObjectRef::new("infra", "failed");
        let invalid = ObjectRef::new("infra", "invalid");
        let mut store = Store::default();
        store.insert(mk_svc(&failed, vec![(Some("192.0.2.1"), None)]));
        store.insert(mk_svc(&invalid, vec![(Some("192.0.2.2"), None)]));
        let mut plan = mk_plan(&[(&failed, true, "Programmed"), (&invalid, false, "Invalid")]);
        let problems = BTreeMap::from([
            (
                failed.clone(),
                "spec.ports[1].name: Duplicate value".to_string(),
            ),
            (invalid.clone(), "whatever".to_string()),
        ]);
        apply_addresses(&mut plan, &store, &ServiceConfig::default(), &problems);
        let f = programmed(&plan, &failed);
        assert_eq!(f.reason, ADDRESS_NOT_ASSIGNED);
        assert!(f.message.contains("Duplicate value"), "{}", f.message);
        let i = programmed(&plan, &invalid);
        assert_eq!(
            (i.reason.as_str(), i.message.as_str()),
            ("Invalid", "planned")
        );
        assert_eq!(plan.gateways[&invalid].addresses[0].value, "192.0.2.2");
    }

    #[test]
    fn problems_join_unallocated_and_failed_gateways() {
        let a = ObjectRef::new("infra", "a");
        let unallocated = [
            Unallocated::Conflict {
                gateway: a.clone(),
                port: 80,
                envoy_port: 20000,
                other: ObjectRef::new("infra", "b"),
            },
            Unallocated::Missing {
                gateway: a.clone(),
                ports: vec![443],
            },
        ];
        let got = problems(None, &unallocated);
        assert_eq!(got.keys().collect::<Vec<_>>(), vec![&a]);
        assert!(got[&a].contains("20000"), "{}", got[&a]);
        assert!(got[&a].contains("[443]"), "{}", got[&a]);
    }

    #[test]
    fn a_service_of_another_gateway_does_not_count() {
        let gw = ObjectRef::new("infra", "web");
        let mut svc = mk_svc(
            &ObjectRef::new("infra", "other"),
            vec![(Some("192.0.2.9"), None)],
        );
        svc.metadata.name = Some(service_name(&gw));
        let mut store = Store::default();
        store.insert(svc);
        let mut plan = mk_plan(&[(&gw, true, "Programmed")]);
        apply_addresses(
            &mut plan,
            &store,
            &ServiceConfig::default(),
            &BTreeMap::new(),
        );
        assert!(plan.gateways[&gw].addresses.is_empty());
        assert_eq!(programmed(&plan, &gw).reason, ADDRESS_NOT_ASSIGNED);
    }
}
