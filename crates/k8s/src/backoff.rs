//! Retry pacing, owned once for every loop of the agent that writes to the API
//! server: after a failed pass wait, doubling from [`Backoff::MIN`] up to
//! [`Backoff::MAX`]; a pass that goes through starts the next failure at the
//! minimum again.
//!
//! ```text
//!  failed ─► wait 200 ms ─► failed ─► wait 400 ms ─► … ─► wait 10 s ─► 10 s …
//!  succeeded ─► the next failure waits 200 ms again
//! ```

use std::time::Duration;

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

    #[test]
    fn doubles_to_the_cap_and_starts_over_after_a_success() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = (0..8).map(|_| b.failed().as_millis() as u64).collect();
        assert_eq!(waits, [200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]);
        b.succeeded();
        assert_eq!(b.failed(), Backoff::MIN);
    }
}
