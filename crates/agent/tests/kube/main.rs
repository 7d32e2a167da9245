//! Kubernetes mode against a real kube-apiserver + etcd (`aether_testkit`), each
//! test in its own network namespace with its own API server, agent(s) and Envoy.
//! One binary: each module was its own before, and every one of them linked the
//! whole agent; libtest runs the modules' tests side by side.
//!
//! `cargo test -p aether-edge --test kube <module>::` runs one module.

#[path = "../support/mod.rs"]
mod support;

mod churn;
mod class_finalizer;
mod discovery;
mod fleet;
mod leader_memory;
mod long_name;
mod rbac;
mod report_auth;
mod restart;
mod routability;
mod route_status;
mod service;
mod service_l4;
mod services_many;
mod status_refused;
mod trust_bundle;
mod watch;
mod watch_expiry;
mod xbackend_route;
mod xbackend_service;
