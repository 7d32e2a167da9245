//! Kubernetes mode: the store fed by watches, and what the leader writes back.
//!
//! ```text
//!  discovery (served Gateway API versions) ─┐
//!  kube-apiserver ──watch (per kind, at the served version)──► Index ──(all kinds listed)──► Store generations
//!                                                                                             │
//!                          status writer (at the served version) ◄── duties::Join (assemble) ◄─┘ (translate, fleet ACKs, addresses)
//!  duties::reconcile_services (leader): one edge Service per served Gateway
//!  xbackend_service::run (leader): one headless Service per EndpointSelector XBackend
//! ```

pub mod agent_token;
pub mod backoff;
pub mod convergence;
pub mod discovery;
pub mod duties;
pub mod events;
pub mod finalizer;
pub mod fleet_doc;
pub mod index;
pub mod leader;
pub mod pods;
pub mod recent;
pub mod service;
pub mod status;
pub mod trust_bundles;
pub mod watch;
pub mod xbackend_service;

pub use discovery::ServedVersions;
pub use index::Index;
