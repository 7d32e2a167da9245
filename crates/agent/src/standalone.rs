//! Standalone mode: Gateway API YAML from a directory, served to Envoy over ADS.
//!
//! ```text
//!  directory ──(inotify + 1 s rescan)──► load ──► Pipeline ──► watch ──► ADS server ──► Envoy
//!     ▲                                    │ error: logged with file/line,          │ ACK/NACK
//!  state file (last served) ─► seed        ▼ last good version keeps serving        ▼
//!     ▲                                 /readyz, /metrics                          Fleet ──► /debug/*
//!     └────────── written on every publish
//! ```
//!
//! The ADS port is opened only once a first configuration has loaded, so an
//! Envoy that (re)connects early waits instead of receiving an empty config.
//! That first configuration is the directory's if every file loads; if a file
//! is broken, it is that file's version saved by the last run (the state file,
//! [`state`]), so a restart serves what served before instead of nothing.
//!
//! Reading, parsing, translating and building run on a thread of their own, so
//! a huge or hostile file never holds up `/healthz` or an ADS stream. When a
//! changed file is read is the source's edit contract ([`crate::source`]): a
//! move into place at once, an in-place write once the directory is quiet
//! (`--settle-ms`), a file open for writing once closed. A load with no Gateway
//! left is not published over a running configuration that has some, unless
//! `--allow-empty-config` says so.

mod problems;
mod state;
mod watch;

use crate::admin::{self, AdminState};
use crate::args::StandaloneArgs;
use crate::pipeline::{Pipeline, Published};
use crate::serve;
use crate::source::{self, Edits, FileStamp, Fingerprint, ParseCache};
use aether_ads::Fleet;
use aether_gateway::{AckState, Addresses, Served, assemble};
use aether_ir::ObjectRef;
use aether_report::fleet_served;
use anyhow::Context;
use problems::{ConfigProblems, Problems};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{error, info, warn};
use watch::{DirWatch, Wake, Writers};

/// A file event within this long of the last load is part of a burst: the
/// rest of the burst is gathered (until the events are this long apart) before
/// the next load, so a copy of thousands of files is a few loads, not
/// thousands. An event after a quiet spell is loaded at once: a lone change
/// waits for nothing (issue 31 item 3: no fixed wait beyond coalescing).
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
    let dir = config_dir(&args)?;
    let pipeline = Arc::new(Pipeline::new(
        args.config.translate_config(),
        args.xds.builder(),
    ));
    let fleet = Fleet::new();
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let (problems_tx, problems_rx) = tokio::sync::watch::channel(Problems::default());

    let admin_state = Arc::new(admin_state(&pipeline, &fleet, problems_rx));
    let metrics_task = match &args.metrics_address {
        Some(address) => {
            Some(admin::spawn_metrics(address, admin_state.clone(), shutdown_rx.clone()).await?)
        }
        None => None,
    };
    let admin_task = admin::spawn(&args.admin_address, admin_state, shutdown_rx.clone()).await?;
    let mut cache =
        ParseCache::new(args.config.limits(Duration::from_millis(args.settle_ms))).keeping_text();
    let state = open_state(&args, &dir, &mut cache).map(state::Saver::spawn);
    let source = Source {
        dir,
        pipeline: pipeline.clone(),
        cache,
        allow_empty: args.allow_empty_config,
        state,
        problems: problems_tx,
        rescan: RESCAN,
    };
    let source_task = spawn_watcher(source, shutdown_rx);

    let ads = serve::Ads {
        address: &args.xds_address,
        removal_grace: args.xds.removal_grace(),
    };
    let result = serve::ads_when_ready(pipeline.subscribe(), fleet, ads, |_| {}).await;
    let _ = shutdown_tx.send(true);
    let _ = tokio::join!(admin_task, source_task);
    if let Some(t) = metrics_task {
        let _ = t.await;
    }
    info!("stopped");
    result
}

