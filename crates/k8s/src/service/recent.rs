//! The leader's own recent writes, until the watch shows them (pure).
//!
//! ```text
//!  reconcile ──report.written──► RecentWrites ──overlay(store)──► store to allocate from
//!                                     ▲ forgotten once the watched copy is as new
//! ```
//!
//! Allocation reads the edge Services from the store, and the store trails the
//! API server. Without this, a pass that runs before the watch delivers the
//! previous pass's Services would allocate again from scratch and could hand a
//! Gateway's Envoy port to another Gateway, moving ports that agents already bind.
//! Only allocation uses the overlay: the write/no-write decision keeps comparing
//! with the watched copy, so a Service deleted behind our back is put back.

use super::reconcile::{ServiceError, up_to_date};
use super::{ReconcileErrors, ReconcileReport, is_edge_service};
use crate::recent::{self, Seen};
use aether_gateway::Store;
use k8s_openapi::api::core::v1::Service;
use std::borrow::Cow;
use std::collections::BTreeSet;

/// Services this leader applied that its store may not show yet, by name
/// ([`crate::recent`], the overlay the status writer uses too).
#[derive(Debug, Clone, Default)]
pub struct RecentWrites {
    services: recent::RecentWrites<String, Service>,
}

fn shows(store: &Store, namespace: &str, name: &str) -> Seen {
    store
        .get::<Service>(namespace, name)
        .map(|s| s.metadata.resource_version.clone())
}

impl RecentWrites {
    /// Remembers what a reconcile against `store` wrote, and forgets every
    /// Service it no longer wants (deleted, or its Gateway gone: a write nobody
    /// wants must not keep its ports reserved).
    pub fn record(&mut self, result: &Result<ReconcileReport, ReconcileErrors>, store: &Store) {
        let (report, failed) = match result {
            Ok(report) => (report, Vec::new()),
            Err(e) => {
                let failed = e
                    .errors
                    .iter()
                    .filter(|(_, e)| matches!(e, ServiceError::Apply { .. }));
                (&e.report, failed.map(|(name, _)| name.as_str()).collect())
            }
        };
        let wanted: BTreeSet<&str> = report
            .applied
            .iter()
            .chain(&report.unchanged)
            .map(String::as_str)
            .chain(failed)
            .collect();
        self.services
            .retain(|name, _| wanted.contains(name.as_str()));
        for svc in &report.written {
            let (Some(name), Some(namespace)) = (&svc.metadata.name, &svc.metadata.namespace)
            else {
                continue;
            };
            let based_on = shows(store, namespace, name);
            let version = svc.metadata.resource_version.clone();
            self.services
                .record(name.clone(), based_on, svc.clone(), version);
        }
    }

