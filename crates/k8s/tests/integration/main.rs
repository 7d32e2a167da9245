//! This crate against real parts: a kube-apiserver + etcd (`aether_testkit`) for
//! the Service reconciler, the status writer, leader election and
//! version discovery, and Envoy for the Service-mode listeners. One binary, so
//! the crate's dependencies are linked once; libtest runs the modules side by side.
//!
//! `cargo test -p aether-k8s --test integration <module>::` runs one module.

mod service_apiserver;
mod service_envoy;
mod service_failures;
mod status_leader;
mod status_write;
mod support;
mod watch_discovery;
