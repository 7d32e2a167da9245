//! What both modes share once a pipeline publishes: the ADS server (opened only
//! after a first complete configuration), Ctrl-C/SIGTERM handling, and a log line
//! whenever a Gateway becomes programmed, pending or rejected.

use crate::pipeline::Published;
use aether_ads::{AckState, AdsServer, Fleet};
use aether_gateway::assemble::rejected;
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

/// Where and how ADS is served.
pub struct Ads<'a> {
    pub address: &'a str,
    /// See [`aether_ads::AdsServer::with_removal_grace`].
    pub removal_grace: std::time::Duration,
}

/// Waits for a first publication, then serves ADS on `ads.address` until a shutdown
/// signal. Returns without serving if the signal comes first. `remember` sees
/// every snapshot before any Envoy can get it (the leader's report join keeps
/// their fingerprints).
pub async fn ads_when_ready(
    mut published: watch::Receiver<Option<Arc<Published>>>,
    fleet: Fleet,
    ads: Ads<'_>,
    remember: impl Fn(&Snapshot) + Send + 'static,
) -> anyhow::Result<()> {
    let address = ads.address;
    // Only the snapshot of the first publication is kept: the publication
    // holds that generation's IR, status plan and store, which this function
    // would otherwise pin for as long as it serves.
    let first = tokio::select! {
        p = published.wait_for(Option::is_some) => {
            p.ok().and_then(|p| p.as_ref().map(|p| p.snapshot.clone()))
        }
        _ = shutdown_signal() => None,
    };
    let Some(first) = first else {
        return Ok(());
    };
    remember(&first);
    let first = fleet.serve(&first);
    let (snapshot_tx, snapshot_rx) = watch::channel(first);
    tokio::spawn(forward_snapshots(
        published.clone(),
        snapshot_tx,
        fleet.clone(),
        remember,
    ));
    tokio::spawn(report_programmed(published, fleet.clone()));
    let server = AdsServer::new(snapshot_rx, fleet).with_removal_grace(ads.removal_grace);
    info!(address = %address, "ADS server listening");
    aether_ads::serve(address, server, shutdown_signal())
        .await
        .context("ADS server")
}

/// Makes sure the directory of the ADS socket `socket` is this user's alone
/// to write ([`private_dir`]): otherwise another local user who made it first
/// (`/tmp/aether-edge-<uid>`) could move our socket aside and serve Envoy
/// their own routes.
pub fn private_socket_dir(socket: &std::path::Path) -> anyhow::Result<()> {
    let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    private_dir(dir, "the ADS socket directory").map_err(|e| {
        anyhow::anyhow!(
            "{e:#}: another user could put their own ADS server in our socket's place. \
             Remove it, or choose --xds-address unix:<a directory only this user can \
             write>/ads.sock"
        )
    })
}

/// Makes sure `dir` (named `what` in errors) is this user's alone to write:
/// created 0700 when missing; an existing one must be a directory (not a
/// symbolic link) owned by this user and writable by nobody else.
pub fn private_dir(dir: &std::path::Path, what: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {what} {}", dir.display()))?;
    }
    let meta = std::fs::symlink_metadata(dir)
        .with_context(|| format!("reading {what} {}", dir.display()))?;
    let uid = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
    let why = if meta.file_type().is_symlink() {
        "is a symbolic link".to_string()
    } else if !meta.is_dir() {
        "is not a directory".to_string()
    } else if meta.uid() != uid {
        format!(
            "is owned by uid {}, not by this user (uid {uid})",
            meta.uid()
        )
    } else if meta.mode() & 0o022 != 0 {
        format!(
            "is writable by other users (mode {:o})",
            meta.mode() & 0o7777
        )
    } else {
        return Ok(());
    };
    anyhow::bail!("{what} {} {why}", dir.display())
}

/// Feeds the ADS server the snapshot of every new publication, with the
/// routes an Envoy refused held back (`aether_ads::holdback`), so again on
/// every fleet change; remembered first (so any version an Envoy ACKs can be
/// read per route).
async fn forward_snapshots(
    mut published: watch::Receiver<Option<Arc<Published>>>,
    snapshots: watch::Sender<Arc<Snapshot>>,
    fleet: Fleet,
    remember: impl Fn(&Snapshot),
) {
    let mut fleet_changes = fleet.subscribe();
    loop {
        let desired = published
            .borrow_and_update()
            .as_ref()
            .map(|p| p.snapshot.clone());
        if let Some(desired) = desired {
            let served = fleet.serve(&desired);
            remember(&desired);
            if !Arc::ptr_eq(&served, &desired) {
                remember(&served);
            }
            snapshots.send_if_modified(|current| {
                let changed = current.version != served.version;
                if changed {
                    *current = served;
                }
                changed
            });
        }
        tokio::select! {
            r = published.changed() => if r.is_err() { return },
            r = fleet_changes.changed() => if r.is_err() { return },
        }
    }
}

