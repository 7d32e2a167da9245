//! Incremental translation: [`translate`](crate::translate) as a cache keyed by
//! its inputs.
//!
//! ```text
//!  Store ─┬─ shared objects (ReferenceGrants, BackendTLSPolicies, ListenerSets,
//!         │   GatewayClasses, ClusterTrustBundles, XBackends; and of the
//!         │   Services, Secrets, ConfigMaps, Namespaces those a translation
//!         │   read, `store::reads`) ───────────────────── changed? ──► forget
//!         │                                                           everything
//!         ├─ each route ──────────────► RouteModel      (same object: reused)
//!         ├─ each Gateway of ours ──┐
//!         │    its parentRefs' routes┴► GatewayUnit     (same Gateway object and
//!         │                             model, status,   same route models in the
//!         │                             IR, clusters     same order: reused)
//!         │                                │
//!         │    translated again, same model: each unchanged route's table
//!         │    entries and attachments from the Gateway's memo (`route_memo.rs`)
//!         │                                ▼
//!         └─ EndpointSlices ─────────► each cluster's endpoints, last (same
//!                                       cluster, its Services' slices the same:
//!                                       reused)
//! ```
//!
//! Only the last phase reads EndpointSlices: a pod's change costs the
//! clusters of its Service, and leaves every route and Gateway as it was.
//! When a store holds the very maps (the same `Arc`s) of the last one for
//! every other kind, the last phase is all that runs.
//!
//! "Same object" is pointer identity of the store's `Arc`s: a store built from
//! another shares every object it did not replace. The cache holds the objects
//! it keyed on, so an address is never reused under it.
//!
//! - Route entries are kept per kind in the store's key order: a translation
//!   walks store and cache side by side and moves reused entries over.
//! - The EndpointSlice/BackendTLSPolicy index backends resolve through is kept
//!   while the shared objects are the same.
//! - A route's status is kept while its model and the parent statuses it was
//!   assembled from are; the plan shares it (`Arc`).
//! - The IR shares each reused Gateway's IR and clusters (`Arc`), so handing it
//!   on costs what changed.
//!
//! What is cached is only ever the output of the pure functions on exactly
//! those inputs: a [`Translator`] with an empty cache is the full recompute,
//! and a warm one gives the same bytes (the property test in
//! `crates/xds/tests/incremental.rs` edits stores at random and compares the
//! two after every edit).

use crate::backend::{BackendIndex, Backends};
use crate::gateway_model::GatewayModel;
use crate::port_claims::Taken;
use crate::route::RouteModel;
use crate::status::{self, GatewayStatus, RouteParentStatus, RouteStatus, StatusPlan};
use crate::store::{Objects, Store, StoreObject};
use identity::{ReadObjects, for_each_shared, objects, same_as, same_objects};
use reuse::{GatewayRead, ParentSources, RouteRead, route_status_stands};
use unit::{classes, merge, translate_gateway};

mod identity;
mod reuse;
mod unit;
use crate::route_memo::GatewayMemo;
use crate::{Config, Translation, grpc_route, http_route, l4_route};
use aether_ir::{Cluster, Ir, Kind, ObjectRef};
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::experimental::xbackends::XBackend;
use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::tcproutes::TcpRoute;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use gateway_api::apis::standard::udproutes::UdpRoute;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::any::Any;
use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

type Shared = Arc<dyn Any + Send + Sync>;