/// The config directory, absolute; the xDS address checked first (a Unix
/// socket's directory made private).
fn config_dir(args: &StandaloneArgs) -> anyhow::Result<PathBuf> {
    args.xds.checked_address(&args.xds_address)?;
    if let Some(path) = args.xds_address.strip_prefix("unix:") {
        serve::private_socket_dir(std::path::Path::new(path))?;
    }
    let dir = std::path::absolute(&args.config.config_dir)?;
    anyhow::ensure!(
        dir.is_dir(),
        "--config-dir {} is not a directory",
        dir.display()
    );
    Ok(dir)
}

/// What the admin and metrics endpoints read: the published configuration,
/// the fleet, the metrics registry, the status as the Envoys connected here
/// serve it, and the config problems.
fn admin_state(
    pipeline: &Pipeline,
    fleet: &Fleet,
    problems_rx: tokio::sync::watch::Receiver<Problems>,
) -> AdminState {
    let mut registry = crate::metrics::registry();
    fleet
        .metrics()
        .register(registry.sub_registry_with_prefix("aether_ads"));
    let edge = registry.sub_registry_with_prefix("aether_edge");
    pipeline.stats.register(edge);
    edge.register_collector(Box::new(ConfigProblems(problems_rx.clone())));
    let gate_fleet = fleet.clone();
    AdminState {
        published: pipeline.subscribe(),
        fleet: fleet.clone(),
        metrics: registry,
        status_view: Box::new(move |p: &Published| {
            // A fleet of the Envoys connected here, through the leader's join.
            let served = fleet_served(&gate_fleet, &p.snapshot);
            let served = |gw: &ObjectRef| {
                served
                    .get(gw)
                    .cloned()
                    .unwrap_or_else(|| Served::whole(AckState::Pending))
            };
            assemble(&p.status, served, &Addresses::Planned)
        }),
        envoy_ready: None,
        config_problems: Some(problem_lines(problems_rx)),
    }
}

/// The config problems as `/readyz` lists them, kept up to date.
fn problem_lines(
    mut rx: tokio::sync::watch::Receiver<Problems>,
) -> tokio::sync::watch::Receiver<Vec<String>> {
    let (tx, lines) = tokio::sync::watch::channel(Vec::new());
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let _ = tx.send(rx.borrow_and_update().lines());
        }
    });
    lines
}

/// The state file of this config directory, its saved files seeded into
/// `cache` (each serves until its own file loads); `None` (logged) if there
/// is no state directory to keep it in.
fn open_state(
    args: &StandaloneArgs,
    dir: &std::path::Path,
    cache: &mut ParseCache,
) -> Option<state::StateFile> {
    let Some(state_dir) = args.state_dir.clone().or_else(state::default_dir) else {
        warn!(
            "no --state-dir, $XDG_STATE_HOME or $HOME: the last configuration served is not kept across restarts"
        );
        return None;
    };
    let file = match state::StateFile::open(&state_dir, dir) {
        Ok(f) => f,
        Err(e) => {
            warn!("{e:#}");
            return None;
        }
    };
    match file.load() {
        Ok(Some(files)) => {
            let count = files.len();
            for bad in cache.seed(dir, files) {
                warn!(state = %file.path().display(), "a saved file does not load: {bad}");
            }
            info!(state = %file.path().display(), files = count, "the configuration served before the restart serves each file until that file loads");
        }
        Ok(None) => {}
        Err(e) => warn!("{e:#}; starting without it"),
    }
    Some(file)
}

/// The directory being served and what reading it needs.
struct Source {
    dir: PathBuf,
    pipeline: Arc<Pipeline>,
    cache: ParseCache,
    allow_empty: bool,
    state: Option<state::Saver>,
    problems: tokio::sync::watch::Sender<Problems>,
    rescan: Duration,
}

