//! Our own writes, laid over the store's Services until the watch shows them.

use super::RECENT_TTL;
use aether_ir::ObjectRef;
use k8s_openapi::api::core::v1::Service;
use std::collections::BTreeMap;
use std::time::Instant;

/// Our own writes, taken over the store's view until the watch shows them: a
/// Service created a moment ago and not yet in the store must not be created
/// twice, nor one just replaced be replaced again from its older version.
#[derive(Debug, Default)]
pub struct Recent {
    /// By (namespace, name): what the API server returned, the
    /// `resourceVersion` it replaced (`None`: created) and when.
    written: BTreeMap<ObjectRef, (Service, Option<String>, Instant)>,
}

impl Recent {
    fn key(svc: &Service) -> ObjectRef {
        ObjectRef::new(
            svc.metadata.namespace.clone().unwrap_or_default(),
            svc.metadata.name.clone().unwrap_or_default(),
        )
    }

    pub fn record(&mut self, written: Service, replaced: Option<String>, at: Instant) {
        self.written
            .insert(Self::key(&written), (written, replaced, at));
    }

    pub fn forget(&mut self, key: &ObjectRef) {
        self.written.remove(key);
    }

    pub fn is_empty(&self) -> bool {
        self.written.is_empty()
    }

    /// The store's Services with ours laid over them: a write stands while the
    /// store shows nothing newer (no Service by that name after a create, the
    /// very version it replaced after a replace), for at most [`RECENT_TTL`].
    pub fn overlay<'a>(
        &mut self,
        store: impl IntoIterator<Item = &'a Service>,
        now: Instant,
    ) -> Vec<Service> {
        let mut all: BTreeMap<ObjectRef, Service> = store
            .into_iter()
            .map(|s| (Self::key(s), s.clone()))
            .collect();
        self.written.retain(|key, (svc, replaced, at)| {
            let stale = match all.get(key) {
                None => replaced.is_none(),
                Some(seen) => replaced.is_some() && seen.metadata.resource_version == *replaced,
            };
            let keep = stale && now.duration_since(*at) < RECENT_TTL;
            if keep {
                all.insert(key.clone(), svc.clone());
            }
            keep
        });
        all.into_values().collect()
    }
}