/// Translates stores one after another, reusing what an edit did not touch.
#[derive(Default)]
pub struct Translator {
    config: Config,
    /// The shared objects the cache was filled under, in store order
    /// (EndpointSlices apart: see `slices`).
    world: Vec<Shared>,
    /// The store's map of EndpointSlices the cache was filled under (held, so
    /// the same `Arc` is the same map; a change copies nothing here). A change
    /// to them fills again only the clusters of the changed Services.
    slices: Objects<EndpointSlice>,
    /// Per route kind, sorted by key as the store is: a merge with the store
    /// moves entries over instead of looking each one up.
    routes: BTreeMap<Kind, Vec<RouteEntry>>,
    gateways: BTreeMap<ObjectRef, GatewayEntry>,
    /// EndpointSlices by Service and BackendTLSPolicies, for this world.
    backend_index: Option<Arc<BackendIndex>>,
    /// In name order: each cluster as the Gateways gave it, and with its
    /// endpoints.
    filled: Vec<(Arc<Cluster>, Arc<Cluster>)>,
    /// The store of the last translation, and what every phase but the last
    /// gave for it (the clusters without their endpoints).
    before: Option<(Store, Translation)>,
    /// The Services, Secrets, ConfigMaps and Namespaces read since the cache
    /// was filled: the others of those kinds are no input.
    read: ReadObjects,
    /// What the last translation reused and recomputed.
    pub last: Reuse,
}

/// How much of the last translation came from the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reuse {
    pub routes_reused: usize,
    pub routes_modeled: usize,
    pub gateways_reused: usize,
    pub gateways_translated: usize,
    /// Clusters whose endpoints were read again (the others kept theirs).
    pub clusters_filled: usize,
    /// In the Gateways translated again: route table entries and attachments
    /// taken from the Gateway's memo (`route_memo.rs`), not made again.
    pub route_parts_kept: usize,
}

struct RouteEntry {
    key: ObjectRef,
    read: RouteRead,
    model: Arc<RouteModel>,
    /// Per parentRef of ours: its index, the object it names, and whether that
    /// is a ListenerSet (else a Gateway).
    parents: Vec<(usize, ObjectRef, bool)>,
    /// The route's status as last assembled, and what from.
    status: Option<(ParentSources, Arc<RouteStatus>)>,
}

impl RouteEntry {
    fn new(key: ObjectRef, source: Shared, mut model: RouteModel) -> Self {
        model.shrink_to_fit();
        let mut parents: Vec<_> = model
            .parent_refs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.group == status::GROUP)
            .filter_map(|(pi, p)| {
                let set = match p.kind.parse() {
                    Ok(Kind::Gateway) => false,
                    Ok(Kind::ListenerSet) => true,
                    _ => return None,
                };
                Some((pi, p.gateway(&model.key().namespace), set))
            })
            .collect();
        parents.shrink_to_fit();
        RouteEntry {
            key,
            read: RouteRead { source },
            model: Arc::new(model),
            parents,
            status: None,
        }
    }
}

struct GatewayEntry {
    read: GatewayRead,
    unit: Arc<GatewayUnit>,
    /// What it computed per route (table entries, attachments), for this
    /// Gateway model (`route_memo.rs`).
    memo: GatewayMemo,
}

/// Everything one Gateway contributes to a translation.
struct GatewayUnit {
    status: GatewayStatus,
    /// The ListenerSets this Gateway holds (their parentRefs reach it).
    listener_sets: Vec<(ObjectRef, crate::listener_set::ListenerSetStatus)>,
    /// Per input, in input order: the parent status it gives its route
    /// (shared with the memo: an unchanged route's is the same `Arc`).
    parents: Vec<Arc<RouteParentStatus>>,
    ir: Option<Arc<aether_ir::Gateway>>,
    clusters: BTreeMap<String, Arc<Cluster>>,
}

