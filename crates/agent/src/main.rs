//! `aether-edge`: the edge data-plane controller of the aether platform.
//!
//! An Envoy xDS control plane driven by Gateway API objects. See `aether-edge --help`.

mod admin;
mod args;
mod cli;
mod drain;
mod explain;
mod fleet_cmd;
mod kubernetes;
mod logging;
mod metrics;
mod pipeline;
mod serve;
mod source;
mod standalone;

/// jemalloc, not glibc's malloc: at 10,000 routes a reload spent about a third
/// of its time in glibc's malloc and free (consolidating and unlinking
/// chunks), and freed memory went back to the system less readily.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    // jemalloc's background thread purges freed pages after its decay time
    // (10 s) even while the process is idle; without it they go back only
    // when later allocations happen to purge them. Measured: RSS after a
    // spike of large files that were then removed, see benches/README.md.
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        eprintln!("warning: jemalloc background thread not started: {e}");
    }
    cli::main()
}
