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
use aether_xds::{Builder, Snapshot};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// Counters exposed on `/metrics`.
#[derive(Debug, Default)]
pub struct Stats {
    pub loads_ok: AtomicU64,
    pub loads_failed: AtomicU64,
    pub publishes: AtomicU64,
    pub last_build_micros: AtomicU64,
    /// Loads not published because they had no Gateway while the running
    /// configuration had some.
    pub refused_empty: AtomicU64,
}

impl Stats {
    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "# HELP aether_edge_config_loads_total Configuration loads by result.\n\
             # TYPE aether_edge_config_loads_total counter\n\
             aether_edge_config_loads_total{{result=\"ok\"}} {}\n\
             aether_edge_config_loads_total{{result=\"error\"}} {}\n\
             # HELP aether_edge_snapshots_published_total Snapshots published to the ADS server (content changed).\n\
             # TYPE aether_edge_snapshots_published_total counter\n\
             aether_edge_snapshots_published_total {}\n\
             # HELP aether_edge_build_seconds Duration of the last translate + build.\n\
             # TYPE aether_edge_build_seconds gauge\n\
             aether_edge_build_seconds {:.6}\n\
             # HELP aether_edge_config_refused_total Loads not published: no Gateway left over a running configuration with some.\n\
             # TYPE aether_edge_config_refused_total counter\n\
             aether_edge_config_refused_total{{reason=\"no_gateways\"}} {}\n",
            get(&self.loads_ok),
            get(&self.loads_failed),
            get(&self.publishes),
            get(&self.last_build_micros) as f64 / 1e6,
            get(&self.refused_empty),
        )
    }
}

pub struct Pipeline {
    /// The translate and build caches; one apply at a time.
    engine: Mutex<Engine>,
    published: watch::Sender<Option<Arc<Published>>>,
    pub stats: Arc<Stats>,
}

impl Pipeline {
    /// A pipeline whose Envoy listeners log as `log` says.
    pub fn new(config: Config, log: aether_xds::AccessLog) -> Self {
        let (published, _) = watch::channel(None);
        Pipeline {
            engine: Mutex::new(Engine {
                translator: Translator::new(config),
                builder: Builder::with_access_log(log),
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
            .last_build_micros
            .store(started.elapsed().as_micros() as u64, Ordering::Relaxed);
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
            self.stats.publishes.fetch_add(1, Ordering::Relaxed);
        }
        changed
    }
}
