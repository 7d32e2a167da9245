//! Standalone mode: Gateway API YAML from a directory, served to Envoy over ADS.
//!
//! ```text
//!  directory ──(inotify + 1 s rescan)──► load ──► Pipeline ──► watch ──► ADS server ──► Envoy
//!                                          │ error: logged with file/line,          │ ACK/NACK
//!                                          ▼ last good config keeps serving         ▼
//!                                       /metrics                                  Fleet ──► /debug/*
//! ```
//!
//! The ADS port is opened only once a first complete configuration has loaded, so
//! an Envoy that (re)connects early waits instead of receiving an empty config.

use crate::admin::{self, AdminState};
use crate::cli::StandaloneArgs;
use crate::pipeline::{Pipeline, Published};
use crate::serve;
use crate::source::{self, Fingerprint, ParseCache};
use aether_ads::{Fleet, GatewayServed};
use aether_gateway::gate::Pending;
use aether_gateway::{AckState, Served};
use aether_ir::ObjectRef;
use aether_xds::Snapshot;
use anyhow::Context;
use notify::Watcher;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};

/// How long to wait after a file event for the writer to finish.
const DEBOUNCE: Duration = Duration::from_millis(15);
/// Safety net for file systems without change events.
const RESCAN: Duration = Duration::from_secs(1);

pub fn run(args: StandaloneArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: StandaloneArgs) -> anyhow::Result<()> {
    let dir = args.config.config_dir.clone();
    anyhow::ensure!(
        dir.is_dir(),
        "--config-dir {} is not a directory",
        dir.display()
    );
    let pipeline = Arc::new(Pipeline::new(args.config.translate_config()));
    let fleet = Fleet::new();
    let (shutdown_tx, shutdown_rx) = watch::channel(false);

    let gate_fleet = fleet.clone();
    let admin_state = Arc::new(AdminState {
        published: pipeline.subscribe(),
        fleet: fleet.clone(),
        metrics: vec![Box::new({
            let stats = pipeline.stats.clone();
            move || stats.render()
        })],
        status_view: Box::new(move |p: &Published| {
            let served = gate_fleet.served(&p.snapshot);
            p.status
                .gated(|gw| local_served(&p.snapshot, gw, served.get(gw)))
        }),
        envoy_ready: None,
    });
    let admin_task = admin::spawn(&args.admin_address, admin_state, shutdown_rx.clone()).await?;
    let source_task = tokio::spawn(watch_dir(dir, pipeline.clone(), shutdown_rx));

    let result =
        serve::ads_when_ready(pipeline.subscribe(), fleet, &args.xds_address, |_| {}).await;
    let _ = shutdown_tx.send(true);
    let _ = tokio::join!(admin_task, source_task);
    info!("stopped");
    result
}

/// The local fleet's view of one Gateway, as the status gate takes it.
pub fn local_served(snapshot: &Snapshot, gw: &ObjectRef, served: Option<&GatewayServed>) -> Served {
    let (Some(served), Some(resources)) = (served, snapshot.gateways.get(gw)) else {
        return Served::whole(AckState::Pending);
    };
    let gateway = served.gateway.clone();
    let pending = resources
        .routes
        .keys()
        .filter(|k| !served.routes.contains(*k))
        .cloned()
        .collect();
    Served {
        gateway,
        pending: Pending::Only(pending),
        unreported: Default::default(),
    }
}

/// Reloads the directory whenever its fingerprint changes.
async fn watch_dir(dir: PathBuf, pipeline: Arc<Pipeline>, mut shutdown: watch::Receiver<bool>) {
    let (tx, mut events) = mpsc::unbounded_channel();
    let watcher = notify::recommended_watcher(move |_res: notify::Result<notify::Event>| {
        let _ = tx.send(());
    })
    .and_then(|mut w| {
        w.watch(&dir, notify::RecursiveMode::NonRecursive)
            .map(|()| w)
    });
    if let Err(e) = &watcher {
        warn!(dir = %dir.display(), error = %e, "file events unavailable; rescanning every second");
    }
    let mut last = Fingerprint::default();
    let mut cache = ParseCache::default();
    loop {
        let now = source::fingerprint(&dir);
        if now != last {
            last = now;
            reload(&dir, &pipeline, &mut cache);
        }
        tokio::select! {
            Some(()) = events.recv() => {
                tokio::time::sleep(DEBOUNCE).await;
                while events.try_recv().is_ok() {}
            }
            _ = tokio::time::sleep(RESCAN) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// One file's problem holds back no other file: every file that parses is
/// served, one that does not keeps its last good version. Until a first load is
/// complete, loading is strict: a half-read directory must not replace what a
/// running Envoy got from our previous run.
fn reload(dir: &std::path::Path, pipeline: &Pipeline, cache: &mut ParseCache) {
    let loaded = if pipeline.subscribe().borrow().is_none() {
        cache.load(dir).map(|store| (store, Vec::new()))
    } else {
        cache.load_each(dir)
    };
    match loaded {
        Ok((store, problems)) => {
            if problems.is_empty() {
                pipeline.stats.loads_ok.fetch_add(1, Ordering::Relaxed);
            } else {
                pipeline.stats.loads_failed.fetch_add(1, Ordering::Relaxed);
                let failure = source::LoadFailure {
                    dir: dir.to_path_buf(),
                    problems,
                };
                error!(
                    "{failure}; those files keep their last good version, every other file is loaded"
                );
            }
            if pipeline.apply(&store) {
                info!(dir = %dir.display(), "configuration loaded and published");
            }
        }
        Err(failure) => {
            pipeline.stats.loads_failed.fetch_add(1, Ordering::Relaxed);
            error!("{failure}; the last good configuration keeps serving");
        }
    }
}
