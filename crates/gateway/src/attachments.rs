//! One Gateway's attachments: which of its routes attach to which of its
//! listeners, keyed by (listener index, route index), the route index into
//! the Gateway's own route list.
//!
//! ```text
//!  attach (per parentRef) ──► counted ⊇ served ◄── reject_mixed_kinds (detach)
//!                                │         │
//!        listener status ◄───────┘         └──► route table (IR)
//!        (attachedRoutes)
//! ```

use crate::route::RouteModel;
use std::collections::BTreeSet;
use std::ops::RangeInclusive;
use std::sync::Arc;

/// One Gateway's attachments table.
#[derive(Debug, Clone, Default)]
pub struct Attachments {
    /// Attached by allowedRoutes and parentRef: counted in `attachedRoutes`,
    /// also when the route itself is not accepted.
    counted: BTreeSet<(usize, usize)>,
    /// Accepted there: served.
    served: BTreeSet<(usize, usize)>,
    /// Each route's `Kind/namespace/name`, as listener status lists it.
    names: Vec<Arc<str>>,
}

impl Attachments {
    /// An empty table for the Gateway's routes, in their order.
    pub fn new(routes: &[Arc<RouteModel>]) -> Self {
        Attachments {
            counted: BTreeSet::new(),
            served: BTreeSet::new(),
            names: routes.iter().map(|r| r.name.clone()).collect(),
        }
    }

    /// The routes served on listener `li`, in route order.
    pub fn served_on(&self, li: usize) -> impl Iterator<Item = usize> + '_ {
        self.served.range(on(li)).map(|&(_, ri)| ri)
    }

    /// The routes `attachedRoutes` counts on listener `li`, by name.
    pub fn counted_on(&self, li: usize) -> BTreeSet<Arc<str>> {
        self.counted
            .range(on(li))
            .map(|&(_, ri)| self.names[ri].clone())
            .collect()
    }

    /// Route `ri` attaches to listener `li`: counted in its `attachedRoutes`.
    pub(crate) fn count(&mut self, li: usize, ri: usize) {
        self.counted.insert((li, ri));
    }

    /// Route `ri` is accepted on listener `li`: served there.
    pub(crate) fn serve(&mut self, li: usize, ri: usize) {
        self.served.insert((li, ri));
    }

    /// Route `ri` off every listener (it lost a conflict on this Gateway).
    pub(crate) fn detach(&mut self, ri: usize) {
        self.counted.retain(|&(_, r)| r != ri);
        self.served.retain(|&(_, r)| r != ri);
    }
}

/// Every (listener `li`, route) key.
fn on(li: usize) -> RangeInclusive<(usize, usize)> {
    (li, 0)..=(li, usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aether_ir::RouteKind;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn mk_route(kind: RouteKind, name: &str) -> Arc<RouteModel> {
        let key = aether_ir::ObjectRef::new("apps", name);
        let meta = ObjectMeta::default();
        Arc::new(RouteModel::new(kind, key, &meta, None, vec![]))
    }

    #[test]
    fn a_route_not_accepted_is_counted_but_not_served() {
        let routes = [
            mk_route(RouteKind::Http, "a"),
            mk_route(RouteKind::Grpc, "b"),
        ];
        let mut t = Attachments::new(&routes);
        t.counted.extend([(0, 0), (0, 1), (1, 1)]);
        t.served.extend([(0, 0), (1, 1)]);
        assert_eq!(
            t.counted_on(0),
            BTreeSet::from(["GRPCRoute/apps/b".into(), "HTTPRoute/apps/a".into()])
        );
        assert_eq!(t.served_on(0).collect::<Vec<_>>(), [0]);
        assert_eq!(t.served_on(1).collect::<Vec<_>>(), [1]);
        assert_eq!(t.served_on(2).count(), 0);
    }

    #[test]
    fn a_route_detached_leaves_every_listener() {
        let routes = [
            mk_route(RouteKind::Http, "a"),
            mk_route(RouteKind::Http, "b"),
        ];
        let mut t = Attachments::new(&routes);
        t.counted.extend([(0, 0), (0, 1), (1, 1)]);
        t.served.extend([(0, 0), (0, 1), (1, 1)]);
        t.detach(1);
        assert_eq!(t.counted_on(0), BTreeSet::from(["HTTPRoute/apps/a".into()]));
        assert_eq!(t.counted_on(1), BTreeSet::new());
        assert_eq!(t.served_on(0).collect::<Vec<_>>(), [0]);
        assert_eq!(t.served_on(1).count(), 0);
    }
}
