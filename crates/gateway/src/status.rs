//! The status plan: Kubernetes-shaped status for every object we own.
//!
//! Translation fills the plan as if every Envoy had already applied the new
//! config; [`crate::assemble`] holds back what is not served yet.
//!
//! ```text
//!  translate ──► StatusPlan (as planned) ──assemble(served, addresses)──► StatusPlan (to write)
//! ```
//!
//! These are our own serde structs (camelCase, no `lastTransitionTime`: the writer
//! stamps it when a condition actually changes).

use crate::vocabulary::{
    Word, gateway, gateway_class, listener, listener_set, policy, route, xbackend,
};
use aether_ir::{Kind, ObjectRef, RouteKind};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub const GROUP: &str = aether_ir::kind::GATEWAY_GROUP;

/// One status condition of a kind whose types are `T` and reasons `R` (see
/// [`crate::vocabulary`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition<T, R> {
    pub type_: T,
    /// `True` (or `False`).
    pub ok: bool,
    pub reason: R,
    pub message: String,
    pub observed_generation: i64,
}

pub type GatewayClassCondition = Condition<gateway_class::Type, gateway_class::Reason>;
pub type GatewayCondition = Condition<gateway::Type, gateway::Reason>;
pub type ListenerCondition = Condition<listener::Type, listener::Reason>;
pub type RouteCondition = Condition<route::Type, route::Reason>;
pub type ListenerSetCondition = Condition<listener_set::Type, listener_set::Reason>;

impl<T: Word, R: Word> Condition<T, R> {
    /// A message quotes input and Envoy: it is kept redacted of key material,
    /// one line and bounded (`aether_ir::untrusted::message`).
    pub fn new(type_: T, ok: bool, reason: R, message: impl Into<String>, generation: i64) -> Self {
        Condition {
            type_,
            ok,
            reason,
            message: aether_ir::untrusted::message(&message.into()),
            observed_generation: generation,
        }
    }

    pub fn is_true(&self) -> bool {
        self.ok
    }

    /// `True` or `False`, as the API spells it.
    pub fn status_str(&self) -> &'static str {
        if self.ok { "True" } else { "False" }
    }

    /// Turns a `True` condition `False` with this reason and message; a `False`
    /// one already says why and is left alone.
    pub fn hold(&mut self, reason: R, message: &str) {
        if self.ok {
            self.ok = false;
            self.reason = reason;
            self.message = aether_ir::untrusted::message(message);
        }
    }
}

/// The API's shape: `type`, `status`, `reason`, `message`, `observedGeneration`.
impl<T: Word, R: Word> Serialize for Condition<T, R> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut c = serializer.serialize_struct("Condition", 5)?;
        c.serialize_field("type", self.type_.as_str())?;
        c.serialize_field("status", self.status_str())?;
        c.serialize_field("reason", self.reason.as_str())?;
        c.serialize_field("message", &self.message)?;
        c.serialize_field("observedGeneration", &self.observed_generation)?;
        c.end()
    }
}

/// `ResolvedRefs` (`type_`) from the references that do not resolve: True with
/// `resolved`, or the first one's reason with every one in the message.
pub fn resolved_refs<T: Word, R: Word, E>(
    (type_, resolved): (T, R),
    unresolved: &[E],
    reason: impl Fn(&E) -> R,
    message: impl Fn(&E) -> String,
    generation: i64,
) -> Condition<T, R> {
    match unresolved.first() {
        None => Condition::new(type_, true, resolved, "all references resolved", generation),
        Some(first) => {
            let all: Vec<String> = unresolved.iter().map(message).collect();
            Condition::new(type_, false, reason(first), all.join("; "), generation)
        }
    }
}

/// Sets (replaces by type) a condition, keeping the list sorted by type name.
pub fn set_condition<T: Word, R: Word>(conditions: &mut Vec<Condition<T, R>>, c: Condition<T, R>) {
    conditions.retain(|x| x.type_ != c.type_);
    conditions.push(c);
    conditions.sort_by_key(|c| c.type_.as_str());
}

pub fn condition<T: Word, R>(conditions: &[Condition<T, R>], type_: T) -> Option<&Condition<T, R>> {
    conditions.iter().find(|c| c.type_ == type_)
}

pub fn condition_mut<T: Word, R>(
    conditions: &mut [Condition<T, R>],
    type_: T,
) -> Option<&mut Condition<T, R>> {
    conditions.iter_mut().find(|c| c.type_ == type_)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassStatus {
    pub conditions: Vec<GatewayClassCondition>,
}

/// Which object a status is about: its uid and the generation it was computed
/// for. A status is written only to that object (a re-created object of the same
/// name has another uid) and only while it still has that generation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identity {
    /// `None` when the input carried none (standalone YAML without uids).
    pub uid: Option<String>,
    pub generation: i64,
}

