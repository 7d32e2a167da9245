//! Routes held back: when Envoy refuses a shared route table, the routes whose
//! change it refused are served as they were, and the rest of the table goes on.
//!
//! ```text
//!  desired Snapshot ──┐
//!  per node: route tables ACKed, route tables refused (NACK) ─► HoldBack::update ─► served Snapshot
//!                                                                  │  (desired, each held route
//!                                                                  │   spliced back as it was)
//!                                                                  └► holds: route key → why
//! ```
//!
//! Envoy takes or refuses a route table whole. Without this, one route Envoy
//! cannot take (something translate let through) keeps every route of its
//! table at the version Envoy has: on a Gateway that many tenants share, one
//! tenant's route would hold back every other's.
//!
//! - **Blame.** A refused version of a table is compared, route by route
//!   (their fragments, `aether_xds::parts`), with the version that Envoy
//!   holds: the routes that differ are the suspects. Each is held: the table is
//!   served with that route's Envoy routes as Envoy holds them (or without it,
//!   if it is new), and every other change goes on.
//! - **One suspect is the culprit.** Several suspects (a burst of changes in
//!   one push, or a whole table Envoy never held) are tried again by halves,
//!   each once Envoy holds the table as served: a half Envoy refuses is halved
//!   again, the other half then tried whole. The route Envoy refuses is held
//!   alone after about 2·log2(suspects) pushes, and the others go on.
//! - **A held route goes when it changes.** An edit (or a removal) of the
//!   route is a new try; an unrelated edit of the table keeps it held.
//!
//! Sans-IO: the caller hands in the desired snapshot and what each node
//! holds and refused, and serves the snapshot it gets back.

use crate::subscription::Versions;
use aether_ir::Rejection;
use aether_xds::held::{self, HeldRoutes};
use aether_xds::{Resource, ResourceType, Snapshot};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

#[cfg(test)]
mod tests;

/// Versions of a route table kept beyond those some Envoy holds.
const RECENT: usize = 2;

/// What one node holds and refused of route tables.
#[derive(Debug, Clone, Default)]
pub struct NodeTables {
    pub node: String,
    /// Route table name → the version its Envoy ACKed.
    pub acked: Versions,
    /// Standing refusals: (route table, version, Envoy's message).
    pub refused: Vec<(String, String, String)>,
}

/// Why a route is held back.
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    /// The node whose Envoy refused it.
    pub node: String,
    /// Envoy's message (already fit to show: `aether_ir::untrusted::message`).
    pub message: String,
    /// The route alone was in the refused change; otherwise it was one of
    /// several and waits its turn to be tried again.
    pub alone: bool,
    /// Which refusal held it: of several suspects held, the newest refusal's
    /// are tried first.
    round: u64,
    /// Its round holds a route Envoy refuses (it was refused together);
    /// otherwise it is the other half of one, not known to.
    known_bad: bool,
    /// The route's fragment in the refused version (`None`: it was removed).
    refused: Option<Arc<str>>,
    /// Its Envoy routes as the node held them.
    routes: HeldRoutes,
}

/// A version of a route table that was served, with its routes' fragments.
#[derive(Debug)]
struct Served {
    resource: Resource,
    fragments: Arc<aether_xds::KeyHashes>,
}

/// The hold-back state of one ADS server.
#[derive(Debug, Default)]
pub struct HoldBack {
    /// Per route table, per route key: the routes held.
    holds: BTreeMap<String, BTreeMap<String, Hold>>,
    /// Per route table, the versions served lately, newest last.
    served: BTreeMap<String, VecDeque<Served>>,
    /// The version of the snapshot served last.
    last: Option<String>,
    /// Refusals turned into holds so far.
    rounds: u64,
}

impl Hold {
    /// Who refused the route and Envoy's words, when Envoy refused the route
    /// alone (one held among several is only pending: it waits its turn).
    /// Its status sentence is worded where status is assembled.
    pub fn refusal(&self) -> Option<Rejection> {
        self.alone
            .then(|| Rejection::new(&self.node, &self.message))
    }
}

impl HoldBack {
    /// The snapshot to serve for `desired`, given what every node holds; the
    /// refusals it turned into holds are returned as (route table, version),
    /// so the fleet stops blaming the Gateway for them.
    pub fn update(
        &mut self,
        desired: &Arc<Snapshot>,
        nodes: &[NodeTables],
    ) -> (Arc<Snapshot>, Vec<(String, String)>) {
        self.release_changed(desired);
        let absorbed = self.absorb(nodes);
        self.try_half(nodes);
        let served = self.splice(desired);
        if self.last.as_deref() != Some(served.version.as_str()) || !absorbed.is_empty() {
            self.keep_served(&served, nodes);
            self.last = Some(served.version.clone());
        }
        (served, absorbed)
    }

    /// Held routes, by route key: why each is held (the first table's reason
    /// when a route is held in several).
    pub fn holds(&self) -> BTreeMap<&str, &Hold> {
        let mut out = BTreeMap::new();
        for holds in self.holds.values() {
            for (key, hold) in holds {
                out.entry(key.as_str()).or_insert(hold);
            }
        }
        out
    }

    /// A held route whose desired fragment is no longer the refused one (it
    /// changed, or left) gets a new try; a table gone takes its holds along.
    fn release_changed(&mut self, desired: &Snapshot) {
        self.holds.retain(|table, holds| {
            let Some(now) = desired.fragments.get(&(ResourceType::Route, table.clone())) else {
                return false;
            };
            holds.retain(|key, hold| now.get(key.as_str()) == hold.refused.as_ref());
            !holds.is_empty()
        });
    }

