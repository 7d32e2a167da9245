//! The reuse rules: when what the cache holds still stands for this
//! translation's inputs. The [`Translator`](super::Translator) asks these and
//! nothing else; each rule says what its result read.
//!
//! ```text
//!  route model   ◄─ the route object
//!  Gateway model ◄─ the Gateway object, the ports older Gateways hold
//!  Gateway unit  ◄─ its model's inputs, and the same route models at the same
//!                   parentRefs, in the same order
//!  route status  ◄─ its model, and the same parent statuses from the same units
//! ```
//!
//! Any shared object that changed empties the whole cache first
//! (`Translator::shared_objects`). EndpointSlices are no input of these:
//! only the clusters' endpoints read them, in the last phase.

use super::identity::{SameAs, same_input};
use super::{GatewayUnit, Shared};
use crate::port_claims::Taken;
use crate::route::RouteModel;
use aether_ir::ObjectRef;
use gateway_api::apis::experimental::gateways::Gateway;
use std::sync::Arc;

/// What a route's model was computed from.
pub(super) struct RouteRead {
    pub source: Shared,
}

impl RouteRead {
    /// The model stands while the route is the same.
    pub fn stands(&self, now: &Shared, same: SameAs) -> bool {
        same(&self.source, now)
    }
}

/// What a Gateway's model and unit were computed from.
pub(super) struct GatewayRead {
    pub source: Arc<Gateway>,
    /// The ports older Gateways hold (see `port_claims`).
    pub taken: Taken,
    /// (route model, parentRef index), in route order.
    pub inputs: Vec<(Arc<RouteModel>, usize)>,
}

impl GatewayRead {
    /// The model stands while the Gateway is the same and it loses the same
    /// ports to older Gateways.
    pub fn model_stands(&self, now: &Arc<Gateway>, lost: &Taken) -> bool {
        same_input(&self.source, now) && self.taken == *lost
    }

    /// The unit stands while the model does and its inputs are the same
    /// route models (the same `Arc`s) at the same parentRefs, in order.
    pub fn unit_stands(
        &self,
        now: &Arc<Gateway>,
        lost: &Taken,
        inputs: &[(Arc<RouteModel>, usize)],
    ) -> bool {
        self.model_stands(now, lost)
            && self.inputs.len() == inputs.len()
            && self
                .inputs
                .iter()
                .zip(inputs)
                .all(|(a, b)| Arc::ptr_eq(&a.0, &b.0) && a.1 == b.1)
    }
}

/// Where a route's parent statuses come from: (parentRef index, Gateway unit,
/// index in the unit's parents), sorted by parentRef index.
pub(super) type ParentSources = Vec<(usize, Arc<GatewayUnit>, usize)>;

/// A route's status stands while its parent statuses come from the same
/// parentRefs and are the same: from the same places of the same units (the
/// same `Arc`s), or equal where a unit was translated again (one route's
/// change on a shared Gateway leaves its other routes' statuses as they were:
/// the same `Arc`s from the Gateway's memo, which `==` tells apart without
/// reading them). `now` is (route, parentRef index, index into `units`,
/// index in that unit's parents), sorted by parentRef index.
pub(super) fn route_status_stands(
    was: &ParentSources,
    now: &[(usize, usize, usize, usize)],
    units: &[(&ObjectRef, Arc<GatewayUnit>)],
) -> bool {
    was.len() == now.len()
        && was.iter().zip(now).all(|(x, &(_, pi, u, at))| {
            let unit = &units[u].1;
            x.0 == pi
                && ((Arc::ptr_eq(&x.1, unit) && x.2 == at) || x.1.parents[x.2] == unit.parents[at])
        })
}

#[cfg(test)]
#[path = "reuse_tests.rs"]
mod tests;
