//! Live-test kit: the real `aether-edge` binary (its path passed in by the test
//! crate, which alone knows it), a real Envoy, tiny backends and an HTTP/1.1
//! client, all killed when their handles drop; for Kubernetes mode, a network
//! namespace per test and readers of the status the agent writes.
//!
//! ```text
//!  test ─► isolated() ─► its own netns: lo up, POD_IP on lo          (netns.rs)
//!    │
//!    ├─ Backend::start / ::on(POD_IP) ◄── Envoy::start(bin, …) ◄─ADS─ Agent / KubeAgent (bin, …)
//!    │     backend.rs, http.rs                envoy.rs              agent.rs, kube_agent.rs
//!    ├─ ChildBackend (child.rs): a backend process, to kill -9          │ status
//!    ├─ AuthServer (auth_server.rs): an ext_authz HTTP server, allow on `x-allow: yes`
//!    ├─ traffic::Load / drive (traffic/): keep-alive clients while a Scenario changes the config
//!    ├─ eventually / wait_until (wait.rs) ◄── get_json, until_object, programmed … (status.rs)
//!    └─ mk_gateway, mk_route … (yaml.rs): the objects, as YAML
//! ```
//!
//! Every child process is a [`Proc`]: SIGKILLed and reaped on drop, its output in a
//! log file of the test's temp directory for the failure message.

mod agent;
mod auth_server;
mod backend;
mod child;
mod envoy;
mod grpc_backend;
mod http;
mod kube_agent;
mod netns;
mod proc;
mod status;
mod tls_backend;
pub mod traffic;
mod wait;
mod yaml;

pub use agent::{Agent, tcp_xds_flag};
pub use auth_server::{AuthServer, GrpcAuthServer};
pub use backend::{Backend, serve_forever, tcp_echo, udp_echo};
pub use child::ChildBackend;
pub use envoy::Envoy;
pub use grpc_backend::GrpcBackend;
pub use http::{Response, http_get, http_request, read_response, request_text};
pub use kube_agent::{KubeAgent, issue_report_token, snapshot_acked};
pub use netns::{
    NETNS_MARKER, POD_HOSTNAME, POD_IP, in_netns, isolated, isolated_main, isolated_standalone,
    runtime,
};
pub use proc::{Proc, free_port, temp_dir};
pub use status::{
    assign_load_balancer, base_yaml, cond, condition, edge_service, edge_services, get_json,
    given_cluster, lease_holder, our_parent, parent_accepted, programmed, public_service,
    public_services, regarding, route_accepted, service_ports, status_reason, until_event,
    until_leader, until_object, until_programmed,
};
pub use tls_backend::TlsBackend;
pub use wait::{eventually, median_p99, wait_until};
pub use yaml::{
    HTTP_80, mk_gateway, mk_gateway_of, mk_prefix_route, mk_route, mk_route_to, mk_service,
};
