//! Make-before-break scripts: a stream machine and a small Envoy that applies
//! what it is sent in order and ACKs it (or NACKs what a script says), checking
//! after every response it applies that each route table it holds names only
//! clusters it holds warm (the cluster and its endpoints).

use crate::delta::DeltaStream;
use crate::fixtures::*;
use crate::sotw::SotwStream;
use aether_xds::{Resource, ResourceType, Snapshot};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryResponse,
};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Key = (ResourceType, String);

/// Listener l80, route table r80 at `rev` naming the clusters `named`, and the
/// clusters `defined`, each with its endpoints.
fn linked(rev: u32, named: &[&str], defined: &[&str]) -> Arc<Snapshot> {
    let mut by_type: BTreeMap<ResourceType, BTreeMap<String, Resource>> = BTreeMap::new();
    let mut put = |r: Resource, ty: ResourceType| {
        by_type.entry(ty).or_default().insert(r.name.clone(), r);
    };
    for c in defined {
        put(
            mk_resource(CDS, c, 1).with_references([(EDS, c.to_string())]),
            CDS,
        );
        put(mk_resource(EDS, c, 1), EDS);
    }
    put(mk_resource(LDS, "l80", 1), LDS);
    let named = named.iter().map(|c| (CDS, c.to_string()));
    put(mk_resource(RDS, "r80", rev).with_references(named), RDS);
    Arc::new(Snapshot::new(by_type, BTreeMap::new()))
}

/// What a small Envoy holds, and the references of every version it was ever
/// sent (from the snapshots the script used).
#[derive(Default)]
struct Envoy {
    held: BTreeMap<Key, String>,
    references: BTreeMap<(Key, String), Vec<Key>>,
    /// Route table versions this Envoy rejects.
    rejects: BTreeSet<String>,
    /// Clusters this Envoy rejects, whatever their version.
    rejects_clusters: BTreeSet<String>,
    /// Every (type, name) it applied, in order, `-` marking a removal.
    applied: Vec<String>,
}

impl Envoy {
    fn knows(&mut self, snapshot: &Snapshot) {
        for (ty, by_name) in &snapshot.resources {
            for (name, r) in by_name.iter() {
                self.references.insert(
                    ((*ty, name.clone()), r.version.clone()),
                    r.references.to_vec(),
                );
            }
        }
    }

    fn holds(&self, ty: ResourceType, name: &str) -> bool {
        self.held.contains_key(&(ty, name.to_string()))
    }

    /// Whether applying `version` of `key` is refused.
    fn refuses(&self, key: &Key, version: &str) -> bool {
        (key.0 == RDS && self.rejects.contains(version))
            || (key.0 == CDS && self.rejects_clusters.contains(&key.1))
    }

    fn apply(&mut self, key: Key, version: Option<String>) {
        let mark = if version.is_some() { "" } else { "-" };
        self.applied
            .push(format!("{mark}{}:{}", key.0.short_name(), key.1));
        match version {
            Some(v) => self.held.insert(key, v),
            None => self.held.remove(&key),
        };
        self.check();
    }

    /// No route table names a cluster this Envoy does not hold warm.
    fn check(&self) {
        // A cluster warms until its endpoints come: only what names clusters counts.
        for (key, version) in self
            .held
            .iter()
            .filter(|((ty, _), _)| *ty == RDS || *ty == LDS)
        {
            let refs = &self.references[&(key.clone(), version.clone())];
            for (ty, name) in refs
                .iter()
                .filter(|(_, n)| !self.rejects_clusters.contains(n))
            {
                assert!(
                    self.holds(*ty, name) && (*ty != CDS || self.holds(EDS, name)),
                    "{} {} is held naming {} {name}, which is not warm; held: {:?}",
                    key.0.short_name(),
                    key.1,
                    ty.short_name(),
                    self.held.keys().collect::<Vec<_>>()
                );
            }
        }
    }
}

// --- Delta -----------------------------------------------------------------

