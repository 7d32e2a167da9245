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
use std::cell::Cell;
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
///
/// A pass reads each route once against it, marks the ones that still hold
/// and then keeps only those and the ones it found as planned: no route key is
/// copied, and the routes still settled are not moved, on a pass.
#[derive(Debug, Default)]
pub struct Settled {
    routes: BTreeMap<StatusKind, BTreeMap<ObjectRef, SettledRoute>>,
}

#[derive(Debug)]
struct SettledRoute {
    resource_version: String,
    planned: Option<std::sync::Arc<PlannedRoute>>,
    context: u64,
    /// Found holding by the pass under way.
    held: Cell<bool>,
}

impl Settled {
    /// How many routes are remembered as needing nothing.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.routes.values().map(BTreeMap::len).sum()
    }

    /// Whether the route `key` of `kind` is settled with these inputs; if so,
    /// it is marked as held ([`Settled::keep_held`]).
    fn holds(
        &self,
        kind: StatusKind,
        key: &ObjectRef,
        resource_version: Option<&str>,
        planned: Option<&std::sync::Arc<PlannedRoute>>,
        context: u64,
    ) -> bool {
        let Some(s) = self.routes.get(&kind).and_then(|r| r.get(key)) else {
            return false;
        };
        // An unchanged route's plan is the very `Arc` of the last translation:
        // no walk of its conditions.
        let same_plan = match (s.planned.as_ref(), planned) {
            (Some(was), Some(now)) => std::sync::Arc::ptr_eq(was, now) || was == now,
            (was, now) => was.is_none() && now.is_none(),
        };
        let holds = Some(s.resource_version.as_str()) == resource_version
            && s.context == context
            && same_plan;
        s.held.set(holds);
        holds
    }

    /// Forgets the routes of `kind` this pass did not find holding, and
    /// clears the marks of the others.
    fn keep_held(&mut self, kind: StatusKind) {
        if let Some(routes) = self.routes.get_mut(&kind) {
            routes.retain(|_, s| s.held.replace(false));
        }
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
    for kind in StatusKind::ROUTES {
        push_routes(&mut out, kind, inputs, top, settled, now);
    }
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

/// The patches for routes of one kind; those found as planned are settled
/// (the next compute skips them while they stay so), the others not.
fn push_routes(
    out: &mut Computed,
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
    let hits = Cell::new(0);
    let skip = |key: &ObjectRef, rv: Option<&str>| {
        let hit = settled.holds(kind, key, rv, plan.and_then(|p| p.get(key)), context);
        hits.set(hits.get() + usize::from(hit));
        hit
    };
    let views = route::routes(&inputs.store, top, kind, &skip);
    out.unchanged += hits.get();
    settled.keep_held(kind);
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
                held: Cell::new(false),
            };
            let routes = settled.routes.entry(kind).or_default();
            routes.insert(key.clone(), settled_route);
        }
        out.push(patch);
    }
}
