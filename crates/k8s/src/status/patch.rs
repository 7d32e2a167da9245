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

use super::condition;
use super::route;
use crate::discovery::ServedVersions;
use aether_gateway::status::{
    GatewayClassStatus as PlannedClass, GatewayStatus as Planned, RouteStatus as PlannedRoute,
};
use aether_gateway::{StatusPlan, Store, StoreObject};
use aether_ir::{Kind, ObjectRef};
use gateway_api::apis::experimental::gateways::{
    Gateway, GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gateway_api::apis::experimental::listenersets::ListenerSet;
use gateway_api::apis::experimental::xbackends::XBackend;
use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
use gateway_api::apis::standard::gatewayclasses::{
    GatewayClass, GatewayClassStatus, GatewayClassStatusSupportedFeatures,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt;

/// `Gateway.status.addresses` maxItems.
const ADDRESSES_MAX: usize = 16;

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

/// The kinds we write status for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StatusKind {
    GatewayClass,
    Gateway,
    HttpRoute,
    GrpcRoute,
    TlsRoute,
    TcpRoute,
    UdpRoute,
    BackendTlsPolicy,
    ListenerSet,
    XBackend,
}

impl StatusKind {
    pub const ALL: [StatusKind; 10] = [
        StatusKind::GatewayClass,
        StatusKind::Gateway,
        StatusKind::HttpRoute,
        StatusKind::GrpcRoute,
        StatusKind::TlsRoute,
        StatusKind::TcpRoute,
        StatusKind::UdpRoute,
        StatusKind::BackendTlsPolicy,
        StatusKind::ListenerSet,
        StatusKind::XBackend,
    ];

    /// The route kinds: a shared `status.parents` list each.
    pub const ROUTES: [StatusKind; 5] = [
        StatusKind::HttpRoute,
        StatusKind::GrpcRoute,
        StatusKind::TlsRoute,
        StatusKind::TcpRoute,
        StatusKind::UdpRoute,
    ];

    /// The kind of the table ([`Kind::spec`]) this is.
    pub const fn kind(self) -> Kind {
        match self {
            StatusKind::GatewayClass => Kind::GatewayClass,
            StatusKind::Gateway => Kind::Gateway,
            StatusKind::HttpRoute => Kind::HttpRoute,
            StatusKind::GrpcRoute => Kind::GrpcRoute,
            StatusKind::TlsRoute => Kind::TlsRoute,
            StatusKind::TcpRoute => Kind::TcpRoute,
            StatusKind::UdpRoute => Kind::UdpRoute,
            StatusKind::BackendTlsPolicy => Kind::BackendTlsPolicy,
            StatusKind::ListenerSet => Kind::ListenerSet,
            StatusKind::XBackend => Kind::XBackend,
        }
    }

    /// The Kubernetes kind.
    pub fn as_str(self) -> &'static str {
        self.kind().as_str()
    }

    /// The resource name in API paths.
    pub fn plural(self) -> &'static str {
        self.kind().spec().plural
    }

    /// The planned statuses of a route kind (`None` for GatewayClass, Gateway).
    pub fn planned(
        self,
        plan: &StatusPlan,
    ) -> Option<&BTreeMap<ObjectRef, std::sync::Arc<PlannedRoute>>> {
        match self {
            StatusKind::GatewayClass
            | StatusKind::Gateway
            | StatusKind::BackendTlsPolicy
            | StatusKind::ListenerSet
            | StatusKind::XBackend => None,
            StatusKind::HttpRoute => Some(&plan.http_routes),
            StatusKind::GrpcRoute => Some(&plan.grpc_routes),
            StatusKind::TlsRoute => Some(&plan.tls_routes),
            StatusKind::TcpRoute => Some(&plan.tcp_routes),
            StatusKind::UdpRoute => Some(&plan.udp_routes),
        }
    }
}

impl fmt::Display for StatusKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One server-side apply of one object's status subresource.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusPatch {
    pub kind: StatusKind,
    /// Namespace empty for a GatewayClass.
    pub object: ObjectRef,
    /// `resourceVersion` of the object this was computed from.
    pub based_on: Option<String>,
    /// The apply body: `apiVersion`, `kind`, `metadata`, `status`.
    pub body: Value,
}

impl StatusPatch {
    /// The version the body is for (its `apiVersion`), v1 if it names none: the
    /// version whose `/status` is patched.
    pub fn version(&self) -> &str {
        self.body
            .get("apiVersion")
            .and_then(Value::as_str)
            .and_then(|v| v.rsplit_once('/'))
            .map_or("v1", |(_, version)| version)
    }

