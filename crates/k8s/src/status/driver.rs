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

#[cfg(test)]
mod tests {
    use super::*;
    use aether_gateway::{Config, Store, translate};

    const CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\n\
        metadata: {name: aether, generation: 1}\nspec: {controllerName: gateway.aether.io/edge}\n";

    fn mk_inputs() -> Arc<StatusInputs> {
        let mut store = Store::default();
        store.add_yaml("class.yaml", CLASS).unwrap();
        let config = Config::default();
        Arc::new(StatusInputs {
            plan: translate(&store, &config).status,
            store,
            supported_features: vec![],
            controller_name: config.controller_name,
        })
    }

    /// A client whose every request fails at once (nothing listens there).
    fn dead_client() -> Client {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}").parse().unwrap();
        Client::try_from(kube::Config::new(url)).unwrap()
    }

    fn failed_batches(writer: &StatusWriter) -> u64 {
        let text = writer.render_metrics();
        text.lines()
            .find_map(|l| l.strip_prefix("aether_edge_status_batches_failed_total "))
            .unwrap()
            .parse()
            .unwrap()
    }

    #[tokio::test]
    async fn writes_only_while_leader_and_backs_off_on_failure() {
        let writer = Arc::new(StatusWriter::new(Duration::from_secs(1), 2));
        let (inputs_tx, inputs) = watch::channel(mk_inputs());
        let (leader_tx, is_leader) = watch::channel(false);
        let task = tokio::spawn(run(dead_client(), inputs, is_leader, writer.clone()));

        tokio::time::sleep(Duration::from_millis(300)).await;
        inputs_tx.send(mk_inputs()).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(failed_batches(&writer), 0, "a follower never writes");

        // Leader: tries at once, then after 200, 400, 800 ms...: a handful of
        // attempts in 1.5 s, not a busy loop.
        leader_tx.send(true).unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let tries = failed_batches(&writer);
        assert!((2..=6).contains(&tries), "{tries} batches in 1.5 s");
        assert!(
            writer.render_metrics().contains(
                "aether_edge_status_writes_total{kind=\"GatewayClass\",result=\"error\"} "
            )
        );

        // Leadership lost: the retries stop.
        leader_tx.send(false).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let stopped_at = failed_batches(&writer);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(failed_batches(&writer), stopped_at);

        drop(leader_tx);
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("run ends when its inputs close")
            .unwrap();
    }
}
