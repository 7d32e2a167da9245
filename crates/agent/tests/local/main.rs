//! No cluster: the command line, the deploy manifests, and standalone mode with a
//! real Envoy (routing, L4, certificate rotation, resilience). One binary: each module was its own
//! before, and every one of them linked the whole agent.
//!
//! `cargo test -p aether-edge --test local <module>::` runs one module.

#[path = "../support/mod.rs"]
mod support;

mod cli;
mod deploy;
mod live_change;
mod live_edits;
mod live_explain;
mod live_l4;
mod live_listener_filters;
mod live_resilience;
mod live_rotation;
mod live_routing;
mod live_trust_bundle;
mod live_xbackend;