    /// What the API server does with this apply, played on `store`: the
    /// object's status becomes the body's and its resourceVersion moves on.
    /// For tests and benches that follow a run of writes with no API server;
    /// an object `store` lacks is left as it is (the server would answer 404).
    pub fn apply_to(&self, store: &mut Store) -> Result<(), serde_json::Error> {
        use gateway_api::apis::experimental::httproutes::HttpRoute;
        use gateway_api::apis::experimental::xbackends::XBackend;
        use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
        use gateway_api::apis::standard::grpcroutes::GrpcRoute;
        use gateway_api::apis::standard::tcproutes::TcpRoute;
        use gateway_api::apis::standard::tlsroutes::TlsRoute;
        use gateway_api::apis::standard::udproutes::UdpRoute;
        use serde::Serialize;
        use serde::de::DeserializeOwned;

        fn set<T: StoreObject + Serialize + DeserializeOwned>(
            store: &mut Store,
            patch: &StatusPatch,
        ) -> Result<(), serde_json::Error> {
            let (ns, name) = (&patch.object.namespace, &patch.object.name);
            let Some(current) = store.get::<T>(ns, name) else {
                return Ok(());
            };
            let mut o = serde_json::to_value(current)?;
            o["status"] = patch.body["status"].clone();
            let rv = o["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default();
            o["metadata"]["resourceVersion"] = json!(format!("{rv}0"));
            store.insert(serde_json::from_value::<T>(o)?);
            Ok(())
        }
        match self.kind {
            StatusKind::GatewayClass => set::<GatewayClass>(store, self),
            StatusKind::Gateway => set::<Gateway>(store, self),
            StatusKind::HttpRoute => set::<HttpRoute>(store, self),
            StatusKind::GrpcRoute => set::<GrpcRoute>(store, self),
            StatusKind::TlsRoute => set::<TlsRoute>(store, self),
            StatusKind::TcpRoute => set::<TcpRoute>(store, self),
            StatusKind::UdpRoute => set::<UdpRoute>(store, self),
            StatusKind::BackendTlsPolicy => set::<BackendTlsPolicy>(store, self),
            StatusKind::ListenerSet => set::<ListenerSet>(store, self),
            StatusKind::XBackend => set::<XBackend>(store, self),
        }
    }
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
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
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
    let api_version = inputs.served.api_version(Kind::BackendTlsPolicy);
    for patch in super::ancestors::patches::<BackendTlsPolicy, _, _>(
        &inputs.store,
        top,
        &inputs.plan.backend_tls_policies,
        &inputs.controller_name,
        &api_version,
        now,
    ) {
        out.push(patch);
    }
    let api_version = inputs.served.api_version(Kind::XBackend);
    for patch in super::ancestors::patches::<XBackend, _, _>(
        &inputs.store,
        top,
        &inputs.plan.x_backends,
        &inputs.controller_name,
        &api_version,
        now,
    ) {
        out.push(patch);
    }
    out.patches
        .sort_by(|a, b| (a.kind, &a.object).cmp(&(b.kind, &b.object)));
    out
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

/// What the API server must find for an apply body to be taken.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Precondition<'a> {
    /// The version read: anyone else's write since makes the apply fail.
    pub resource_version: Option<&'a str>,
    /// The object read: a re-created namesake makes the apply fail.
    pub uid: Option<&'a str>,
}

/// The apply body around a status.
pub(crate) fn body(
    kind: StatusKind,
    api_version: &str,
    object: &ObjectRef,
    precondition: Precondition<'_>,
    status: Value,
) -> Value {
    let mut metadata = json!({ "name": object.name });
    if !object.namespace.is_empty() {
        metadata["namespace"] = json!(object.namespace);
    }
    if let Some(rv) = precondition.resource_version {
        metadata["resourceVersion"] = json!(rv);
    }
    if let Some(uid) = precondition.uid {
        metadata["uid"] = json!(uid);
    }
    json!({
        "apiVersion": api_version,
        "kind": kind.as_str(),
        "metadata": metadata,
        "status": status,
    })
}

/// The planned class status, with `SupportedVersion` from what the CRDs say
/// their release is (only Kubernetes mode reads them).
fn with_supported_version(
    planned: &PlannedClass,
    served: &ServedVersions,
    class: &GatewayClass,
) -> PlannedClass {
    use aether_gateway::status::{Condition, set_condition};
    use aether_gateway::vocabulary::gateway_class::{Reason, Type};
    let mut planned = planned.clone();
    if let Some((ok, message)) = served.supported_version() {
        let reason = if ok {
            Reason::SupportedVersion
        } else {
            Reason::UnsupportedVersion
        };
        let g = class.metadata.generation.unwrap_or(0);
        set_condition(
            &mut planned.conditions,
            Condition::new(Type::SupportedVersion, ok, reason, message, g),
        );
    }
    planned
}

fn gateway_class(
    class: &GatewayClass,
    planned: &PlannedClass,
    features: &[String],
    api_version: &str,
    now: &Time,
) -> Option<StatusPatch> {
    let current = class.status.clone().unwrap_or_default();
    let current_conditions = current.conditions.unwrap_or_default();
    let conditions = condition::from_plan(&planned.conditions, &current_conditions, now);
    let mut names: Vec<&String> = features.iter().collect();
    names.sort();
    names.dedup();
    let supported: Vec<GatewayClassStatusSupportedFeatures> = names
        .into_iter()
        .map(|name| GatewayClassStatusSupportedFeatures { name: name.clone() })
        .collect();
    if condition::same(&conditions, &current_conditions)
        && supported == current.supported_features.unwrap_or_default()
    {
        return None;
    }
    let status = GatewayClassStatus {
        conditions: Some(conditions),
        supported_features: Some(supported),
    };
    let object = ObjectRef::new("", class.metadata.name.clone().unwrap_or_default());
    Some(StatusPatch {
        kind: StatusKind::GatewayClass,
        body: body(
            StatusKind::GatewayClass,
            api_version,
            &object,
            Precondition {
                resource_version: None,
                uid: class.metadata.uid.as_deref(),
            },
            serde_json::to_value(&status).expect("status serializes"),
        ),
        object,
        based_on: class.metadata.resource_version.clone(),
    })
}

/// A planned listener status as the API's, timestamps kept from `current`.
pub(crate) fn listener(
    l: &aether_gateway::status::ListenerStatus,
    current: Option<&GatewayStatusListeners>,
    now: &Time,
) -> GatewayStatusListeners {
    let was = current.map(|c| c.conditions.as_slice()).unwrap_or_default();
    GatewayStatusListeners {
        name: l.name.clone(),
        attached_routes: l.attached_routes,
        supported_kinds: Some(
            l.supported_kinds
                .iter()
                .map(|k| GatewayStatusListenersSupportedKinds {
                    group: Some(k.group.clone()),
                    kind: k.kind.clone(),
                })
                .collect(),
        ),
        conditions: condition::from_plan(&l.conditions, was, now),
    }
}

fn gateway(gw: &Gateway, planned: &Planned, api_version: &str, now: &Time) -> Option<StatusPatch> {
    let current = gw.status.clone().unwrap_or_default();
    let current_conditions = current.conditions.clone().unwrap_or_default();
    let current_listeners: BTreeMap<&str, &GatewayStatusListeners> = current
        .listeners
        .iter()
        .flatten()
        .map(|l| (l.name.as_str(), l))
        .collect();
    let addresses: Vec<GatewayStatusAddresses> = planned
        .addresses
        .iter()
        .take(ADDRESSES_MAX)
        .map(|a| GatewayStatusAddresses {
            r#type: Some(a.type_.clone()),
            value: a.value.clone(),
            // The default scope is left unset, which the spec reads the same
            // as "": a cluster on CRDs before v1.7 has no such field and
            // refuses the whole status apply over it.
            routability: a.routability.clone().filter(|r| !r.is_empty()),
        })
        .collect();
    let conditions = condition::from_plan(&planned.conditions, &current_conditions, now);
    let listeners: Vec<GatewayStatusListeners> = planned
        .listeners
        .iter()
        .map(|l| listener(l, current_listeners.get(l.name.as_str()).copied(), now))
        .collect();

    let same_listeners = listeners.len() == current_listeners.len()
        && listeners.iter().all(|l| {
            current_listeners.get(l.name.as_str()).is_some_and(|c| {
                c.attached_routes == l.attached_routes
                    && c.supported_kinds.clone().unwrap_or_default()
                        == l.supported_kinds.clone().unwrap_or_default()
                    && condition::same(&c.conditions, &l.conditions)
            })
        });
    if same_listeners
        && condition::same(&conditions, &current_conditions)
        && addresses == current.addresses.clone().unwrap_or_default()
        && planned.attached_listener_sets == current.attached_listener_sets
    {
        return None;
    }
    let status = GatewayStatus {
        addresses: Some(addresses),
        attached_listener_sets: planned.attached_listener_sets,
        conditions: Some(conditions),
        listeners: Some(listeners),
    };
    let object = ObjectRef::new(
        gw.metadata.namespace.clone().unwrap_or_default(),
        gw.metadata.name.clone().unwrap_or_default(),
    );
    Some(StatusPatch {
        kind: StatusKind::Gateway,
        body: body(
            StatusKind::Gateway,
            api_version,
            &object,
            Precondition {
                resource_version: None,
                uid: gw.metadata.uid.as_deref(),
            },
            serde_json::to_value(&status).expect("status serializes"),
        ),
        object,
        based_on: gw.metadata.resource_version.clone(),
    })
}