    /// Writes still waited for.
    pub fn len(&self) -> usize {
        self.services.len()
    }

    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }

    /// `store` with every remembered write the store does not show yet put in
    /// place of the watched copy (or added), for [`super::desired_services`].
    /// Forgets the writes the store has caught up with: it shows our write's
    /// version, or another that carries everything it set. A watched copy that
    /// lacks what we set (someone else changed it, or it is gone) is not caught
    /// up: the reconcile applies ours again, and [`RecentWrites::record`]
    /// replaces or forgets it. With nothing trailing (most passes) that is
    /// `store` itself, not a copy of it.
    pub fn overlay<'s>(&mut self, store: &'s Store, namespace: &str) -> Cow<'s, Store> {
        self.services.retain(|_, s| is_edge_service(s, namespace));
        let watched = |name: &String| shows(store, namespace, name);
        let covers = |name: &String, written: &Service| {
            store
                .get::<Service>(namespace, name)
                .is_some_and(|w| up_to_date(written, w))
        };
        let mut trailing = self.services.trailing(watched, covers).peekable();
        if trailing.peek().is_none() {
            return Cow::Borrowed(store);
        }
        let mut out = store.clone();
        for (_, written) in trailing {
            out.insert(written.clone());
        }
        Cow::Owned(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{ServiceConfig, allocations, desired_services};
    use aether_ir::{Ir, ObjectRef};
    use gateway_api::apis::experimental::gateways::Gateway;
    use gateway_api::apis::standard::gatewayclasses::GatewayClass;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn mk_store(gateways: &[&str]) -> Store {
        let mut store = Store::default();
        store.insert::<GatewayClass>(
            serde_json::from_value(json!({"metadata": {"name": "aether"},
                "spec": {"controllerName": "gateway.aether.io/edge"}}))
            .unwrap(),
        );
        for g in gateways {
            store.insert::<Gateway>(
                serde_json::from_value(json!({
                    "metadata": {"namespace": "infra", "name": g},
                    "spec": {"gatewayClassName": "aether",
                             "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]},
                }))
                .unwrap(),
            );
        }
        store
    }

    /// What the API server would return for an applied Service.
    fn as_written(mut svc: Service, version: u64) -> Service {
        svc.metadata.resource_version = Some(version.to_string());
        svc
    }

    #[test]
    fn a_pass_before_the_watch_catches_up_keeps_the_allocations() {
        let cfg = ServiceConfig::default();
        let ns = cfg.namespace.clone();
        let mut recent = RecentWrites::default();
        // Pass 1: b gets 20000.
        let store = mk_store(&["b"]);
        let first = desired_services(&recent.overlay(&store, &ns), &Ir::default(), &cfg);
        let report = ReconcileReport {
            applied: vec![first[0].metadata.name.clone().unwrap()],
            written: vec![as_written(first[0].clone(), 10)],
            ..Default::default()
        };
        recent.record(&Ok(report), &store);
        // Pass 2: a (sorted first) appears, the watch has not shown b's Service.
        let store = mk_store(&["a", "b"]);
        let without = allocations(
            &store_with(&store, desired_services(&store, &Ir::default(), &cfg)),
            &ns,
        );
        assert_eq!(
            without[&ObjectRef::new("infra", "b")][&80],
            20001,
            "the hazard: b's port would move"
        );
        let second = desired_services(&recent.overlay(&store, &ns), &Ir::default(), &cfg);
        let got = allocations(&store_with(&store, second), &ns);
        assert_eq!(got[&ObjectRef::new("infra", "b")][&80], 20000);
        assert_eq!(got[&ObjectRef::new("infra", "a")][&80], 20001);
        assert_eq!(recent.len(), 1);

        // An older copy (another resourceVersion, without b's allocation) is
        // behind, whatever the versions look like: they are opaque.
        let mut older = store.clone();
        let mut stale = as_written(first[0].clone(), 11);
        stale.metadata.annotations = None;
        older.insert(stale);
        let _ = recent.overlay(&older, &ns);
        assert_eq!(recent.len(), 1, "still waiting");

        // The watch catches up: the write is forgotten.
        let mut caught_up = store.clone();
        caught_up.insert(as_written(first[0].clone(), 10));
        let _ = recent.overlay(&caught_up, &ns);
        assert!(recent.is_empty());

        // So is one the store shows as newer with everything it set.
        recent.record(
            &Ok(ReconcileReport {
                applied: vec![first[0].metadata.name.clone().unwrap()],
                written: vec![as_written(first[0].clone(), 12)],
                ..Default::default()
            }),
            &store,
        );
        let mut newer = store.clone();
        newer.insert(as_written(first[0].clone(), 9));
        let _ = recent.overlay(&newer, &ns);
        assert!(recent.is_empty(), "opaque: 9 after 12 is fine");
    }

    #[test]
    fn services_no_longer_wanted_are_forgotten() {
        let cfg = ServiceConfig::default();
        let store = mk_store(&["a", "b"]);
        let services = desired_services(&store, &Ir::default(), &cfg);
        let names: Vec<String> = services
            .iter()
            .map(|s| s.metadata.name.clone().unwrap())
            .collect();
        let mut recent = RecentWrites::default();
        recent.record(
            &Ok(ReconcileReport {
                applied: names.clone(),
                written: services.iter().map(|s| as_written(s.clone(), 5)).collect(),
                ..Default::default()
            }),
            &store,
        );
        assert_eq!(recent.len(), 2);
        // Next pass: a's apply failed (kept: it may still be in flight), b's
        // Gateway is gone (forgotten, whether or not its delete went through).
        let failure = crate::service::reconcile::ServiceError::Apply {
            kind: "Service",
            namespace: cfg.namespace.clone(),
            name: names[0].clone(),
            gateway: None,
            source: kube::Error::LinesCodecMaxLineLengthExceeded,
        };
        recent.record(
            &Err(ReconcileErrors {
                errors: BTreeMap::from([(names[0].clone(), failure)]),
                report: ReconcileReport::default(),
            }),
            &store,
        );
        assert_eq!(recent.len(), 1);
        let empty = Store::default();
        let overlaid = recent.overlay(&empty, &cfg.namespace);
        let kept: Vec<&String> = overlaid.all::<Service>().keys().map(|k| &k.name).collect();
        assert_eq!(kept, vec![&names[0]]);
        recent.record(&Ok(ReconcileReport::default()), &store);
        assert!(recent.is_empty());
    }

    fn store_with(store: &Store, services: Vec<Service>) -> Store {
        let mut out = store.clone();
        for s in services {
            out.insert(s);
        }
        out
    }
}
