//! The process's one metrics registry, built once per mode, encoded on `/metrics`.
//!
//! ```text
//!  Registry (root)
//!   ├─ process_*               ProcessCollector: /proc/self at each scrape
//!   ├─ aether_edge_heap_*      AllocatorCollector: jemalloc's stats at each scrape
//!   ├─ aether_ads_*            Fleet::metrics().register   (ADS counters)
//!   └─ aether_edge_*           build_info, pipeline Stats, and per mode:
//!        standalone:  ConfigProblems (the config directory)
//!        Kubernetes:  status writer, Services, report refusals, served kinds,
//!                     leader; LeaderOnly(convergence, fleet_envoy_connected)
//! ```
//!
//! Each component owns typed handles (counters, gauges, histograms, and
//! `aether_metrics::Series` of them for labelled series)
//! or a collector that reads its state at scrape time, and registers them
//! under its prefix; nothing formats exposition text by hand. Counters are
//! registered without `_total`: the encoders add it. `Registry::register`
//! ends a help text with a period itself, so ours have none there.
//!
//! `/metrics` answers in OpenMetrics 1.0 to a client that asks for it
//! (Prometheus does, in its `Accept` header), and in the Prometheus text format
//! 0.0.4 otherwise (curl, older scrapers): the same registry, the same series
//! names; 0.0.4 writes histogram bounds as before (`le="1"`, OpenMetrics
//! `le="1.0"`).

mod allocator;
mod process;

pub use allocator::AllocatorCollector;
pub use process::ProcessCollector;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

/// The `Content-Type` of an OpenMetrics 1.0 text answer.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A new root registry with what every mode serves: process and heap
/// metrics and `aether_edge_build_info{version,commit} 1`.
pub fn registry() -> Registry {
    let mut root = Registry::default();
    root.register_collector(Box::new(ProcessCollector));
    root.register_collector(Box::new(AllocatorCollector));
    let build = Info::new([
        ("version", env!("CARGO_PKG_VERSION")),
        ("commit", env!("AETHER_EDGE_COMMIT")),
    ]);
    root.sub_registry_with_prefix("aether_edge").register(
        "build",
        "The version and commit of this binary (always 1)",
        build,
    );
    root
}

/// `registry` encoded for a client whose `Accept` header is `accept`: the
/// content type and the body.
pub fn encode(registry: &Registry, accept: Option<&str>) -> (&'static str, String) {
    let mut body = String::new();
    let openmetrics = accept.is_some_and(|a| a.contains("application/openmetrics-text"));
    // Writing to a String cannot fail; a collector's error would only cut
    // the answer short.
    let (content_type, result) = if openmetrics {
        let r = prometheus_client::encoding::text::encode(&mut body, registry);
        (OPENMETRICS, r)
    } else {
        let r = prometheus_client::encoding::prometheus_text::encode(&mut body, registry);
        (
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            r,
        )
    };
    if let Err(e) = result {
        tracing::warn!(error = %e, "encoding the metrics failed");
    }
    (content_type, body)
}

/// `aether_edge_leader`: 1 on the agent that leads (writes status and Services).
#[derive(Debug)]
pub struct Leading(pub watch::Receiver<bool>);

impl Collector for Leading {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let gauge = ConstGauge::new(i64::from(*self.0.borrow()));
        gauge.encode(encoder.encode_descriptor(
            "leader",
            "Whether this agent leads (writes status and Services).",
            None,
            MetricType::Gauge,
        )?)
    }
}

/// A collector shown only while this agent leads: the fleet as the leader
/// joins it (a follower's join would be its own node only).
#[derive(Debug)]
pub struct LeaderOnly<C> {
    pub leading: watch::Receiver<bool>,
    pub inner: C,
}

impl<C: Collector> Collector for LeaderOnly<C> {
    fn encode(&self, encoder: DescriptorEncoder) -> std::fmt::Result {
        if *self.leading.borrow() {
            self.inner.encode(encoder)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry_leading(leads: bool) -> Registry {
        let mut r = registry();
        let (_, leading) = watch::channel(leads);
        let edge = r.sub_registry_with_prefix("aether_edge");
        edge.register_collector(Box::new(Leading(leading.clone())));
        let inner = Leading(leading.clone());
        edge.sub_registry_with_prefix("only")
            .register_collector(Box::new(LeaderOnly { leading, inner }));
        r
    }

    #[test]
    fn both_formats_name_the_same_series_and_only_openmetrics_ends_with_eof() {
        let r = registry_leading(true);
        let (plain_type, plain) = encode(&r, None);
        let (om_type, om) = encode(&r, Some("application/openmetrics-text;version=1.0.0,*/*"));
        assert!(plain_type.starts_with("text/plain; version=0.0.4"));
        assert_eq!(om_type, OPENMETRICS);
        assert!(om.ends_with("# EOF\n"), "{om}");
        assert!(!plain.contains("# EOF"), "{plain}");
        let commit = env!("AETHER_EDGE_COMMIT");
        let build = format!(
            "aether_edge_build_info{{version=\"{}\",commit=\"{commit}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        );
        for text in [&plain, &om] {
            assert!(text.contains(&build), "{text}");
            assert!(text.contains("aether_edge_leader 1\n"), "{text}");
            assert!(text.contains("aether_edge_only_leader 1\n"), "{text}");
        }
        let samples = |text: &str| -> Vec<String> {
            let mut names: Vec<String> = text
                .lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.split([' ', '{']).next())
                .map(String::from)
                .collect();
            names.sort();
            names
        };
        assert_eq!(samples(&plain), samples(&om));
    }

    #[test]
    fn a_follower_shows_no_leader_only_series() {
        let (_, text) = encode(&registry_leading(false), None);
        assert!(text.contains("aether_edge_leader 0\n"), "{text}");
        assert!(!text.contains("aether_edge_only_"), "{text}");
    }
}
