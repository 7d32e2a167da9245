//! Route status: our `RouteParentStatus` entries merged into a list we share.
//!
//! `status.parents` is an atomic list in the CRD, so an apply replaces it whole.
//! The list we send is every other controller's entry exactly as read, in its
//! order, followed by ours in plan order; the body carries the route's
//! `resourceVersion` so the API server refuses it if another controller changed
//! the list since we read it. Our entries are those with our `controllerName`;
//! one whose parentRef left the plan is simply not sent again. The list holds at
//! most [`PARENTS_MAX`] entries; ours beyond what the others leave room for are
//! not sent (the API server would refuse the whole write).

use super::condition;
use super::patch::{StatusKind, StatusPatch, body};
use aether_gateway::Store;
use aether_gateway::status::RouteStatus as Planned;
use aether_ir::ObjectRef;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::httproutes::HttpRoute;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Value, json};

/// `status.parents` maxItems.
pub(crate) const PARENTS_MAX: usize = 32;

/// A route of either kind, reduced to what its status patch needs.
pub(crate) struct RouteView<'a> {
    kind: StatusKind,
    key: &'a ObjectRef,
    resource_version: Option<&'a str>,
    /// `status.parents` as read, one JSON object per entry.
    parents: Vec<Value>,
}

fn parents_of<S: serde::Serialize>(parents: Option<&S>) -> Vec<Value> {
    match parents.map(serde_json::to_value) {
        Some(Ok(Value::Array(list))) => list,
        _ => Vec::new(),
    }
}

/// Every route of `kind` in the store, sorted by (namespace, name).
pub(crate) fn routes(store: &Store, kind: StatusKind) -> Vec<(&ObjectRef, RouteView<'_>)> {
    fn view<'a>(
        kind: StatusKind,
        key: &'a ObjectRef,
        rv: &'a Option<String>,
        parents: Vec<Value>,
    ) -> (&'a ObjectRef, RouteView<'a>) {
        let resource_version = rv.as_deref();
        let route = RouteView {
            kind,
            key,
            resource_version,
            parents,
        };
        (key, route)
    }
    match kind {
        StatusKind::HttpRoute => store
            .all::<HttpRoute>()
            .iter()
            .map(|(k, r)| {
                let parents = parents_of(r.status.as_ref().map(|s| &s.parents));
                view(kind, k, &r.metadata.resource_version, parents)
            })
            .collect(),
        StatusKind::GrpcRoute => store
            .all::<GrpcRoute>()
            .iter()
            .map(|(k, r)| {
                let parents = parents_of(r.status.as_ref().map(|s| &s.parents));
                view(kind, k, &r.metadata.resource_version, parents)
            })
            .collect(),
        StatusKind::GatewayClass | StatusKind::Gateway => Vec::new(),
    }
}

fn controller(entry: &Value) -> Option<&str> {
    entry.get("controllerName").and_then(Value::as_str)
}

fn conditions(entry: &Value) -> Vec<Condition> {
    entry
        .get("conditions")
        .cloned()
        .and_then(|c| serde_json::from_value(c).ok())
        .unwrap_or_default()
}

impl RouteView<'_> {
    pub(crate) fn has_parent_of(&self, controller_name: &str) -> bool {
        self.parents
            .iter()
            .any(|p| controller(p) == Some(controller_name))
    }

    /// The patch making our entries equal to `planned` (none planned: no entries),
    /// or `None` when they already are.
    pub(crate) fn patch(
        &self,
        planned: Option<&Planned>,
        controller_name: &str,
        now: &Time,
    ) -> Option<StatusPatch> {
        let (ours, others): (Vec<&Value>, Vec<&Value>) = self
            .parents
            .iter()
            .partition(|p| controller(p) == Some(controller_name));
        let room = PARENTS_MAX.saturating_sub(others.len());
        let planned_count = planned.map_or(0, |p| p.parents.len());
        if planned_count > room {
            tracing::warn!(
                kind = %self.kind, route = %self.key, planned = planned_count, room,
                "status.parents is full (32 entries): some of our parent entries are left out"
            );
        }
        let desired: Vec<(Value, Vec<Condition>)> = planned
            .map(|p| p.parents.as_slice())
            .unwrap_or_default()
            .iter()
            .take(room)
            .map(|p| {
                let parent_ref = serde_json::to_value(&p.parent_ref).expect("parentRef serializes");
                let was = ours
                    .iter()
                    .find(|o| o.get("parentRef") == Some(&parent_ref))
                    .map(|o| conditions(o))
                    .unwrap_or_default();
                let conds = condition::from_plan(&p.conditions, &was, now);
                (parent_ref, conds)
            })
            .collect();

        let unchanged = ours.len() == desired.len()
            && ours.iter().zip(&desired).all(|(o, (parent_ref, conds))| {
                o.get("parentRef") == Some(parent_ref) && condition::same(&conditions(o), conds)
            });
        if unchanged {
            return None;
        }
        let mut list: Vec<Value> = others.into_iter().cloned().collect();
        list.extend(desired.into_iter().map(|(parent_ref, conds)| {
            json!({
                "parentRef": parent_ref,
                "controllerName": controller_name,
                "conditions": conds,
            })
        }));
        Some(StatusPatch {
            kind: self.kind,
            object: self.key.clone(),
            based_on: self.resource_version.map(str::to_string),
            body: body(
                self.kind,
                self.key,
                self.resource_version,
                json!({ "parents": list }),
            ),
        })
    }
}