/// Logs each Gateway's transitions between pending, programmed and rejected as
/// the Envoys connected here ACK and NACK. Programmed: every one holds the
/// Gateway's current config whole, endpoints at any version
/// ([`Fleet::gateway_config_state`]: under pod churn, waiting for each new
/// version of the endpoints logged two lines per pod change), which costs a
/// look at each member resource's version, not a walk over its routes (at
/// 10,000 routes on a Gateway the status gate's per-route join, run on every
/// publication and ACK for this line alone, was a fifth of the agent's CPU).
/// The status, per object, may say a route is served a moment sooner: while
/// the new version it is unchanged in is not ACKed yet.
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
                let state = match fleet.gateway_config_state(&snapshot, gw) {
                    AckState::Nacked(rejection) => rejected(&rejection),
                    AckState::Acked => "programmed".to_string(),
                    AckState::Pending => "pending".to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn publication(version: &str) -> Arc<Published> {
        Arc::new(Published {
            snapshot: Arc::new(Snapshot {
                version: version.into(),
                ..Snapshot::default()
            }),
            status: Default::default(),
            ir: Default::default(),
            left_out: BTreeMap::new(),
            store: Default::default(),
        })
    }

    /// The socket's directory: made 0700 when missing; refused when another
    /// user could write it (a squatter's `/tmp/aether-edge-<uid>`).
    #[test]
    fn the_socket_directory_is_ours_alone_or_refused() {
        use std::os::unix::fs::PermissionsExt;
        let root = std::env::temp_dir().join(format!("aether-edge-sockdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;

        let fresh = root.join("fresh/ads.sock");
        private_socket_dir(&fresh).unwrap();
        assert_eq!(mode(fresh.parent().unwrap()), 0o700);
        private_socket_dir(&fresh).expect("ours, 0700: taken again");

        let open = root.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = format!(
            "{:#}",
            private_socket_dir(&open.join("ads.sock")).unwrap_err()
        );
        assert!(
            err.contains("is writable by other users (mode 777)"),
            "{err}"
        );

        let link = root.join("link");
        std::os::unix::fs::symlink(fresh.parent().unwrap(), &link).unwrap();
        let err = format!(
            "{:#}",
            private_socket_dir(&link.join("ads.sock")).unwrap_err()
        );
        assert!(err.contains("is a symbolic link"), "{err}");

        // Another user's directory (chown needs root, which the suite has).
        let theirs = root.join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
        if std::os::unix::fs::chown(&theirs, Some(4242), Some(4242)).is_ok() {
            let err = format!(
                "{:#}",
                private_socket_dir(&theirs.join("ads.sock")).unwrap_err()
            );
            assert!(
                err.contains("is owned by uid 4242, not by this user"),
                "{err}"
            );
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A publication carries its generation's IR, status plan and store: once
    /// a newer one replaces it, serving must not keep it alive (the first one
    /// used to stay pinned for as long as the server ran).
    #[tokio::test]
    async fn a_replaced_publication_is_let_go() {
        let (tx, rx) = watch::channel(None);
        let first = publication("v1");
        let first_weak = Arc::downgrade(&first);
        tx.send_replace(Some(first));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let address = format!("127.0.0.1:{port}");
        let serving = tokio::spawn(async move {
            let ads = Ads {
                address: &address,
                removal_grace: aether_ads::DEFAULT_REMOVAL_GRACE,
            };
            ads_when_ready(rx, Fleet::new(), ads, |_| {}).await
        });
        // The server has taken the first publication once it listens.
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "the ADS server never listened");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let second = publication("v2");
        let second_weak = Arc::downgrade(&second);
        tx.send_replace(Some(second));
        let deadline = Instant::now() + Duration::from_secs(10);
        while first_weak.upgrade().is_some() {
            assert!(
                Instant::now() < deadline,
                "the first publication is still held after a second replaced it"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(second_weak.upgrade().is_some(), "the current one is kept");
        serving.abort();
    }
}
