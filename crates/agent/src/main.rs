//! `aether-edge`: the edge data-plane controller of the aether platform.
//!
//! An Envoy xDS control plane driven by Gateway API objects. See `aether-edge --help`.

mod admin;
mod cli;
mod explain;
mod fleet_cmd;
mod kubernetes;
mod logging;
mod pipeline;
mod serve;
mod source;
mod standalone;

fn main() -> std::process::ExitCode {
    cli::main()
}