impl Identity {
    pub fn of(meta: &ObjectMeta) -> Self {
        Identity {
            uid: meta.uid.clone(),
            generation: meta.generation.unwrap_or(0),
        }
    }

    /// Is `meta` the object, at the generation, this status was computed for?
    /// (Without a uid here, any object of that name and generation.)
    pub fn describes(&self, meta: &ObjectMeta) -> bool {
        self.uid
            .as_ref()
            .is_none_or(|uid| meta.uid.as_ref() == Some(uid))
            && self.generation == meta.generation.unwrap_or(0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<GatewayStatusAddress>,
    pub conditions: Vec<GatewayCondition>,
    pub listeners: Vec<ListenerStatus>,
    /// ListenerSets attached (allowed, and with a valid listener); `None` when
    /// the Gateway allows none and none names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_listener_sets: Option<i32>,
    /// Not part of the written status.
    #[serde(skip)]
    pub of: Identity,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatusAddress {
    #[serde(rename = "type")]
    pub type_: String,
    pub value: String,
    /// Where the address is reachable from ([`crate::routability`]): set on
    /// every address we report, `""` for the default scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routability: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerStatus {
    pub name: String,
    pub supported_kinds: Vec<RouteGroupKind>,
    pub attached_routes: i32,
    pub conditions: Vec<ListenerCondition>,
    /// The route keys counted in `attached_routes` (see `names::route_key`): the
    /// gate counts only those the fleet serves. Not part of the written status.
    #[serde(skip)]
    pub attached: BTreeSet<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteGroupKind {
    pub group: String,
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RouteStatus {
    /// Shared with the Gateway translation that decided each (a route's
    /// status is a list of what its parents' translations said, not a copy).
    pub parents: Vec<Arc<RouteParentStatus>>,
    /// Not part of the written status.
    #[serde(skip)]
    pub of: Identity,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteParentStatus {
    /// The route model's own, shared.
    pub parent_ref: Arc<ParentReference>,
    pub controller_name: String,
    pub conditions: Vec<RouteCondition>,
    /// The Gateway whose config serves the route on this parent (the
    /// parent itself, or a ListenerSet's Gateway). Not part of the written status.
    #[serde(skip)]
    pub gateway: ObjectRef,
}

/// How a reference's group and kind read in messages: `Kind` for the core
/// group, `group/Kind` otherwise.
pub fn group_kind(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{group}/{kind}")
    }
}

/// A ListenerSet's status, as planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListenerSetStatus {
    pub conditions: Vec<ListenerSetCondition>,
    pub listeners: Vec<ListenerStatus>,
    /// Not part of the written status.
    #[serde(skip)]
    pub of: Identity,
    /// The Gateway whose config carries it (not written either).
    #[serde(skip)]
    pub gateway: ObjectRef,
}

/// The status of a policy-like object (BackendTLSPolicy, XBackend): the same
/// conditions, about the object itself, on one entry per ancestor Gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(bound(serialize = "T: Word, R: Word"))]
pub struct AncestorsStatus<T, R> {
    pub ancestors: Vec<AncestorStatus<T, R>>,
    /// Not part of the written status.
    #[serde(skip)]
    pub of: Identity,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", bound(serialize = "T: Word, R: Word"))]
pub struct AncestorStatus<T, R> {
    pub ancestor_ref: ParentReference,
    pub controller_name: String,
    pub conditions: Vec<Condition<T, R>>,
}

/// A BackendTLSPolicy's status: one entry per ancestor Gateway.
pub type PolicyStatus = AncestorsStatus<policy::Type, policy::Reason>;
/// An XBackend's status: one entry per ancestor Gateway.
pub type XBackendStatus = AncestorsStatus<xbackend::Type, xbackend::Reason>;

impl<T: Word, R: Word> AncestorsStatus<T, R> {
    /// `conditions` on each of `gateways`, in their order.
    pub fn on_gateways(
        gateways: impl IntoIterator<Item = ObjectRef>,
        conditions: &[Condition<T, R>],
        controller_name: &str,
        of: Identity,
    ) -> Self {
        let ancestors = gateways
            .into_iter()
            .map(|gw| AncestorStatus {
                ancestor_ref: ParentReference::defaulted(
                    None,
                    None,
                    Some(&gw.namespace),
                    &gw.name,
                    None,
                    None,
                ),
                controller_name: controller_name.to_string(),
                conditions: conditions.to_vec(),
            })
            .collect();
        AncestorsStatus { ancestors, of }
    }
}

/// A route's parentRef echoed back, with group and kind defaulted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
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
    /// A parentRef as a route's spec or status carries it, group and kind
    /// defaulted (`gateway.networking.k8s.io`, `Gateway`): the one place the
    /// defaults are applied.
    pub fn defaulted(
        group: Option<&str>,
        kind: Option<&str>,
        namespace: Option<&str>,
        name: &str,
        section_name: Option<&str>,
        port: Option<i32>,
    ) -> Self {
        ParentReference {
            group: group.unwrap_or(GROUP).to_string(),
            kind: kind.unwrap_or(Kind::Gateway.as_str()).to_string(),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            section_name: section_name.map(str::to_string),
            port,
        }
    }

    /// Do both name the same parent, for a route in `route_namespace` (a
    /// namespace left out is the route's)?
    pub fn same_parent(&self, other: &ParentReference, route_namespace: &str) -> bool {
        let ns = |p: &ParentReference| {
            p.namespace
                .clone()
                .unwrap_or_else(|| route_namespace.into())
        };
        ParentReference {
            namespace: Some(ns(self)),
            ..self.clone()
        } == ParentReference {
            namespace: Some(ns(other)),
            ..other.clone()
        }
    }

    /// The Gateway this parentRef names, given the route's namespace.
    pub fn gateway(&self, route_namespace: &str) -> ObjectRef {
        ObjectRef::new(
            self.namespace.as_deref().unwrap_or(route_namespace),
            &self.name,
        )
    }
}

/// Status for every object we own, keyed and sorted by object. Route
/// statuses are shared (`Arc`): a plan computed after a small edit shares
/// every route status the edit did not change, so copying and comparing plans
/// costs what changed. Each kind's map of them is shared too: a copy of the
/// plan (a translator keeps one) costs a reference per kind.
/// One route kind's statuses, by route; shared between copies of a plan.
pub type RouteStatuses = Arc<BTreeMap<ObjectRef, Arc<RouteStatus>>>;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatusPlan {
    /// By GatewayClass name (cluster-scoped).
    pub gateway_classes: BTreeMap<String, GatewayClassStatus>,
    pub gateways: BTreeMap<ObjectRef, GatewayStatus>,
    pub http_routes: RouteStatuses,
    pub grpc_routes: RouteStatuses,
    pub tls_routes: RouteStatuses,
    pub tcp_routes: RouteStatuses,
    pub udp_routes: RouteStatuses,
    /// Not gated on the fleet: a policy's conditions are about the policy.
    pub backend_tls_policies: BTreeMap<ObjectRef, PolicyStatus>,
    pub listener_sets: BTreeMap<ObjectRef, ListenerSetStatus>,
    /// Not gated on the fleet, as a policy's: its conditions are about the XBackend.
    pub x_backends: BTreeMap<ObjectRef, XBackendStatus>,
}

#[derive(Serialize)]
struct Document<'a, S: Serialize> {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: Kind,
    metadata: Metadata<'a>,
    status: &'a S,
}

#[derive(Serialize)]
struct Metadata<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
}

/// One document of `kind` at its most preferred version (`v1`; XBackend
/// `v1alpha1`); `ns` `None` for a cluster-scoped kind.
fn push_doc<S: Serialize>(
    out: &mut String,
    kind: impl Into<Kind>,
    ns: Option<&str>,
    name: &str,
    status: &S,
) {
    let kind = kind.into();
    let doc = Document {
        api_version: kind.api_version(kind.served_versions()[0]),
        kind,
        metadata: Metadata {
            name,
            namespace: ns,
        },
        status,
    };
    out.push_str("---\n");
    out.push_str(&serde_norway::to_string(&doc).expect("status serializes"));
}

impl StatusPlan {
    /// Multi-document YAML: one `apiVersion/kind/metadata/status` document per
    /// object, sorted by kind, then namespace/name. Deterministic.
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        for (r, s) in &self.backend_tls_policies {
            push_doc(
                &mut out,
                Kind::BackendTlsPolicy,
                Some(&r.namespace),
                &r.name,
                s,
            );
        }
        for (name, s) in &self.gateway_classes {
            push_doc(&mut out, Kind::GatewayClass, None, name, s);
        }
        for (r, s) in &self.gateways {
            push_doc(&mut out, Kind::Gateway, Some(&r.namespace), &r.name, s);
        }
        for (r, s) in &self.listener_sets {
            push_doc(&mut out, Kind::ListenerSet, Some(&r.namespace), &r.name, s);
        }
        for (kind, routes) in self.routes() {
            for (r, s) in routes {
                push_doc(&mut out, kind, Some(&r.namespace), &r.name, s);
            }
        }
        for (r, s) in &self.x_backends {
            push_doc(&mut out, Kind::XBackend, Some(&r.namespace), &r.name, s);
        }
        out
    }

    /// Route statuses of every kind, by kind (sorted by name).
    pub fn routes(&self) -> [(RouteKind, &BTreeMap<ObjectRef, Arc<RouteStatus>>); 5] {
        RouteKind::ALL.map(|kind| (kind, self.routes_of_kind(kind)))
    }

    /// The route status map of one kind.
    pub fn routes_of_kind(&self, kind: RouteKind) -> &BTreeMap<ObjectRef, Arc<RouteStatus>> {
        match kind {
            RouteKind::Grpc => &self.grpc_routes,
            RouteKind::Http => &self.http_routes,
            RouteKind::Tcp => &self.tcp_routes,
            RouteKind::Tls => &self.tls_routes,
            RouteKind::Udp => &self.udp_routes,
        }
    }

    /// The route status map of one kind, to change: copied first if a copy
    /// of the plan shares it.
    pub fn routes_of_kind_mut(
        &mut self,
        kind: RouteKind,
    ) -> &mut BTreeMap<ObjectRef, Arc<RouteStatus>> {
        Arc::make_mut(match kind {
            RouteKind::Grpc => &mut self.grpc_routes,
            RouteKind::Http => &mut self.http_routes,
            RouteKind::Tcp => &mut self.tcp_routes,
            RouteKind::Tls => &mut self.tls_routes,
            RouteKind::Udp => &mut self.udp_routes,
        })
    }

    pub(crate) fn routes_mut(
        &mut self,
    ) -> [(RouteKind, &mut BTreeMap<ObjectRef, Arc<RouteStatus>>); 5] {
        [
            (RouteKind::Grpc, Arc::make_mut(&mut self.grpc_routes)),
            (RouteKind::Http, Arc::make_mut(&mut self.http_routes)),
            (RouteKind::Tcp, Arc::make_mut(&mut self.tcp_routes)),
            (RouteKind::Tls, Arc::make_mut(&mut self.tls_routes)),
            (RouteKind::Udp, Arc::make_mut(&mut self.udp_routes)),
        ]
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_message_from_outside_is_kept_redacted_one_line_and_bounded() {
        let quoted = format!(
            "header `{}\r\nx`: private_key {{ inline_string: \"-----BEGIN PRIVATE KEY-----\\nSECRET\" }}",
            "v".repeat(20_000)
        );
        let mut c = Condition::new(
            gateway::Type::Accepted,
            false,
            gateway::Reason::Accepted,
            quoted.clone(),
            1,
        );
        let held = |c: &GatewayCondition| {
            !c.message.contains("SECRET") && !c.message.contains('\r') && c.message.len() < 1100
        };
        assert!(held(&c), "{}", c.message);
        c.ok = true;
        c.hold(gateway::Reason::Accepted, &quoted);
        assert!(held(&c), "{}", c.message);
    }

    /// Gateway infra/web (one listener, 3 attached: apps/r among them) and route
    /// apps/r with parents web and other.
    pub(crate) fn plan() -> StatusPlan {
        let gw = ObjectRef::new("infra", "web");
        let mut plan = StatusPlan::default();
        plan.gateways.insert(
            gw.clone(),
            GatewayStatus {
                addresses: vec![],
                conditions: vec![
                    Condition::new(
                        gateway::Type::Accepted,
                        true,
                        gateway::Reason::Accepted,
                        "ok",
                        2,
                    ),
                    Condition::new(
                        gateway::Type::Programmed,
                        true,
                        gateway::Reason::Programmed,
                        "ok",
                        2,
                    ),
                ],
                listeners: vec![ListenerStatus {
                    name: "http".into(),
                    supported_kinds: vec![],
                    attached_routes: 3,
                    conditions: vec![Condition::new(
                        listener::Type::Programmed,
                        true,
                        listener::Reason::Programmed,
                        "ok",
                        2,
                    )],
                    attached: ["HTTPRoute/apps/r", "HTTPRoute/apps/s", "HTTPRoute/apps/t"]
                        .map(Arc::from)
                        .into(),
                }],
                attached_listener_sets: None,
                of: Default::default(),
            },
        );
        let parent = |name: &str| {
            Arc::new(RouteParentStatus {
                gateway: ObjectRef::new("infra", name),
                parent_ref: ParentReference {
                    group: GROUP.into(),
                    kind: "Gateway".into(),
                    namespace: Some("infra".into()),
                    name: name.into(),
                    section_name: None,
                    port: None,
                }
                .into(),
                controller_name: "c".into(),
                conditions: vec![Condition::new(
                    route::Type::Accepted,
                    true,
                    route::Reason::Accepted,
                    "ok",
                    1,
                )],
            })
        };
        Arc::make_mut(&mut plan.http_routes).insert(
            ObjectRef::new("apps", "r"),
            Arc::new(RouteStatus {
                parents: vec![parent("web"), parent("other")],
                of: Default::default(),
            }),
        );
        plan
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
