//! Builders the crate's tests share.

use crate::pb::AckReport;
use aether_ir::ObjectRef;
use aether_xds::{Resource, ResourceType, Snapshot};
use std::collections::{BTreeMap, BTreeSet};

/// A snapshot of one Gateway `ns/gw` whose one route table `rt` has this body.
pub fn mk_snapshot(route_body: &[u8]) -> Snapshot {
    let route = Resource::new("rt", ResourceType::Route.type_url(), route_body.to_vec());
    let resources = BTreeMap::from([(
        ResourceType::Route,
        BTreeMap::from([("rt".to_string(), route)]),
    )]);
    let members = BTreeMap::from([(
        ObjectRef::new("ns", "gw"),
        BTreeSet::from([(ResourceType::Route, "rt".to_string())]),
    )]);
    Snapshot::new(resources, members)
}

/// An empty report of `node`, whose Envoy is connected or not.
pub fn mk_report(node: &str, connected: bool) -> AckReport {
    AckReport {
        node: node.into(),
        envoy_connected: connected,
        ..Default::default()
    }
}
