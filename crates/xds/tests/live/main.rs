//! Live checks: a real Envoy runs our resources (as the static validation
//! bootstrap) in front of tiny backends, on 127.0.0.1 only: HTTP/1.1 routing
//! (`http1`), HTTP/2 without TLS (`h2c`), TLS termination (`tls`), client
//! certificates (`client_certificates`), TLS to backends (`upstream_tls`) and the
//! HTTPRoute features beyond matching (`filters`).
//!
//! `cargo test -p aether-xds --test live <module>::` runs one module.

#[path = "../common/mod.rs"]
mod common;

mod client_certificates;
mod filters;
mod h2c;
mod http1;
mod tls;
mod upstream_tls;
