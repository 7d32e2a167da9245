//! Route status: our `RouteParentStatus` entries merged into a list we share.
//!
//! `status.parents` is an atomic list in the CRD, so an apply replaces it whole.
//! The list we send is every other controller's entry exactly as read, in its
//! order, followed by ours in plan order; the body carries the route's
//! `resourceVersion` (and `uid`) so the API server refuses it if another
//! controller changed the list since we read it, or the route was re-created. Our entries are those with our `controllerName`;
//! one whose parentRef left the route's spec, or whose Gateway is no longer ours,
//! is simply not sent again. An entry of ours that the plan lacks although the
//! route still names that Gateway of ours can only mean the plan is older than the
//! route (translation gives every such parentRef a status): it is kept as it is
//! until the plan catches up, rather than removed and written back a moment later.
//! The list holds at most [`PARENTS_MAX`] entries; ours beyond what the others
//! leave room for are not sent (the API server would refuse the whole write).

use super::condition;
use super::patch::{Precondition, StatusKind, StatusPatch, body};
use aether_gateway::status::{GROUP, ParentReference, RouteStatus as Planned};
use aether_gateway::{Store, StoreObject};
use aether_ir::ObjectRef;
use gateway_api::apis::experimental::httproutes::{
    HttpRoute, HttpRouteStatusParents as Entry, HttpRouteStatusParentsParentRef as EntryRef,
};
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::tcproutes::TcpRoute;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use gateway_api::apis::standard::udproutes::UdpRoute;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use serde_json::{Value, json};

/// `status.parents` maxItems.
pub(crate) const PARENTS_MAX: usize = 32;

/// A route of any kind, reduced to what its status patch needs.
pub(crate) struct RouteView<'a> {
    kind: StatusKind,
    key: &'a ObjectRef,
    meta: &'a ObjectMeta,
    resource_version: Option<&'a str>,
    /// `status.parents` as read, one JSON object per entry: another
    /// controller's entry is sent back exactly so (read through our types, a
    /// field we do not know would be lost); ours are read as [`Entry`].
    parents: Vec<Value>,
    /// `spec.parentRefs` as read.
    spec_parents: Vec<ParentReference>,
}

/// Every route kind's `status.parents` entry has one shape (the API's
/// RouteParentStatus); the HTTPRoute type of it stands for all.
fn parent_reference(r: &EntryRef) -> ParentReference {
    ParentReference::defaulted(
        r.group.as_deref(),
        r.kind.as_deref(),
        r.namespace.as_deref(),
        &r.name,
        r.section_name.as_deref(),
        r.port,
    )
}

/// A planned parent (or ancestor) reference as a status entry's generated
/// reference type (a route's parentRef, a BackendTLSPolicy's or an XBackend's
/// ancestorRef: the same fields).
pub(crate) trait FromParentRef {
    fn from_parent_ref(p: &ParentReference) -> Self;
}

macro_rules! from_parent_ref {
    ($($ty:ty),*) => {$(
        impl FromParentRef for $ty {
            fn from_parent_ref(p: &ParentReference) -> Self {
                Self {
                    group: Some(p.group.clone()),
                    kind: Some(p.kind.clone()),
                    name: p.name.clone(),
                    namespace: p.namespace.clone(),
                    port: p.port,
                    section_name: p.section_name.clone(),
                }
            }
        }
    )*};
}
from_parent_ref!(
    EntryRef,
    gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicyStatusAncestorsAncestorRef,
    gateway_api::apis::experimental::xbackends::XBackendStatusAncestorsAncestorRef
);

fn entry_ref(p: &ParentReference) -> EntryRef {
    EntryRef::from_parent_ref(p)
}

fn status_parents<S: serde::Serialize>(parents: Option<&S>) -> Vec<Value> {
    match parents.map(serde_json::to_value) {
        Some(Ok(Value::Array(list))) => list,
        _ => Vec::new(),
    }
}

/// A route type: where its status and spec parents are.
trait RouteObject: StoreObject + 'static {
    fn status_parents(&self) -> Vec<Value>;
    fn spec_parents(&self) -> Vec<ParentReference>;
}

macro_rules! route_object {
    ($($ty:ty),*) => {$(
        impl RouteObject for $ty {
            fn status_parents(&self) -> Vec<Value> {
                status_parents(self.status.as_ref().map(|s| &s.parents))
            }
            fn spec_parents(&self) -> Vec<ParentReference> {
                aether_gateway::route::parent_references!(self.spec.parent_refs)
            }
        }
    )*};
}