/// Applies `responses` (and what answering them brings) until the stream has
/// nothing more to say.
fn delta_pump(
    s: &mut DeltaStream,
    envoy: &mut Envoy,
    responses: Vec<DeltaDiscoveryResponse>,
    now: Instant,
) {
    let mut queue: std::collections::VecDeque<_> = responses.into();
    while let Some(r) = queue.pop_front() {
        let ty = ResourceType::from_type_url(&r.type_url).unwrap();
        let refused = r
            .resources
            .iter()
            .any(|x| envoy.refuses(&(ty, x.name.clone()), &x.version));
        let mut subscribe = Vec::new();
        let mut unsubscribe = Vec::new();
        if !refused {
            for x in &r.resources {
                envoy.apply((ty, x.name.clone()), Some(x.version.clone()));
                if ty == CDS {
                    subscribe.push(x.name.clone());
                }
            }
            for name in &r.removed_resources {
                envoy.apply((ty, name.clone()), None);
                if ty == CDS {
                    unsubscribe.push(name.clone());
                }
            }
        }
        let answer = if refused {
            let names: Vec<&str> = r.resources.iter().map(|x| x.name.as_str()).collect();
            let message = format!("Error adding/updating {}: rejected", names.join(", "));
            mk_delta_nack(ty, &r.nonce, &message)
        } else {
            mk_delta(ty, &[], &[], &r.nonce)
        };
        queue.extend(s.on_request_at(answer, now).responses);
        // Envoy asks for the endpoints of the clusters it took, drops the others'.
        if !subscribe.is_empty() || !unsubscribe.is_empty() {
            let sub: Vec<&str> = subscribe.iter().map(String::as_str).collect();
            let unsub: Vec<&str> = unsubscribe.iter().map(String::as_str).collect();
            let req = mk_delta(EDS, &sub, &unsub, "");
            queue.extend(s.on_request_at(req, now).responses);
            for name in &unsubscribe {
                envoy.held.remove(&(EDS, name.clone()));
            }
        }
    }
}

/// A Delta stream on `snapshot` opened by `envoy` (CDS, LDS, RDS r80) and pumped.
fn delta_opened(snapshot: &Arc<Snapshot>, grace: Duration, envoy: &mut Envoy) -> DeltaStream {
    envoy.knows(snapshot);
    let mut s = DeltaStream::with_removal_grace(snapshot.clone(), grace);
    let mut first = Vec::new();
    first.extend(s.on_request(mk_delta(CDS, &[], &[], "")).responses);
    first.extend(s.on_request(mk_delta(LDS, &[], &[], "")).responses);
    first.extend(s.on_request(mk_delta(RDS, &["r80"], &[], "")).responses);
    delta_pump(&mut s, envoy, first, Instant::now());
    s
}

fn delta_change(s: &mut DeltaStream, envoy: &mut Envoy, snapshot: Arc<Snapshot>, now: Instant) {
    envoy.knows(&snapshot);
    let out = s.on_snapshot_at(snapshot, now);
    delta_pump(s, envoy, out.responses, now);
}

fn held_version(envoy: &Envoy, ty: ResourceType, name: &str) -> Option<String> {
    envoy.held.get(&(ty, name.to_string())).cloned()
}

#[test]
fn delta_a_route_goes_after_its_new_cluster_is_warm_and_the_old_one_leaves_after() {
    let mut envoy = Envoy::default();
    let mut s = delta_opened(&linked(1, &["c1"], &["c1"]), Duration::ZERO, &mut envoy);
    assert!(envoy.holds(RDS, "r80") && envoy.holds(EDS, "c1"));
    envoy.applied.clear();

    let next = linked(2, &["c2"], &["c2"]);
    delta_change(&mut s, &mut envoy, next.clone(), Instant::now());
    assert_eq!(
        envoy.applied,
        ["CDS:c2", "EDS:c2", "RDS:r80", "-CDS:c1", "-EDS:c1"],
        "cluster, its endpoints, the route naming it, then the old cluster"
    );
    assert_eq!(
        held_version(&envoy, RDS, "r80").as_deref(),
        next.version_of(RDS, "r80")
    );
}

#[test]
fn delta_a_cluster_nothing_names_stays_for_the_grace_and_a_switch_back_is_immediate() {
    let grace = Duration::from_secs(10);
    let t0 = Instant::now();
    let mut envoy = Envoy::default();
    let mut s = delta_opened(&linked(1, &["c1"], &["c1"]), grace, &mut envoy);
    delta_change(&mut s, &mut envoy, linked(2, &["c2"], &["c2"]), t0);
    assert!(envoy.holds(CDS, "c1"), "kept for the grace");
    assert_eq!(s.wake_at(), Some(t0 + grace));
    assert!(s.on_tick(t0 + grace / 2).responses.is_empty());

    // Back to c1 within the grace: Envoy holds it warm, the route goes at once.
    envoy.applied.clear();
    let back = linked(3, &["c1"], &["c1"]);
    envoy.knows(&back);
    let out = s.on_snapshot_at(back, t0 + grace / 2);
    let types: Vec<_> = out.responses.iter().map(|r| r.type_url.clone()).collect();
    assert_eq!(types, [RDS.type_url()], "only the route table: c1 is warm");
    delta_pump(&mut s, &mut envoy, out.responses, t0 + grace / 2);
    assert_eq!(envoy.applied, ["RDS:r80"]);

    // c2's grace starts when the route naming it was replaced and ACKed.
    let t1 = t0 + grace / 2;
    assert_eq!(s.wake_at(), Some(t1 + grace));
    envoy.applied.clear();
    let out = s.on_tick(t1 + grace);
    delta_pump(&mut s, &mut envoy, out.responses, t1 + grace);
    assert_eq!(
        envoy.applied,
        ["-CDS:c2", "-EDS:c2"],
        "endpoints leave with their cluster"
    );
    assert_eq!(s.wake_at(), None);
}

