//! A metric family whose labelled series are all known up front.
//!
//! ```text
//!  Series::new([labels₁, labels₂, …])  ──► [(labels₁, Counter), (labels₂, Counter), …]
//!        │ inc/get: the series with those labels        (order as given, fixed)
//!        └─ registered in a prometheus-client Registry ──► encoded in that order
//! ```
//!
//! prometheus-client's `Family` keeps its series in a hash map, so a scrape
//! lists them in a different order from one process to the next, and a series
//! exists only once something touched it. A [`Series`] is given every label set
//! when it is made: each series reads 0 from the start (dashboards and `rate()`
//! see it before its first event) and a scrape lists them in the order given,
//! the same every time.
//!
//! ```
//! use aether_metrics::Series;
//! use prometheus_client::metrics::counter::Counter;
//! use prometheus_client::registry::Registry;
//!
//! let loads: Series<[(&str, &str); 1], Counter> =
//!     Series::new([[("result", "ok")], [("result", "error")]]);
//! loads.get(&[("result", "ok")]).inc();
//! assert_eq!(loads.get(&[("result", "ok")]).get(), 1);
//!
//! let mut registry = Registry::default();
//! registry.register("loads", "Loads by result", loads.clone());
//! let mut text = String::new();
//! prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
//! assert!(text.contains("loads_total{result=\"ok\"} 1\nloads_total{result=\"error\"} 0\n"));
//! ```

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::Arc;

/// A family of metrics `M`, one per label set `S`, fixed at construction.
/// Cheap to clone: clones share the same series.
#[derive(Debug)]
pub struct Series<S, M> {
    series: Arc<[(S, M)]>,
}

impl<S, M> Clone for Series<S, M> {
    fn clone(&self) -> Self {
        Series {
            series: self.series.clone(),
        }
    }
}

impl<S: PartialEq + std::fmt::Debug, M: Default> Series<S, M> {
    /// One series per label set, in this order (a label set given twice is
    /// one series).
    pub fn new(labels: impl IntoIterator<Item = S>) -> Self {
        let mut series: Vec<(S, M)> = Vec::new();
        for l in labels {
            if !series.iter().any(|(s, _)| *s == l) {
                series.push((l, M::default()));
            }
        }
        Series {
            series: series.into(),
        }
    }

    /// The series with `labels`.
    ///
    /// # Panics
    /// When `labels` is not one of the label sets the family was made with:
    /// a programming error, caught by the first test that counts it.
    pub fn get(&self, labels: &S) -> &M {
        self.series
            .iter()
            .find(|(s, _)| s == labels)
            .map(|(_, m)| m)
            .unwrap_or_else(|| panic!("no series {labels:?} in this family"))
    }
}

impl<S, M> EncodeMetric for Series<S, M>
where
    S: EncodeLabelSet,
    M: EncodeMetric + TypedMetric,
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, metric) in self.series.iter() {
            metric.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::registry::Registry;

    #[test]
    fn every_series_is_listed_in_the_order_given_and_clones_share_them() {
        let streams: Series<[(&str, &str); 1], Gauge> = Series::new([
            [("protocol", "sotw")],
            [("protocol", "delta")],
            [("protocol", "sotw")],
        ]);
        let shared = streams.clone();
        shared.get(&[("protocol", "delta")]).inc();
        assert_eq!(streams.get(&[("protocol", "delta")]).get(), 1);
        let mut registry = Registry::with_prefix("aether_ads");
        registry.register("connected_streams", "Streams open", streams);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert_eq!(
            text,
            "# HELP aether_ads_connected_streams Streams open.\n\
             # TYPE aether_ads_connected_streams gauge\n\
             aether_ads_connected_streams{protocol=\"sotw\"} 0\n\
             aether_ads_connected_streams{protocol=\"delta\"} 1\n\
             # EOF\n"
        );
    }

    #[test]
    #[should_panic(expected = "no series")]
    fn a_label_set_not_made_is_a_programming_error() {
        let s: Series<[(&str, &str); 1], Gauge> = Series::new([[("protocol", "sotw")]]);
        s.get(&[("protocol", "grpc")]);
    }
}
