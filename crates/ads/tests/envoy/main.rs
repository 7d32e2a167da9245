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
#[path = "../support/mod.rs"]
mod support;

use aether_ads::{AckState, AdsServer, Fleet, Protocol, bind, serve_on};
use aether_ir::ObjectRef;
use aether_xds::Snapshot;
use config::{Variant, bad, other, snapshot, snapshot_with, web, with_other};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{oneshot, watch};

const WAIT: Duration = Duration::from_secs(30);

use aether_testkit::envoy_bin;
use aether_testkit::live::free_port;

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

/// How long one GET may take. Envoy answers at once (and closes the connection
/// a second later, its delayed close); whatever else holds the port may never
/// answer, which must not hang the check that reports it.
const GET_TIMEOUT: Duration = Duration::from_secs(10);

/// GET `path` from `address`; the body, if anything answered in time.
async fn get_from(address: &str, path: &str) -> Option<String> {
    let get = async {
        let mut conn = tokio::net::TcpStream::connect(address).await.ok()?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: web.example\r\nConnection: close\r\n\r\n");
        conn.write_all(request.as_bytes()).await.ok()?;
        let mut raw = String::new();
        conn.read_to_string(&mut raw).await.ok()?;
        raw.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
    };
    tokio::time::timeout(GET_TIMEOUT, get).await.ok()?
}

/// Polls `check` until it gives `Ok`. Each `Err` says what the check saw; on
/// timeout the last one is in the panic message.
async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Result<T, String>) -> T {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let seen = match check().await {
            Ok(v) => return v,
            Err(seen) => seen,
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; last seen: {seen}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `Ok` when GET / on the Envoy listener at `port` answers `body`; else what it
/// answered.
async fn answers(port: u16, body: &str) -> Result<(), String> {
    let got = get(port).await;
    if got.as_deref() == Some(body) {
        Ok(())
    } else {
        Err(format!("GET :{port} answered {got:?}"))
    }
}

/// What a check of several parts saw of one.
fn seen(part: Result<(), String>) -> String {
    part.err().unwrap_or_else(|| "as wanted".into())
}

/// `Ok` when Gateway `gw` of `s` is Acked; else [`describe`].
fn acked(fleet: &Fleet, s: &Snapshot, gw: &ObjectRef) -> Result<(), String> {
    match fleet.gateway_state(s, gw) {
        AckState::Acked => Ok(()),
        _ => Err(describe(fleet, s, gw)),
    }
}

/// Gateway `gw`'s state for `s`, and per member the version `s` holds beside
/// what each connected node ACKed (versions cut to 12 characters).
fn describe(fleet: &Fleet, s: &Snapshot, gw: &ObjectRef) -> String {
    let short = |v: &str| v.get(..12).unwrap_or(v).to_string();
    let mut out = format!("{gw} {:?}", fleet.gateway_state(s, gw));
    let view = fleet.debug_view();
    if view.nodes.is_empty() {
        out.push_str("; no node connected");
    }
    for (ty, name) in s
        .gateways
        .get(gw)
        .map(|r| r.members.iter())
        .into_iter()
        .flatten()
    {
        let want = s.version_of(*ty, name).map(short);
        out.push_str(&format!("; {} {name}: want {want:?}", ty.short_name()));
        for (node, n) in &view.nodes {
            let have = n
                .acked
                .get(ty.short_name())
                .and_then(|t| t.resources.get(name))
                .map(|v| short(v));
            out.push_str(&format!(", {node} ({} streams) acked {have:?}", n.streams));
        }
    }
    for (node, n) in &view.nodes {
        if let Some(nack) = &n.last_nack {
            out.push_str(&format!("; {node} last NACK: {nack:?}"));
        }
    }
    out
}

/// How many responses of type `ty` (`"RDS"`, `"LDS"`) the fleet has pushed.
fn pushes(fleet: &Fleet, ty: &str) -> u64 {
    let ty = aether_xds::ResourceType::ALL
        .into_iter()
        .find(|t| t.short_name() == ty)
        .expect("an xDS type");
    Protocol::ALL
        .into_iter()
        .map(|p| fleet.metrics().pushes(ty, p))
        .sum()
}

/// A running Envoy, killed when dropped. Dropped while the test panics (an
/// `eventually`, an assertion, the test's own timeout), it prints its log.
struct Envoy {
    child: tokio::process::Child,
    log: PathBuf,
}

impl Envoy {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- Envoy log ({}) ----\n{}---- end of Envoy log ----",
                self.log.display(),
                self.log()
            );
        }
    }
}

