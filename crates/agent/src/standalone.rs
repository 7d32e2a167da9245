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
//!
//! Reading, parsing, translating and building run on a thread of their own, so
//! a huge or hostile file never holds up `/healthz` or an ADS stream. A file is
//! read as soon as a file event says its writer is done (closed it, or moved it
//! into place); one still open for writing, or changed with no such event,
//! waits until it is `--settle-ms` (50 ms) old (an editor that truncates, then
//! writes, is not published half-written), and a load with no
//! Gateway left is not published over a running configuration that has some,
//! unless `--allow-empty-config` says so.

use crate::admin::{self, AdminState};
use crate::cli::StandaloneArgs;
use crate::pipeline::{Pipeline, Published};
use crate::serve;
use crate::source::{self, Fingerprint, ParseCache};
use aether_ads::{Fleet, GatewayServed};
use aether_gateway::assemble::Pending;
use aether_gateway::{AckState, Addresses, Served, assemble};
use aether_ir::ObjectRef;
use aether_xds::Snapshot;
use anyhow::Context;
use notify::Watcher;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::watch;
use tracing::{error, info, warn};

/// How long to wait for more file events while a writer still has a file open,
/// or after a file went away.
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
    args.xds.checked_address(&args.xds_address)?;
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
            let served = |gw: &ObjectRef| local_served(&p.snapshot, gw, served.get(gw));
            assemble(&p.status, served, &Addresses::Planned)
        }),
        envoy_ready: None,
    });
    let admin_task = admin::spawn(&args.admin_address, admin_state, shutdown_rx.clone()).await?;
    let source = Source {
        dir,
        pipeline: pipeline.clone(),
        cache: ParseCache::new(args.config.limits(Duration::from_millis(args.settle_ms))),
        allow_empty: args.allow_empty_config,
    };
    let source_task = spawn_watcher(source, shutdown_rx);

    if let Some(path) = args.xds_address.strip_prefix("unix:") {
        serve::private_socket_dir(std::path::Path::new(path))?;
    }
    let ads = serve::Ads {
        address: &args.xds_address,
        removal_grace: args.xds.removal_grace(),
    };
    let result = serve::ads_when_ready(pipeline.subscribe(), fleet, ads, |_| {}).await;
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

/// The directory being served and what reading it needs.
struct Source {
    dir: PathBuf,
    pipeline: Arc<Pipeline>,
    cache: ParseCache,
    allow_empty: bool,
}

/// Runs [`watch_dir`] on a thread of its own until `shutdown`; the returned
/// task ends when the thread has.
fn spawn_watcher(
    source: Source,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let (wake, events) = std::sync::mpsc::channel();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let thread = std::thread::Builder::new()
        .name("config-source".into())
        .spawn({
            let wake = wake.clone();
            let stop = stop.clone();
            move || watch_dir(source, wake, events, &stop)
        })
        .expect("starting the config source thread");
    tokio::spawn(async move {
        let _ = shutdown.wait_for(|stopping| *stopping).await;
        stop.store(true, Ordering::Release);
        let _ = wake.send(Vec::new());
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    })
}

/// What a file event says about the file's writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writer {
    /// Created or written to: the writer may not be done.
    Writing,
    /// Closed after writing, or moved into place: what is there now is what
    /// the writer meant.
    Done,
    /// Removed or moved away: often one step of a change to several files
    /// (a directory emptied or swapped file by file), so the rest of the
    /// burst is waited for.
    Gone,
}

/// The YAML files an event names, and what it says about their writers;
/// nothing for events that change no content (opens, reads, attributes).
fn writer_events(event: &notify::Event) -> Vec<(PathBuf, Writer)> {
    use notify::EventKind::{Access, Create, Modify, Remove};
    use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
    let writer = match event.kind {
        Access(AccessKind::Close(AccessMode::Write)) => Writer::Done,
        Modify(ModifyKind::Name(RenameMode::To)) => Writer::Done,
        // A rename within the directory also comes as From and To.
        Modify(ModifyKind::Name(RenameMode::Both)) => return Vec::new(),
        Remove(_) | Modify(ModifyKind::Name(_)) => Writer::Gone,
        Create(_) | Modify(ModifyKind::Data(_) | ModifyKind::Any) => Writer::Writing,
        _ => return Vec::new(),
    };
    event
        .paths
        .iter()
        .filter(|p| source::is_yaml(p))
        .map(|p| (p.clone(), writer))
        .collect()
}

/// Files with a writer still at work, files whose writer is done since the
/// last load, and whether a file went away since the last wake-up.
#[derive(Debug, Default)]
struct Writers {
    writing: BTreeSet<PathBuf>,
    done: BTreeSet<PathBuf>,
    gone: bool,
}

impl Writers {
    fn note(&mut self, events: Vec<(PathBuf, Writer)>) {
        for (path, writer) in events {
            match writer {
                Writer::Writing => {
                    self.done.remove(&path);
                    self.writing.insert(path);
                }
                Writer::Done => {
                    self.writing.remove(&path);
                    self.done.insert(path);
                }
                Writer::Gone => {
                    self.writing.remove(&path);
                    self.done.remove(&path);
                    self.gone = true;
                }
            }
        }
    }
}

