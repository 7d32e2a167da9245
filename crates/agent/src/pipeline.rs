//! Store → translate → build → publish.
//!
//! ```text
//!  Store ─► aether_gateway::translate ─► (Ir, StatusPlan) ─► aether_xds::build ─► Snapshot
//!                                                                                    │
//!                            watch<Option<Arc<Published>>> ◄── only when it changed ─┘
//! ```
//!
//! Every change translates and builds the whole store, through caches keyed by
//! their inputs (`aether_gateway::incremental`, `aether_xds::Builder`): what an
//! edit did not touch is reused, already encoded, and the output is exactly a
//! full recompute's. The ADS server's per-resource versions keep unchanged
//! resources from being re-sent.
//! Nothing is published before the first store that loaded completely, so an
//! empty or half-read source never reaches a running Envoy.

use aether_gateway::incremental::Translator;
use aether_gateway::{Config, StatusPlan, Store, Translation};
use aether_ir::{Ir, ObjectRef};
use aether_metrics::Series;
use aether_xds::{Builder, Snapshot};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// One published generation: the snapshot the ADS server serves, the status plan
/// it was translated with, and the IR as translated.
#[derive(Debug)]
pub struct Published {
    pub snapshot: Arc<Snapshot>,
    pub status: StatusPlan,
    /// The IR as translated, before any mode-specific rewrite (port allocations).
    pub ir: Arc<Ir>,
    /// Gateways the rewrite left (partly) out of the snapshot, and why. Published
    /// with the snapshot it describes: status read from one publication can never
    /// call a listener served that this snapshot lacks.
    pub left_out: BTreeMap<ObjectRef, String>,
    /// The store this was translated from (shared, not copied), for `explain`.
    pub store: Arc<Store>,
}

impl aether_k8s::duties::Translated for Published {
    fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }
    fn plan(&self) -> &StatusPlan {
        &self.status
    }
    fn ir(&self) -> &Arc<Ir> {
        &self.ir
    }
    fn left_out(&self) -> &BTreeMap<ObjectRef, String> {
        &self.left_out
    }
}

struct Engine {
    translator: Translator,
    builder: Builder,
}

/// What the pipeline counts (cheap to clone: every handle is shared). The
/// labelled series are held one handle each, so a caller counts a load with
/// `loads_ok.inc()`.
#[derive(Debug, Clone)]
pub struct Stats {
    loads: Series<[(&'static str, &'static str); 1], Counter>,
    pub loads_ok: Counter,
    pub loads_failed: Counter,
    pub publishes: Counter,
    /// Seconds the last translate + build took.
    pub build_seconds: Gauge<f64, AtomicU64>,
    /// Each apply's translate, and its build of Envoy resources, apart.
    translate: Histogram,
    snapshot_build: Histogram,
    refused: Series<[(&'static str, &'static str); 1], Counter>,
    /// Loads not published because they had no Gateway while the running
    /// configuration had some.
    pub refused_empty: Counter,
}

impl Default for Stats {
    fn default() -> Self {
        let loads: Series<_, Counter> = Series::new([[("result", "ok")], [("result", "error")]]);
        let refused: Series<_, Counter> = Series::new([[("reason", "no_gateways")]]);
        let loads_ok = loads.get(&[("result", "ok")]).clone();
        let loads_failed = loads.get(&[("result", "error")]).clone();
        let refused_empty = refused.get(&[("reason", "no_gateways")]).clone();
        Stats {
            loads,
            loads_ok,
            loads_failed,
            publishes: Counter::default(),
            build_seconds: Gauge::default(),
            translate: Histogram::new(stage_buckets()),
            snapshot_build: Histogram::new(stage_buckets()),
            refused,
            refused_empty,
        }
    }
}

/// Upper bounds of `aether_edge_translate_seconds` and
/// `aether_edge_snapshot_build_seconds`: 0.5 ms doubling to about 4 s.
fn stage_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(0.0005, 2.0, 14)
}

/// `t` in microseconds since the Unix epoch: how publication log lines say
/// when something happened, for a bench to set beside its own clock.
pub fn unix_us(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

impl Stats {
    /// `aether_edge_config_*`, `aether_edge_snapshots_published_total`,
    /// `aether_edge_build_seconds` (the last translate + build) and the
    /// histograms of each stage apart, `aether_edge_translate_seconds` and
    /// `aether_edge_snapshot_build_seconds`, under a registry prefixed
    /// `aether_edge`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "config_loads",
            "Configuration loads by result",
            self.loads.clone(),
        );
        registry.register(
            "snapshots_published",
            "Snapshots published to the ADS server (content changed)",
            self.publishes.clone(),
        );
        registry.register(
            "build_seconds",
            "Duration of the last translate + build",
            self.build_seconds.clone(),
        );
        registry.register(
            "translate_seconds",
            "Duration of each translate (Gateway API objects to IR and status plan)",
            self.translate.clone(),
        );
        registry.register(
            "snapshot_build_seconds",
            "Duration of each build of Envoy resources from the IR",
            self.snapshot_build.clone(),
        );
        registry.register(
            "config_refused",
            "Loads not published: no Gateway left over a running configuration with some",
            self.refused.clone(),
        );
    }
}