route_object!(HttpRoute, GrpcRoute, TlsRoute, TcpRoute, UdpRoute);

/// Routes of one kind, each as the layered store shows it: `top` (our recent
/// writes) over `store`. Those `skip` names by key and resourceVersion are left
/// out before anything is read from them.
type Skip<'s> = dyn Fn(&ObjectRef, Option<&str>) -> bool + 's;

fn views<'a, T: RouteObject>(
    store: &'a Store,
    top: Option<&'a Store>,
    kind: StatusKind,
    skip: &Skip<'_>,
) -> Vec<(&'a ObjectRef, RouteView<'a>)> {
    store
        .all::<T>()
        .iter()
        .filter_map(|(key, r)| {
            let r = top
                .and_then(|t| t.get::<T>(&key.namespace, &key.name))
                .unwrap_or(r);
            let resource_version = r.metadata().resource_version.as_deref();
            if skip(key, resource_version) {
                return None;
            }
            let route = RouteView {
                kind,
                key,
                meta: r.metadata(),
                resource_version,
                parents: r.status_parents(),
                spec_parents: r.spec_parents(),
            };
            Some((key, route))
        })
        .collect()
}

/// Every route of `kind` in the store (with `top` laid over it), sorted by
/// (namespace, name), but those `skip` names.
pub(crate) fn routes<'a>(
    store: &'a Store,
    top: Option<&'a Store>,
    kind: StatusKind,
    skip: &Skip<'_>,
) -> Vec<(&'a ObjectRef, RouteView<'a>)> {
    match kind {
        StatusKind::HttpRoute => views::<HttpRoute>(store, top, kind, skip),
        StatusKind::GrpcRoute => views::<GrpcRoute>(store, top, kind, skip),
        StatusKind::TlsRoute => views::<TlsRoute>(store, top, kind, skip),
        StatusKind::TcpRoute => views::<TcpRoute>(store, top, kind, skip),
        StatusKind::UdpRoute => views::<UdpRoute>(store, top, kind, skip),
        StatusKind::GatewayClass
        | StatusKind::Gateway
        | StatusKind::BackendTlsPolicy
        | StatusKind::ListenerSet
        | StatusKind::XBackend => Vec::new(),
    }
}

fn controller(entry: &Value) -> Option<&str> {
    entry.get("controllerName").and_then(Value::as_str)
}

/// One of our entries: which parent, and its conditions as stored.
#[derive(Clone)]
struct Ours {
    parent_ref: ParentReference,
    conditions: Vec<Condition>,
}

impl Ours {
    /// Our entry as read. The list was read from the typed route, so every
    /// entry decodes; `None` only if that ever changes.
    fn read(entry: &Value) -> Option<Ours> {
        let e: Entry = serde_json::from_value(entry.clone()).ok()?;
        Some(Ours {
            parent_ref: parent_reference(&e.parent_ref),
            conditions: e.conditions,
        })
    }

    fn to_value(&self, controller_name: &str) -> Value {
        let e = Entry {
            conditions: self.conditions.clone(),
            controller_name: controller_name.to_string(),
            parent_ref: entry_ref(&self.parent_ref),
        };
        serde_json::to_value(e).expect("a parent status serializes")
    }
}

