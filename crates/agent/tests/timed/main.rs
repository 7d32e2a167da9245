//! Kubernetes-mode tests that time what they see: an ACK shows in status within a
//! second (`truth_gate`), apply → Accepted p99 and how few status writes a burst
//! takes (`latency`). Timings on a machine shared with other tests say little, so
//! these run one at a time, with no other test beside them: cargo runs test
//! binaries one after another, and [`alone`] serializes the tests in this one.
//!
//! `cargo test -p aether-edge --test timed <module>::` runs one module.

#[path = "../support/mod.rs"]
mod support;

mod latency;
mod truth_gate;

/// Held for the whole of a test: one at a time in this binary.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A failed test poisons the lock; the next one still runs alone.
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
