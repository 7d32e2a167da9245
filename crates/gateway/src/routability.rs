//! Gateway address routability (GatewayAddressRoutability, GEP-5093): each
//! `spec.addresses` entry is matched alone against what the Gateway can be
//! reached at, and `status.addresses` says, per address, where it is
//! reachable from.
//!
//! ```text
//!  spec.addresses[i] (type, value?, routability) ─┐
//!                                                 ├─► assign ─► status.addresses (routability set on each)
//!  offered: default addresses (load balancer,     │             + AddressesAssigned: all / some / none
//!           or the listeners' own) + ClusterIP ───┘
//!
//!  routability ""                        any default address (the value, if asked)  → reported ""
//!  routability testing.x-k8s.io/sentinel as "" (reserved for conformance)             → reported as asked
//!  routability Cluster, IPAddress        the Service's ClusterIP (the value, if asked) → reported Cluster
//!  anything else                         never satisfied by another scope: named in the condition
//! ```
//!
//! With no `spec.addresses` every default address is reported, routability "".

use crate::status::{Condition, GatewayCondition, GatewayStatusAddress};
use crate::vocabulary::gateway::{Reason, Type};
use gateway_api::apis::experimental::gateways::Gateway;

/// The scope `Cluster`: an address in the cluster's Service CIDR.
pub const CLUSTER: &str = "Cluster";
/// Reserved by the Gateway API for its conformance suite: carries no
/// guarantee, and an implementation that claims routability must report it.
pub const SENTINEL: &str = "testing.x-k8s.io/sentinel";
pub const IP_ADDRESS: &str = "IPAddress";

/// One `spec.addresses` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub type_: String,
    pub value: Option<String>,
    pub routability: String,
}

/// What the Gateway can be reached at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Offer {
    /// The default scope's addresses (routability ""), e.g. a load balancer's.
    pub default: Vec<GatewayStatusAddress>,
    /// A Kubernetes Service ClusterIP, if the Gateway has one.
    pub cluster_ip: Option<String>,
}

/// The outcome: the addresses to report and the entries left unsatisfied.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assigned {
    pub addresses: Vec<GatewayStatusAddress>,
    /// Why each unsatisfied entry is, in spec order.
    pub unsatisfied: Vec<String>,
    /// The IP addresses asked of the default scope (a load balancer) by value
    /// and not offered, once each in spec order: the load balancer cannot be
    /// told apart from a slow one, so these make the Gateway's addresses not
    /// usable rather than merely unassigned.
    pub not_given: Vec<String>,
}

impl Assigned {
    /// Some entries satisfied, some not.
    pub fn partial(&self) -> bool {
        !self.addresses.is_empty() && !self.unsatisfied.is_empty()
    }

    /// No entry satisfied.
    pub fn none(&self) -> bool {
        self.addresses.is_empty()
    }
}

fn address(type_: &str, value: &str, routability: &str) -> GatewayStatusAddress {
    GatewayStatusAddress {
        type_: type_.to_string(),
        value: value.to_string(),
        routability: Some(routability.to_string()),
    }
}

/// Matches every request alone against `offer`, in spec order; an address is
/// reported once, for the first request it satisfies, in the order `offer`
/// lists them (the ClusterIP last).
pub fn assign(requests: &[Request], offer: &Offer) -> Assigned {
    let mut out = Assigned::default();
    if requests.is_empty() {
        for a in &offer.default {
            out.addresses.push(address(&a.type_, &a.value, ""));
        }
        return out;
    }
    // Per offered default address, the routability it was given for; the
    // ClusterIP's likewise.
    let mut given: Vec<Option<&str>> = vec![None; offer.default.len()];
    let mut cluster_given = false;
    for (i, r) in requests.iter().enumerate() {
        let what = describe(i, r);
        let outcome = match r.routability.as_str() {
            "" | SENTINEL => {
                let fits = |a: &GatewayStatusAddress| {
                    a.type_ == r.type_ && r.value.as_ref().is_none_or(|v| *v == a.value)
                };
                let free = (0..offer.default.len())
                    .find(|&j| given[j].is_none() && fits(&offer.default[j]));
                match free {
                    Some(j) => {
                        given[j] = Some(r.routability.as_str());
                        Ok(())
                    }
                    None if offer.default.iter().any(fits) => Err(format!(
                        "{what}: its address already satisfies another entry"
                    )),
                    None => Err(match &r.value {
                        Some(v) => {
                            if r.type_ == IP_ADDRESS && !out.not_given.contains(v) {
                                out.not_given.push(v.clone());
                            }
                            format!("{what}: {v} is not assigned")
                        }
                        None => format!("{what}: no address is assigned"),
                    }),
                }
            }
            CLUSTER if r.type_ != IP_ADDRESS => Err(format!(
                "{what}: Cluster routability is supported for IPAddress only"
            )),
            CLUSTER => match (&offer.cluster_ip, &r.value) {
                (None, _) => Err(format!(
                    "{what}: no ClusterIP (Cluster routability needs the service address mode)"
                )),
                (Some(ip), Some(v)) if v != ip => {
                    Err(format!("{what}: {v} is not the Gateway's ClusterIP ({ip})"))
                }
                (Some(_), _) if cluster_given => Err(format!(
                    "{what}: the ClusterIP already satisfies another entry"
                )),
                (Some(_), _) => {
                    cluster_given = true;
                    Ok(())
                }
            },
            other => Err(format!("{what}: routability {other:?} is not supported")),
        };
        if let Err(why) = outcome {
            out.unsatisfied.push(why);
        }
    }
    for (a, scope) in offer.default.iter().zip(&given) {
        if let Some(scope) = scope {
            out.addresses.push(address(&a.type_, &a.value, scope));
        }
    }
    if let (true, Some(ip)) = (cluster_given, &offer.cluster_ip) {
        out.addresses.push(address(IP_ADDRESS, ip, CLUSTER));
    }
    out
}

