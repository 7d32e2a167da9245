//! The fleet's side of the hold-back (`crate::holdback`): what each node holds
//! and refused of route tables goes in, the snapshot to serve comes out, and
//! the refusals the held routes now answer for stop counting against their
//! Gateway.

use super::{Fleet, NodeState, nodes};
use crate::holdback::{HoldBack, NodeTables};
use crate::subscription::Versions;
use aether_xds::{ResourceType, Snapshot};
use std::sync::{Arc, MutexGuard};

impl Fleet {
    /// The snapshot to serve for `desired`: the routes Envoy refused held
    /// back (`crate::holdback`), remembered (see [`Fleet::remember`]). Call
    /// it on every new snapshot and every fleet change.
    pub fn serve(&self, desired: &Arc<Snapshot>) -> Arc<Snapshot> {
        let streams = self.streams();
        let tables: Vec<NodeTables> = nodes(&streams)
            .iter()
            .map(|(node, state)| state.tables(node))
            .collect();
        let (served, absorbed) = self.holdback().update(desired, &tables);
        if !absorbed.is_empty() {
            // The routes held answer for these refusals now, not their Gateway.
            for mut stream in self.shared.streams.iter_mut() {
                for (ty, nack) in &mut stream.refused {
                    if *ty == ResourceType::Route {
                        nack.rejected
                            .retain(|name, v| !absorbed.iter().any(|(t, av)| t == name && av == v));
                    }
                }
                stream.refused.retain(|(_, nack)| !nack.rejected.is_empty());
            }
            self.bump();
        }
        self.remember(&served);
        served
    }

    pub(super) fn holdback(&self) -> MutexGuard<'_, HoldBack> {
        self.shared
            .holdback
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl NodeState<'_> {
    /// What this node holds and refused of route tables (newest stream wins).
    fn tables(&self, node: &str) -> NodeTables {
        let mut acked = Versions::new();
        for s in &self.streams {
            if let Some(versions) = s.acked.get(&ResourceType::Route) {
                acked.extend(versions.iter().map(|(n, v)| (n.clone(), v.clone())));
            }
        }
        let refused = self
            .streams
            .iter()
            .flat_map(|s| &s.refused)
            .filter(|(ty, _)| *ty == ResourceType::Route)
            .flat_map(|(_, nack)| {
                nack.rejected
                    .iter()
                    .map(|(n, v)| (n.clone(), v.clone(), nack.message.clone()))
            })
            .collect();
        NodeTables {
            node: node.to_string(),
            acked,
            refused,
        }
    }
}
