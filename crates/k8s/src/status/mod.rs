//! The status writer: the gated status plan, written back by the leader alone.
//!
//! ```text
//!  StatusInputs { gated plan, store, features } ──► patch::compute (pure)
//!        (watch of the latest)                        │ one SSA body per object whose
//!                                                     │ status differs (lastTransitionTime
//!                                                     ▼ kept unless the status flipped)
//!  is_leader ──────────────────────────────► run: debounce ─► StatusWriter::write
//!                                                     │ Patch::Apply on /status at the
//!                                                     │ kind's served version, field
//!                                                     │ manager "aether-edge", forced
//!                                                     ▼
//!                 every object tried; failures named, logged, counted (/metrics);
//!                 a failed object retried with its own backoff, from a fresh recompute
//! ```
//!
//! Wiring (the agent): publish the latest `Arc<StatusInputs>` on a `watch` whenever
//! the store, the plan or the fleet's ACKs change, then
//! `tokio::spawn(status::run(client, inputs, is_leader, writer.clone()))` and register
//! `writer.metrics()` in the binary's registry. `is_leader` comes from
//! [`crate::leader::LeaderElector::is_leader`] or [`crate::leader::always_leader`].
//!
//! Kinds: GatewayClass, Gateway, every route kind the plan has (HTTPRoute,
//! GRPCRoute, TLSRoute, TCPRoute, UDPRoute), ListenerSet (`listener_set.rs`) and
//! BackendTLSPolicy (`policy.rs`:
//! `status.ancestors`, shared like a route's parents), each at the version its CRD serves
//! ([`StatusInputs::served`], from [`crate::discovery`]).
//!
//! Ownership under server-side apply: a Gateway's and a GatewayClass's status are
//! ours field by field (conditions and listeners are maps keyed by type and name), so
//! a condition or listener we stop sending is dropped by the API server. A route's
//! `status.parents` is an atomic list shared with other controllers, so we send the
//! whole list: their entries exactly as read, then ours, with the route's
//! `resourceVersion` as a precondition so an entry another controller wrote in the
//! meantime is never overwritten (a conflict is retried from fresher state).

mod ancestors;
mod compute;
mod condition;
mod driver;
mod gateway;
mod listener_set;
pub mod metrics;
pub mod patch;
mod policy;
mod route;
mod writer;
mod xbackend;

#[cfg(test)]
mod identity_tests;
#[cfg(test)]
mod l4_tests;
#[cfg(test)]
mod settled_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;

pub use compute::{Computed, Settled, StatusInputs, compute, compute_over};
pub use driver::{DEBOUNCE, MAX_DELAY, run};
pub use metrics::{StatusMetrics, WriteResult};
pub use patch::{StatusKind, StatusPatch};
pub use writer::{FIELD_MANAGER, StatusWriter, WriteError, WriteErrors, WriteFailure, WriteReport};
