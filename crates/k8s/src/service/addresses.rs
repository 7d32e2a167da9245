//! Gateway `status.addresses` from the edge Services' load-balancer ingress (pure).
//!
//! ```text
//!  Service status.loadBalancer.ingress[] ── ip → IPAddress, hostname → Hostname ──► Assignment.addresses
//!  no Service / no ingress / Service apply failed ──────────────────────────────► Assignment.missing
//! ```
//!
//! The [`Addresses`] go to [`aether_gateway::assemble`], which decides what a
//! missing address does to the Gateway's status (`AddressNotAssigned`, unless a
//! stronger reason holds it): a Gateway nobody can reach is not programmed,
//! whatever Envoy ACKed.

use super::{ReconcileErrors, Unallocated, gateway_of, is_public_service, public_name};
use aether_gateway::status::GatewayStatusAddress;
use aether_gateway::{Addresses, Assignment};
use aether_gateway::{Store, routability};
use aether_ir::ObjectRef;
use gateway_api::apis::experimental::gateways::Gateway;
use k8s_openapi::api::core::v1::Service;
use std::collections::BTreeMap;

pub const IP_ADDRESS: &str = "IPAddress";
pub const HOSTNAME: &str = "Hostname";

/// Every Gateway's addresses from its edge Service. `problems` says, per
/// Gateway, why its Service is not in place (the reconciler's errors,
/// [`super::Unallocated`]); it wins over what the store shows.
pub fn assignments<'a>(
    gateways: impl IntoIterator<Item = &'a ObjectRef>,
    store: &Store,
    problems: &BTreeMap<ObjectRef, String>,
) -> Addresses {
    let by_gateway = gateways
        .into_iter()
        .map(|gw| (gw.clone(), assignment(gw, store, problems.get(gw))))
        .collect();
    Addresses::LoadBalancer(by_gateway)
}

fn assignment(gw: &ObjectRef, store: &Store, problem: Option<&String>) -> Assignment {
    // The public Service, beside the Gateway, is the one the load balancer serves.
    let name = public_name(gw);
    let svc = store
        .get::<Service>(&gw.namespace, &name)
        .filter(|s| is_public_service(s) && gateway_of(s).as_ref() == Some(gw));
    let addresses = svc.map(ingress_addresses).unwrap_or_default();
    let service = format!("Service {}/{name}", gw.namespace);
    let gateway = store.get::<Gateway>(&gw.namespace, &gw.name);
    let requests = gateway.map(routability::requests).unwrap_or_default();
    let cluster_ip = svc
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.cluster_ip.clone())
        .filter(|ip| !ip.is_empty() && ip != "None");
    // Each spec entry matched once the Service's addresses are known (a
    // problem or no Service yet: not reconciled, no AddressesAssigned).
    let assigned = (problem.is_none() && svc.is_some()).then(|| {
        let offer = routability::Offer {
            default: addresses.clone(),
            cluster_ip,
        };
        routability::assign(&requests, &offer)
    });
    let not_given = assigned.as_ref().map_or(&[][..], |a| &a.not_given[..]);
    let mut unusable = false;
    let missing = if let Some(problem) = problem {
        Some(format!("{service} could not be put in place: {problem}"))
    } else if svc.is_none() {
        Some(format!("waiting for {service} to be created"))
    } else if !not_given.is_empty() {
        // The load balancer cannot be told apart from a slow one: an address
        // asked for and not given is reported as not usable, naming it.
        unusable = true;
        Some(format!(
            "the load balancer has not assigned the requested address{} {} to {service}",
            if not_given.len() > 1 { "es" } else { "" },
            not_given.join(", ")
        ))
    } else if addresses.is_empty() && routability::wants_default_scope(&requests) {
        Some(format!(
            "waiting for a load balancer to assign an address to {service}"
        ))
    } else {
        None
    };
    let missing = match (&missing, &assigned) {
        (None, Some(a)) if a.none() => Some(format!(
            "no requested address can be assigned: {}",
            a.unsatisfied.join("; ")
        )),
        _ => missing,
    };
    Assignment {
        addresses: assigned.as_ref().map_or(addresses, |a| a.addresses.clone()),
        missing,
        unusable,
        assigned,
    }
}

