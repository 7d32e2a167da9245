//! The Aggregated Discovery Service: serves [`aether_xds::Snapshot`]s to Envoy over
//! SotW and Delta ADS, tracks what every Envoy ACKed or NACKed, and joins that into
//! a fleet view the status writer waits on.
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
//!                               └──► gateway_state(): Acked / Pending / Nacked(msg)
//! ```
//!
//! Wiring it up:
//!
//! ```no_run
//! # async fn run(snapshots: tokio::sync::watch::Receiver<std::sync::Arc<aether_xds::Snapshot>>)
//! # -> Result<(), aether_ads::ServeError> {
//! let fleet = aether_ads::Fleet::new();
//! let server = aether_ads::AdsServer::new(snapshots, fleet.clone());
//! // `fleet.gateway_state(&snapshot, &gateway)` gates status; `fleet.subscribe()`
//! // says when to look again.
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
