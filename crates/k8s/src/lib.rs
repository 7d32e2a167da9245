//! Kubernetes mode: the store fed by watches, and what the leader writes back.
//!
//! ```text
//!  kube-apiserver ──watch (per kind)──► Index ──(all kinds listed)──► Store generations
//!                                                                        │
//!                          status writer ◄── gated StatusPlan ◄──────────┘ (translate, ACK gate)
//! ```

pub mod index;
pub mod leader;
pub mod service;
pub mod status;
pub mod watch;

pub use index::Index;
