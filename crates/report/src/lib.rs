//! Fleet ACK reports and their join: the status gate, for a fleet of any size.
//!
//! ```text
//!  Fleet (per node: what its Envoy ACKed)  ─ aether_ads
//!    └─ local_report(node, fleet, snapshot) per node ─► AckReport
//!         └─ join over the Gateway's members ─► Served per Gateway (aether_ir)
//!              └─ assemble ─► status (aether_gateway::assemble)
//!
//!  DaemonSet: each agent reports its node, the leader joins the last reports
//!  agent (node A) ── local Fleet ─► AckReport ──gRPC stream──┐
//!  agent (node B) ── local Fleet ─► AckReport ──gRPC stream──┼─► leader: Reports::served ─► join
//!  leader's own node ─ local Fleet ─► AckReport ─(in process)─┘
//!
//!  standalone: every Envoy connected to the one ADS server is a node
//!  Fleet ─► local_report per connected node ─► join (members: those nodes) = fleet_served
//! ```
//!
//! So each behaviour of the gate (a partial ACK, a NACK confined to its
//! Gateway, a refused route served as it was, an Envoy gone or not ACKed yet)
//! is decided once, in [`join`], and its text is worded once, in `assemble`.
//!
//! Every agent translates the same store into the same snapshot, so a Gateway's
//! content hash is comparable across nodes: the leader calls a Gateway ACKed when
//! every node with a connected Envoy (and at least one) reports the hash the
//! leader computed. Reports are bounded: an agent sends its latest report at most
//! once per interval, and only what changed since its last (`delta`). Pod
//! events can reach the leader and an agent coalesced differently, so their
//! snapshot versions may differ where their Gateways' hashes (which endpoints
//! do not move) agree; and route events too, so an agent may serve a Gateway
//! at a hash the leader never had. Its report lists every part its Envoy
//! serves, and the leader reads it route by route from the last hash of that
//! node it knew (`node_report`).

pub mod auth;
pub mod client;
pub mod join;
pub mod local;
mod node_report;
pub mod per_node;
mod recent;
pub mod server;
pub mod tls;

/// Generated from proto/aether/edge/v1/fleet.proto.
pub mod pb {
    tonic::include_proto!("aether.edge.v1");
}

pub use join::{Members, Reports};
pub use local::{fleet_served, local_report};
pub use pb::AckReport;
pub use per_node::{EnvoyConnected, GatewayNodes, NodeState};

#[cfg(test)]
mod server_tests;
#[cfg(test)]
mod test_support;
