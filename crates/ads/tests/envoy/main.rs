//! A real Envoy against our ADS server, in SotW (over TCP) and Delta (over a unix
//! socket). Envoy must:
//!
//! - ACK what we serve and serve traffic from it;
//! - NACK a broken route table, which we do not resend in a loop, while it keeps
//!   serving the previous config; then take the fix;
//! - finish warming an updated cluster (its endpoints follow at once) and an
//!   updated listener well before its 15 s initial fetch timeout;
//! - keep serving while the control plane restarts, reconnect, ACK again (in Delta
//!   without resends) and still receive new listeners (wildcard kept);
//! - keep the good listener of a push whose other listener it rejects by name, so
//!   only the broken Gateway is NACKed.
//!
//! The Envoy binary comes from `ENVOY_BIN`, else `<workspace>/.tools/envoy/bin/envoy`
//! (installed by `scripts/get-envoy`).

mod config;

use aether_ads::{AckState, AdsServer, Fleet, bind, serve_on};
use aether_xds::Snapshot;
use config::{Variant, other, snapshot, snapshot_with, web, with_other};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{oneshot, watch};

const WAIT: Duration = Duration::from_secs(30);

use aether_testkit::envoy_bin;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An Envoy bootstrap that takes everything from our ADS server at `xds`.
fn bootstrap(node: &str, api_type: &str, xds: &str) -> String {
    let address = match xds.strip_prefix("unix:") {
        Some(path) => format!("{{pipe: {{path: \"{path}\"}}}}"),
        None => {
            let (host, port) = xds.rsplit_once(':').unwrap();
            format!("{{socket_address: {{address: \"{host}\", port_value: {port}}}}}")
        }
    };
    format!(
        r#"
node: {{id: "{node}", cluster: edge}}
admin: {{address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}}}
dynamic_resources:
  ads_config:
    api_type: {api_type}
    transport_api_version: V3
    set_node_on_first_message_only: true
    grpc_services: [{{envoy_grpc: {{cluster_name: xds}}}}]
  cds_config: {{ads: {{}}, resource_api_version: V3}}
  lds_config: {{ads: {{}}, resource_api_version: V3}}
static_resources:
  clusters:
  - name: xds
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    load_assignment:
      cluster_name: xds
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {address}}}}}]}}]
"#
    )
}

/// GET / on the Envoy listener; the body, if Envoy answered.
async fn get(port: u16) -> Option<String> {
    get_from(&format!("127.0.0.1:{port}"), "/").await
}

