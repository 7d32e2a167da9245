//! From the gated plan and the status objects carry now, the apply bodies to send.
//!
//! ```text
//!  plan (gated) ──┐
//!                 ├─► per object: desired status (timestamps carried over)
//!  store ─────────┘        │ equal to the current status (ignoring timestamps)? ─► skip
//!                          ▼
//!                   StatusPatch { kind, object, body: apiVersion/kind/metadata/status }
//! ```
//!
//! Every body names the version the object's kind is served at
//! ([`StatusInputs::served`]): the status subresource is patched at that version.
//!
//! Pure: no I/O, `now` passed in. Objects missing from the store are skipped (the
//! plan was computed from the same store, so they are being deleted), and so are
//! objects the plan does not describe: another uid (deleted and re-created under
//! the same name) or another generation (the plan is older than the object). The
//! bodies carry the uid read, so a write never lands on a namesake. Routes that
//! the plan no longer mentions but that still carry an entry of ours get a patch
//! that removes it.

use super::ancestors::{self, Ancestored};
use super::gateway::{gateway, gateway_class, with_supported_version};
use super::patch::{StatusKind, StatusPatch};
use super::route;
use crate::discovery::ServedVersions;
use aether_gateway::status::AncestorsStatus;
use aether_gateway::status::RouteStatus as PlannedRoute;
use aether_gateway::vocabulary::Word;
use aether_gateway::{StatusPlan, Store, StoreObject};
use aether_ir::{Kind, ObjectRef};
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::listenersets::ListenerSet;
use gateway_api::apis::experimental::xbackends::XBackend;
use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::collections::BTreeMap;

/// Everything the status writer computes from; the agent publishes the latest on a
/// `watch` channel.
#[derive(Debug, Clone, Default)]
pub struct StatusInputs {
    /// The plan after the ACK gate ([`aether_gateway::assemble`]).
    pub plan: StatusPlan,
    /// The objects as last seen, with the status they carry now.
    pub store: std::sync::Arc<Store>,
    /// Feature names for `GatewayClass.status.supportedFeatures` (any order).
    pub supported_features: Vec<String>,
    /// Our `controllerName`: route parent entries with it are ours.
    pub controller_name: String,
    /// The version each kind is served at: status is written at that version.
    pub served: ServedVersions,
    /// When what the fleet serves last changed (a report arrived), as of
    /// `plan`: status that follows it goes out without the full debounce, and
    /// the time from it to the write is measured.
    pub served_at: Option<tokio::time::Instant>,
}

/// What [`compute`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Computed {
    /// Sorted by (kind, object).
    pub patches: Vec<StatusPatch>,
    /// Objects whose status is already as desired.
    pub unchanged: usize,
}

impl Computed {
    fn push(&mut self, patch: Option<StatusPatch>) {
        match patch {
            Some(p) => self.patches.push(p),
            None => self.unchanged += 1,
        }
    }
}

/// The patches that bring every object's status to the plan.
pub fn compute(inputs: &StatusInputs, now: &Time) -> Computed {
    compute_over(inputs, None, &mut Settled::default(), now)
}

/// Routes an earlier [`compute_over`] found already as planned, with what that
/// depended on: the route as read (its resourceVersion), its plan, and the
/// context (our Gateways, the served version). A route for which all of that
/// is the same again needs no patch again, and is not even read: under churn
/// one route changes while a thousand stay as they are.
#[derive(Debug, Default)]
pub struct Settled {
    routes: BTreeMap<(StatusKind, ObjectRef), SettledRoute>,
}

#[derive(Debug)]
struct SettledRoute {
    resource_version: String,
    planned: Option<std::sync::Arc<PlannedRoute>>,
    context: u64,
}

impl Settled {
    /// How many routes are remembered as needing nothing.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.routes.len()
    }

    fn holds(
        &self,
        id: &(StatusKind, ObjectRef),
        resource_version: Option<&str>,
        planned: Option<&std::sync::Arc<PlannedRoute>>,
        context: u64,
    ) -> bool {
        self.routes.get(id).is_some_and(|s| {
            Some(s.resource_version.as_str()) == resource_version
                && s.context == context
                && s.planned.as_ref() == planned
        })
    }
}

/// What a route's patch depends on beyond the route and its own plan.
fn route_context(inputs: &StatusInputs, api_version: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    api_version.hash(&mut h);
    inputs.controller_name.hash(&mut h);
    for gw in inputs.plan.gateways.keys() {
        gw.hash(&mut h);
    }
    h.finish()
}

/// An object as `top` shows it if it has it, else as `store` does; `None`
/// when `store` has no such object (`top` only ever trails it).
fn layered<'a, T: StoreObject>(
    store: &'a Store,
    top: Option<&'a Store>,
    key: &ObjectRef,
) -> Option<&'a T> {
    let base = store.get::<T>(&key.namespace, &key.name)?;
    Some(
        top.and_then(|t| t.get::<T>(&key.namespace, &key.name))
            .unwrap_or(base),
    )
}