impl Translator {
    pub fn new(config: Config) -> Self {
        Translator {
            config,
            ..Translator::default()
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Translates the whole store. Same store, same output, byte for byte,
    /// whatever the cache holds. Each phase is one call, in the order the
    /// semantics need; each reuses what the cache holds for inputs that did
    /// not change.
    pub fn translate(&mut self, store: &Store) -> Translation {
        // Every phase's reads, the shared objects' too: the backend index
        // resolves each BackendTLSPolicy's CA ConfigMaps, and one created
        // after its policy must forget what the cache holds.
        let (translation, reads) = crate::store::reads::recording(|| self.phases(store));
        self.read.add(store, reads);
        translation
    }

    /// [`Translator::translate`], its reads recorded by the caller.
    fn phases(&mut self, store: &Store) -> Translation {
        // What every route and Gateway reads: a change forgets the cache.
        let (index, stale) = self.shared_objects(store);
        let before = self.before.take();
        let unfilled = match before.filter(|(was, _)| was.same_but_endpoint_slices(store)) {
            // Only EndpointSlices changed, if anything: every phase but the
            // last gives what it gave, and is not run.
            Some((_, unfilled)) => {
                self.last = Reuse::default();
                unfilled
            }
            None => self.translate_all(store, &index),
        };
        let mut translation = unfilled.clone();
        // Endpoints last: the only phase that reads EndpointSlices.
        let mut reuse = self.last;
        self.fill_endpoints(&mut translation.ir, &index, &stale, &mut reuse);
        self.last = reuse;
        self.before = Some((store.clone(), unfilled));
        translation
    }

    /// [`Translator::translate`] but its last phase (the clusters' endpoints).
    fn translate_all(&mut self, store: &Store, index: &Arc<BackendIndex>) -> Translation {
        let mut reuse = Reuse::default();
        let mut status = StatusPlan::default();
        let backends = OnceCell::new();
        let external_hostnames = self.config.external_hostnames;
        let backends = || {
            backends.get_or_init(|| {
                Backends::with_index(store, index.clone())
                    .allowing_external_hostnames(external_hostnames)
            })
        };
        // GatewayClasses of ours, with their status.
        let ours = classes(store, &self.config, &mut status);
        // Every route modeled on its own (rules, backends, filters), in route order.
        let routes = self.route_models(store, &backends, &mut reuse);
        // Our Gateways, and the ports each may bind (the oldest keeps a shared one).
        let gateways: Vec<(&ObjectRef, &Arc<Gateway>)> = store
            .all::<Gateway>()
            .iter()
            .filter(|(_, gw)| ours.contains(&gw.spec.gateway_class_name))
            .collect();
        let mut taken = crate::port_claims::taken(&gateways, &self.config);
        // Gateway models (listeners, ListenerSets), and which Gateway holds each ListenerSet.
        let (mut models, set_gateway) = self.gateway_models(store, &backends, &gateways, &taken);
        // Each Gateway's inputs: the routes whose parentRefs reach it.
        let inputs = self.gateway_inputs(&gateways, &set_gateway, &routes);
        // Per Gateway: its routes attached, its status and IR (the unit).
        let units = self.gateway_units(
            (store, &backends),
            &gateways,
            &inputs,
            &routes,
            (&mut models, &mut taken),
            &mut reuse,
        );
        // Each route's status: its parents' statuses from the units, in parentRef order.
        self.route_statuses(&units, &inputs, &mut status);
        // The IR: every served Gateway, the clusters they share merged.
        let ir = merge(&units, &mut status);
        // BackendTLSPolicy status: each policy's ancestors are our Gateways that use it.
        if !store.all::<BackendTlsPolicy>().is_empty() {
            let keys: BTreeSet<ObjectRef> = units.iter().map(|(k, _)| (*k).clone()).collect();
            let by_service = crate::gateways_by_service(store, &keys);
            status.backend_tls_policies = backends().tls().status(
                |svc| by_service.get(svc).cloned().unwrap_or_default(),
                &self.config.controller_name,
            );
        }
        // XBackend status: its ancestors are our Gateways whose routes name it.
        if !store.all::<XBackend>().is_empty() {
            let keys: BTreeSet<ObjectRef> = units.iter().map(|(k, _)| (*k).clone()).collect();
            status.x_backends = crate::xbackend::status::statuses(
                store,
                &keys,
                backends(),
                &self.config.controller_name,
            );
        }
        self.last = reuse;
        Translation { ir, status }
    }

    /// The backend index for this store, and the Services whose EndpointSlices
    /// changed. Any other shared object that changed empties the cache.
    fn shared_objects(&mut self, store: &Store) -> (Arc<BackendIndex>, BTreeSet<ObjectRef>) {
        let world = same_objects(&mut self.world, store, for_each_shared);
        if !world || !self.read.stand(store) {
            self.world = objects(store, for_each_shared);
            self.routes.clear();
            self.gateways.clear();
            self.backend_index = None;
            self.filled.clear();
            self.read = ReadObjects::default();
        }
        let mut stale = BTreeSet::new();
        // The store's map of them, shared: the one held here is not reused.
        let slices = EndpointSlice::shared(store);
        if !Arc::ptr_eq(&self.slices, slices) {
            // The index is ours alone between translations: updated in place for
            // the Services whose slices changed, else made anew.
            match self.backend_index.as_mut().and_then(Arc::get_mut) {
                Some(index) => stale = index.update(self.slices.values(), store),
                None => {
                    let new = Arc::new(BackendIndex::new(store));
                    if let Some(old) = self.backend_index.replace(new.clone()) {
                        stale = old.services_changed(&new);
                    }
                }
            }
            self.slices = slices.clone();
        }
        let index = self
            .backend_index
            .get_or_insert_with(|| Arc::new(BackendIndex::new(store)))
            .clone();
        (index, stale)
    }

    /// Every route's model, in route order (GRPC, HTTP, TCP, TLS, UDP; by
    /// key): the cached one while the route is the same, else modeled again.
    fn route_models<'s>(
        &mut self,
        store: &'s Store,
        backends: &dyn Fn() -> &'s Backends<'s>,
        reuse: &mut Reuse,
    ) -> Vec<Arc<RouteModel>> {
        let mut routes: Vec<Arc<RouteModel>> = Vec::new();
        macro_rules! models {
            ($ty:ty, $model:path) => {{
                let kind = <$ty as StoreObject>::KIND;
                let objects = store.all::<$ty>();
                let mut cached = self
                    .routes
                    .remove(&kind)
                    .unwrap_or_default()
                    .into_iter()
                    .peekable();
                let mut entries = Vec::with_capacity(objects.len());
                for (key, r) in objects {
                    // Entries of routes no longer in the store go.
                    while cached.next_if(|e| e.key < *key).is_some() {}
                    let source: Shared = r.clone();
                    let entry = match cached.next_if(|e| e.key == *key) {
                        Some(mut e) if e.read.stands(&source, same_as::<$ty>) => {
                            reuse.routes_reused += 1;
                            e.read.source = source;
                            e
                        }
                        _ => {
                            reuse.routes_modeled += 1;
                            let b = backends();
                            RouteEntry::new(key.clone(), source, $model(b, key.clone(), r))
                        }
                    };
                    routes.push(entry.model.clone());
                    entries.push(entry);
                }
                self.routes.insert(kind, entries);
            }};
        }
        // In the order of their kinds (by name), the order `self.routes` iterates in.
        models!(GrpcRoute, grpc_route::model);
        models!(HttpRoute, http_route::model);
        models!(TcpRoute, l4_route::tcp_model);
        models!(TlsRoute, l4_route::tls_model);
        models!(UdpRoute, l4_route::udp_model);
        routes
    }

    /// The model of every Gateway whose unit cannot be reused as it is, and
    /// the Gateway of ours each ListenerSet names (as its model decides).
    fn gateway_models<'s>(
        &self,
        store: &'s Store,
        backends: &dyn Fn() -> &'s Backends<'s>,
        gateways: &[(&ObjectRef, &Arc<Gateway>)],
        taken: &BTreeMap<ObjectRef, Taken>,
    ) -> (
        BTreeMap<ObjectRef, GatewayModel>,
        BTreeMap<ObjectRef, ObjectRef>,
    ) {
        let no_ports_taken = Taken::new();
        let mut set_gateway = BTreeMap::new();
        let mut models = BTreeMap::new();
        for (key, gw) in gateways {
            let lost = taken.get(*key).unwrap_or(&no_ports_taken);
            let sets: Vec<ObjectRef> = match self.gateways.get(*key) {
                Some(e) if e.read.model_stands(gw, lost) => e
                    .unit
                    .listener_sets
                    .iter()
                    .map(|(k, _)| k.clone())
                    .collect(),
                _ => {
                    let b = backends();
                    let m = GatewayModel::new(store, b, &self.config, (*key).clone(), gw, lost);
                    let keys = m.listener_sets.iter().map(|s| s.key.clone()).collect();
                    models.insert((*key).clone(), m);
                    keys
                }
            };
            for s in sets {
                set_gateway.insert(s, (*key).clone());
            }
        }
        (models, set_gateway)
    }

