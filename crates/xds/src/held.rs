//! A route held back in a route table: its Envoy routes as an older version of
//! the table had them, put back into a newer one in place of what Envoy refused.
//!
//! ```text
//!  table vA (ACKed)  ── HeldRoutes::of(vA, key) ─► key's routes, each with its
//!                                                  virtual host and the names
//!                                                  of the routes before it
//!  table vB (refused)┐
//!  held routes ──────┴─ splice ─► vB without the held keys' routes, each held
//!                                 route back after its nearest predecessor
//! ```
//!
//! Envoy refuses a route table whole, so one route it cannot take would keep
//! every other route of a shared table at the version Envoy has. The ADS
//! server's hold-back (`aether_ads::holdback`) splices the table Envoy refused
//! with the held routes' previous Envoy routes: the rest of the table goes on.
//! A held route that names a cluster the snapshot no longer defines is left
//! out instead (it would answer 503): while Envoy refuses it, it is not served.

use crate::parts::KeyHashes;
use crate::snapshot::{Resource, ResourceType};
use crate::{INVALID_BACKEND, route};
use aether_ir as ir;
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteConfiguration, VirtualHost, route::Action, route_action::ClusterSpecifier,
};
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};

/// One route's Envoy routes in one version of a route table.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HeldRoutes {
    routes: Vec<HeldRoute>,
}

#[derive(Debug, Clone, PartialEq)]
struct HeldRoute {
    virtual_host: String,
    domains: Vec<String>,
    /// The names of the routes before it in its virtual host, nearest first.
    after: Vec<String>,
    route: Route,
    /// Its virtual host ran a listener's pre-routing filters (`ext_authz.rs`).
    filtered: bool,
}

/// A route table that does not decode as one.
#[derive(Debug, thiserror::Error)]
#[error("route table {name} does not decode: {source}")]
pub struct DecodeError {
    name: String,
    source: prost::DecodeError,
}

fn decode(table: &Resource) -> Result<RouteConfiguration, DecodeError> {
    RouteConfiguration::decode(table.body.value.as_slice()).map_err(|source| DecodeError {
        name: table.name.clone(),
        source,
    })
}

impl HeldRoutes {
    /// The Envoy routes of route `key` (see [`ir::names::route_key`]) in `table`;
    /// none when that version did not carry the route.
    pub fn of(table: &Resource, key: &str) -> Result<HeldRoutes, DecodeError> {
        let rc = decode(table)?;
        let mut routes = Vec::new();
        for vh in &rc.virtual_hosts {
            for (i, r) in vh.routes.iter().enumerate() {
                if ir::names::route_key_of(&r.name) != Some(key) {
                    continue;
                }
                routes.push(HeldRoute {
                    virtual_host: vh.name.clone(),
                    domains: vh.domains.clone(),
                    after: vh.routes[..i]
                        .iter()
                        .rev()
                        .map(|p| p.name.clone())
                        .collect(),
                    route: r.clone(),
                    filtered: !vh.typed_per_filter_config.is_empty(),
                });
            }
        }
        Ok(HeldRoutes { routes })
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The clusters these routes forward or mirror to (never the cluster
    /// that stands for an invalid backend, which no snapshot defines).
    fn clusters(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for held in &self.routes {
            let Some(Action::Route(a)) = &held.route.action else {
                continue;
            };
            match &a.cluster_specifier {
                Some(ClusterSpecifier::Cluster(c)) => {
                    out.insert(c.clone());
                }
                Some(ClusterSpecifier::WeightedClusters(w)) => {
                    out.extend(w.clusters.iter().map(|c| c.name.clone()));
                }
                _ => {}
            }
            out.extend(a.request_mirror_policies.iter().map(|m| m.cluster.clone()));
        }
        out.remove(INVALID_BACKEND);
        out
    }
}

/// `table` with every route of the keys in `held` replaced by the held
/// routes (none for a key whose held version had none), and its fragments.
/// `defined` says which clusters the snapshot defines; a held route naming
/// another is left out. Deterministic: `held` is sorted by key.
pub fn splice(
    table: &Resource,
    held: &BTreeMap<String, HeldRoutes>,
    defined: impl Fn(&str) -> bool,
) -> Result<(Resource, KeyHashes), DecodeError> {
    let mut rc = decode(table)?;
    let mut emptied = BTreeSet::new();
    for vh in &mut rc.virtual_hosts {
        let had = vh.routes.len();
        vh.routes
            .retain(|r| !ir::names::route_key_of(&r.name).is_some_and(|k| held.contains_key(k)));
        if had > 0 && vh.routes.is_empty() {
            emptied.insert(vh.name.clone());
        }
    }
    // A virtual host only held routes filled would, empty, answer 404 for
    // hostnames that the older table sent to the catch-all.
    rc.virtual_hosts.retain(|vh| !emptied.contains(&vh.name));
    let mut references: BTreeSet<(ResourceType, String)> =
        table.references.iter().cloned().collect();
    for routes in held.values() {
        let clusters = routes.clusters();
        if !clusters.iter().all(|c| defined(c)) {
            continue;
        }
        for h in &routes.routes {
            put_back(&mut rc, h);
        }
        references.extend(clusters.into_iter().map(|c| (ResourceType::Cluster, c)));
    }
    let fragments = route::fragments(&rc);
    let resource = Resource::new(
        &table.name,
        ResourceType::Route.type_url(),
        rc.encode_to_vec(),
    )
    .with_references(references);
    Ok((resource, fragments))
}

/// Puts one held route back: into its virtual host (added back if the table
/// lost it, no other virtual host took one of its domains and it ran no
/// pre-routing filters), after the
/// nearest of its old predecessors still there, else first.
fn put_back(rc: &mut RouteConfiguration, h: &HeldRoute) {
    let at = match rc
        .virtual_hosts
        .iter()
        .position(|v| v.name == h.virtual_host)
    {
        Some(at) => at,
        None => {
            let taken = rc
                .virtual_hosts
                .iter()
                .any(|v| v.domains.iter().any(|d| h.domains.contains(d)));
            // Its listener's filters are not known here: never served
            // without them.
            if taken || h.filtered {
                return;
            }
            rc.virtual_hosts.push(VirtualHost {
                name: h.virtual_host.clone(),
                domains: h.domains.clone(),
                ..Default::default()
            });
            rc.virtual_hosts.len() - 1
        }
    };
    let vh = &mut rc.virtual_hosts[at];
    let index = h
        .after
        .iter()
        .find_map(|name| vh.routes.iter().position(|r| &r.name == name))
        .map_or(0, |i| i + 1);
    vh.routes.insert(index, h.route.clone());
}

#[cfg(test)]
#[path = "held_tests.rs"]
mod tests;
