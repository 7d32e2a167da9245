//! Fleet ACK reports: the status gate across a DaemonSet of agents.
//!
//! ```text
//!  agent (node A) ── local Fleet ─► AckReport ──gRPC stream──┐
//!  agent (node B) ── local Fleet ─► AckReport ──gRPC stream──┼─► leader: Reports ─► join ─► AckState per Gateway
//!  leader's own node ─ local Fleet ─► AckReport ─(in process)─┘
//! ```
//!
//! Every agent translates the same store into the same snapshot, so a Gateway's
//! content hash is comparable across nodes: the leader calls a Gateway ACKed when
//! every node with a connected Envoy (and at least one) reports the hash the
//! leader computed. Reports are bounded: an agent sends its latest report at most
//! once per interval, in a compact form (`acked_snapshot`) once it is caught up.

pub mod auth;
pub mod client;
pub mod join;
pub mod local;
pub mod per_node;
mod recent;
pub mod server;

/// Generated from proto/aether/edge/v1/fleet.proto.
pub mod pb {
    tonic::include_proto!("aether.edge.v1");
}

pub use join::{Members, Reports};
pub use local::local_report;
pub use pb::AckReport;
pub use per_node::{EnvoyConnected, GatewayNodes, NodeState};

#[cfg(test)]
mod server_tests;
#[cfg(test)]
mod test_support;
