//! What is wrong with the config directory now: `/readyz` and `/metrics` say it.
//!
//! ```text
//!  reload ──send_if_modified──► watch<Problems> ──► /readyz (one line per problem)
//!                                     └───────────► ConfigProblems (a collector, at each scrape):
//!                                                   aether_edge_config_broken,
//!                                                   aether_edge_config_file_problem{file},
//!                                                   aether_edge_config_files_from_state
//! ```

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use std::collections::BTreeSet;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Problems {
    /// One line per problem, each naming its file.
    pub lines: Vec<String>,
    /// Files served in the version saved before the restart.
    pub from_state: Vec<String>,
}

impl Problems {
    pub fn lines(&self) -> Vec<String> {
        let saved = self
            .from_state
            .iter()
            .map(|f| format!("{f}: the version served before the restart serves"));
        self.lines.iter().cloned().chain(saved).collect()
    }

    /// The files that do not load as they are, sorted.
    pub fn broken_files(&self) -> BTreeSet<&str> {
        self.lines
            .iter()
            .map(|l| l.split(':').next().unwrap_or_default())
            .collect()
    }
}

/// The directory's problems as gauges, read from the latest [`Problems`] at
/// each scrape (under a registry prefixed `aether_edge`): a file fixed leaves
/// no series behind.
#[derive(Debug)]
pub(super) struct ConfigProblems(pub tokio::sync::watch::Receiver<Problems>);

impl Collector for ConfigProblems {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let problems = self.0.borrow().clone();
        let files = problems.broken_files();
        ConstGauge::new(i64::from(!files.is_empty())).encode(encoder.encode_descriptor(
            "config_broken",
            "Whether a file of the config directory does not load as it is (it keeps its last good version).",
            None,
            MetricType::Gauge,
        )?)?;
        let mut family = encoder.encode_descriptor(
            "config_file_problem",
            "A file of the config directory that does not load as it is.",
            None,
            MetricType::Gauge,
        )?;
        for file in files {
            ConstGauge::new(1i64).encode(family.encode_family(&[("file", file)])?)?;
        }
        ConstGauge::new(problems.from_state.len() as i64).encode(encoder.encode_descriptor(
            "config_files_from_state",
            "Files served in the version saved before the restart.",
            None,
            MetricType::Gauge,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_broken_file_is_named_once_and_saved_files_are_told_apart() {
        let p = Problems {
            lines: vec![
                "a.yaml: line 3: bad indent".into(),
                "a.yaml: line 9: unknown kind".into(),
                "b \"q\".yaml: empty".into(),
            ],
            from_state: vec!["c.yaml".into()],
        };
        assert_eq!(
            p.broken_files().into_iter().collect::<Vec<_>>(),
            ["a.yaml", "b \"q\".yaml"]
        );
        assert_eq!(
            p.lines().last().unwrap(),
            "c.yaml: the version served before the restart serves"
        );
        assert!(Problems::default().broken_files().is_empty());
    }
}
