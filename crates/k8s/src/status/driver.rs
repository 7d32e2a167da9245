//! The status loop: debounce, recompute from the latest inputs, write, back off.
//!
//! ```text
//!   leader? ──no──► wait for leadership
//!     │yes
//!   inputs changed ─► settle (DEBOUNCE quiet, at most MAX_DELAY) ─► patches ─► write
//!     ▲                                                                      │
//!     ├───────────── ok: wait for the next change ◄──────────────────────────┤
//!     └───────────── failed: sleep backoff (200 ms, doubling, ≤ 10 s) ◄───────┘
//!                    then recompute from whatever is latest by then
//! ```
//!
//! One batch is in flight at a time. Every pass recomputes from the whole latest
//! input, so a retry never re-sends a stale status and inputs that changed during
//! a write or a backoff are picked up. Writes happen only while `is_leader` says
//! so; losing leadership mid-backoff stops the retries.

use super::patch::StatusInputs;
use super::writer::StatusWriter;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until};
use tracing::{debug, warn};

/// Quiet time after the last input change before a batch starts.
pub const DEBOUNCE: Duration = Duration::from_millis(100);
/// A burst of changes delays a batch by at most this much.
pub const MAX_DELAY: Duration = Duration::from_millis(500);
pub const BACKOFF_MIN: Duration = Duration::from_millis(200);
pub const BACKOFF_MAX: Duration = Duration::from_secs(10);

/// Runs until either input channel closes.
pub async fn run(
    client: Client,
    mut inputs: watch::Receiver<Arc<StatusInputs>>,
    mut is_leader: watch::Receiver<bool>,
    writer: Arc<StatusWriter>,
) {
    let mut backoff = BACKOFF_MIN;
    loop {
        while !*is_leader.borrow_and_update() {
            if is_leader.changed().await.is_err() {
                return;
            }
        }
        let latest = inputs.borrow_and_update().clone();
        let patches = writer.patches(&latest, &now());
        let failed = if patches.is_empty() {
            false
        } else {
            let n = patches.len();
            match writer.write(&client, patches).await {
                Ok(report) => {
                    debug!(
                        written = report.written.len(),
                        gone = report.gone.len(),
                        "status batch written"
                    );
                    false
                }
                Err(e) => {
                    warn!(failed = e.failures.len(), of = n, retry_in = ?backoff, error = %e, "status batch failed; retrying");
                    true
                }
            }
        };
        if failed {
            tokio::select! {
                _ = sleep(backoff) => {}
                r = is_leader.changed() => if r.is_err() { return },
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
            continue;
        }
        backoff = BACKOFF_MIN;
        tokio::select! {
            r = inputs.changed() => {
                if r.is_err() || !settle(&mut inputs).await {
                    return;
                }
            }
            r = is_leader.changed() => if r.is_err() { return },
        }
    }
}

/// Waits until the inputs have been quiet for [`DEBOUNCE`] (or [`MAX_DELAY`] has
/// passed); `false` if the channel closed.
async fn settle(inputs: &mut watch::Receiver<Arc<StatusInputs>>) -> bool {
    let deadline = Instant::now() + MAX_DELAY;
    loop {
        let quiet = (Instant::now() + DEBOUNCE).min(deadline);
        tokio::select! {
            r = inputs.changed() => {
                if r.is_err() {
                    return false;
                }
                if Instant::now() >= deadline {
                    return true;
                }
            }
            _ = sleep_until(quiet) => return true,
        }
    }
}

/// Now, to the second (the precision the API server stores).
fn now() -> Time {
    let t = Timestamp::now();
    Time(Timestamp::from_second(t.as_second()).unwrap_or(t))
}
