//! What one translation computes per Gateway (its unit) and across them (our
//! GatewayClasses, the IR merge): the pure functions the [`super::Translator`]
//! caches the results of.

use super::GatewayUnit;
use crate::attach;
use crate::attachments::Attachments;
use crate::gateway_model::GatewayModel;
use crate::listener_set::ListenerSetModel;
use crate::route::RouteModel;
use crate::route_memo::GatewayMemo;
use crate::status::{Condition, GatewayClassStatus, RouteParentStatus, StatusPlan, set_condition};
use crate::store::Store;
use crate::vocabulary::gateway_class;
use crate::{Config, route_table};
use aether_ir::{Cluster, Ir, ObjectRef, UpstreamProtocol};
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The IR of the units (each served Gateway's, the clusters they share
/// merged), and their Gateway and ListenerSet statuses into `status`.
pub(super) fn merge(units: &[(&ObjectRef, Arc<GatewayUnit>)], status: &mut StatusPlan) -> Ir {
    let mut ir = Ir::default();
    let mut clusters: BTreeMap<&str, Arc<Cluster>> = BTreeMap::new();
    for (key, unit) in units {
        status.gateways.insert((*key).clone(), unit.status.clone());
        for (set, s) in &unit.listener_sets {
            status.listener_sets.insert(set.clone(), s.clone());
        }
        if let Some(gw) = &unit.ir {
            ir.gateways.push(gw.clone());
        }
        for (name, cluster) in &unit.clusters {
            merge_cluster(&mut clusters, name, cluster);
        }
    }
    ir.clusters = clusters.into_values().collect();
    ir
}

/// GatewayClasses of ours (by name), their status planned.
pub(super) fn classes(store: &Store, config: &Config, status: &mut StatusPlan) -> BTreeSet<String> {
    let mut ours = BTreeSet::new();
    for (key, class) in store.all::<GatewayClass>() {
        if class.spec.controller_name != config.controller_name {
            continue;
        }
        ours.insert(key.name.clone());
        let mut conditions = Vec::new();
        let g = class.metadata.generation.unwrap_or(0);
        set_condition(
            &mut conditions,
            Condition::new(
                gateway_class::Type::Accepted,
                true,
                gateway_class::Reason::Accepted,
                "GatewayClass is accepted",
                g,
            ),
        );
        status
            .gateway_classes
            .insert(key.name.clone(), GatewayClassStatus { conditions });
    }
    ours
}

/// One Gateway: its routes attached parentRef by parentRef (in route order),
/// HTTP/GRPC hostname conflicts decided, its IR if it is served.
/// `memo` holds what the Gateway's last translation computed per route, for
/// this same Gateway model, or is empty (see `route_memo.rs`).
pub(super) fn translate_gateway(
    store: &Store,
    config: &Config,
    gw: GatewayModel,
    inputs: &[(Arc<RouteModel>, usize)],
    memo: &GatewayMemo,
) -> GatewayUnit {
    memo.start();
    // The routes of this Gateway alone, in route order; (listener, local route).
    let mut local: Vec<Arc<RouteModel>> = Vec::new();
    let mut at: Vec<usize> = Vec::with_capacity(inputs.len());
    for (i, (route, _)) in inputs.iter().enumerate() {
        let same_as_before = i > 0 && Arc::ptr_eq(&inputs[i - 1].0, route);
        if !same_as_before {
            local.push(route.clone());
        }
        at.push(local.len() - 1);
    }
    let mut attachments = Attachments::new(&local);
    let mut parents: Vec<Vec<Arc<RouteParentStatus>>> = vec![Vec::new(); local.len()];
    for (&(_, pi), &lri) in inputs.iter().zip(&at) {
        let route = &local[lri];
        let attached = memo.attachments.get_or_make((route, pi), || {
            let parent_ref = &route.parent_refs[pi];
            attach::attach(store, &gw, route, parent_ref, &config.controller_name)
        });
        attached.record(&mut attachments, lri);
        parents[lri].push(attached.status.clone());
    }
    if !inputs.is_empty() {
        attach::reject_mixed_kinds(&gw, &local, &mut attachments, &mut parents);
    }
    // Back to input order: a route's parents were pushed in parentRef order.
    let mut flat = Vec::with_capacity(inputs.len());
    let mut next = vec![0usize; local.len()];
    for &lri in &at {
        flat.push(parents[lri][next[lri]].clone());
        next[lri] += 1;
    }
    let mut clusters = BTreeMap::new();
    let ir = gw.is_served().then(|| {
        Arc::new(route_table::gateway(
            &gw,
            &local,
            &attachments,
            &mut clusters,
            memo,
        ))
    });
    memo.finish();
    GatewayUnit {
        status: gw.status(&attachments),
        listener_sets: gw
            .listener_sets
            .iter()
            .map(|s: &ListenerSetModel| (s.key.clone(), s.status(&gw, &attachments)))
            .collect(),
        parents: flat,
        ir,
        clusters,
    }
}

/// A cluster two Gateways both use: the first one's, served as h2c if either
/// needs it (as one Gateway's routes do among themselves).
fn merge_cluster<'a>(
    clusters: &mut BTreeMap<&'a str, Arc<Cluster>>,
    name: &'a str,
    cluster: &Arc<Cluster>,
) {
    clusters
        .entry(name)
        .and_modify(|c| {
            if cluster.protocol == UpstreamProtocol::H2c && c.protocol != UpstreamProtocol::H2c {
                Arc::make_mut(c).protocol = UpstreamProtocol::H2c;
            }
        })
        .or_insert_with(|| cluster.clone());
}