#[test]
fn delta_a_rejected_route_keeps_the_cluster_the_served_one_names() {
    let t0 = Instant::now();
    let mut envoy = Envoy::default();
    let mut s = delta_opened(&linked(1, &["c1"], &["c1"]), Duration::ZERO, &mut envoy);
    let served = held_version(&envoy, RDS, "r80");
    let bad = linked(2, &["c2"], &["c2"]);
    envoy
        .rejects
        .insert(bad.version_of(RDS, "r80").unwrap().to_string());
    delta_change(&mut s, &mut envoy, bad, t0);
    assert_eq!(
        held_version(&envoy, RDS, "r80"),
        served,
        "the old route serves"
    );
    assert!(
        envoy.holds(CDS, "c1") && envoy.holds(EDS, "c1"),
        "and the cluster it names stays"
    );
    let out = s.on_tick(t0 + Duration::from_secs(3600));
    assert!(out.responses.is_empty(), "for good: {:?}", out.responses);
}

#[test]
fn delta_a_refused_cluster_holds_back_no_route_of_its_table() {
    let mut envoy = Envoy::default();
    let mut s = delta_opened(&linked(1, &["c1"], &["c1"]), Duration::ZERO, &mut envoy);
    envoy.rejects_clusters.insert("bad".to_string());
    // The table now names a cluster Envoy refuses beside the one it had.
    let next = linked(2, &["c1", "bad"], &["c1", "bad"]);
    delta_change(&mut s, &mut envoy, next.clone(), Instant::now());
    assert!(!envoy.holds(CDS, "bad"));
    assert_eq!(
        held_version(&envoy, RDS, "r80").as_deref(),
        next.version_of(RDS, "r80"),
        "the table goes on: waiting for a refused cluster would freeze every route in it"
    );
}

#[test]
fn delta_a_second_change_before_the_first_is_acked() {
    let mut envoy = Envoy::default();
    let mut s = delta_opened(&linked(1, &["c1"], &["c1"]), Duration::ZERO, &mut envoy);
    let second = linked(2, &["c2"], &["c2"]);
    let third = linked(3, &["c3"], &["c3"]);
    envoy.knows(&second);
    envoy.knows(&third);
    // Envoy has not answered the first change when the second arrives.
    let mut pending = s.on_snapshot_at(second, Instant::now()).responses;
    pending.extend(s.on_snapshot_at(third.clone(), Instant::now()).responses);
    delta_pump(&mut s, &mut envoy, pending, Instant::now());
    assert_eq!(
        held_version(&envoy, RDS, "r80").as_deref(),
        third.version_of(RDS, "r80")
    );
    let clusters: Vec<_> = envoy.held.keys().filter(|(ty, _)| *ty == CDS).collect();
    assert_eq!(clusters, [&(CDS, "c3".to_string())]);
}

#[test]
fn delta_a_stream_resumed_mid_change_keeps_what_the_held_route_may_name() {
    // Envoy held r80 naming c1 from another stream (versions only, no bodies here).
    let before = linked(1, &["c1"], &["c1"]);
    let after = linked(2, &["c2"], &["c2"]);
    let mut envoy = Envoy::default();
    envoy.knows(&before);
    envoy.knows(&after);
    for (ty, name) in [(CDS, "c1"), (EDS, "c1"), (LDS, "l80"), (RDS, "r80")] {
        let v = before.version_of(ty, name).unwrap().to_string();
        envoy.held.insert((ty, name.to_string()), v);
    }
    let mut s = DeltaStream::with_removal_grace(after.clone(), Duration::ZERO);
    let resume = |ty: ResourceType, names: &[&str]| -> DeltaDiscoveryRequest {
        let mut req = mk_delta(ty, names, &[], "");
        req.initial_resource_versions = envoy
            .held
            .iter()
            .filter(|((t, _), _)| *t == ty)
            .map(|((_, n), v)| (n.clone(), v.clone()))
            .collect();
        req
    };
    let mut first = Vec::new();
    first.extend(s.on_request(resume(CDS, &[])).responses);
    first.extend(s.on_request(resume(EDS, &["c1"])).responses);
    first.extend(s.on_request(resume(LDS, &[])).responses);
    first.extend(s.on_request(resume(RDS, &["r80"])).responses);
    delta_pump(&mut s, &mut envoy, first, Instant::now());
    assert_eq!(
        held_version(&envoy, RDS, "r80").as_deref(),
        after.version_of(RDS, "r80")
    );
    assert!(!envoy.holds(CDS, "c1"), "gone once the new route was ACKed");
}

