//! The status plan: Kubernetes-shaped status for every object we own.
//!
//! Translation fills the plan as if every Envoy had already applied the new
//! config. [`StatusPlan::gated`] is the truth gate: given what the fleet ACKed per
//! Gateway, it turns `Programmed`, `attachedRoutes` and route `Accepted` back to
//! Pending (or Invalid on a NACK) until the config is really served.
//!
//! ```text
//!  translate ──► StatusPlan (as planned) ──gated(ack)──► StatusPlan (to write)
//! ```
//!
//! These are our own serde structs (camelCase, no `lastTransitionTime`: the writer
//! stamps it when a condition actually changes).

use aether_ir::ObjectRef;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const GROUP: &str = "gateway.networking.k8s.io";

/// One status condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    pub reason: String,
    pub message: String,
    pub observed_generation: i64,
}

impl Condition {
    pub fn new(
        type_: &str,
        ok: bool,
        reason: &str,
        message: impl Into<String>,
        generation: i64,
    ) -> Self {
        Condition {
            type_: type_.to_string(),
            status: if ok { "True" } else { "False" }.to_string(),
            reason: reason.to_string(),
            message: message.into(),
            observed_generation: generation,
        }
    }

    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// Sets (replaces by type) a condition, keeping the list sorted by type.
pub fn set_condition(conditions: &mut Vec<Condition>, c: Condition) {
    conditions.retain(|x| x.type_ != c.type_);
    conditions.push(c);
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
}

pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassStatus {
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<GatewayStatusAddress>,
    pub conditions: Vec<Condition>,
    pub listeners: Vec<ListenerStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatusAddress {
    #[serde(rename = "type")]
    pub type_: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerStatus {
    pub name: String,
    pub supported_kinds: Vec<RouteGroupKind>,
    pub attached_routes: i32,
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteGroupKind {
    pub group: String,
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RouteStatus {
    pub parents: Vec<RouteParentStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteParentStatus {
    pub parent_ref: ParentReference,
    pub controller_name: String,
    pub conditions: Vec<Condition>,
}

/// A route's parentRef echoed back, with group and kind defaulted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    pub group: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

impl ParentReference {
    /// The Gateway this parentRef names, given the route's namespace.
    pub fn gateway(&self, route_namespace: &str) -> ObjectRef {
        ObjectRef::new(
            self.namespace.as_deref().unwrap_or(route_namespace),
            &self.name,
        )
    }
}

/// Status for every object we own, keyed and sorted by object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatusPlan {
    /// By GatewayClass name (cluster-scoped).
    pub gateway_classes: BTreeMap<String, GatewayClassStatus>,
    pub gateways: BTreeMap<ObjectRef, GatewayStatus>,
    pub http_routes: BTreeMap<ObjectRef, RouteStatus>,
    pub grpc_routes: BTreeMap<ObjectRef, RouteStatus>,
    pub tls_routes: BTreeMap<ObjectRef, RouteStatus>,
    pub tcp_routes: BTreeMap<ObjectRef, RouteStatus>,
    pub udp_routes: BTreeMap<ObjectRef, RouteStatus>,
}

/// What the Envoy fleet has done with a Gateway's current config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckState {
    /// Every ready Envoy ACKed a snapshot with this Gateway's current config.
    Acked,
    /// Not yet (or no Envoy is connected).
    Pending,
    /// An Envoy rejected it, with Envoy's message.
    Nacked(String),
}

#[derive(Serialize)]
struct Document<'a, S: Serialize> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata<'a>,
    status: &'a S,
}

#[derive(Serialize)]
struct Metadata<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
}

fn push_doc<S: Serialize>(
    out: &mut String,
    kind: &'static str,
    ns: Option<&str>,
    name: &str,
    status: &S,
) {
    let doc = Document {
        api_version: "gateway.networking.k8s.io/v1",
        kind,
        metadata: Metadata {
            name,
            namespace: ns,
        },
        status,
    };
    out.push_str("---\n");
    out.push_str(&serde_yaml::to_string(&doc).expect("status serializes"));
}

impl StatusPlan {
    /// Multi-document YAML: one `apiVersion/kind/metadata/status` document per
    /// object, sorted by kind, then namespace/name. Deterministic.
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        for (name, s) in &self.gateway_classes {
            push_doc(&mut out, "GatewayClass", None, name, s);
        }
        for (r, s) in &self.gateways {
            push_doc(&mut out, "Gateway", Some(&r.namespace), &r.name, s);
        }
        for (r, s) in &self.grpc_routes {
            push_doc(&mut out, "GRPCRoute", Some(&r.namespace), &r.name, s);
        }
        for (r, s) in &self.http_routes {
            push_doc(&mut out, "HTTPRoute", Some(&r.namespace), &r.name, s);
        }
        for (r, s) in &self.tcp_routes {
            push_doc(&mut out, "TCPRoute", Some(&r.namespace), &r.name, s);
        }
        for (r, s) in &self.tls_routes {
            push_doc(&mut out, "TLSRoute", Some(&r.namespace), &r.name, s);
        }
        for (r, s) in &self.udp_routes {
            push_doc(&mut out, "UDPRoute", Some(&r.namespace), &r.name, s);
        }
        out
    }

    /// Route statuses of every kind, by kind.
    pub fn routes(&self) -> [(&'static str, &BTreeMap<ObjectRef, RouteStatus>); 5] {
        [
            ("GRPCRoute", &self.grpc_routes),
            ("HTTPRoute", &self.http_routes),
            ("TCPRoute", &self.tcp_routes),
            ("TLSRoute", &self.tls_routes),
            ("UDPRoute", &self.udp_routes),
        ]
    }

    /// The route status map of one kind (`HTTPRoute`, ...).
    pub fn routes_of_kind_mut(&mut self, kind: &str) -> &mut BTreeMap<ObjectRef, RouteStatus> {
        match kind {
            "GRPCRoute" => &mut self.grpc_routes,
            "TLSRoute" => &mut self.tls_routes,
            "TCPRoute" => &mut self.tcp_routes,
            "UDPRoute" => &mut self.udp_routes,
            _ => &mut self.http_routes,
        }
    }

    fn routes_mut(&mut self) -> [&mut BTreeMap<ObjectRef, RouteStatus>; 5] {
        [
            &mut self.grpc_routes,
            &mut self.http_routes,
            &mut self.tcp_routes,
            &mut self.tls_routes,
            &mut self.udp_routes,
        ]
    }

    /// The status to write, given what the fleet ACKed per Gateway.
    ///
    /// - Acked: as planned.
    /// - Pending: Gateway and listener `Programmed=False/Pending` (conditions that
    ///   were planned True), `attachedRoutes: 0`, and route parents on that Gateway
    ///   planned `Accepted=True` become `Accepted=False/Pending`.
    /// - Nacked: the same, with `Programmed=False/Invalid` carrying Envoy's message.
    ///
    /// A Gateway that is not served at all (planned `Programmed=False`) is left as
    /// planned: no Envoy will ever ACK it, and its attachedRoutes must still count
    /// (e.g. routes on a listener whose certificate does not resolve).
    pub fn gated(&self, ack: impl Fn(&ObjectRef) -> AckState) -> StatusPlan {
        let mut out = self.clone();
        let mut held: BTreeMap<ObjectRef, AckState> = BTreeMap::new();
        for (gw, status) in &mut out.gateways {
            // A Gateway that is not served has nothing to wait for.
            if !condition(&status.conditions, "Programmed").is_some_and(Condition::is_true) {
                continue;
            }
            let state = ack(gw);
            let (reason, message) = match &state {
                AckState::Acked => continue,
                AckState::Pending => (
                    "Pending",
                    "waiting for every ready Envoy to ACK this Gateway's configuration".to_string(),
                ),
                AckState::Nacked(msg) => (
                    "Invalid",
                    format!("Envoy rejected the configuration: {msg}"),
                ),
            };
            gate_programmed(&mut status.conditions, reason, &message);
            for l in &mut status.listeners {
                l.attached_routes = 0;
                gate_programmed(&mut l.conditions, reason, &message);
            }
            held.insert(gw.clone(), state);
        }
        for routes in out.routes_mut() {
            for (route, status) in routes.iter_mut() {
                for parent in &mut status.parents {
                    if !held.contains_key(&parent.parent_ref.gateway(&route.namespace)) {
                        continue;
                    }
                    if let Some(c) = parent.conditions.iter_mut().find(|c| c.type_ == "Accepted")
                        && c.is_true()
                    {
                        c.status = "False".into();
                        c.reason = "Pending".into();
                        c.message = "waiting for the Gateway's configuration to be served".into();
                    }
                }
            }
        }
        out
    }
}

fn gate_programmed(conditions: &mut [Condition], reason: &str, message: &str) {
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == "Programmed")
        && c.is_true()
    {
        c.status = "False".into();
        c.reason = reason.into();
        c.message = message.into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> StatusPlan {
        let gw = ObjectRef::new("infra", "web");
        let mut plan = StatusPlan::default();
        plan.gateways.insert(
            gw.clone(),
            GatewayStatus {
                addresses: vec![],
                conditions: vec![
                    Condition::new("Accepted", true, "Accepted", "ok", 2),
                    Condition::new("Programmed", true, "Programmed", "ok", 2),
                ],
                listeners: vec![ListenerStatus {
                    name: "http".into(),
                    supported_kinds: vec![],
                    attached_routes: 3,
                    conditions: vec![Condition::new("Programmed", true, "Programmed", "ok", 2)],
                }],
            },
        );
        let parent = |name: &str| RouteParentStatus {
            parent_ref: ParentReference {
                group: GROUP.into(),
                kind: "Gateway".into(),
                namespace: Some("infra".into()),
                name: name.into(),
                section_name: None,
                port: None,
            },
            controller_name: "c".into(),
            conditions: vec![Condition::new("Accepted", true, "Accepted", "ok", 1)],
        };
        plan.http_routes.insert(
            ObjectRef::new("apps", "r"),
            RouteStatus {
                parents: vec![parent("web"), parent("other")],
            },
        );
        plan
    }

    #[test]
    fn acked_is_as_planned() {
        let p = plan();
        assert_eq!(p.gated(|_| AckState::Acked), p);
    }

    #[test]
    fn pending_holds_programmed_counts_and_route_acceptance() {
        let g = plan().gated(|gw| {
            if gw.name == "web" {
                AckState::Pending
            } else {
                AckState::Acked
            }
        });
        let gw = &g.gateways[&ObjectRef::new("infra", "web")];
        let programmed = condition(&gw.conditions, "Programmed").unwrap();
        assert_eq!(
            (programmed.status.as_str(), programmed.reason.as_str()),
            ("False", "Pending")
        );
        assert!(condition(&gw.conditions, "Accepted").unwrap().is_true());
        assert_eq!(gw.listeners[0].attached_routes, 0);
        let route = &g.http_routes[&ObjectRef::new("apps", "r")];
        assert_eq!(route.parents[0].conditions[0].reason, "Pending");
        assert!(
            route.parents[1].conditions[0].is_true(),
            "other Gateway untouched"
        );
    }

    #[test]
    fn unserved_gateways_are_not_gated() {
        let mut p = plan();
        let gw = p.gateways.get_mut(&ObjectRef::new("infra", "web")).unwrap();
        set_condition(
            &mut gw.conditions,
            Condition::new("Programmed", false, "Invalid", "no listener", 2),
        );
        assert_eq!(p.gated(|_| AckState::Pending), p);
    }

    #[test]
    fn nacked_carries_envoys_message() {
        let g = plan().gated(|_| AckState::Nacked("duplicate domain".into()));
        let gw = &g.gateways[&ObjectRef::new("infra", "web")];
        let programmed = condition(&gw.conditions, "Programmed").unwrap();
        assert_eq!(programmed.reason, "Invalid");
        assert!(programmed.message.contains("duplicate domain"));
        let l = condition(&gw.listeners[0].conditions, "Programmed").unwrap();
        assert_eq!(l.reason, "Invalid");
    }

    #[test]
    fn yaml_is_sorted_and_kubernetes_shaped() {
        let y = plan().to_yaml();
        assert!(y.starts_with("---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n"));
        assert!(y.contains("observedGeneration: 2"));
        assert!(y.find("kind: Gateway").unwrap() < y.find("kind: HTTPRoute").unwrap());
        assert_eq!(y, plan().to_yaml());
    }
}
