//! The Aggregated Discovery Service: serves [`aether_xds::Snapshot`]s to Envoy over
//! SotW and Delta ADS and tracks, per node, what its Envoy ACKed or NACKed.
//!
//! ```text
//!  desired Snapshot ─► Fleet::serve (routes Envoy refused held back: `holdback`)
//!                          │
//!  watch<Arc<Snapshot>> ◄──┘──► server (tonic, one task per stream)
//!                               │  requests, snapshots
//!                               ▼
//!                           SotwStream / DeltaStream   (pure state machines)
//!                               │  responses ──► Envoy
//!                               │  Acked / Nacked events
//!                               ▼
//!                           Fleet (per node, per type: ACKed versions, last NACK)
//!                               └──► served_by(node): what that node's Envoy serves
//! ```
//!
//! This crate is the first step of the status gate, not the gate. There is one
//! path from an ACK to a status, the same for a standalone fleet of one (or a
//! few) Envoys and for a DaemonSet of a hundred:
//!
//! ```text
//!  Fleet (per node: what its Envoy ACKed)        this crate
//!    └─ local_report(node) per node ─► AckReport  aether_report::local
//!         └─ join over the Gateway's members      aether_report::join
//!              └─ Served per Gateway              aether_ir::Served
//!                   └─ assemble ─► status         aether_gateway::assemble
//! ```
//!
//! [`Fleet::gateway_state`] answers another question, whether every connected
//! Envoy holds a Gateway whole: what this crate's own tests wait on.
//!
//! Wiring it up:
//!
//! ```no_run
//! # async fn run(snapshots: tokio::sync::watch::Receiver<std::sync::Arc<aether_xds::Snapshot>>)
//! # -> Result<(), aether_ads::ServeError> {
//! let fleet = aether_ads::Fleet::new();
//! let server = aether_ads::AdsServer::new(snapshots, fleet.clone());
//! // `aether_report::fleet_served(&fleet, &snapshot)` (standalone) or each
//! // node's `aether_report::local_report` (an agent) feeds the status gate;
//! // `fleet.subscribe()` says when to look again.
//! aether_ads::serve("127.0.0.1:18000", server, std::future::pending()).await
//! # }
//! ```

pub mod delta;
pub mod event;
pub mod fleet;
pub mod gate;
pub mod holdback;
mod serve;
mod server;
pub mod sotw;
pub mod subscription;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod limits_tests;

pub use aether_ir::AckState;
pub use delta::DeltaStream;
pub use event::{Event, Nack, Output};
pub use fleet::{AdsMetrics, Fleet, FleetStream, FleetView, GatewayServed, Protocol};
pub use serve::{ServeError, XdsListener, bind, serve, serve_on};
pub use server::{AdsServer, DEFAULT_REMOVAL_GRACE, Limits};
pub use sotw::SotwStream;
pub use subscription::{Subscription, Versions};