    /// Per Gateway, its inputs: (route index, parentRef index) for every
    /// parentRef that reaches it (directly or through a ListenerSet it
    /// holds), in route order.
    fn gateway_inputs<'g>(
        &self,
        gateways: &[(&'g ObjectRef, &Arc<Gateway>)],
        set_gateway: &BTreeMap<ObjectRef, ObjectRef>,
        routes: &[Arc<RouteModel>],
    ) -> BTreeMap<&'g ObjectRef, Vec<(usize, usize)>> {
        let mut inputs: BTreeMap<&ObjectRef, Vec<(usize, usize)>> =
            gateways.iter().map(|(k, _)| (*k, Vec::new())).collect();
        // The kinds' entries, in kind order, are the routes in route order.
        for (ri, entry) in self.routes.values().flatten().enumerate() {
            debug_assert!(Arc::ptr_eq(&entry.model, &routes[ri]));
            for (pi, named, set) in &entry.parents {
                let gw_key = match set {
                    false => named,
                    true => match set_gateway.get(named) {
                        Some(gw) => gw,
                        None => continue,
                    },
                };
                if let Some(list) = inputs.get_mut(gw_key) {
                    list.push((ri, *pi));
                }
            }
        }
        inputs
    }

    /// Every Gateway's unit: the cached one while the Gateway, the ports it
    /// lost and its inputs are the same, else translated again.
    fn gateway_units<'g, 's>(
        &mut self,
        (store, backends): (&'s Store, &dyn Fn() -> &'s Backends<'s>),
        gateways: &[(&'g ObjectRef, &Arc<Gateway>)],
        inputs: &BTreeMap<&ObjectRef, Vec<(usize, usize)>>,
        routes: &[Arc<RouteModel>],
        (models, taken): (
            &mut BTreeMap<ObjectRef, GatewayModel>,
            &mut BTreeMap<ObjectRef, Taken>,
        ),
        reuse: &mut Reuse,
    ) -> Vec<(&'g ObjectRef, Arc<GatewayUnit>)> {
        let mut units = Vec::new();
        let mut live = BTreeSet::new();
        for (key, gw) in gateways {
            let keyed: Vec<(Arc<RouteModel>, usize)> = inputs[*key]
                .iter()
                .map(|&(ri, pi)| (routes[ri].clone(), pi))
                .collect();
            let lost = taken.remove(*key).unwrap_or_default();
            let cached = self.gateways.get_mut(*key);
            let unit = match cached {
                Some(e) if e.read.unit_stands(gw, &lost, &keyed) => {
                    reuse.gateways_reused += 1;
                    e.read.source = (*gw).clone();
                    e.unit.clone()
                }
                cached => {
                    reuse.gateways_translated += 1;
                    // The route entries of the Gateway's last tables hold
                    // while its model does.
                    let memo = cached
                        .filter(|e| e.read.model_stands(gw, &lost))
                        .map(|e| std::mem::take(&mut e.memo))
                        .unwrap_or_default();
                    let model = models.remove(*key).unwrap_or_else(|| {
                        let b = backends();
                        GatewayModel::new(store, b, &self.config, (*key).clone(), gw, &lost)
                    });
                    let unit =
                        Arc::new(translate_gateway(store, &self.config, model, &keyed, &memo));
                    reuse.route_parts_kept += memo.kept();
                    self.gateways.insert(
                        (*key).clone(),
                        GatewayEntry {
                            read: GatewayRead {
                                source: (*gw).clone(),
                                taken: lost,
                                inputs: keyed,
                            },
                            unit: unit.clone(),
                            memo,
                        },
                    );
                    unit
                }
            };
            live.insert((*key).clone());
            units.push((*key, unit));
        }
        self.gateways.retain(|k, _| live.contains(k));
        units
    }

    /// Each cluster's endpoints, from the EndpointSlices: those filled last
    /// time while the cluster is the same (or an equal one) and no Service
    /// it reads the slices of changed, else read again. Both lists are in
    /// name order, so they are walked side by side: a cluster that is the
    /// same `Arc` as last time costs one pointer comparison.
    fn fill_endpoints(
        &mut self,
        ir: &mut Ir,
        index: &BackendIndex,
        stale: &BTreeSet<ObjectRef>,
        reuse: &mut Reuse,
    ) {
        let stale = |service: &ObjectRef| stale.contains(service);
        let mut was = std::mem::take(&mut self.filled).into_iter().peekable();
        let mut filled = Vec::with_capacity(ir.clusters.len());
        for c in &mut ir.clusters {
            // Those of clusters gone, before this one in name order, go.
            while was
                .next_if(|(w, _)| !Arc::ptr_eq(w, c) && w.name < c.name)
                .is_some()
            {}
            let before = was.next_if(|(w, _)| Arc::ptr_eq(w, c) || w.name == c.name);
            let with = match before {
                Some((w, with))
                    if (Arc::ptr_eq(&w, c) || w == *c) && !c.endpoints_from.reads(&stale) =>
                {
                    with
                }
                _ => {
                    reuse.clusters_filled += 1;
                    Arc::new(Cluster {
                        endpoints: index.endpoints(&c.endpoints_from),
                        ..Cluster::clone(c)
                    })
                }
            };
            filled.push((std::mem::replace(c, with.clone()), with));
        }
        self.filled = filled;
    }

    /// Route statuses: each route's parents in parentRef order. A route whose
    /// model and parent statuses are the ones its status was assembled from
    /// last time keeps that status, and its sources are updated in place: at
    /// 10,000 routes a change allocates for the routes that changed only.
    fn route_statuses(
        &mut self,
        units: &[(&ObjectRef, Arc<GatewayUnit>)],
        inputs: &BTreeMap<&ObjectRef, Vec<(usize, usize)>>,
        status: &mut StatusPlan,
    ) {
        // Every (route, parentRef index, unit, index in its parents), sorted
        // by route then parentRef: each route's sources are one run of it.
        let mut from: Vec<(usize, usize, usize, usize)> = Vec::new();
        for (u, (key, _)) in units.iter().enumerate() {
            for (at, &(ri, pi)) in inputs[*key].iter().enumerate() {
                from.push((ri, pi, u, at));
            }
        }
        from.sort_unstable();
        let mut from = from.as_slice();
        for (ri, entry) in self.routes.values_mut().flatten().enumerate() {
            let run = from.iter().take_while(|f| f.0 == ri).count();
            let (sources, rest) = from.split_at(run);
            from = rest;
            if sources.is_empty() {
                entry.status = None;
                continue;
            }
            let route = &entry.model;
            let stands = entry
                .status
                .as_ref()
                .is_some_and(|(was, _)| route_status_stands(was, sources, units));
            let route_status = match &mut entry.status {
                Some((was, s)) if stands => {
                    for (w, &(_, _, u, at)) in was.iter_mut().zip(sources) {
                        w.1 = units[u].1.clone();
                        w.2 = at;
                    }
                    s.clone()
                }
                _ => {
                    let list: ParentSources = sources
                        .iter()
                        .map(|&(_, pi, u, at)| (pi, units[u].1.clone(), at))
                        .collect();
                    let s = Arc::new(RouteStatus {
                        parents: list
                            .iter()
                            .map(|(_, unit, at)| unit.parents[*at].clone())
                            .collect(),
                        of: route.of.clone(),
                    });
                    entry.status = Some((list, s.clone()));
                    s
                }
            };
            status
                .routes_of_kind_mut(route.kind())
                .insert(route.key().clone(), route_status);
        }
    }
}

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