    /// Turns each refusal of a table version this server served into holds of
    /// the routes that differ from what the node holds.
    fn absorb(&mut self, nodes: &[NodeTables]) -> Vec<(String, String)> {
        let mut absorbed = Vec::new();
        for n in nodes {
            for (table, version, message) in &n.refused {
                let Some(kept) = self.served.get(table) else {
                    continue;
                };
                let Some(refused) = kept.iter().find(|s| s.resource.version == *version) else {
                    continue;
                };
                let held = n
                    .acked
                    .get(table)
                    .and_then(|v| kept.iter().find(|s| s.resource.version == *v));
                let before = held.map(|s| s.fragments.clone()).unwrap_or_default();
                let suspects: BTreeSet<&Arc<str>> = refused
                    .fragments
                    .keys()
                    .chain(before.keys())
                    .filter(|&k| refused.fragments.get(k) != before.get(k))
                    .collect();
                self.rounds += 1;
                let round = self.rounds;
                let holds = self.holds.entry(table.clone()).or_default();
                for &key in &suspects {
                    let routes = held
                        .and_then(|s| HeldRoutes::of(&s.resource, key).ok())
                        .unwrap_or_default();
                    holds.entry(key.to_string()).or_insert_with(|| Hold {
                        node: n.node.clone(),
                        message: message.clone(),
                        alone: suspects.len() == 1,
                        round,
                        known_bad: true,
                        refused: refused.fragments.get(key).cloned(),
                        routes,
                    });
                }
                if holds.is_empty() {
                    self.holds.remove(table);
                }
                if !suspects.is_empty() {
                    absorbed.push((table.clone(), version.clone()));
                }
            }
        }
        absorbed
    }

    /// Once every node holds a table as last served, tries the routes held
    /// together by its newest refusal: half of them when they were refused
    /// together (the other half then waits, no longer known to be refused),
    /// all of them otherwise. A try Envoy refuses is a new, smaller round, so
    /// the route Envoy refuses is alone after about 2·log2(suspects) pushes,
    /// and every other goes on.
    fn try_half(&mut self, nodes: &[NodeTables]) {
        for (table, holds) in &mut self.holds {
            let last = self.served.get(table).and_then(|k| k.back());
            let settled = !nodes.is_empty()
                && last.is_some_and(|last| {
                    nodes
                        .iter()
                        .all(|n| n.acked.get(table) == Some(&last.resource.version))
                });
            if !settled {
                continue;
            }
            let Some(newest) = holds.values().filter(|h| !h.alone).map(|h| h.round).max() else {
                continue;
            };
            let together: Vec<String> = holds
                .iter()
                .filter(|(_, h)| !h.alone && h.round == newest)
                .map(|(k, _)| k.clone())
                .collect();
            let known_bad = together.iter().any(|k| holds[k].known_bad);
            let tried = if known_bad {
                together.len().div_ceil(2)
            } else {
                together.len()
            };
            for key in &together[..tried] {
                holds.remove(key);
            }
            for key in &together[tried..] {
                if let Some(h) = holds.get_mut(key) {
                    h.known_bad = false;
                }
            }
        }
        self.holds.retain(|_, holds| !holds.is_empty());
    }

    /// `desired` with each table that has holds spliced.
    fn splice(&self, desired: &Arc<Snapshot>) -> Arc<Snapshot> {
        if self.holds.is_empty() {
            return desired.clone();
        }
        let clusters = desired.resources.get(&ResourceType::Cluster);
        let defined = |c: &str| clusters.is_some_and(|m| m.contains_key(c));
        let replaced: Vec<(Resource, aether_xds::KeyHashes)> = self
            .holds
            .iter()
            .filter_map(|(table, holds)| {
                let now = desired.resources.get(&ResourceType::Route)?.get(table)?;
                let routes: BTreeMap<String, HeldRoutes> = holds
                    .iter()
                    .map(|(k, h)| (k.clone(), h.routes.clone()))
                    .collect();
                held::splice(now, &routes, defined).ok()
            })
            .collect();
        Arc::new(desired.replacing(ResourceType::Route, replaced))
    }

    /// Remembers the served versions of every table, keeping those a node
    /// holds or refused, and the newest few.
    fn keep_served(&mut self, served: &Snapshot, nodes: &[NodeTables]) {
        let wanted: BTreeSet<(&str, &str)> = nodes
            .iter()
            .flat_map(|n| {
                n.acked
                    .iter()
                    .map(|(t, v)| (t.as_str(), v.as_str()))
                    .chain(n.refused.iter().map(|(t, v, _)| (t.as_str(), v.as_str())))
            })
            .collect();
        for r in served.of_type(ResourceType::Route) {
            let kept = self.served.entry(r.name.clone()).or_default();
            if kept.back().is_none_or(|s| s.resource.version != r.version) {
                kept.retain(|s| s.resource.version != r.version);
                let fragments = served
                    .fragments
                    .get(&(ResourceType::Route, r.name.clone()))
                    .cloned()
                    .unwrap_or_default();
                kept.push_back(Served {
                    resource: r.clone(),
                    fragments,
                });
            }
            let mut excess = kept.len().saturating_sub(RECENT);
            let newest = kept.back().map(|s| s.resource.version.clone());
            kept.retain(|s| {
                let v = s.resource.version.as_str();
                let drop = excess > 0
                    && Some(v) != newest.as_deref()
                    && !wanted.contains(&(r.name.as_str(), v));
                if drop {
                    excess -= 1;
                }
                !drop
            });
        }
        self.served
            .retain(|name, _| served.version_of(ResourceType::Route, name).is_some());
    }
}