impl RouteView<'_> {
    /// Is `planned` about this route as it is now (its uid, its generation)? A
    /// plan about a deleted namesake or an older generation is not written.
    pub(crate) fn is_described_by(&self, planned: &Planned) -> bool {
        planned.of.describes(self.meta)
    }

    pub(crate) fn resource_version(&self) -> Option<&str> {
        self.resource_version
    }

    pub(crate) fn has_parent_of(&self, controller_name: &str) -> bool {
        self.parents
            .iter()
            .any(|p| controller(p) == Some(controller_name))
    }

    /// Our entry for a parentRef the plan lacks is kept when the route still
    /// names that parentRef and it is a Gateway of ours: the plan is lagging.
    fn lagging(
        &self,
        parent_ref: &ParentReference,
        our_gateway: &dyn Fn(&ObjectRef) -> bool,
    ) -> bool {
        let ns = self.key.namespace.as_str();
        parent_ref.group == GROUP
            && parent_ref.kind == aether_ir::Kind::Gateway.as_str()
            && our_gateway(&parent_ref.gateway(ns))
            && self
                .spec_parents
                .iter()
                .any(|s| s.same_parent(parent_ref, ns))
    }

    /// The patch making our entries equal to `planned` (none planned: no entries,
    /// bar lagging ones), or `None` when they already are.
    pub(crate) fn patch(
        &self,
        planned: Option<&Planned>,
        controller_name: &str,
        our_gateway: &dyn Fn(&ObjectRef) -> bool,
        api_version: &str,
        now: &Time,
    ) -> Option<StatusPatch> {
        let (ours, others): (Vec<&Value>, Vec<&Value>) = self
            .parents
            .iter()
            .partition(|p| controller(p) == Some(controller_name));
        let ours: Vec<Ours> = ours.into_iter().filter_map(Ours::read).collect();
        let planned = planned.map(|p| p.parents.as_slice()).unwrap_or_default();
        let ns = self.key.namespace.as_str();
        let is_planned =
            |r: &ParentReference| planned.iter().any(|p| p.parent_ref.same_parent(r, ns));
        let kept: Vec<&Ours> = ours
            .iter()
            .filter(|o| !is_planned(&o.parent_ref) && self.lagging(&o.parent_ref, our_gateway))
            .collect();
        let room = PARENTS_MAX.saturating_sub(others.len() + kept.len());
        if planned.len() > room {
            tracing::warn!(
                kind = %self.kind, route = %self.key, planned = planned.len(), room,
                "status.parents is full (32 entries): some of our parent entries are left out"
            );
        }
        let mut desired: Vec<Ours> = planned
            .iter()
            .take(room)
            .map(|p| {
                let was = ours
                    .iter()
                    .find(|o| o.parent_ref.same_parent(&p.parent_ref, ns));
                let was = was.map(|o| o.conditions.as_slice()).unwrap_or_default();
                Ours {
                    parent_ref: ParentReference::clone(&p.parent_ref),
                    conditions: condition::from_plan(&p.conditions, was, now),
                }
            })
            .collect();
        desired.extend(kept.into_iter().cloned());

        let unchanged = ours.len() == desired.len()
            && ours.iter().zip(&desired).all(|(o, d)| {
                o.parent_ref == d.parent_ref && condition::same(&o.conditions, &d.conditions)
            });
        if unchanged {
            return None;
        }
        let only_pending = self.only_pending(&ours, &desired);
        let mut list: Vec<Value> = others.into_iter().cloned().collect();
        list.extend(desired.iter().map(|d| d.to_value(controller_name)));
        Some(StatusPatch {
            kind: self.kind,
            object: self.key.clone(),
            based_on: self.resource_version.map(str::to_string),
            body: body(
                self.kind,
                api_version,
                self.key,
                Precondition {
                    resource_version: self.resource_version,
                    uid: self.meta.uid.as_deref(),
                },
                json!({ "parents": list }),
            ),
            only_pending,
        })
    }

    /// Whether going from `ours` to `desired` says only "Pending" (see
    /// [`StatusPatch::only_pending`]): no entry goes, and each one that
    /// changes becomes `Accepted=False/Pending` with nothing else amiss, over
    /// none or over one about an older generation.
    fn only_pending(&self, ours: &[Ours], desired: &[Ours]) -> bool {
        let ns = self.key.namespace.as_str();
        let generation = self.meta.generation;
        let kept_all = ours.iter().all(|o| {
            desired
                .iter()
                .any(|d| d.parent_ref.same_parent(&o.parent_ref, ns))
        });
        kept_all
            && desired.iter().all(|d| {
                let was = ours
                    .iter()
                    .find(|o| o.parent_ref.same_parent(&d.parent_ref, ns));
                match was {
                    Some(o) if condition::same(&o.conditions, &d.conditions) => true,
                    _ => {
                        pending(&d.conditions)
                            && !was.is_some_and(|o| {
                                o.conditions
                                    .iter()
                                    .any(|c| c.observed_generation == generation)
                            })
                    }
                }
            })
    }
}

/// `Accepted=False/Pending` (waiting for the Envoys that serve the route)
/// and nothing else amiss: every other condition `True`.
fn pending(conditions: &[Condition]) -> bool {
    use aether_gateway::vocabulary::{Word, route};
    let (accepted, waiting) = (
        route::Type::Accepted.as_str(),
        route::Reason::Pending.as_str(),
    );
    let mut waits = false;
    for c in conditions {
        if c.type_ == accepted {
            waits = c.status == "False" && c.reason == waiting;
        } else if c.status != "True" {
            return false;
        }
    }
    waits
}