/// What one apply did: whether it published, and how long its stages took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    pub published: bool,
    pub translate: Duration,
    /// The build of Envoy resources (after the mode's rewrite of the IR).
    pub build: Duration,
}

pub struct Pipeline {
    /// The translate and build caches; one apply at a time.
    engine: Mutex<Engine>,
    published: watch::Sender<Option<Arc<Published>>>,
    pub stats: Arc<Stats>,
}

impl Pipeline {
    /// A pipeline whose Envoy resources `builder` builds (how listeners log,
    /// whether they read a PROXY protocol header).
    pub fn new(config: Config, builder: Builder) -> Self {
        let (published, _) = watch::channel(None);
        Pipeline {
            engine: Mutex::new(Engine {
                translator: Translator::new(config),
                builder,
            }),
            published,
            stats: Arc::default(),
        }
    }

    pub fn subscribe(&self) -> watch::Receiver<Option<Arc<Published>>> {
        self.published.subscribe()
    }

    /// Translates and builds `store`; publishes when the result differs from what
    /// is published.
    pub fn apply(&self, store: Arc<Store>) -> Applied {
        self.apply_with(store, |_, _| BTreeMap::new())
    }

    /// [`Pipeline::apply`] with a mode-specific rewrite of the IR (and the plan)
    /// between translation and building, e.g. Kubernetes port allocations; it
    /// returns the Gateways it left out, and why ([`Published::left_out`]).
    pub fn apply_with(
        &self,
        store: Arc<Store>,
        rewrite: impl FnOnce(&Store, &mut Translation) -> BTreeMap<ObjectRef, String>,
    ) -> Applied {
        let started = Instant::now();
        let mut engine = self.engine.lock().expect("pipeline engine");
        let translation = engine.translator.translate(&store);
        let translated = Instant::now();
        let ir = Arc::new(translation.ir.clone());
        let mut served = translation;
        let left_out = rewrite(&store, &mut served);
        let rewritten = Instant::now();
        let snapshot = engine.builder.build(&served.ir);
        drop(engine);
        let built = Instant::now();
        let (translate, build) = (translated - started, built - rewritten);
        self.stats.translate.observe(translate.as_secs_f64());
        self.stats.snapshot_build.observe(build.as_secs_f64());
        self.stats
            .build_seconds
            .set((built - started).as_secs_f64());
        let next = Published {
            snapshot: Arc::new(snapshot),
            status: served.status,
            ir,
            left_out,
            store,
        };
        let mut replaced = None;
        let changed = self.published.send_if_modified(|current| {
            let same = current.as_ref().is_some_and(|p| {
                p.snapshot.version == next.snapshot.version
                    && p.status == next.status
                    && p.ir == next.ir
                    && p.left_out == next.left_out
            });
            if !same {
                replaced = current.replace(Arc::new(next));
            }
            !same
        });
        // The generation replaced is freed once the receivers have been told
        // of the new one, outside the channel's lock: at 10,000 routes freeing
        // it is a tenth of a change's CPU, which under the lock held back every
        // reader of the new publication (the ADS streams among them).
        drop(replaced);
        if changed {
            self.stats.publishes.inc();
        }
        Applied {
            published: changed,
            translate,
            build,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    /// Every apply is timed stage by stage, published or not; a store that
    /// translates to what is published already publishes nothing.
    #[test]
    fn each_apply_is_timed_and_only_a_change_is_published() {
        let pipeline = Pipeline::new(Config::default(), Builder::default());
        let first = pipeline.apply(Arc::new(Store::default()));
        let again = pipeline.apply(Arc::new(Store::default()));
        assert!(first.published, "the first store is published");
        assert!(!again.published, "the same store again is not");
        let mut registry = Registry::with_prefix("aether_edge");
        pipeline.stats.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for series in [
            "aether_edge_translate_seconds_count 2\n",
            "aether_edge_snapshot_build_seconds_count 2\n",
            "aether_edge_snapshots_published_total 1\n",
        ] {
            assert!(text.contains(series), "no {series:?} in {text}");
        }
    }
}