/// Why each Gateway's Service or Envoy ports are not in place, for
/// [`assignments`]: the last reconcile's apply failures (these win) and the
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
                routability: None,
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
    use crate::service::{GATEWAY_NAME_ANNOTATION, GATEWAY_NAMESPACE_ANNOTATION, PUBLIC_LABEL};
    use aether_gateway::status::{Condition, GatewayCondition, GatewayStatus, condition};
    use aether_gateway::vocabulary::gateway::{self, Type};
    use aether_gateway::{AckState, Served, StatusPlan, assemble};
    use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, ServiceStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn mk_svc(gw: &ObjectRef, ingress: Vec<(Option<&str>, Option<&str>)>) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(public_name(gw)),
                namespace: Some(gw.namespace.clone()),
                labels: Some([(PUBLIC_LABEL.to_string(), "x".to_string())].into()),
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

    fn mk_plan(gws: &[(&ObjectRef, bool, gateway::Reason)]) -> StatusPlan {
        let mut plan = StatusPlan::default();
        for (gw, ok, reason) in gws {
            let accepted = Condition::new(Type::Accepted, true, gateway::Reason::Accepted, "ok", 3);
            let programmed = Condition::new(Type::Programmed, *ok, *reason, "planned", 3);
            plan.gateways.insert(
                (*gw).clone(),
                GatewayStatus {
                    addresses: vec![],
                    conditions: vec![accepted, programmed],
                    listeners: vec![],
                    attached_listener_sets: None,
                    of: Default::default(),
                },
            );
        }
        plan
    }

    /// The status to write for `plan` with these Services, every Gateway ACKed
    /// but those in `pending`.
    fn assembled(
        plan: &StatusPlan,
        store: &Store,
        problems: &BTreeMap<ObjectRef, String>,
        pending: &[&ObjectRef],
    ) -> StatusPlan {
        let addresses = assignments(plan.gateways.keys(), store, problems);
        let served = |gw: &ObjectRef| {
            let ack = if pending.contains(&gw) {
                AckState::Pending
            } else {
                AckState::Acked
            };
            Served::whole(ack)
        };
        assemble(plan, served, &addresses)
    }

    fn programmed<'a>(plan: &'a StatusPlan, gw: &ObjectRef) -> &'a GatewayCondition {
        condition(&plan.gateways[gw].conditions, Type::Programmed).unwrap()
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
        let plan = assembled(
            &mk_plan(&[(&gw, true, gateway::Reason::Programmed)]),
            &store,
            &BTreeMap::new(),
            &[],
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

    fn mk_gateway(gw: &ObjectRef, addresses: &str) -> Gateway {
        let yaml = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {}, namespace: {}}}\nspec:\n  gatewayClassName: aether\n  addresses: {addresses}\n  listeners: [{{name: http, port: 80, protocol: HTTP}}]\n",
            gw.name, gw.namespace
        );
        serde_json::from_value(serde_norway::from_str(&yaml).unwrap()).unwrap()
    }

    /// (value, routability) of each status address, and AddressesAssigned's
    /// (status, reason).
    type Reported = (Vec<(String, String)>, Option<(bool, gateway::Reason)>);

    fn routability_of(plan: &StatusPlan, gw: &ObjectRef) -> Reported {
        let s = &plan.gateways[gw];
        let addresses = s
            .addresses
            .iter()
            .map(|a| {
                (
                    a.value.clone(),
                    a.routability.clone().unwrap_or_else(|| "unset".into()),
                )
            })
            .collect();
        let assigned = condition(&s.conditions, Type::AddressesAssigned).map(|c| (c.ok, c.reason));
        (addresses, assigned)
    }

    #[test]
    fn an_empty_and_a_cluster_entry_get_the_load_balancers_address_and_the_cluster_ip() {
        let gw = ObjectRef::new("infra", "web");
        let mut store = Store::default();
        let mut svc = mk_svc(&gw, vec![(Some("192.0.2.7"), None)]);
        svc.spec = Some(k8s_openapi::api::core::v1::ServiceSpec {
            cluster_ip: Some("10.96.0.9".into()),
            ..Default::default()
        });
        store.insert(svc);
        store.insert(mk_gateway(
            &gw,
            "[{type: IPAddress, routability: Cluster}, {type: IPAddress}]",
        ));
        let plan = mk_plan(&[(&gw, true, gateway::Reason::Programmed)]);
        let plan = assembled(&plan, &store, &BTreeMap::new(), &[]);
        let (addresses, assigned) = routability_of(&plan, &gw);
        assert_eq!(
            addresses,
            [
                ("192.0.2.7".into(), String::new()),
                ("10.96.0.9".into(), "Cluster".into())
            ]
        );
        assert_eq!(assigned, Some((true, gateway::Reason::AddressesAssigned)));
        assert!(programmed(&plan, &gw).is_true());
    }

    #[test]
    fn an_unknown_scope_alone_is_not_assigned_and_not_programmed() {
        let gw = ObjectRef::new("infra", "web");
        let mut store = Store::default();
        store.insert(mk_svc(&gw, vec![(Some("192.0.2.7"), None)]));
        store.insert(mk_gateway(
            &gw,
            "[{type: IPAddress, routability: example.com/CorpWan}]",
        ));
        let plan = mk_plan(&[(&gw, true, gateway::Reason::Programmed)]);
        let plan = assembled(&plan, &store, &BTreeMap::new(), &[]);
        let (addresses, assigned) = routability_of(&plan, &gw);
        assert_eq!(addresses, []);
        assert_eq!(assigned, Some((false, gateway::Reason::NotAssigned)));
        let p = programmed(&plan, &gw);
        assert_eq!(
            (p.ok, p.reason),
            (false, gateway::Reason::AddressNotAssigned)
        );
    }

    #[test]
    fn no_addresses_condition_before_the_service_exists() {
        let gw = ObjectRef::new("infra", "web");
        let plan = mk_plan(&[(&gw, true, gateway::Reason::Programmed)]);
        let plan = assembled(&plan, &Store::default(), &BTreeMap::new(), &[]);
        assert_eq!(routability_of(&plan, &gw).1, None);
    }

    #[test]
    fn no_service_or_no_ingress_is_address_not_assigned() {
        let waiting = ObjectRef::new("infra", "no-ingress");
        let missing = ObjectRef::new("infra", "no-service");
        let mut store = Store::default();
        store.insert(mk_svc(&waiting, vec![]));
        let programmable = gateway::Reason::Programmed;
        let plan = mk_plan(&[
            (&waiting, true, programmable),
            (&missing, true, programmable),
        ]);
        // `missing` also waits for its Envoys: the address is what is told.
        let plan = assembled(&plan, &store, &BTreeMap::new(), &[&missing]);
        let w = programmed(&plan, &waiting);
        assert_eq!(
            (w.ok, w.reason),
            (false, gateway::Reason::AddressNotAssigned)
        );
        assert!(w.message.contains("load balancer"), "{}", w.message);
        assert_eq!(w.observed_generation, 3);
        let m = programmed(&plan, &missing);
        assert_eq!(m.reason, gateway::Reason::AddressNotAssigned);
        assert!(m.message.contains(&public_name(&missing)), "{}", m.message);
        assert!(plan.gateways[&missing].addresses.is_empty());
    }

    fn mk_gateway_asking(gw: &ObjectRef, ips: &[&str]) -> Gateway {
        let addresses: Vec<serde_json::Value> = ips
            .iter()
            .map(|ip| serde_json::json!({"type": "IPAddress", "value": ip}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": gw.name, "namespace": gw.namespace},
            "spec": {"gatewayClassName": "aether", "addresses": addresses, "listeners": []},
        }))
        .unwrap()
    }

    #[test]
    fn a_requested_address_not_given_is_address_not_usable_and_named() {
        let gw = ObjectRef::new("infra", "static");
        let mut store = Store::default();
        store.insert(mk_svc(&gw, vec![(Some("10.250.0.9"), None)]));
        store.insert(mk_gateway_asking(&gw, &["10.251.0.1", "10.250.0.9"]));
        let plan = mk_plan(&[(&gw, true, gateway::Reason::Programmed)]);
        let out = assembled(&plan, &store, &BTreeMap::new(), &[]);
        let p = programmed(&out, &gw);
        assert_eq!((p.ok, p.reason), (false, gateway::Reason::AddressNotUsable));
        assert!(p.message.contains("10.251.0.1"), "{}", p.message);
        assert!(!p.message.contains("10.250.0.9"), "{}", p.message);
        // What the load balancer did give is reported.
        assert_eq!(out.gateways[&gw].addresses[0].value, "10.250.0.9");

        store.insert(mk_gateway_asking(&gw, &["10.250.0.9"]));
        let out = assembled(&plan, &store, &BTreeMap::new(), &[]);
        assert!(programmed(&out, &gw).is_true());
    }

    #[test]
    fn a_failed_service_names_the_error_and_other_reasons_stay() {
        let failed = ObjectRef::new("infra", "failed");
        let invalid = ObjectRef::new("infra", "invalid");
        let mut store = Store::default();
        store.insert(mk_svc(&failed, vec![(Some("192.0.2.1"), None)]));
        store.insert(mk_svc(&invalid, vec![(Some("192.0.2.2"), None)]));
        let plan = mk_plan(&[
            (&failed, true, gateway::Reason::Programmed),
            (&invalid, false, gateway::Reason::Invalid),
        ]);
        let problems = BTreeMap::from([
            (
                failed.clone(),
                "spec.ports[1].name: Duplicate value".to_string(),
            ),
            (invalid.clone(), "whatever".to_string()),
        ]);
        let plan = assembled(&plan, &store, &problems, &[]);
        let f = programmed(&plan, &failed);
        assert_eq!(f.reason, gateway::Reason::AddressNotAssigned);
        assert!(f.message.contains("Duplicate value"), "{}", f.message);
        let i = programmed(&plan, &invalid);
        assert_eq!(
            (i.reason, i.message.as_str()),
            (gateway::Reason::Invalid, "planned")
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
        svc.metadata.name = Some(public_name(&gw));
        let mut store = Store::default();
        store.insert(svc);
        let plan = assembled(
            &mk_plan(&[(&gw, true, gateway::Reason::Programmed)]),
            &store,
            &BTreeMap::new(),
            &[],
        );
        assert!(plan.gateways[&gw].addresses.is_empty());
        assert_eq!(
            programmed(&plan, &gw).reason,
            gateway::Reason::AddressNotAssigned
        );
    }
}
