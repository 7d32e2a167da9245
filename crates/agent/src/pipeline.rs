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
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;
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
            refused,
            refused_empty,
        }
    }
}

impl Stats {
    /// `aether_edge_config_*`, `aether_edge_snapshots_published_total` and
    /// `aether_edge_build_seconds` under a registry prefixed `aether_edge`.
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
            "config_refused",
            "Loads not published: no Gateway left over a running configuration with some",
            self.refused.clone(),
        );
    }
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
    /// is published. Returns whether it published.
    pub fn apply(&self, store: Arc<Store>) -> bool {
        self.apply_with(store, |_, _| BTreeMap::new())
    }

    /// [`Pipeline::apply`] with a mode-specific rewrite of the IR (and the plan)
    /// between translation and building, e.g. Kubernetes port allocations; it
    /// returns the Gateways it left out, and why ([`Published::left_out`]).
    pub fn apply_with(
        &self,
        store: Arc<Store>,
        rewrite: impl FnOnce(&Store, &mut Translation) -> BTreeMap<ObjectRef, String>,
    ) -> bool {
        let started = Instant::now();
        let mut engine = self.engine.lock().expect("pipeline engine");
        let translation = engine.translator.translate(&store);
        let ir = Arc::new(translation.ir.clone());
        let mut served = translation;
        let left_out = rewrite(&store, &mut served);
        let snapshot = engine.builder.build(&served.ir);
        drop(engine);
        self.stats
            .build_seconds
            .set(started.elapsed().as_secs_f64());
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
        changed
    }
}