/// GET `path` from `address`; the body, if anything answered.
async fn get_from(address: &str, path: &str) -> Option<String> {
    let mut conn = tokio::net::TcpStream::connect(address).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: web.example\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.ok()?;
    let mut raw = String::new();
    conn.read_to_string(&mut raw).await.ok()?;
    raw.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn rds_pushes(fleet: &Fleet) -> u64 {
    let metrics = fleet.render_metrics();
    aether_testkit::metric_sum(&metrics, "aether_ads_pushes_total", &["type=\"RDS\""])
}

/// Starts a real Envoy bootstrapped for `node` against `xds`, its files in
/// `dir` (its admin address in `admin.txt`); returns it and its log's path.
fn spawn_envoy(
    dir: &Path,
    node: &str,
    api_type: &str,
    xds: &str,
) -> (tokio::process::Child, PathBuf) {
    let envoy = envoy_bin();
    let config = dir.join("bootstrap.yaml");
    std::fs::write(&config, bootstrap(node, api_type, xds)).unwrap();
    let log = dir.join("envoy.log");
    let child = tokio::process::Command::new(&envoy)
        .arg("-c")
        .arg(&config)
        .args(["--disable-hot-restart", "--concurrency", "1", "-l", "info"])
        .arg("--admin-address-path")
        .arg(dir.join("admin.txt"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", envoy.display()));
    (child, log)
}

/// Serves ADS on `listen`; send on the returned sender to stop it.
async fn start_xds(
    listen: &str,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    fleet: Fleet,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = bind(listen).await.expect("bind xDS");
    let (stop, stopped) = oneshot::channel::<()>();
    let server = AdsServer::new(snapshots, fleet);
    let served = tokio::spawn(async move {
        serve_on(listener, server, async {
            let _ = stopped.await;
        })
        .await
        .expect("xDS server");
    });
    (stop, served)
}

/// A real Envoy on our ADS server: the server's fleet view and snapshot channel,
/// Envoy's files in a directory of its own (removed when the run passes).
struct Rig {
    dir: PathBuf,
    node: String,
    api_type: &'static str,
    /// Where ADS listens, and its Gateway `edge/web` listener's port.
    listen: String,
    web_port: u16,
    publish: watch::Sender<Arc<Snapshot>>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    fleet: Fleet,
    /// The ADS server: its stop signal and task.
    xds: Option<(oneshot::Sender<()>, tokio::task::JoinHandle<()>)>,
    envoy: tokio::process::Child,
    log: PathBuf,
}

impl Rig {
    /// `what` names the run (its directory, Envoy's node); ADS on a unix socket
    /// when `unix`; `first` (given `edge/web`'s port) is served from the start.
    async fn start(
        what: &str,
        api_type: &'static str,
        unix: bool,
        first: impl Fn(u16) -> Arc<Snapshot>,
    ) -> Rig {
        let dir =
            std::env::temp_dir().join(format!("aether-ads-envoy-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let web_port = free_port();
        let (publish, snapshots) = watch::channel(first(web_port));
        let fleet = Fleet::new();
        let listen = if unix {
            format!("unix:{}", dir.join("xds.sock").display())
        } else {
            format!("127.0.0.1:{}", free_port())
        };
        let xds = Some(start_xds(&listen, snapshots.clone(), fleet.clone()).await);
        let node = what.to_string();
        let (envoy, log) = spawn_envoy(&dir, &node, api_type, &listen);
        Rig {
            dir,
            node,
            api_type,
            listen,
            web_port,
            publish,
            snapshots,
            fleet,
            xds,
            envoy,
            log,
        }
    }

    /// Runs `checks` within `limit`; then Envoy goes, and on a timeout its log is
    /// in the panic message.
    async fn run<T>(mut self, limit: Duration, checks: impl AsyncFnOnce(&mut Rig) -> T) -> T {
        let done = tokio::time::timeout(limit, checks(&mut self)).await;
        let _ = self.envoy.kill().await;
        let done = done.unwrap_or_else(|_| {
            panic!(
                "{} timed out; Envoy log:\n{}",
                self.node,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            )
        });
        let _ = std::fs::remove_dir_all(&self.dir);
        done
    }

    /// Publishes `s` and waits until Envoy ACKed `edge/web` in it.
    async fn publish_and_ack(&self, s: &Arc<Snapshot>, what: &str) {
        self.publish.send(s.clone()).unwrap();
        self.acked(s, what).await;
    }

    async fn acked(&self, s: &Snapshot, what: &str) {
        eventually(what, async || {
            (self.fleet.gateway_state(s, &web()) == AckState::Acked).then_some(())
        })
        .await;
    }

    /// Envoy's admin address, from the file it wrote.
    fn admin(&self) -> String {
        let admin =
            std::fs::read_to_string(self.dir.join("admin.txt")).expect("Envoy admin address");
        admin.trim().to_string()
    }
}

/// Waits until GET / on `port` answers `body`.
async fn then_serves(port: u16, body: &str, what: &str) {
    eventually(what, async || {
        (get(port).await.as_deref() == Some(body)).then_some(())
    })
    .await;
}

/// Waits until Envoy's stats (`filter`) say `modified` is 1 and `warming` 0.
async fn then_warmed(admin: &str, (filter, modified, warming): (&str, &str, &str), what: &str) {
    eventually(what, async || {
        let stats = get_from(admin, &format!("/stats?filter={filter}")).await?;
        let modified = stats.contains(&format!("{modified}: 1\n"));
        let warm = stats.contains(&format!("{warming}: 0\n"));
        (modified && warm).then_some(())
    })
    .await;
}

async fn live(mode: &str, api_type: &'static str, unix: bool) {
    let rig = Rig::start(&format!("live-{mode}"), api_type, unix, |port| {
        snapshot(port, 1, false)
    })
    .await;
    let msg = rig
        .run(WAIT * 3, async |rig| {
            rig.acked(
                &snapshot(rig.web_port, 1, false),
                "Envoy to ACK the Gateway",
            )
            .await;
            then_serves(rig.web_port, "rev 1", "traffic from rev 1").await;
            let msg = a_broken_route_table_is_nacked_not_resent_and_the_old_one_serves(rig).await;
            let s3 = snapshot(rig.web_port, 3, false);
            rig.publish_and_ack(&s3, "Envoy to ACK the fix").await;
            then_serves(rig.web_port, "rev 3", "traffic from rev 3").await;
            an_updated_cluster_warms_well_before_the_fetch_timeout(rig).await;
            let s5 = an_updated_listener_warms_on_the_route_table_it_shares(rig).await;
            a_restarted_control_plane_is_reconnected_to_and_acked(rig, &s5).await;
            listeners_stay_a_wildcard_after_the_reconnect(rig).await;
            msg
        })
        .await;
    assert!(
        msg.contains("wildcard"),
        "Envoy's own reason reaches the fleet view: {msg}"
    );
}

/// A route table with two `*` virtual hosts: Envoy rejects it. Returns the NACK.
async fn a_broken_route_table_is_nacked_not_resent_and_the_old_one_serves(rig: &Rig) -> String {
    let s2 = snapshot(rig.web_port, 2, true);
    rig.publish.send(s2.clone()).unwrap();
    let msg = eventually("a NACK", async || {
        match rig.fleet.gateway_state(&s2, &web()) {
            AckState::Nacked(m) => Some(m),
            _ => None,
        }
    })
    .await;
    assert!(msg.contains(&rig.node), "{msg}");
    assert!(msg.contains("RDS"), "{msg}");
    let pushes = rds_pushes(&rig.fleet);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        rds_pushes(&rig.fleet),
        pushes,
        "the rejected route table was resent"
    );
    assert_eq!(
        get(rig.web_port).await.as_deref(),
        Some("rev 1"),
        "old config still served"
    );
    msg
}

/// The cluster alone changes: Envoy warms the new one, which waits for its
/// endpoints; they follow the CDS push, so warming ends well before Envoy's 15 s
/// initial fetch timeout.
async fn an_updated_cluster_warms_well_before_the_fetch_timeout(rig: &Rig) {
    let variant = Variant {
        cluster_timeout_s: 2,
        ..Variant::rev(3)
    };
    let s4 = snapshot_with(rig.web_port, variant);
    let pushed_at = tokio::time::Instant::now();
    rig.publish_and_ack(&s4, "Envoy to ACK the updated cluster")
        .await;
    let stats = (
        "cluster_manager",
        "cluster_manager.cluster_modified",
        "cluster_manager.warming_clusters",
    );
    then_warmed(&rig.admin(), stats, "the updated cluster to finish warming").await;
    assert!(
        pushed_at.elapsed() < Duration::from_secs(10),
        "the updated cluster waited for its endpoints: {:?}",
        pushed_at.elapsed()
    );
}

/// The listener alone changes: the new one warms on the route table it shares
/// with the old one, so no RDS answer is needed. Returns that snapshot.
async fn an_updated_listener_warms_on_the_route_table_it_shares(rig: &Rig) -> Arc<Snapshot> {
    let variant = Variant {
        cluster_timeout_s: 2,
        listener_stat_prefix: "web2",
        ..Variant::rev(3)
    };
    let s5 = snapshot_with(rig.web_port, variant);
    let pushed_at = tokio::time::Instant::now();
    rig.publish.send(s5.clone()).unwrap();
    let stats = (
        "listener_manager",
        "listener_manager.listener_modified",
        "listener_manager.total_listeners_warming",
    );
    then_warmed(
        &rig.admin(),
        stats,
        "the updated listener to finish warming",
    )
    .await;
    assert!(
        pushed_at.elapsed() < Duration::from_secs(10),
        "the updated listener waited: {:?}",
        pushed_at.elapsed()
    );
    rig.acked(&s5, "Envoy to ACK the updated listener").await;
    assert_eq!(get(rig.web_port).await.as_deref(), Some("rev 3"));
    s5
}

/// The control plane restarts with no memory: Envoy keeps serving, then
/// reconnects and ACKs again (in Delta, from what it reports holding, so the
/// route table is not resent).
async fn a_restarted_control_plane_is_reconnected_to_and_acked(rig: &mut Rig, current: &Snapshot) {
    let (stop, served) = rig.xds.take().unwrap();
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, served)
        .await
        .expect("shutdown with Envoy connected")
        .unwrap();
    assert_eq!(
        get(rig.web_port).await.as_deref(),
        Some("rev 3"),
        "served while xDS is down"
    );
    rig.fleet = Fleet::new();
    rig.xds = Some(start_xds(&rig.listen, rig.snapshots.clone(), rig.fleet.clone()).await);
    rig.acked(current, "Envoy to reconnect and ACK").await;
    if rig.api_type == "DELTA_GRPC" {
        assert_eq!(
            rds_pushes(&rig.fleet),
            0,
            "the route table Envoy holds is not resent"
        );
    }
    assert_eq!(get(rig.web_port).await.as_deref(), Some("rev 3"));
}

/// A new listener is pushed and serves.
async fn listeners_stay_a_wildcard_after_the_reconnect(rig: &Rig) {
    let second_port = free_port();
    let variant = Variant {
        cluster_timeout_s: 2,
        listener_stat_prefix: "web2",
        second_port: Some(second_port),
        ..Variant::rev(3)
    };
    let s6 = snapshot_with(rig.web_port, variant);
    rig.publish_and_ack(&s6, "Envoy to ACK the new listener")
        .await;
    then_serves(second_port, "rev 3", "traffic on the new listener").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_envoy_acks_sotw_over_tcp() {
    live("sotw", "GRPC", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_envoy_acks_delta_over_unix_socket() {
    live("delta", "DELTA_GRPC", true).await;
}

fn lds_pushes(fleet: &Fleet) -> u64 {
    let metrics = fleet.render_metrics();
    aether_testkit::metric_sum(&metrics, "aether_ads_pushes_total", &["type=\"LDS\""])
}

/// One push brings a good new listener (Gateway edge/web) and a bad one (Gateway
/// edge/bad). Envoy keeps the good one and names the bad one: edge/web is ACKed,
/// edge/bad is NACKed with Envoy's words, and nothing is resent.
async fn partial(mode: &str, api_type: &'static str) {
    let first = |port| snapshot(port, 1, false);
    let rig = Rig::start(&format!("partial-{mode}"), api_type, false, first).await;
    rig.run(WAIT * 2, async |rig| {
        rig.acked(&first(rig.web_port), "Envoy to ACK the Gateway")
            .await;
        let second_port = free_port();
        let variant = Variant {
            second_port: Some(second_port),
            bad_listener: true,
            ..Variant::rev(1)
        };
        let s2 = snapshot_with(rig.web_port, variant);
        rig.publish.send(s2.clone()).unwrap();
        let bad = aether_ir::ObjectRef::new("edge", "bad");
        let msg = eventually("edge/bad NACKed", async || {
            match rig.fleet.gateway_state(&s2, &bad) {
                AckState::Nacked(m) => Some(m),
                _ => None,
            }
        })
        .await;
        assert!(msg.contains(&rig.node) && msg.contains("bad"), "{msg}");
        assert_eq!(
            rig.fleet.gateway_state(&s2, &web()),
            AckState::Acked,
            "the good listener of the same push was taken"
        );
        then_serves(second_port, "rev 1", "traffic on the good new listener").await;
        let pushes = lds_pushes(&rig.fleet);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            lds_pushes(&rig.fleet),
            pushes,
            "the rejected listener was resent"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_envoy_keeps_good_listeners_of_a_rejected_sotw_push() {
    partial("sotw", "GRPC").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_envoy_keeps_good_listeners_of_a_rejected_delta_push() {
    partial("delta", "DELTA_GRPC").await;
}

/// One Gateway's route table breaks (Envoy refuses it) in the same push as
/// another Gateway's changes; that one then changes 20 more times. Every change
/// of the healthy Gateway reaches Envoy, its state is Acked and names nothing of
/// the broken one's, and the broken one stays Nacked.
async fn isolation(mode: &str, api_type: &'static str) {
    let other_port = free_port();
    let at = move |web_port, broken: bool, rev: u32| {
        with_other(&snapshot(web_port, 1, broken), other_port, rev)
    };
    let rig = Rig::start(&format!("isolation-{mode}"), api_type, false, |p| {
        at(p, false, 1)
    })
    .await;
    rig.run(WAIT * 4, async |rig| {
        let s1 = at(rig.web_port, false, 1);
        eventually("both Gateways served", async || {
            (get(other_port).await.as_deref() == Some("other rev 1")
                && rig.fleet.gateway_state(&s1, &web()) == AckState::Acked)
                .then_some(())
        })
        .await;
        let mut took = Vec::new();
        for rev in 2..23 {
            took.push(
                a_change_beside_the_broken_table_is_acked_and_served(
                    rig,
                    at(rig.web_port, true, rev),
                    rev,
                    other_port,
                )
                .await,
            );
        }
        took.sort();
        eprintln!(
            "{mode}: 21 changes beside a refused route table, ACKed in median {:?}, max {:?}",
            took[took.len() / 2],
            took[took.len() - 1]
        );
    })
    .await;
}

/// Publishes `s` (the other Gateway at `rev`): how long until it is ACKed
/// (event-driven, so the time is Envoy's, not a poll interval's); then it serves,
/// and the broken Gateway stays rejected with its table.
async fn a_change_beside_the_broken_table_is_acked_and_served(
    rig: &Rig,
    s: Arc<Snapshot>,
    rev: u32,
    other_port: u16,
) -> Duration {
    let started = std::time::Instant::now();
    rig.publish.send(s.clone()).unwrap();
    let mut changes = rig.fleet.subscribe();
    while rig.fleet.gateway_state(&s, &other()) != AckState::Acked {
        changes.changed().await.expect("fleet alive");
    }
    let took = started.elapsed();
    let want = format!("other rev {rev}");
    then_serves(other_port, &want, &format!("{want} served")).await;
    let web_state = rig.fleet.gateway_state(&s, &web());
    assert!(
        matches!(&web_state, AckState::Nacked(m) if m.contains(&rig.node)),
        "rev {rev}: the broken Gateway stays rejected: {web_state:?}"
    );
    assert_eq!(
        get(rig.web_port).await.as_deref(),
        Some("rev 1"),
        "web keeps its table"
    );
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_route_table_holds_back_no_other_gateway_sotw() {
    isolation("sotw", "GRPC").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_route_table_holds_back_no_other_gateway_delta() {
    isolation("delta", "DELTA_GRPC").await;
}