/// The Gateway's `spec.addresses` as requests (type defaults to IPAddress, an
/// empty value asks for any address).
pub fn requests(gw: &Gateway) -> Vec<Request> {
    gw.spec
        .addresses
        .iter()
        .flatten()
        .map(|a| Request {
            type_: a.r#type.clone().unwrap_or_else(|| IP_ADDRESS.to_string()),
            value: a.value.clone().filter(|v| !v.is_empty()),
            routability: a.routability.clone().unwrap_or_default(),
        })
        .collect()
}

/// Whether some entry asks for the default scope (a load balancer's address in
/// service mode): no entry at all does too. A Gateway whose every entry is
/// `Cluster` needs no load balancer.
pub fn wants_default_scope(requests: &[Request]) -> bool {
    requests.is_empty()
        || requests
            .iter()
            .any(|r| r.routability.is_empty() || r.routability == SENTINEL)
}

/// `AddressesAssigned` for an assignment: True when every entry got an
/// address, False/PartiallyAssigned naming the others, False/NotAssigned when
/// none did.
pub fn condition(a: &Assigned, generation: i64) -> GatewayCondition {
    if a.unsatisfied.is_empty() {
        return Condition::new(
            Type::AddressesAssigned,
            true,
            Reason::AddressesAssigned,
            "every requested address is assigned",
            generation,
        );
    }
    let reason = if a.none() {
        Reason::NotAssigned
    } else {
        Reason::PartiallyAssigned
    };
    let message = format!("not assigned: {}", a.unsatisfied.join("; "));
    Condition::new(Type::AddressesAssigned, false, reason, message, generation)
}

fn describe(i: usize, r: &Request) -> String {
    let scope = if r.routability.is_empty() {
        String::new()
    } else {
        format!(" {}", r.routability)
    };
    format!("spec.addresses[{i}] ({}{scope})", r.type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(routability: &str, value: Option<&str>) -> Request {
        Request {
            type_: IP_ADDRESS.into(),
            value: value.map(Into::into),
            routability: routability.into(),
        }
    }

    fn offer() -> Offer {
        Offer {
            default: vec![address(IP_ADDRESS, "10.250.0.7", "")],
            cluster_ip: Some("10.96.3.4".into()),
        }
    }

    fn reported(a: &Assigned) -> Vec<(String, String)> {
        a.addresses
            .iter()
            .map(|a| (a.value.clone(), a.routability.clone().unwrap_or_default()))
            .collect()
    }

    #[test]
    fn no_request_reports_every_default_address_with_an_empty_routability() {
        let a = assign(&[], &offer());
        assert_eq!(reported(&a), [("10.250.0.7".into(), String::new())]);
        assert!(a.unsatisfied.is_empty());
    }

    #[test]
    fn an_empty_and_a_cluster_request_get_one_address_each_in_any_order() {
        for requests in [
            vec![req("", None), req(CLUSTER, None)],
            vec![req(CLUSTER, None), req("", None)],
        ] {
            let a = assign(&requests, &offer());
            let mut got = reported(&a);
            got.sort();
            assert_eq!(
                got,
                [
                    ("10.250.0.7".into(), String::new()),
                    ("10.96.3.4".into(), CLUSTER.into())
                ]
            );
            assert!(a.unsatisfied.is_empty());
        }
    }

    #[test]
    fn the_sentinel_is_reported_as_asked() {
        let a = assign(&[req(SENTINEL, None)], &offer());
        assert_eq!(reported(&a), [("10.250.0.7".into(), SENTINEL.into())]);
    }

    #[test]
    fn a_cluster_value_that_is_not_the_cluster_ip_is_unsatisfied_and_never_substituted() {
        let a = assign(&[req(CLUSTER, Some("192.0.2.1")), req("", None)], &offer());
        assert_eq!(reported(&a), [("10.250.0.7".into(), String::new())]);
        assert!(a.partial());
        assert!(
            a.unsatisfied[0].contains("192.0.2.1"),
            "{:?}",
            a.unsatisfied
        );
    }

    #[test]
    fn without_a_cluster_ip_or_with_an_unknown_scope_nothing_is_assigned() {
        let standalone = Offer {
            cluster_ip: None,
            ..offer()
        };
        let a = assign(&[req(CLUSTER, None)], &standalone);
        assert!(a.none());
        let a = assign(&[req("example.com/CorpWan", None)], &offer());
        assert!(a.none());
        assert!(a.unsatisfied[0].contains("example.com/CorpWan"));
        let a = assign(&[req("testing.x-k8s.io/other", None)], &offer());
        assert!(a.none(), "other testing.x-k8s.io values are unsupported");
    }

    #[test]
    fn one_address_satisfies_one_request() {
        let a = assign(&[req("", None), req("", None)], &offer());
        assert_eq!(a.addresses.len(), 1);
        assert_eq!(a.unsatisfied.len(), 1);
    }

    #[test]
    fn an_ip_asked_of_the_load_balancer_and_not_offered_is_not_given_once() {
        let mut hostname = req("", Some("edge.example.com"));
        hostname.type_ = "Hostname".into();
        let requests = [
            req("", Some("10.250.0.9")),
            req("", Some("10.250.0.9")),
            req("", Some("10.250.0.7")),
            req(CLUSTER, Some("10.96.9.9")),
            hostname,
        ];
        let a = assign(&requests, &offer());
        assert_eq!(a.not_given, ["10.250.0.9"]);
        assert_eq!(a.unsatisfied.len(), 4, "{:?}", a.unsatisfied);
    }
}