// --- SotW ------------------------------------------------------------------

/// Applies SotW `responses` (CDS and LDS replace the whole type; EDS and RDS
/// update what they carry) and what answering them brings.
fn sotw_pump(s: &mut SotwStream, envoy: &mut Envoy, responses: Vec<DiscoveryResponse>) {
    let mut queue: std::collections::VecDeque<_> = responses.into();
    while let Some(r) = queue.pop_front() {
        let ty = ResourceType::from_type_url(&r.type_url).unwrap();
        let names = any_names(ty, &r.resources);
        // A version is the sha256 of the encoded body.
        let versions: Vec<(String, String)> = names
            .iter()
            .zip(&r.resources)
            .map(|(n, a)| (n.clone(), hex::encode(Sha256::digest(&a.value))))
            .collect();
        let refused = versions
            .iter()
            .any(|(n, v)| envoy.refuses(&(ty, n.clone()), v));
        if !refused {
            if matches!(ty, ResourceType::Cluster | ResourceType::Listener) {
                let gone: Vec<Key> = envoy
                    .held
                    .keys()
                    .filter(|(t, n)| *t == ty && !names.contains(n))
                    .cloned()
                    .collect();
                for key in gone {
                    if ty == CDS {
                        envoy.held.remove(&(EDS, key.1.clone()));
                    }
                    envoy.apply(key, None);
                }
            }
            for (n, v) in versions {
                envoy.apply((ty, n), Some(v));
            }
        }
        let held = |t: ResourceType| -> Vec<String> {
            envoy
                .held
                .keys()
                .filter(|(x, _)| *x == t)
                .map(|(_, n)| n.clone())
                .collect()
        };
        // CDS and LDS are wildcards; EDS names the clusters held.
        let subscribed = match ty {
            ResourceType::Endpoint => held(CDS),
            ResourceType::Route => vec!["r80".to_string()],
            _ => vec![],
        };
        let subscribed: Vec<&str> = subscribed.iter().map(String::as_str).collect();
        let answer = if refused {
            mk_nack(ty, &subscribed, &r.nonce, "route table r80: rejected")
        } else {
            mk_request(ty, &subscribed, &r.nonce)
        };
        queue.extend(s.on_request(answer).responses);
        if ty == CDS && !refused {
            // Envoy restates its EDS interest for the clusters it now holds.
            let clusters = held(CDS);
            let clusters: Vec<&str> = clusters.iter().map(String::as_str).collect();
            let nonce = s_last_nonce(&queue, EDS).unwrap_or_default();
            queue.extend(s.on_request(mk_request(EDS, &clusters, &nonce)).responses);
        }
    }
}

/// The nonce of the last EDS response still queued, if any (Envoy's next EDS
/// request carries the last nonce it saw).
fn s_last_nonce(
    queue: &std::collections::VecDeque<DiscoveryResponse>,
    ty: ResourceType,
) -> Option<String> {
    queue
        .iter()
        .rev()
        .find(|r| r.type_url == ty.type_url())
        .map(|r| r.nonce.clone())
}

#[test]
fn sotw_a_route_goes_after_its_new_cluster_is_warm_and_the_old_one_leaves_after() {
    let first = linked(1, &["c1"], &["c1"]);
    let mut envoy = Envoy::default();
    envoy.knows(&first);
    let mut s = SotwStream::with_removal_grace(first, Duration::ZERO);
    let mut opening = Vec::new();
    opening.extend(s.on_request(mk_request(CDS, &[], "")).responses);
    opening.extend(s.on_request(mk_request(LDS, &[], "")).responses);
    opening.extend(s.on_request(mk_request(RDS, &["r80"], "")).responses);
    sotw_pump(&mut s, &mut envoy, opening);
    assert!(envoy.holds(RDS, "r80") && envoy.holds(EDS, "c1"));

    envoy.applied.clear();
    let next = linked(2, &["c2"], &["c2"]);
    envoy.knows(&next);
    let out = s.on_snapshot_at(next.clone(), Instant::now());
    sotw_pump(&mut s, &mut envoy, out.responses);
    assert_eq!(
        held_version(&envoy, RDS, "r80").as_deref(),
        next.version_of(RDS, "r80")
    );
    assert!(
        !envoy.holds(CDS, "c1"),
        "gone after the route stopped naming it"
    );
    let order: Vec<&str> = envoy.applied.iter().map(String::as_str).collect();
    let at = |x: &str| order.iter().position(|a| *a == x).unwrap();
    assert!(
        at("EDS:c2") < at("RDS:r80") && at("RDS:r80") < at("-CDS:c1"),
        "{order:?}"
    );
}
