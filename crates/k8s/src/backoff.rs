//! Retry pacing, owned once for every loop of the agent that writes to the API
//! server: after a failed pass wait, doubling from [`Backoff::MIN`] up to
//! [`Backoff::MAX`]; a pass that goes through starts the next failure at the
//! minimum again.
//!
//! ```text
//!  failed ─► wait 200 ms ─► failed ─► wait 400 ms ─► … ─► wait 10 s ─► 10 s …
//!  succeeded ─► the next failure waits 200 ms again
//! ```
//!
//! The leader-only writers (the GatewayClass finalizer, the edge Services, the
//! XBackend Services) are one loop, [`run_writer`], around their own
//! [`Writer::pass`]:
//!
//! ```text
//!  ┌─► pass(leading) ── failed ──► wait Backoff ─────────────────────────┐
//!  │        └ went through (or not leading) ─► wait for a change of the   │
//!  │                 inputs or of leadership ─► SETTLE (a burst is one) ─┤
//!  └──────────────────────────────────────────────────────────────────────┘
//! ```

use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;

/// Coalesces bursts of changes before acting on them.
pub const SETTLE: Duration = Duration::from_millis(20);

/// A pass wrote some of what it had to, not all: try again after a [`Backoff`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed;

/// One leader-only loop that writes to the API server, as [`run_writer`] drives it.
pub trait Writer: Send {
    /// Takes the latest inputs (marking them seen) and, when `leading`, writes
    /// what they call for.
    fn pass(&mut self, leading: bool) -> impl Future<Output = Result<(), Failed>> + Send;
    /// Waits for the inputs to change; `false` once they never will (the agent
    /// is stopping).
    fn changed(&mut self) -> impl Future<Output = bool> + Send;
}

/// Runs `writer` until its inputs or `is_leader` close: a pass per change,
/// failed passes retried with [`Backoff`].
pub async fn run_writer(mut writer: impl Writer, mut is_leader: watch::Receiver<bool>) {
    let mut backoff = Backoff::default();
    loop {
        let leading = *is_leader.borrow_and_update();
        if writer.pass(leading).await.is_err() {
            backoff.sleep().await;
            continue;
        }
        backoff.succeeded();
        tokio::select! {
            alive = writer.changed() => if !alive { return },
            r = is_leader.changed() => if r.is_err() { return },
        }
        tokio::time::sleep(SETTLE).await;
    }
}

/// The wait before the next try of something that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: Self::MIN }
    }
}

impl Backoff {
    /// The first wait after a failure.
    pub const MIN: Duration = Duration::from_millis(200);
    /// The longest wait: a write that keeps failing is still retried this often.
    pub const MAX: Duration = Duration::from_secs(10);

    /// One more failure: how long to wait before trying again.
    pub fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = (wait * 2).min(Self::MAX);
        wait
    }

    /// A try went through: the next failure waits [`Backoff::MIN`].
    pub fn succeeded(&mut self) {
        self.next = Self::MIN;
    }

    /// Sleeps for the wait of one more failure.
    pub async fn sleep(&mut self) {
        tokio::time::sleep(self.failed()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Passes as told (`fail`), each one logged with its `leading`.
    struct Scripted {
        inputs: watch::Receiver<u32>,
        fail: Arc<Mutex<bool>>,
        log: Arc<Mutex<Vec<(u32, bool)>>>,
    }

    impl Writer for Scripted {
        async fn pass(&mut self, leading: bool) -> Result<(), Failed> {
            let input = *self.inputs.borrow_and_update();
            self.log.lock().unwrap().push((input, leading));
            if leading && *self.fail.lock().unwrap() {
                return Err(Failed);
            }
            Ok(())
        }
        async fn changed(&mut self) -> bool {
            self.inputs.changed().await.is_ok()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_writer_passes_per_change_retries_failures_and_ends_with_its_inputs() {
        let (inputs_tx, inputs) = watch::channel(1);
        let (leader_tx, is_leader) = watch::channel(false);
        let fail = Arc::new(Mutex::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let writer = Scripted {
            inputs,
            fail: fail.clone(),
            log: log.clone(),
        };
        let task = tokio::spawn(run_writer(writer, is_leader));
        let settle = || tokio::time::sleep(Duration::from_secs(1));
        settle().await;
        assert_eq!(*log.lock().unwrap(), [(1, false)], "one pass, then waits");
        leader_tx.send_replace(true);
        settle().await;
        assert_eq!(log.lock().unwrap().last(), Some(&(1, true)));
        // Failing: retried after 200, 400 ms … with nothing changed.
        *fail.lock().unwrap() = true;
        inputs_tx.send_replace(2);
        tokio::time::sleep(SETTLE + Backoff::MIN + Backoff::MIN * 2 + Duration::from_millis(1))
            .await;
        let tries = log.lock().unwrap().iter().filter(|p| p.0 == 2).count();
        assert_eq!(tries, 3, "{:?}", log.lock().unwrap());
        *fail.lock().unwrap() = false;
        settle().await;
        let passes = log.lock().unwrap().len();
        settle().await;
        assert_eq!(
            log.lock().unwrap().len(),
            passes,
            "went through: waits again"
        );
        drop(inputs_tx);
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("the loop ends with its inputs")
            .unwrap();
    }

    #[test]
    fn doubles_to_the_cap_and_starts_over_after_a_success() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = (0..8).map(|_| b.failed().as_millis() as u64).collect();
        assert_eq!(waits, [200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]);
        b.succeeded();
        assert_eq!(b.failed(), Backoff::MIN);
    }
}
