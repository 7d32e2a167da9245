//! Our own writes, laid over the store's Services until the watch shows them
//! ([`crate::recent`], the overlay the status writer and the edge Services use),
//! each for at most [`RECENT_TTL`].

use super::RECENT_TTL;
use crate::recent::{RecentWrites, Seen};
use aether_ir::ObjectRef;
use k8s_openapi::api::core::v1::Service;
use std::collections::BTreeMap;
use std::time::Instant;

/// Our own writes, taken over the store's view until the watch shows them: a
/// Service created a moment ago and not yet in the store must not be created
/// twice, nor one just replaced be replaced again from its older version.
#[derive(Debug, Default)]
pub struct Recent {
    /// What the API server returned, and when.
    written: RecentWrites<ObjectRef, (Service, Instant)>,
}

fn key(svc: &Service) -> ObjectRef {
    ObjectRef::new(
        svc.metadata.namespace.clone().unwrap_or_default(),
        svc.metadata.name.clone().unwrap_or_default(),
    )
}

impl Recent {
    /// `written` as the API server returned it, replacing the version
    /// `replaced` (`None`: created).
    pub fn record(&mut self, written: Service, replaced: Option<String>, at: Instant) {
        let based_on: Seen = replaced.map(Some);
        let version = written.metadata.resource_version.clone();
        self.written
            .record(key(&written), based_on, (written, at), version);
    }

    pub fn forget(&mut self, gone: &ObjectRef) {
        self.written.retain(|k, _| k != gone);
    }

    pub fn is_empty(&self) -> bool {
        self.written.is_empty()
    }

    /// The store's Services with ours laid over them: a write stands while the
    /// store shows what it replaced (nothing, after a create), for at most
    /// [`RECENT_TTL`]; a store showing anything else speaks for itself.
    pub fn overlay<'a>(
        &mut self,
        store: impl IntoIterator<Item = &'a Service>,
        now: Instant,
    ) -> Vec<Service> {
        let mut all: BTreeMap<ObjectRef, Service> =
            store.into_iter().map(|s| (key(s), s.clone())).collect();
        self.written
            .retain(|_, (_, at)| now.duration_since(*at) < RECENT_TTL);
        let shows = |k: &ObjectRef| all.get(k).map(|s| s.metadata.resource_version.clone());
        let trailing: Vec<Service> = self
            .written
            .trailing(shows, |_, _| true)
            .map(|(_, (svc, _))| svc.clone())
            .collect();
        for svc in trailing {
            all.insert(key(&svc), svc);
        }
        all.into_values().collect()
    }
}
