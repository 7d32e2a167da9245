//! What both modes share once a pipeline publishes: the ADS server (opened only
//! after a first complete configuration), Ctrl-C/SIGTERM handling, and a log line
//! whenever a Gateway becomes programmed, pending or rejected.

use crate::pipeline::Published;
use aether_ads::{AckState, AdsServer, Fleet};
use aether_ir::ObjectRef;
use aether_xds::Snapshot;
use anyhow::Context;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::watch;
use tracing::info;

/// Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
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

/// Waits for a first publication, then serves ADS on `address` until a shutdown
/// signal. Returns without serving if the signal comes first. `remember` sees
/// every snapshot before any Envoy can get it (the leader's report join keeps
/// their fingerprints).
pub async fn ads_when_ready(
    mut published: watch::Receiver<Option<Arc<Published>>>,
    fleet: Fleet,
    address: &str,
    remember: impl Fn(&Snapshot) + Send + 'static,
) -> anyhow::Result<()> {
    let first = tokio::select! {
        p = published.wait_for(Option::is_some) => p.map(|p| p.clone()).ok().flatten(),
        _ = shutdown_signal() => None,
    };
    let Some(first) = first else {
        return Ok(());
    };
    fleet.remember(&first.snapshot);
    remember(&first.snapshot);
    let (snapshot_tx, snapshot_rx) = watch::channel(first.snapshot.clone());
    tokio::spawn(forward_snapshots(
        published.clone(),
        snapshot_tx,
        fleet.clone(),
        remember,
    ));
    tokio::spawn(report_programmed(published, fleet.clone()));
    let server = AdsServer::new(snapshot_rx, fleet);
    info!(address = %address, "ADS server listening");
    aether_ads::serve(address, server, shutdown_signal())
        .await
        .context("ADS server")
}

/// Feeds the ADS server the snapshot of every new publication, remembered by
/// the fleet first (so any version an Envoy ACKs can be read per route).
async fn forward_snapshots(
    mut published: watch::Receiver<Option<Arc<Published>>>,
    snapshots: watch::Sender<Arc<Snapshot>>,
    fleet: Fleet,
    remember: impl Fn(&Snapshot),
) {
    while published.changed().await.is_ok() {
        let Some(p) = published.borrow_and_update().clone() else {
            continue;
        };
        fleet.remember(&p.snapshot);
        remember(&p.snapshot);
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
/// the local Envoy ACKs and NACKs.
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
            for (gw, state) in fleet.gateway_states(&snapshot) {
                let state = match state {
                    AckState::Acked => "programmed".to_string(),
                    AckState::Pending => "pending".to_string(),
                    AckState::Nacked(msg) => format!("rejected by Envoy: {msg}"),
                };
                if last.get(&gw) != Some(&state) {
                    info!(gateway = %gw, "{state}");
                }
                now.insert(gw, state);
            }
            last = now;
        }
        tokio::select! {
            r = published.changed() => if r.is_err() { return },
            r = fleet_changes.changed() => if r.is_err() { return },
        }
    }
}
