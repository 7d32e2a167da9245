//! Counters of edge Service writes: typed handles registered in the binary's
//! registry.
//!
//! ```text
//!  reconcile result ──observe──► ServiceMetrics (counter handles) ──register──► Registry
//! ```

use super::reconcile::ServiceError;
use super::{ReconcileErrors, ReconcileReport};
use aether_metrics::Series;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

type Labels = [(&'static str, &'static str); 2];

fn write(op: &'static str, result: &'static str) -> Labels {
    [("op", op), ("result", result)]
}

/// Totals over every reconcile observed (shared; cheap to update and clone).
#[derive(Debug, Clone)]
pub struct ServiceMetrics {
    writes: Series<Labels, Counter>,
    unchanged: Counter,
    reconciles_failed: Counter,
}

impl Default for ServiceMetrics {
    fn default() -> Self {
        let writes = ["apply", "delete"]
            .into_iter()
            .flat_map(|op| ["ok", "error"].map(|result| write(op, result)));
        ServiceMetrics {
            writes: Series::new(writes),
            unchanged: Counter::default(),
            reconciles_failed: Counter::default(),
        }
    }
}

impl ServiceMetrics {
    /// `aether_edge_service_*` under a registry prefixed `aether_edge`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "service_writes",
            "Edge Service writes by operation and result",
            self.writes.clone(),
        );
        registry.register(
            "service_unchanged",
            "Edge Services already as desired (no write)",
            self.unchanged.clone(),
        );
        registry.register(
            "service_reconciles_failed",
            "Reconciles with at least one failed write (requeued)",
            self.reconciles_failed.clone(),
        );
    }

    /// Counts what one reconcile did, failures included.
    pub fn observe(&self, result: &Result<ReconcileReport, ReconcileErrors>) {
        let report = match result {
            Ok(report) => report,
            Err(errors) => {
                self.reconciles_failed.inc();
                for e in errors.errors.values() {
                    let op = match e {
                        ServiceError::Apply { .. } => "apply",
                        ServiceError::Delete { .. } => "delete",
                    };
                    self.writes.get(&write(op, "error")).inc();
                }
                &errors.report
            }
        };
        let add = |op, n: usize| self.writes.get(&write(op, "ok")).inc_by(n as u64);
        add("apply", report.applied.len());
        add("delete", report.deleted.len());
        self.unchanged.inc_by(report.unchanged.len() as u64);
    }

    /// Writes of `op` (`apply`, `delete`) with `result` (`ok`, `error`).
    pub fn writes(&self, op: &'static str, result: &'static str) -> u64 {
        self.writes.get(&write(op, result)).get()
    }

    pub fn unchanged(&self) -> u64 {
        self.unchanged.get()
    }

    pub fn reconciles_failed(&self) -> u64 {
        self.reconciles_failed.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn successes_and_failures_are_counted() {
        let m = ServiceMetrics::default();
        m.observe(&Ok(ReconcileReport {
            applied: vec!["a".into(), "b".into()],
            unchanged: vec!["c".into()],
            ..Default::default()
        }));
        let failure = ServiceError::Apply {
            kind: "Service",
            namespace: "aether-ingress".into(),
            name: "d".into(),
            gateway: None,
            source: kube::Error::LinesCodecMaxLineLengthExceeded,
        };
        m.observe(&Err(ReconcileErrors {
            errors: BTreeMap::from([("d".to_string(), failure)]),
            report: ReconcileReport {
                deleted: vec!["e".into()],
                ..Default::default()
            },
        }));
        assert_eq!(m.writes("apply", "ok"), 2);
        assert_eq!(m.writes("apply", "error"), 1);
        assert_eq!(m.writes("delete", "ok"), 1);
        assert_eq!(m.writes("delete", "error"), 0);
        assert_eq!((m.unchanged(), m.reconciles_failed()), (1, 1));
    }
}
