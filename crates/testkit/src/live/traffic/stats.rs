//! Envoy's stats, read before and after a scenario: what moved explains it.

use std::collections::{BTreeMap, BTreeSet};

use crate::live::http_get;

/// Envoy's counters and gauges (admin `/stats`), by name.
#[derive(Debug, Clone, Default)]
pub struct EnvoyStats(pub BTreeMap<String, i64>);

/// The Envoy stats that explain lost requests and closed connections. A `*`
/// matches any part of a name; `http.admin.*` (our own reads) never counts.
/// `cluster.*` sums include `edge_xds`, the ADS cluster (its connections opened
/// are listed first: the agent reached again).
pub const DIAGNOSIS: &[&str] = &[
    "cluster.edge_xds.upstream_cx_total",
    "http.*.no_cluster",
    "http.*.no_route",
    "cluster.*.upstream_cx_none_healthy",
    "cluster.*.upstream_cx_connect_fail",
    "cluster.*.upstream_cx_destroy_remote_with_active_rq",
    "cluster.*.upstream_rq_retry",
    "cluster.*.upstream_rq_retry_success",
    "cluster.*.outlier_detection.ejections_enforced_total",
    "http.*.downstream_rq_5xx",
    "http.*.downstream_cx_drain_close",
    "http.*.downstream_cx_destroy_local_active_rq",
    "http.*.downstream_cx_destroy_remote_active_rq",
    "http.*.downstream_cx_protocol_error",
    "http.*.downstream_cx_idle_timeout",
    "http.*.downstream_rq_rx_reset",
    "http.*.downstream_rq_tx_reset",
    "http2.goaway_sent",
    "http2.rx_reset",
    "http2.tx_reset",
    "cluster.*.membership_change",
    "cluster_manager.cluster_added",
    "cluster_manager.cluster_modified",
    "cluster_manager.cluster_removed",
    "cluster_manager.cds.update_success",
    "cluster_manager.cds.update_rejected",
    "http.*.rds.*.update_success",
    "http.*.rds.*.update_rejected",
    "listener_manager.listener_added",
    "listener_manager.listener_modified",
    "listener_manager.listener_in_place_updated",
    "listener_manager.listener_removed",
    "listener_manager.lds.update_success",
    "listener_manager.lds.update_rejected",
    "sds.*.update_success",
];

/// Envoy's own time to apply an update, per xDS type, from its
/// `update_duration` histograms since it started (ms, cumulative quantiles;
/// the worst of several route tables): `rds 1.2/3.4/5.6 cds …` as p50/p99/max.
pub fn apply_times(admin: &str) -> String {
    let Ok(r) = http_get(admin, "localhost", "/stats?filter=update_duration", &[]) else {
        return String::new();
    };
    let mut worst: BTreeMap<&str, [f64; 3]> = BTreeMap::new();
    for line in r.body.lines() {
        let Some((name, quantiles)) = line.split_once(": ") else {
            continue;
        };
        let ty = match name {
            n if n.contains(".rds.") => "rds",
            n if n.starts_with("cluster_manager.cds.") => "cds",
            n if n.starts_with("listener_manager.lds.") => "lds",
            n if n.starts_with("sds.") => "sds",
            _ => continue,
        };
        let at = |q: &str| -> Option<f64> {
            let rest = quantiles.split(&format!("{q}(")).nth(1)?;
            let (_, cumulative) = rest.split_once(',')?;
            cumulative.split(')').next()?.parse().ok()
        };
        let (Some(p50), Some(p99), Some(max)) = (at("P50"), at("P99"), at("P100")) else {
            continue;
        };
        let w = worst.entry(ty).or_insert([0.0; 3]);
        for (slot, v) in w.iter_mut().zip([p50, p99, max]) {
            *slot = slot.max(v);
        }
    }
    worst
        .iter()
        .map(|(ty, [a, b, c])| format!("{ty} {a:.1}/{b:.1}/{c:.1}"))
        .collect::<Vec<_>>()
        .join("  ")
}

impl EnvoyStats {
    /// Envoy's stats now, from its admin at `admin`.
    pub fn read(admin: &str) -> EnvoyStats {
        let r = http_get(admin, "localhost", "/stats", &[]).expect("Envoy admin /stats");
        let stats = r
            .body
            .lines()
            .filter_map(|l| {
                let (name, value) = l.split_once(": ")?;
                Some((name.to_string(), value.trim().parse().ok()?))
            })
            .collect();
        EnvoyStats(stats)
    }

    /// What moved from `before` to `self`: the differences that are not 0.
    pub fn since(&self, before: &EnvoyStats) -> EnvoyStats {
        let names: BTreeSet<&String> = self.0.keys().chain(before.0.keys()).collect();
        EnvoyStats(
            names
                .into_iter()
                .filter_map(|n| {
                    let d = self.0.get(n).unwrap_or(&0) - before.0.get(n).unwrap_or(&0);
                    (d != 0).then(|| (n.clone(), d))
                })
                .collect(),
        )
    }

    /// The sum of the stats matching `pattern` (`*` for any part of a name).
    pub fn sum(&self, pattern: &str) -> i64 {
        self.0
            .iter()
            .filter(|(n, _)| !n.starts_with("http.admin.") && glob(pattern, n))
            .map(|(_, v)| v)
            .sum()
    }

    /// `pattern=value` for each of [`DIAGNOSIS`] that is not 0.
    pub fn diagnosis(&self) -> String {
        DIAGNOSIS
            .iter()
            .filter_map(|p| {
                let v = self.sum(p);
                (v != 0).then(|| format!("{p}={v}"))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters.
fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs() {
        assert!(glob("http.*.no_cluster", "http.edge_ls_x.no_cluster"));
        assert!(!glob("http.*.no_cluster", "http.edge_ls_x.no_cluster_x"));
        assert!(glob(
            "http.*.rds.*.update_success",
            "http.a.rds.edge_rt_b.update_success"
        ));
        assert!(glob(
            "cluster_manager.cluster_added",
            "cluster_manager.cluster_added"
        ));
        assert!(!glob(
            "cluster_manager.cluster_added",
            "cluster_manager.cluster_added2"
        ));
    }
}