/// Starts a real Envoy bootstrapped for `node` against `xds`, its files in
/// `dir` (its admin address in `admin.txt`, its log in `envoy.log`).
fn spawn_envoy(dir: &Path, node: &str, api_type: &str, xds: &str) -> Envoy {
    let envoy = envoy_bin();
    let config = dir.join("bootstrap.yaml");
    std::fs::write(&config, bootstrap(node, api_type, xds)).unwrap();
    let log = dir.join("envoy.log");
    let child = tokio::process::Command::new(&envoy)
        .arg("-c")
        .arg(&config)
        .args(["--disable-hot-restart", "--concurrency", "1", "-l", "info"])
        // What it received, ACKed and rejected, for the log a failure prints.
        .args(["--component-log-level", "config:debug"])
        .arg("--admin-address-path")
        .arg(dir.join("admin.txt"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", envoy.display()));
    Envoy { child, log }
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

/// How Envoy reaches our ADS server.
#[derive(Clone, Copy)]
enum Xds {
    Tcp,
    Unix,
}

/// One Envoy against one ADS server of ours, its files in a directory of its own.
struct Run {
    /// What a time-out names: `<kind> <mode>`.
    test: String,
    node: String,
    api_type: &'static str,
    dir: PathBuf,
    /// Where the ADS server listens, again after a restart.
    listen: String,
    /// The port of Gateway edge/web's listener.
    web_port: u16,
    publish: watch::Sender<Arc<Snapshot>>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    fleet: Fleet,
    /// Stops the ADS server; taken while it is down.
    xds: Option<(oneshot::Sender<()>, tokio::task::JoinHandle<()>)>,
    envoy: Envoy,
}

/// Envoy `<kind>-<mode>`, speaking ADS as `api_type`, against our ADS server on
/// `xds`, which serves `first(web_port)`.
async fn given_envoy_on(
    kind: &str,
    mode: &str,
    api_type: &'static str,
    xds: Xds,
    first: impl FnOnce(u16) -> Arc<Snapshot>,
) -> Run {
    let node = format!("{kind}-{mode}");
    let dir = std::env::temp_dir().join(format!("aether-ads-envoy-{node}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let web_port = free_port();
    let (publish, snapshots) = watch::channel(first(web_port));
    let fleet = Fleet::new();
    let listen = match xds {
        Xds::Unix => format!("unix:{}", dir.join("xds.sock").display()),
        Xds::Tcp => format!("127.0.0.1:{}", free_port()),
    };
    let xds = Some(start_xds(&listen, snapshots.clone(), fleet.clone()).await);
    let envoy = spawn_envoy(&dir, &node, api_type, &listen);
    Run {
        test: format!("{kind} {mode}"),
        node,
        api_type,
        dir,
        listen,
        web_port,
        publish,
        snapshots,
        fleet,
        xds,
        envoy,
    }
}

impl Run {
    /// Plays `script` within `limit`, then stops Envoy. A time-out fails the
    /// test; Envoy's log follows, as on any panic while the run is held.
    async fn play<T>(&mut self, limit: Duration, script: impl AsyncFnOnce(&mut Run) -> T) -> T {
        let done = tokio::time::timeout(limit, script(self)).await;
        let _ = self.envoy.child.kill().await;
        done.unwrap_or_else(|_| panic!("{} test timed out", self.test))
    }

    /// Removes the run's files. A failed run panics before this, so its files,
    /// Envoy's log among them, stay to be read.
    fn clean_up(self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    fn push(&self, s: &Arc<Snapshot>) {
        self.publish.send(s.clone()).unwrap();
    }

    /// Envoy's admin address, from the file it writes at start.
    fn admin(&self) -> String {
        let admin =
            std::fs::read_to_string(self.dir.join("admin.txt")).expect("Envoy admin address");
        admin.trim().to_string()
    }
}

/// Waits until Envoy ACKed Gateway edge/web of `s`.
async fn then_acked(run: &Run, s: &Snapshot, what: &str) {
    eventually(what, async || acked(&run.fleet, s, &web())).await;
}

/// Waits until Envoy ACKed `s`, then until edge/web answers `body`.
async fn then_acked_and_serves(run: &Run, s: &Snapshot, what: &str, body: &str) {
    then_acked(run, s, what).await;
    then_serves(run.web_port, body, &format!("traffic from {body}")).await;
}

/// Waits until Gateway `gw` of `s` is NACKed by the run's Envoy; the NACK's text.
async fn then_nacked(run: &Run, s: &Snapshot, gw: &ObjectRef, what: &str) -> String {
    let rejection = eventually(what, async || match run.fleet.gateway_state(s, gw) {
        AckState::Nacked(rejection) => Ok(rejection),
        _ => Err(describe(&run.fleet, s, gw)),
    })
    .await;
    assert_eq!(rejection.node, run.node, "the NACK names its node");
    rejection.message
}

/// Waits until GET / on `port` answers `body`.
async fn then_serves(port: u16, body: &str, what: &str) {
    eventually(what, async || answers(port, body).await).await;
}

/// GET / on `port` answers `body` at once.
async fn then_still_serves(port: u16, body: &str, why: &str) {
    assert_eq!(get(port).await.as_deref(), Some(body), "{why}");
}

/// No `ty` response goes out for a second; one would be `resent`.
async fn then_not_resent(fleet: &Fleet, ty: &str, resent: &str) {
    let before = pushes(fleet, ty);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(pushes(fleet, ty), before, "{resent}");
}

/// Waits until Envoy's `manager` stats count one `modified` and none `warming`.
async fn then_warmed(admin: &str, manager: &str, (modified, warming): (&str, &str), what: &str) {
    let path = format!("/stats?filter={manager}");
    let modified = format!("{manager}.{modified}: 1\n");
    let warm = format!("{manager}.{warming}: 0\n");
    eventually(what, async || {
        let stats = get_from(admin, &path).await;
        let stats = stats.ok_or("no answer from Envoy's admin")?;
        if stats.contains(&modified) && stats.contains(&warm) {
            Ok(())
        } else {
            Err(stats)
        }
    })
    .await;
}

/// Well before Envoy's 15 s initial fetch timeout since `pushed_at`; else `waited`.
fn then_soon_after(pushed_at: tokio::time::Instant, waited: &str) {
    assert!(
        pushed_at.elapsed() < Duration::from_secs(10),
        "{waited}: {:?}",
        pushed_at.elapsed()
    );
}

async fn live(mode: &str, api_type: &'static str, xds: Xds) {
    let first = |port| snapshot(port, 1, false);
    let mut run = given_envoy_on("live", mode, api_type, xds, first).await;
    let nack = run
        .play(WAIT * 3, async |run| {
            let s1 = first(run.web_port);
            then_acked_and_serves(run, &s1, "Envoy to ACK the Gateway", "rev 1").await;
            let nack = a_broken_route_table_is_nacked_and_not_resent(run).await;
            the_fix_is_acked_and_served(run).await;
            an_updated_cluster_warms_well_before_the_fetch_timeout(run).await;
            let current = an_updated_listener_warms_on_the_route_table_it_shares(run).await;
            envoy_serves_through_a_control_plane_restart_and_acks_again(run, &current).await;
            a_listener_added_after_the_reconnect_is_served(run).await;
            nack
        })
        .await;
    assert!(
        nack.contains("wildcard"),
        "Envoy's own reason reaches the fleet view: {nack}"
    );
    run.clean_up();
}

/// A route table with two `*` virtual hosts: Envoy rejects it, naming itself and
/// RDS; it is not resent, and rev 1 still serves. Returns the NACK.
async fn a_broken_route_table_is_nacked_and_not_resent(run: &Run) -> String {
    let s2 = snapshot(run.web_port, 2, true);
    run.push(&s2);
    let nack = then_nacked(run, &s2, &web(), "a NACK").await;
    assert!(nack.contains("RDS"), "{nack}");
    then_not_resent(&run.fleet, "RDS", "the rejected route table was resent").await;
    then_still_serves(run.web_port, "rev 1", "old config still served").await;
    nack
}

async fn the_fix_is_acked_and_served(run: &Run) {
    let s3 = snapshot(run.web_port, 3, false);
    run.push(&s3);
    then_acked_and_serves(run, &s3, "Envoy to ACK the fix", "rev 3").await;
}

/// The cluster alone changes: Envoy warms the new one, which waits for its
/// endpoints; they follow the CDS push, so warming ends well before Envoy's
/// 15 s initial fetch timeout.
async fn an_updated_cluster_warms_well_before_the_fetch_timeout(run: &Run) {
    let variant = Variant {
        cluster_timeout_s: 2,
        ..Variant::rev(3)
    };
    let s4 = snapshot_with(run.web_port, variant);
    let pushed_at = tokio::time::Instant::now();
    run.push(&s4);
    then_acked(run, &s4, "Envoy to ACK the updated cluster").await;
    let counts = ("cluster_modified", "warming_clusters");
    let what = "the updated cluster to finish warming";
    then_warmed(&run.admin(), "cluster_manager", counts, what).await;
    then_soon_after(pushed_at, "the updated cluster waited for its endpoints");
}

/// The listener alone changes: the new one warms on the route table it shares
/// with the old one, so no RDS answer is needed. Returns what Envoy then holds.
async fn an_updated_listener_warms_on_the_route_table_it_shares(run: &Run) -> Arc<Snapshot> {
    let variant = Variant {
        cluster_timeout_s: 2,
        listener_stat_prefix: "web2",
        ..Variant::rev(3)
    };
    let s5 = snapshot_with(run.web_port, variant);
    let pushed_at = tokio::time::Instant::now();
    run.push(&s5);
    let counts = ("listener_modified", "total_listeners_warming");
    let what = "the updated listener to finish warming";
    then_warmed(&run.admin(), "listener_manager", counts, what).await;
    then_soon_after(pushed_at, "the updated listener waited");
    then_acked(run, &s5, "Envoy to ACK the updated listener").await;
    then_still_serves(run.web_port, "rev 3", "the updated listener serves").await;
    s5
}

/// The control plane restarts with no memory: Envoy keeps serving, then
/// reconnects and ACKs `current` again (in Delta, from what it reports holding,
/// so the route table is not resent).
async fn envoy_serves_through_a_control_plane_restart_and_acks_again(
    run: &mut Run,
    current: &Snapshot,
) {
    let (stop, served) = run.xds.take().expect("the ADS server runs");
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, served)
        .await
        .expect("shutdown with Envoy connected")
        .unwrap();
    then_still_serves(run.web_port, "rev 3", "served while xDS is down").await;
    run.fleet = Fleet::new();
    run.xds = Some(start_xds(&run.listen, run.snapshots.clone(), run.fleet.clone()).await);
    then_acked(run, current, "Envoy to reconnect and ACK").await;
    if run.api_type == "DELTA_GRPC" {
        assert_eq!(
            pushes(&run.fleet, "RDS"),
            0,
            "the route table Envoy holds is not resent"
        );
    }
    then_still_serves(run.web_port, "rev 3", "served after the reconnect").await;
}

/// After the reconnect, listeners are still a wildcard subscription: a new one
/// is pushed and serves.
async fn a_listener_added_after_the_reconnect_is_served(run: &Run) {
    let second_port = free_port();
    let variant = Variant {
        cluster_timeout_s: 2,
        listener_stat_prefix: "web2",
        second_port: Some(second_port),
        ..Variant::rev(3)
    };
    let s6 = snapshot_with(run.web_port, variant);
    run.push(&s6);
    then_acked(run, &s6, "Envoy to ACK the new listener").await;
    then_serves(second_port, "rev 3", "traffic on the new listener").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_envoy_acks_sotw_over_tcp() {
    live("sotw", "GRPC", Xds::Tcp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_envoy_acks_delta_over_unix_socket() {
    live("delta", "DELTA_GRPC", Xds::Unix).await;
}

/// One push brings a good new listener (Gateway edge/web) and a bad one (Gateway
/// edge/bad). Envoy keeps the good one and names the bad one: edge/web is ACKed,
/// edge/bad is NACKed with Envoy's words, and nothing is resent.
async fn partial(mode: &str, api_type: &'static str) {
    let first = |port| snapshot(port, 1, false);
    let mut run = given_envoy_on("partial", mode, api_type, Xds::Tcp, first).await;
    run.play(WAIT * 2, async |run| {
        then_acked(run, &first(run.web_port), "Envoy to ACK the Gateway").await;
        let second_port = free_port();
        let variant = Variant {
            second_port: Some(second_port),
            bad_listener: true,
            ..Variant::rev(1)
        };
        let s2 = snapshot_with(run.web_port, variant);
        run.push(&s2);
        then_only_the_bad_listener_is_nacked(run, &s2).await;
        then_serves(second_port, "rev 1", "traffic on the good new listener").await;
        then_not_resent(&run.fleet, "LDS", "the rejected listener was resent").await;
    })
    .await;
    run.clean_up();
}

/// Waits until Gateway edge/bad of `s` is NACKed in Envoy's words; edge/web,
/// pushed with it, is ACKed.
async fn then_only_the_bad_listener_is_nacked(run: &Run, s: &Snapshot) {
    let nack = then_nacked(run, s, &bad(), "edge/bad NACKed").await;
    assert!(nack.contains("bad"), "{nack}");
    assert_eq!(
        run.fleet.gateway_state(s, &web()),
        AckState::Acked,
        "the good listener of the same push was taken"
    );
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
    let first = |port| at(port, false, 1);
    let mut run = given_envoy_on("isolation", mode, api_type, Xds::Tcp, first).await;
    run.play(WAIT * 4, async |run| {
        then_both_gateways_served(run, &first(run.web_port), other_port).await;
        let mut took = Vec::new();
        for rev in 2..23 {
            let s = at(run.web_port, true, rev);
            took.push(a_change_beside_the_refused_table_is_taken(run, &s, rev, other_port).await);
        }
        took.sort();
        eprintln!(
            "{mode}: 21 changes beside a refused route table, ACKed in median {:?}, max {:?}",
            took[took.len() / 2],
            took[took.len() - 1]
        );
    })
    .await;
    run.clean_up();
}

/// Waits until edge/other answers its rev 1 on `other_port` and edge/web of `s`
/// is ACKed.
async fn then_both_gateways_served(run: &Run, s: &Snapshot, other_port: u16) {
    eventually("both Gateways served", async || {
        let other = answers(other_port, "other rev 1").await;
        let web = acked(&run.fleet, s, &web());
        match (other, web) {
            (Ok(()), Ok(())) => Ok(()),
            (other, web) => Err(format!("other: {}; web: {}", seen(other), seen(web))),
        }
    })
    .await;
}

/// Pushes `s`, edge/other at `rev` beside edge/web's refused route table:
/// edge/other is ACKed and serves it; edge/web stays rejected and keeps serving
/// its rev 1. Returns how long the ACK took, event-driven so the time is
/// Envoy's, not a poll interval's.
async fn a_change_beside_the_refused_table_is_taken(
    run: &Run,
    s: &Arc<Snapshot>,
    rev: u32,
    other_port: u16,
) -> Duration {
    let started = std::time::Instant::now();
    run.push(s);
    let want = format!("other rev {rev}");
    let mut changes = run.fleet.subscribe();
    let acks = async {
        while run.fleet.gateway_state(s, &other()) != AckState::Acked {
            changes.changed().await.expect("fleet alive");
        }
    };
    if tokio::time::timeout(WAIT, acks).await.is_err() {
        panic!(
            "timed out waiting for {want} to be ACKed; last seen: {}",
            describe(&run.fleet, s, &other())
        );
    }
    let took = started.elapsed();
    then_serves(other_port, &want, &format!("{want} served")).await;
    let web_state = run.fleet.gateway_state(s, &web());
    assert!(
        matches!(&web_state, AckState::Nacked(r) if r.node == run.node),
        "rev {rev}: the broken Gateway stays rejected: {web_state:?}"
    );
    then_still_serves(run.web_port, "rev 1", "web keeps its table").await;
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
