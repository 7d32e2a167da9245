//! Counters of edge Service writes, for `/metrics`.
//!
//! ```text
//!  reconcile result ──observe──► ServiceMetrics (atomics) ──render──► Prometheus text
//! ```

use super::reconcile::ServiceError;
use super::{ReconcileErrors, ReconcileReport};
use std::sync::atomic::{AtomicU64, Ordering};

/// Totals over every reconcile observed (shared; cheap to update).
#[derive(Debug, Default)]
pub struct ServiceMetrics {
    applied: AtomicU64,
    apply_failed: AtomicU64,
    deleted: AtomicU64,
    delete_failed: AtomicU64,
    unchanged: AtomicU64,
    reconciles_failed: AtomicU64,
}

impl ServiceMetrics {
    /// Counts what one reconcile did, failures included.
    pub fn observe(&self, result: &Result<ReconcileReport, ReconcileErrors>) {
        let report = match result {
            Ok(report) => report,
            Err(errors) => {
                self.reconciles_failed.fetch_add(1, Ordering::Relaxed);
                for e in errors.errors.values() {
                    let counter = match e {
                        ServiceError::Apply { .. } => &self.apply_failed,
                        ServiceError::Delete { .. } => &self.delete_failed,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                &errors.report
            }
        };
        let add = |c: &AtomicU64, n: usize| c.fetch_add(n as u64, Ordering::Relaxed);
        add(&self.applied, report.applied.len());
        add(&self.deleted, report.deleted.len());
        add(&self.unchanged, report.unchanged.len());
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::from(
            "# HELP aether_edge_service_writes_total Edge Service writes by operation and result.\n\
             # TYPE aether_edge_service_writes_total counter\n",
        );
        for (op, result, c) in [
            ("apply", "ok", &self.applied),
            ("apply", "error", &self.apply_failed),
            ("delete", "ok", &self.deleted),
            ("delete", "error", &self.delete_failed),
        ] {
            out.push_str(&format!(
                "aether_edge_service_writes_total{{op=\"{op}\",result=\"{result}\"}} {}\n",
                get(c)
            ));
        }
        out.push_str(&format!(
            "# HELP aether_edge_service_unchanged_total Edge Services already as desired (no write).\n\
             # TYPE aether_edge_service_unchanged_total counter\n\
             aether_edge_service_unchanged_total {}\n\
             # HELP aether_edge_service_reconciles_failed_total Reconciles with at least one failed write (requeued).\n\
             # TYPE aether_edge_service_reconciles_failed_total counter\n\
             aether_edge_service_reconciles_failed_total {}\n",
            get(&self.unchanged),
            get(&self.reconciles_failed),
        ));
        out
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
        let text = m.render();
        for line in [
            "aether_edge_service_writes_total{op=\"apply\",result=\"ok\"} 2",
            "aether_edge_service_writes_total{op=\"apply\",result=\"error\"} 1",
            "aether_edge_service_writes_total{op=\"delete\",result=\"ok\"} 1",
            "aether_edge_service_writes_total{op=\"delete\",result=\"error\"} 0",
            "aether_edge_service_unchanged_total 1",
            "aether_edge_service_reconciles_failed_total 1",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
    }
}
