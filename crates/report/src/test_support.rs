//! Builders the crate's tests share.

use crate::pb::AckReport;

/// An empty report of `node`, whose Envoy is connected or not.
pub fn mk_report(node: &str, connected: bool) -> AckReport {
    AckReport {
        node: node.into(),
        envoy_connected: connected,
        ..Default::default()
    }
}
