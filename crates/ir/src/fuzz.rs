//! The time-bounded fuzz driver of the crates' fuzz tests (feature `fuzz`).
//!
//! `make test` gives each target `AETHER_FUZZ_SECONDS` (default 3); `make fuzz`
//! gives each ten minutes.

use proptest::strategy::Strategy;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use std::time::{Duration, Instant};

/// Runs `check` on values of `strategy` until the fuzz time is spent, in
/// batches of 64 cases, each from its own fixed seed: a run is reproducible,
/// and a longer run goes on to new seeds. A failure is shrunk and panics.
pub fn fuzz_for<S: Strategy>(
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), TestCaseError>,
) -> usize {
    use proptest::test_runner::{RngAlgorithm, TestRng};
    let seconds = std::env::var("AETHER_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut batches: u64 = 0;
    while Instant::now() < deadline {
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&batches.to_le_bytes());
        let config = RunnerConfig {
            cases: 64,
            failure_persistence: None,
            ..RunnerConfig::default()
        };
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed);
        let mut runner = TestRunner::new_with_rng(config, rng);
        if let Err(e) = runner.run(&strategy, &check) {
            panic!("batch {batches}: {e}");
        }
        batches += 1;
    }
    batches as usize * 64
}
