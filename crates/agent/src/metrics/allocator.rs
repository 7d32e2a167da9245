//! The heap as the allocator (jemalloc) sees it, read at each scrape: what
//! the program holds, against what the process keeps resident for it. The
//! gap between `process_resident_memory_bytes` and `allocated` is the
//! binary, the stacks, and freed pages jemalloc has not given back yet
//! (Envoy's `server.memory_allocated` and `server.memory_physical_size` are
//! the same pair).
//!
//! ```text
//!  epoch::advance (refresh jemalloc's cached stats)
//!   ├─ stats::allocated ─► aether_edge_heap_allocated_bytes
//!   ├─ stats::active    ─► aether_edge_heap_active_bytes
//!   ├─ stats::resident  ─► aether_edge_heap_resident_bytes
//!   └─ stats::retained  ─► aether_edge_heap_retained_bytes
//! ```

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use tikv_jemalloc_ctl::{epoch, stats};

/// Registered at the root of the registry under `aether_edge_heap_*`.
#[derive(Debug)]
pub struct AllocatorCollector;

impl Collector for AllocatorCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        // The stats are a snapshot taken at the last epoch advance; a failure
        // leaves them out rather than serving stale numbers.
        if epoch::advance().is_err() {
            return Ok(());
        }
        let gauges = [
            (
                "aether_edge_heap_allocated_bytes",
                "Bytes the program holds allocated",
                stats::allocated::read(),
            ),
            (
                "aether_edge_heap_active_bytes",
                "Bytes in the allocator's active pages (allocated, rounded up to pages)",
                stats::active::read(),
            ),
            (
                "aether_edge_heap_resident_bytes",
                "Bytes of the allocator's pages resident in memory, freed pages not yet returned included",
                stats::resident::read(),
            ),
            (
                "aether_edge_heap_retained_bytes",
                "Bytes of virtual memory the allocator keeps mapped but returned to the system",
                stats::retained::read(),
            ),
        ];
        for (name, help, value) in gauges {
            let Ok(value) = value else { continue };
            let gauge = ConstGauge::new(value as f64);
            gauge.encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)?;
        }
        Ok(())
    }
}
