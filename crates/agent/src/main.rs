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

/// How long freed pages stay before jemalloc gives them back: 1 s, not its
/// default 10. The agent's work comes in bursts (a reload, a change) with idle
/// time between, and at 10,000 routes the pages a change freed held the RSS
/// ~6 MiB higher for the next 10 s. Measured, at no cost to a change's
/// latency: benches/README.md. `_RJEM_MALLOC_CONF` set by the operator wins.
const DIRTY_DECAY_MS: isize = 1000;

/// Sets [`DIRTY_DECAY_MS`] for the arenas there are and those to come.
fn set_decay() -> Result<(), tikv_jemalloc_ctl::Error> {
    use tikv_jemalloc_ctl::{Access, AsName};
    b"arenas.dirty_decay_ms\0".name().write(DIRTY_DECAY_MS)?;
    for i in 0..tikv_jemalloc_ctl::arenas::narenas::read()? {
        // Only arenas already in use take it (the rest start with the default
        // set above), so a refusal here is expected.
        let name = format!("arena.{i}.dirty_decay_ms\0");
        let _ = name.as_bytes().name().write(DIRTY_DECAY_MS);
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    // jemalloc's background thread purges freed pages after their decay time
    // ([`DIRTY_DECAY_MS`]) even while the process is idle; without it they go back only
    // when later allocations happen to purge them. Measured: RSS after a
    // spike of large files that were then removed, see benches/README.md.
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        eprintln!("warning: jemalloc background thread not started: {e}");
    }
    if std::env::var_os("_RJEM_MALLOC_CONF").is_none()
        && let Err(e) = set_decay()
    {
        eprintln!("warning: jemalloc's decay time not set: {e}");
    }
    cli::main()
}

#[cfg(test)]
mod tests {
    use tikv_jemalloc_ctl::{Access, AsName};

    /// Fails if an arena in use, or one made after, kept jemalloc's default.
    #[test]
    fn freed_pages_go_back_after_the_decay_time_set() {
        super::set_decay().unwrap();
        let in_use: isize = b"arena.0.dirty_decay_ms\0".name().read().unwrap();
        assert_eq!(in_use, super::DIRTY_DECAY_MS);
        let later = std::thread::spawn(|| {
            // A new thread's allocations may take an arena made for it.
            let v: Vec<u8> = vec![1; 1 << 20];
            let arena: u32 = b"thread.arena\0".name().read().unwrap();
            let name = format!("arena.{arena}.dirty_decay_ms\0");
            let decay: isize = name.as_bytes().name().read().unwrap();
            drop(v);
            decay
        });
        assert_eq!(later.join().unwrap(), super::DIRTY_DECAY_MS);
    }
}