/// Runs [`watch_dir`] on a thread of its own until `shutdown`; the returned
/// task ends when the thread has.
fn spawn_watcher(
    source: Source,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let (wake, events) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("config-source".into())
        .spawn({
            let wake = wake.clone();
            move || watch_dir(source, wake, events)
        })
        .expect("starting the config source thread");
    tokio::spawn(async move {
        let _ = shutdown.wait_for(|stopping| *stopping).await;
        let _ = wake.send(Wake::Stop);
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    })
}

/// Loads the directory whenever an event, the rescan (a changed
/// [`Fingerprint`]) or the end of a hold says so, until [`Wake::Stop`].
fn watch_dir(
    mut source: Source,
    wake: std::sync::mpsc::Sender<Wake>,
    events: std::sync::mpsc::Receiver<Wake>,
) {
    use std::sync::mpsc::RecvTimeoutError;
    let dir = source.dir.clone();
    let mut watch = DirWatch::start(&dir, wake);
    let mut last = Fingerprint::default();
    let mut writers = Writers::default();
    let mut due = Some(Instant::now());
    // When the last load ended: what tells a lone change from a burst.
    let mut loaded = Instant::now();
    loop {
        let now = source::fingerprint(&dir);
        if watch.available() && now.dir != watch.watching {
            // Replaced (or back): watch the directory that is there now;
            // what happened in between is unknown.
            watch.rewatch(now.dir);
            writers.lost();
        }
        if writers.news || now != last || due.is_some_and(|d| d <= Instant::now()) {
            last = now;
            source.reload(&writers.take_edits(), last.files());
            due = source.cache.held().map(|left| Instant::now() + left);
            loaded = Instant::now();
        }
        let wait = due.map_or(source.rescan, |d| {
            d.saturating_duration_since(Instant::now())
                .min(source.rescan)
        });
        let mut note = |w: Wake| match w {
            Wake::Files(files) => {
                writers.note(&dir, files);
                true
            }
            Wake::Lost => {
                writers.lost();
                true
            }
            Wake::Stop => false,
        };
        match events.recv_timeout(wait) {
            Ok(w) => {
                if !note(w) {
                    return;
                }
                // What has come in since, and in a burst the rest of it.
                let gather = burst_gather(loaded.elapsed());
                let until = Instant::now() + DEBOUNCE * 10;
                loop {
                    let next = match gather {
                        Some(quiet) => events.recv_timeout(quiet).ok(),
                        None => events.try_recv().ok(),
                    };
                    let Some(w) = next else { break };
                    if !note(w) {
                        return;
                    }
                    if Instant::now() > until {
                        break;
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// How long to wait for a further event before loading, given the time
/// since the last load ended: `None` (load at once, with what is already
/// queued) after a quiet spell, else [`DEBOUNCE`] (a burst: gather it).
fn burst_gather(since_load: Duration) -> Option<Duration> {
    (since_load < DEBOUNCE).then_some(DEBOUNCE)
}

impl Source {
    /// One file's problem holds back no other file: every file that parses is
    /// served, one that does not keeps its last good version. Until a first
    /// load is complete, loading is strict unless saved state seeded the
    /// cache: a half-read directory must not replace what a running Envoy got
    /// from our previous run (and with the state, that is what it keeps).
    fn reload(&mut self, edits: &Edits, listed: Option<&[(PathBuf, Option<FileStamp>)]>) {
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
        let started = Instant::now();
        let started_unix_us = crate::pipeline::unix_us(std::time::SystemTime::now());
        let loaded = match listed {
            Some(entries) => self.cache.load_listed(dir, edits, entries),
            None => self.cache.load_each(dir, edits),
        };
        let (store, problems) = match loaded {
            Ok(loaded) => loaded,
            Err(failure) => {
                stats.loads_failed.inc();
                error!("{failure}; the last good configuration keeps serving");
                return;
            }
        };
        for note in self.cache.take_notes() {
            warn!("{note}");
        }
        let news = self.note_problems(problems.clone());
        let failure = (!problems.is_empty()).then(|| source::LoadFailure {
            dir: dir.to_path_buf(),
            problems,
        });
        if !self.may_publish(first, failure, news) {
            return;
        }
        if self.refuses_empty(store.gateway_count(), running.unwrap_or(0)) {
            return;
        }
        let load = started.elapsed();
        let applied = self.pipeline.apply(Arc::new(store));
        if applied.published {
            info!(
                dir = %dir.display(),
                load_started_unix_us = started_unix_us,
                load_us = load.as_micros() as u64,
                translate_us = applied.translate.as_micros() as u64,
                build_us = applied.build.as_micros() as u64,
                "configuration loaded and published"
            );
            if let Some(state) = &self.state {
                state.save(self.cache.served_files());
            }
        }
    }

    /// Sends the load's problems to `/readyz` and the metrics; whether they
    /// changed (a problem is logged when it is news).
    fn note_problems(&self, lines: Vec<String>) -> bool {
        let now = Problems {
            lines,
            from_state: self.cache.served_from_state(),
        };
        self.problems.send_if_modified(|p| {
            let changed = *p != now;
            *p = now;
            changed
        })
    }

    /// Whether a load may be published (and counts it): not the first one
    /// while a file fails without saved state to stand in for it, nor while
    /// a file is still being written.
    fn may_publish(&self, first: bool, failure: Option<source::LoadFailure>, news: bool) -> bool {
        let held = self.cache.held().is_some();
        let seeded = !self.cache.served_from_state().is_empty();
        if first
            && !seeded
            && let Some(failure) = failure
        {
            self.pipeline.stats.loads_failed.inc();
            if news {
                error!("{failure}; nothing is served until every file loads");
            }
            return false;
        }
        if first && held {
            // A file is still being written: the first configuration waits.
            return false;
        }
        match failure {
            None if !held => {
                self.pipeline.stats.loads_ok.inc();
            }
            None => {}
            Some(failure) => {
                if news {
                    error!(
                        "{failure}; those files keep their last good version, every other file is loaded"
                    );
                }
                self.pipeline.stats.loads_failed.inc();
            }
        };
        true
    }

    /// Whether a load with `left` Gateways is refused over a running
    /// configuration of `running` (an emptied directory is not published
    /// unless `--allow-empty-config`).
    fn refuses_empty(&self, left: usize, running: usize) -> bool {
        if left == 0 && running > 0 && !self.allow_empty {
            self.pipeline.stats.refused_empty.inc();
            error!(
                dir = %self.dir.display(),
                running,
                "the configuration has no Gateway left; not published over the running one \
                 (an emptied or half-copied directory?). Pass --allow-empty-config to allow it"
            );
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(name: &str) -> String {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: aether-{name}}}\n\
             spec: {{controllerName: gateway.aether.io/edge}}\n---\n\
             apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}}}\n\
             spec: {{gatewayClassName: aether-{name}, listeners: [{{name: http, port: 80, protocol: HTTP}}]}}\n"
        )
    }

    /// The config thread on `dir` with no rescan to speak of: only file
    /// events can make it see a change.
    fn watching(
        dir: &std::path::Path,
    ) -> (
        Arc<Pipeline>,
        std::sync::mpsc::Sender<Wake>,
        std::thread::JoinHandle<()>,
    ) {
        let config = aether_gateway::Config {
            controller_name: crate::args::DEFAULT_CONTROLLER_NAME.into(),
            default_address: "127.0.0.1".into(),
            shared_ports: true,
            external_hostnames: false,
        };
        let pipeline = Arc::new(Pipeline::new(config, aether_xds::Builder::default()));
        let source = Source {
            dir: dir.to_path_buf(),
            pipeline: pipeline.clone(),
            cache: ParseCache::new(source::Limits {
                settle: Duration::from_millis(50),
                ..source::Limits::default()
            }),
            allow_empty: false,
            state: None,
            problems: tokio::sync::watch::channel(Problems::default()).0,
            rescan: Duration::from_secs(3600),
        };
        let (wake, events) = std::sync::mpsc::channel();
        let thread = std::thread::spawn({
            let wake = wake.clone();
            move || watch_dir(source, wake, events)
        });
        (pipeline, wake, thread)
    }

    /// A fresh scratch dir for test `test`, and in it `config/` holding
    /// `<gateway_name>.yaml` (that Gateway and its class).
    fn config_dir(test: &str, gateway_name: &str) -> (PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!("aether-edge-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("config");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(format!("{gateway_name}.yaml")),
            gateway(gateway_name),
        )
        .unwrap();
        (base, dir)
    }

    /// Waits for a publication whose Gateways are `names`.
    fn wait_gateways(pipeline: &Pipeline, names: &[&str], what: &str) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let mut rx = pipeline.subscribe();
        let seen = rt.block_on(async {
            let published = rx.wait_for(|p| {
                p.as_ref().is_some_and(|p| {
                    let served: Vec<&str> = p
                        .store
                        .all::<gateway_api::apis::experimental::gateways::Gateway>()
                        .keys()
                        .map(|k| k.name.as_str())
                        .collect();
                    served == names
                })
            });
            tokio::time::timeout(Duration::from_secs(10), published)
                .await
                .is_ok()
        });
        assert!(seen, "{what}: never published Gateways {names:?}");
    }

    #[test]
    fn a_change_after_a_quiet_spell_loads_at_once_and_a_burst_is_gathered() {
        assert_eq!(burst_gather(Duration::from_secs(1)), None);
        assert_eq!(burst_gather(DEBOUNCE), None);
        assert_eq!(burst_gather(Duration::ZERO), Some(DEBOUNCE));
        assert_eq!(burst_gather(DEBOUNCE / 2), Some(DEBOUNCE));
    }

    #[test]
    fn every_file_of_a_burst_of_moves_is_served() {
        let (base, dir) = config_dir("burst", "g000");
        let (pipeline, wake, thread) = watching(&dir);
        wait_gateways(&pipeline, &["g000"], "the first load");
        // The first move is loaded at once, the rest while and after it loads.
        let names: Vec<String> = (0..40).map(|i| format!("g{i:03}")).collect();
        for name in &names[1..] {
            let tmp = base.join(format!("{name}.tmp"));
            std::fs::write(&tmp, gateway(name)).unwrap();
            std::fs::rename(&tmp, dir.join(format!("{name}.yaml"))).unwrap();
        }
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        wait_gateways(&pipeline, &names, "a burst of 39 moves");
        let _ = wake.send(Wake::Stop);
        thread.join().unwrap();
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn events_are_seen_after_the_directory_is_replaced() {
        let (base, dir) = config_dir("replaced", "a");
        let (pipeline, wake, thread) = watching(&dir);
        wait_gateways(&pipeline, &["a"], "the first load");
        // Replaced: renamed away, a new one in its place.
        std::fs::rename(&dir, base.join("config.old")).unwrap();
        let fresh = base.join("config.new");
        std::fs::create_dir(&fresh).unwrap();
        std::fs::write(fresh.join("a.yaml"), gateway("c")).unwrap();
        std::fs::rename(&fresh, &dir).unwrap();
        wait_gateways(&pipeline, &["c"], "the new directory");
        // Then an edit in the new directory, seen only through its events.
        std::fs::write(base.join("b.tmp"), gateway("b")).unwrap();
        std::fs::rename(base.join("b.tmp"), dir.join("b.yaml")).unwrap();
        wait_gateways(
            &pipeline,
            &["b", "c"],
            "a file moved into the new directory",
        );
        let _ = wake.send(Wake::Stop);
        thread.join().unwrap();
        let _ = std::fs::remove_dir_all(&base);
    }
}