/// [`compute`], with `top` (our writes the store trails) laid over the store,
/// and `settled` remembering which routes needed nothing (the same inputs
/// give the same answer, so this is [`compute`] with a cache).
pub fn compute_over(
    inputs: &StatusInputs,
    top: Option<&Store>,
    settled: &mut Settled,
    now: &Time,
) -> Computed {
    let mut out = Computed::default();
    push_classes_and_gateways(&mut out, inputs, top, now);
    let mut still = BTreeMap::new();
    for kind in StatusKind::ROUTES {
        push_routes(&mut out, &mut still, kind, inputs, top, settled, now);
    }
    settled.routes = still;
    let plan = &inputs.plan;
    push_ancestors::<BackendTlsPolicy, _, _>(
        &mut out,
        inputs,
        top,
        &plan.backend_tls_policies,
        now,
    );
    push_ancestors::<XBackend, _, _>(&mut out, inputs, top, &plan.x_backends, now);
    out.patches
        .sort_by(|a, b| (a.kind, &a.object).cmp(&(b.kind, &b.object)));
    out
}

/// Every `K`'s `status.ancestors` patch, at the version `K` is served at.
fn push_ancestors<K: Ancestored, T: Word, R: Word>(
    out: &mut Computed,
    inputs: &StatusInputs,
    top: Option<&Store>,
    plan: &BTreeMap<ObjectRef, AncestorsStatus<T, R>>,
    now: &Time,
) {
    let api_version = inputs.served.api_version(K::KIND);
    let controller = &inputs.controller_name;
    for patch in
        ancestors::patches::<K, _, _>(&inputs.store, top, plan, controller, &api_version, now)
    {
        out.push(patch);
    }
}

fn push_classes_and_gateways(
    out: &mut Computed,
    inputs: &StatusInputs,
    top: Option<&Store>,
    now: &Time,
) {
    let store = &inputs.store;
    for (name, planned) in &inputs.plan.gateway_classes {
        if let Some(class) = layered::<GatewayClass>(store, top, &ObjectRef::new("", name.as_str()))
        {
            let api_version = inputs.served.api_version(Kind::GatewayClass);
            out.push(gateway_class(
                class,
                &with_supported_version(planned, &inputs.served, class),
                &inputs.supported_features,
                &api_version,
                now,
            ));
        }
    }
    for (key, planned) in &inputs.plan.listener_sets {
        if let Some(set) =
            layered::<ListenerSet>(store, top, key).filter(|s| planned.of.describes(&s.metadata))
        {
            let api_version = inputs.served.api_version(Kind::ListenerSet);
            out.push(super::listener_set::patch(set, planned, &api_version, now));
        }
    }
    for (key, planned) in &inputs.plan.gateways {
        // The plan is about this Gateway as it is now, or it waits for the next.
        if let Some(gw) =
            layered::<Gateway>(store, top, key).filter(|gw| planned.of.describes(&gw.metadata))
        {
            let api_version = inputs.served.api_version(Kind::Gateway);
            out.push(gateway(gw, planned, &api_version, now));
        }
    }
}

/// The patches for routes of one kind; those found as planned go to `still`
/// (the next compute skips them while they stay so).
fn push_routes(
    out: &mut Computed,
    still: &mut BTreeMap<(StatusKind, ObjectRef), SettledRoute>,
    kind: StatusKind,
    inputs: &StatusInputs,
    top: Option<&Store>,
    settled: &mut Settled,
    now: &Time,
) {
    let ours = &inputs.controller_name;
    let our_gateway = |gw: &ObjectRef| inputs.plan.gateways.contains_key(gw);
    let plan = kind.planned(&inputs.plan);
    let api_version = inputs.served.api_version(kind.kind());
    let context = route_context(inputs, &api_version);
    let hits = std::cell::RefCell::new(Vec::new());
    let skip = |key: &ObjectRef, rv: Option<&str>| {
        let id = (kind, key.clone());
        let hit = settled.holds(&id, rv, plan.and_then(|p| p.get(key)), context);
        if hit {
            hits.borrow_mut().push(id);
        }
        hit
    };
    let views = route::routes(&inputs.store, top, kind, &skip);
    for id in hits.into_inner() {
        out.unchanged += 1;
        if let Some(s) = settled.routes.remove(&id) {
            still.insert(id, s);
        }
    }
    for (key, route) in views {
        let planned = plan.and_then(|p| p.get(key));
        if planned.is_some_and(|p| !route.is_described_by(p)) {
            // About a deleted namesake or an older generation: the next plan
            // will be about this one.
            continue;
        }
        if planned.is_none() && !route.has_parent_of(ours) {
            continue;
        }
        let patch = route.patch(planned.map(|p| &**p), ours, &our_gateway, &api_version, now);
        if let (None, Some(rv)) = (&patch, route.resource_version()) {
            let settled_route = SettledRoute {
                resource_version: rv.to_string(),
                planned: planned.cloned(),
                context,
            };
            still.insert((kind, key.clone()), settled_route);
        }
        out.push(patch);
    }
}
