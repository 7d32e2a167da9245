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
use crate::source::{self, Fingerprint};
use aether_ads::{AdsServer, Fleet, GatewayAck};
use aether_ir::ObjectRef;
use aether_xds::Snapshot;
use anyhow::Context;
use notify::Watcher;
use std::collections::BTreeMap;
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
    let mut published = pipeline.subscribe();
    let (shutdown_tx, shutdown_rx) = watch::channel(false);

    let admin_state = Arc::new(AdminState {
        published: pipeline.subscribe(),
        fleet: fleet.clone(),
        stats: pipeline.stats.clone(),
    });
    let admin_listener = tokio::net::TcpListener::bind(&args.admin_address)
        .await
        .with_context(|| format!("binding the admin address {}", args.admin_address))?;
    info!(address = %args.admin_address, "admin HTTP listening");
    let admin_task = tokio::spawn(admin::serve(
        admin_listener,
        admin_state,
        wait_for(shutdown_rx.clone()),
    ));

    let source_task = tokio::spawn(watch_dir(dir, pipeline.clone(), shutdown_rx.clone()));

    // Open the ADS port only once there is a first complete configuration.
    let first = tokio::select! {
        p = published.wait_for(Option::is_some) => p.map(|p| p.clone()).ok().flatten(),
        _ = shutdown_signal() => None,
    };
    let Some(first) = first else {
        let _ = shutdown_tx.send(true);
        let _ = tokio::join!(admin_task, source_task);
        return Ok(());
    };
    let (snapshot_tx, snapshot_rx) = watch::channel(first.snapshot.clone());
    tokio::spawn(forward_snapshots(published.clone(), snapshot_tx));
    tokio::spawn(report_programmed(published, fleet.clone()));

    let server = AdsServer::new(snapshot_rx, fleet);
    info!(address = %args.xds_address, "ADS server listening");
    let ads = aether_ads::serve(&args.xds_address, server, shutdown_signal());
    let result = ads.await.context("ADS server");
    let _ = shutdown_tx.send(true);
    let _ = tokio::join!(admin_task, source_task);
    info!("stopped");
    result
}

async fn wait_for(mut shutdown: watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
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
    loop {
        let now = source::fingerprint(&dir);
        if now != last {
            last = now;
            reload(&dir, &pipeline);
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

fn reload(dir: &std::path::Path, pipeline: &Pipeline) {
    match source::load_dir(dir) {
        Ok(store) => {
            pipeline.stats.loads_ok.fetch_add(1, Ordering::Relaxed);
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

/// Feeds the ADS server the snapshot of every new publication.
async fn forward_snapshots(
    mut published: watch::Receiver<Option<Arc<Published>>>,
    snapshots: watch::Sender<Arc<Snapshot>>,
) {
    while published.changed().await.is_ok() {
        let Some(p) = published.borrow_and_update().clone() else {
            continue;
        };
        snapshots.send_if_modified(|current| {
            let changed = current.version != p.snapshot.version;
            if changed {
                *current = p.snapshot.clone();
            }
            changed
        });
    }
}

/// Logs each Gateway's transitions between pending, programmed and rejected as
/// Envoy ACKs and NACKs arrive.
async fn report_programmed(mut published: watch::Receiver<Option<Arc<Published>>>, fleet: Fleet) {
    let mut fleet_changes = fleet.subscribe();
    let mut last: BTreeMap<ObjectRef, String> = BTreeMap::new();
    loop {
        let snapshot = published
            .borrow_and_update()
            .as_ref()
            .map(|p| p.snapshot.clone());
        if let Some(snapshot) = snapshot {
            let mut now = BTreeMap::new();
            for gw in snapshot.gateways.keys() {
                let state = match fleet.gateway_state(&snapshot, gw) {
                    GatewayAck::Acked => "programmed".to_string(),
                    GatewayAck::Pending => "pending".to_string(),
                    GatewayAck::Nacked(msg) => format!("rejected by Envoy: {msg}"),
                };
                if last.get(gw) != Some(&state) {
                    info!(gateway = %gw, "{state}");
                }
                now.insert(gw.clone(), state);
            }
            last = now;
        }
        tokio::select! {
            r = published.changed() => if r.is_err() { return },
            r = fleet_changes.changed() => if r.is_err() { return },
        }
    }
}
