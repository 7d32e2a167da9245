//! Kubernetes mode: the store fed by watches, and what the leader writes back.
//!
//! ```text
//!  discovery (served Gateway API versions) ─┐
//!  kube-apiserver ──watch (per kind, at the served version)──► Index ──(all kinds listed)──► Store generations
//!                                                                                             │
//!                          status writer (at the served version) ◄── gated StatusPlan ◄──────┘ (translate, ACK gate)
//! ```

pub mod agent_token;
pub mod discovery;
pub mod index;
pub mod leader;
pub mod pods;
pub mod service;
pub mod status;
pub mod watch;

pub use discovery::ServedVersions;
pub use index::Index;