/// Reloads the directory whenever its fingerprint changes, and again once a
/// file that was too fresh to read has settled.
///
/// A file whose writer closed it (or that was moved into place) is read at
/// once: that is the end of an edit, seen, not guessed. Only a file still
/// open for writing, or one no event was seen for, waits out the settle
/// window. A wake-up waits for more events only while some file is still open
/// for writing (until it is closed, for [`DEBOUNCE`] at most) or, for the whole
/// of [`DEBOUNCE`], after a file went away: removing or moving files out is how
/// a directory is emptied or swapped file by file, and a half-done swap must
/// not be published.
fn watch_dir(
    mut source: Source,
    wake: std::sync::mpsc::Sender<Vec<(PathBuf, Writer)>>,
    events: std::sync::mpsc::Receiver<Vec<(PathBuf, Writer)>>,
    stop: &std::sync::atomic::AtomicBool,
) {
    use std::sync::mpsc::RecvTimeoutError;
    let dir = source.dir.clone();
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(event) = res {
            let files = writer_events(&event);
            if !files.is_empty() {
                let _ = wake.send(files);
            }
        } else {
            // Events were lost: look at the directory again.
            let _ = wake.send(Vec::new());
        }
    })
    .and_then(|mut w| {
        w.watch(&dir, notify::RecursiveMode::NonRecursive)
            .map(|()| w)
    });
    if let Err(e) = &watcher {
        warn!(dir = %dir.display(), error = %e, "file events unavailable; rescanning every second");
    }
    let mut last = Fingerprint::default();
    let mut writers = Writers::default();
    loop {
        let now = source::fingerprint(&dir);
        if now != last {
            last = now;
            source.cache.writer_done(std::mem::take(&mut writers.done));
            source.reload();
            if source.cache.settling() {
                // Not read yet: look again once it has settled.
                last = Fingerprint::default();
            }
        }
        let wait = if source.cache.settling() {
            source.cache.limits().settle
        } else {
            RESCAN
        };
        match events.recv_timeout(wait) {
            Ok(files) => {
                writers.note(files);
                while let Ok(files) = events.try_recv() {
                    writers.note(files);
                }
                // A file went away, or a writer is at work: wait for the rest
                // of the burst, for the writer to close its file, but no
                // longer than DEBOUNCE (then the settle window decides).
                let until = std::time::Instant::now() + DEBOUNCE;
                let mut hold = std::mem::take(&mut writers.gone);
                while hold || !writers.writing.is_empty() {
                    let left = until.saturating_duration_since(std::time::Instant::now());
                    match events.recv_timeout(left) {
                        Ok(files) => {
                            writers.note(files);
                            hold |= std::mem::take(&mut writers.gone);
                        }
                        Err(_) => break,
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if stop.load(Ordering::Acquire) {
            return;
        }
    }
}

impl Source {
    /// One file's problem holds back no other file: every file that parses is
    /// served, one that does not keeps its last good version. Until a first load
    /// is complete, loading is strict: a half-read directory must not replace
    /// what a running Envoy got from our previous run.
    fn reload(&mut self) {
        let dir = &self.dir;
        let stats = &self.pipeline.stats;
        // Gateways served now; `None` before the first publish.
        let running = self
            .pipeline
            .subscribe()
            .borrow()
            .as_ref()
            .map(|p| p.ir.gateways.len());
        let first = running.is_none();
        let (store, problems) = match self.cache.load_each(dir) {
            Ok(loaded) => loaded,
            Err(failure) => {
                stats.loads_failed.fetch_add(1, Ordering::Relaxed);
                error!("{failure}; the last good configuration keeps serving");
                return;
            }
        };
        let failure = (!problems.is_empty()).then(|| source::LoadFailure {
            dir: dir.to_path_buf(),
            problems,
        });
        if first && let Some(failure) = failure {
            stats.loads_failed.fetch_add(1, Ordering::Relaxed);
            error!("{failure}; nothing is served until every file loads");
            return;
        }
        if self.cache.settling() {
            // A file is still being written: the whole directory is published
            // once it has settled (what else changed is parsed and kept).
            return;
        }
        match failure {
            None => stats.loads_ok.fetch_add(1, Ordering::Relaxed),
            Some(failure) => {
                error!(
                    "{failure}; those files keep their last good version, every other file is loaded"
                );
                stats.loads_failed.fetch_add(1, Ordering::Relaxed)
            }
        };
        let running = running.unwrap_or(0);
        let left = store.gateway_count();
        if left == 0 && running > 0 && !self.allow_empty {
            stats.refused_empty.fetch_add(1, Ordering::Relaxed);
            error!(
                dir = %dir.display(),
                running,
                "the configuration has no Gateway left; not published over the running one \
                 (an emptied or half-copied directory?). Pass --allow-empty-config to allow it"
            );
            return;
        }
        if self.pipeline.apply(Arc::new(store)) {
            info!(dir = %dir.display(), "configuration loaded and published");
        }
    }
}
