//! What the status writer counts: typed handles, registered in the binary's
//! registry, read back by tests.
//!
//! ```text
//!  StatusWriter::write ──per object──► writes{kind, result} (ok | error | gone)
//!                      └─per batch───► batches_failed, follow (report → batch written)
//!  StatusWriter::patches ────────────► unchanged (no write needed)
//! ```

use super::patch::StatusKind;
use aether_metrics::Series;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::Duration;

/// Upper bounds of `aether_edge_status_follow_seconds`, in seconds.
pub const FOLLOW_BUCKETS: [f64; 10] = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5];

/// The result label of one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteResult {
    Ok,
    Error,
    /// The object was deleted meanwhile (404): not a failure.
    Gone,
}

impl WriteResult {
    pub const ALL: [WriteResult; 3] = [WriteResult::Ok, WriteResult::Error, WriteResult::Gone];

    pub fn as_str(self) -> &'static str {
        match self {
            WriteResult::Ok => "ok",
            WriteResult::Error => "error",
            WriteResult::Gone => "gone",
        }
    }
}

type Labels = [(&'static str, &'static str); 2];

fn labels(kind: StatusKind, result: WriteResult) -> Labels {
    [("kind", kind.as_str()), ("result", result.as_str())]
}

/// The writer's counters (cheap to clone: every handle is shared).
#[derive(Debug, Clone)]
pub struct StatusMetrics {
    writes: Series<Labels, Counter>,
    unchanged: Counter,
    batches_failed: Counter,
    follow: Histogram,
}

impl Default for StatusMetrics {
    fn default() -> Self {
        let writes = StatusKind::ALL
            .into_iter()
            .flat_map(|kind| WriteResult::ALL.map(|result| labels(kind, result)));
        StatusMetrics {
            writes: Series::new(writes),
            unchanged: Counter::default(),
            batches_failed: Counter::default(),
            follow: Histogram::new(FOLLOW_BUCKETS),
        }
    }
}

impl StatusMetrics {
    /// `aether_edge_status_*` under a registry prefixed `aether_edge`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "status_writes",
            "Status subresource writes by kind and result",
            self.writes.clone(),
        );
        registry.register(
            "status_unchanged",
            "Objects whose status already matched the plan (no write)",
            self.unchanged.clone(),
        );
        registry.register(
            "status_batches_failed",
            "Status batches with at least one failed write (requeued)",
            self.batches_failed.clone(),
        );
        registry.register(
            "status_follow_seconds",
            "From a fleet report changing what is served to the status batch that follows it being written",
            self.follow.clone(),
        );
    }

    pub(super) fn written(&self, kind: StatusKind, result: WriteResult) {
        self.writes.get(&labels(kind, result)).inc();
    }

    pub(super) fn unchanged_by(&self, n: usize) {
        self.unchanged.inc_by(n as u64);
    }

    pub(super) fn batch_failed(&self) {
        self.batches_failed.inc();
    }

    pub(super) fn follow(&self, lag: Duration) {
        self.follow.observe(lag.as_secs_f64());
    }

    /// Writes of objects of `kind` with `result`.
    pub fn writes(&self, kind: StatusKind, result: WriteResult) -> u64 {
        self.writes.get(&labels(kind, result)).get()
    }

    /// Writes with `result`, every kind together.
    pub fn writes_of_any_kind(&self, result: WriteResult) -> u64 {
        StatusKind::ALL
            .into_iter()
            .map(|kind| self.writes(kind, result))
            .sum()
    }

    pub fn unchanged(&self) -> u64 {
        self.unchanged.get()
    }

    pub fn batches_failed(&self) -> u64 {
        self.batches_failed.get()
    }
}
