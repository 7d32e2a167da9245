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
use aether_ir::ObjectRef;
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
    for (ty, name) in s.gateways.get(gw).map(|r| &r.members).into_iter().flatten() {
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

fn rds_pushes(fleet: &Fleet) -> u64 {
    let metrics = fleet.render_metrics();
    aether_testkit::metric_sum(&metrics, "aether_ads_pushes_total", &["type=\"RDS\""])
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

async fn live(mode: &str, api_type: &str, unix: bool) {
    let dir = std::env::temp_dir().join(format!("aether-ads-envoy-{mode}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let listen_port = free_port();
    let (publish, snapshots) = watch::channel(snapshot(listen_port, 1, false));
    let fleet = Fleet::new();
    let listen = if unix {
        format!("unix:{}", dir.join("xds.sock").display())
    } else {
        format!("127.0.0.1:{}", free_port())
    };
    let (stop, served) = start_xds(&listen, snapshots.clone(), fleet.clone()).await;
    let xds = listen.clone();

    let node = format!("live-{mode}");
    let mut envoy = spawn_envoy(&dir, &node, api_type, &xds);

    let result = async {
        let s1 = snapshot(listen_port, 1, false);
        eventually("Envoy to ACK the Gateway", async || {
            acked(&fleet, &s1, &web())
        })
        .await;
        eventually("traffic from rev 1", async || {
            answers(listen_port, "rev 1").await
        })
        .await;

        // A route table with two `*` virtual hosts: Envoy rejects it.
        let s2 = snapshot(listen_port, 2, true);
        publish.send(s2.clone()).unwrap();
        let msg = eventually("a NACK", async || match fleet.gateway_state(&s2, &web()) {
            AckState::Nacked(m) => Ok(m),
            _ => Err(describe(&fleet, &s2, &web())),
        })
        .await;
        assert!(msg.contains(&node), "{msg}");
        assert!(msg.contains("RDS"), "{msg}");
        let pushes = rds_pushes(&fleet);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            rds_pushes(&fleet),
            pushes,
            "the rejected route table was resent"
        );
        assert_eq!(
            get(listen_port).await.as_deref(),
            Some("rev 1"),
            "old config still served"
        );

        let s3 = snapshot(listen_port, 3, false);
        publish.send(s3.clone()).unwrap();
        eventually("Envoy to ACK the fix", async || acked(&fleet, &s3, &web())).await;
        eventually("traffic from rev 3", async || {
            answers(listen_port, "rev 3").await
        })
        .await;

        // The cluster alone changes: Envoy warms the new one, which waits for its
        // endpoints; they follow the CDS push, so warming ends well before Envoy's
        // 15 s initial fetch timeout.
        let s4 = snapshot_with(
            listen_port,
            Variant {
                cluster_timeout_s: 2,
                ..Variant::rev(3)
            },
        );
        let pushed_at = tokio::time::Instant::now();
        publish.send(s4.clone()).unwrap();
        eventually("Envoy to ACK the updated cluster", async || {
            acked(&fleet, &s4, &web())
        })
        .await;
        let admin = std::fs::read_to_string(dir.join("admin.txt")).expect("Envoy admin address");
        let admin = admin.trim().to_string();
        eventually("the updated cluster to finish warming", async || {
            let stats = get_from(&admin, "/stats?filter=cluster_manager").await;
            let stats = stats.ok_or("no answer from Envoy's admin")?;
            let modified = stats.contains("cluster_manager.cluster_modified: 1\n");
            let warm = stats.contains("cluster_manager.warming_clusters: 0\n");
            if modified && warm { Ok(()) } else { Err(stats) }
        })
        .await;
        assert!(
            pushed_at.elapsed() < Duration::from_secs(10),
            "the updated cluster waited for its endpoints: {:?}",
            pushed_at.elapsed()
        );

        // The listener alone changes: the new one warms on the route table it
        // shares with the old one, so no RDS answer is needed.
        let s5 = snapshot_with(
            listen_port,
            Variant {
                cluster_timeout_s: 2,
                listener_stat_prefix: "web2",
                ..Variant::rev(3)
            },
        );
        let pushed_at = tokio::time::Instant::now();
        publish.send(s5.clone()).unwrap();
        eventually("the updated listener to finish warming", async || {
            let stats = get_from(&admin, "/stats?filter=listener_manager").await;
            let stats = stats.ok_or("no answer from Envoy's admin")?;
            let modified = stats.contains("listener_manager.listener_modified: 1\n");
            let warm = stats.contains("listener_manager.total_listeners_warming: 0\n");
            if modified && warm { Ok(()) } else { Err(stats) }
        })
        .await;
        assert!(
            pushed_at.elapsed() < Duration::from_secs(10),
            "the updated listener waited: {:?}",
            pushed_at.elapsed()
        );
        eventually("Envoy to ACK the updated listener", async || {
            acked(&fleet, &s5, &web())
        })
        .await;
        assert_eq!(get(listen_port).await.as_deref(), Some("rev 3"));
        let s3 = s5;

        // The control plane restarts with no memory: Envoy keeps serving, then
        // reconnects and ACKs again (in Delta, from what it reports holding).
        stop.send(()).unwrap();
        tokio::time::timeout(WAIT, served)
            .await
            .expect("shutdown with Envoy connected")
            .unwrap();
        assert_eq!(
            get(listen_port).await.as_deref(),
            Some("rev 3"),
            "served while xDS is down"
        );
        let fleet = Fleet::new();
        let (_stop, _served) = start_xds(&listen, snapshots.clone(), fleet.clone()).await;
        eventually("Envoy to reconnect and ACK", async || {
            acked(&fleet, &s3, &web())
        })
        .await;
        if api_type == "DELTA_GRPC" {
            assert_eq!(
                rds_pushes(&fleet),
                0,
                "the route table Envoy holds is not resent"
            );
        }
        assert_eq!(get(listen_port).await.as_deref(), Some("rev 3"));

        // After the reconnect, listeners are still a wildcard subscription: a new
        // one is pushed and serves.
        let second_port = free_port();
        let s6 = snapshot_with(
            listen_port,
            Variant {
                cluster_timeout_s: 2,
                listener_stat_prefix: "web2",
                second_port: Some(second_port),
                ..Variant::rev(3)
            },
        );
        publish.send(s6.clone()).unwrap();
        eventually("Envoy to ACK the new listener", async || {
            acked(&fleet, &s6, &web())
        })
        .await;
        eventually("traffic on the new listener", async || {
            answers(second_port, "rev 3").await
        })
        .await;
        msg
    };
    let msg = tokio::time::timeout(WAIT * 3, result).await;
    let _ = envoy.child.kill().await;
    let msg = msg.unwrap_or_else(|_| panic!("live {mode} test timed out"));
    assert!(
        msg.contains("wildcard"),
        "Envoy's own reason reaches the fleet view: {msg}"
    );
    let _ = std::fs::remove_dir_all(&dir);
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
async fn partial(mode: &str, api_type: &str) {
    let dir = std::env::temp_dir().join(format!(
        "aether-ads-envoy-partial-{mode}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let listen_port = free_port();
    let s1 = snapshot(listen_port, 1, false);
    let (publish, snapshots) = watch::channel(s1.clone());
    let fleet = Fleet::new();
    let listen = format!("127.0.0.1:{}", free_port());
    let (_stop, _served) = start_xds(&listen, snapshots, fleet.clone()).await;
    let node = format!("partial-{mode}");
    let mut envoy = spawn_envoy(&dir, &node, api_type, &listen);

    let checks = async {
        eventually("Envoy to ACK the Gateway", async || {
            acked(&fleet, &s1, &web())
        })
        .await;
        let second_port = free_port();
        let s2 = snapshot_with(
            listen_port,
            Variant {
                second_port: Some(second_port),
                bad_listener: true,
                ..Variant::rev(1)
            },
        );
        publish.send(s2.clone()).unwrap();
        let bad = aether_ir::ObjectRef::new("edge", "bad");
        let msg = eventually("edge/bad NACKed", async || {
            match fleet.gateway_state(&s2, &bad) {
                AckState::Nacked(m) => Ok(m),
                _ => Err(describe(&fleet, &s2, &bad)),
            }
        })
        .await;
        assert!(msg.contains(&node) && msg.contains("bad"), "{msg}");
        assert_eq!(
            fleet.gateway_state(&s2, &web()),
            AckState::Acked,
            "the good listener of the same push was taken"
        );
        eventually("traffic on the good new listener", async || {
            answers(second_port, "rev 1").await
        })
        .await;
        let pushes = lds_pushes(&fleet);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            lds_pushes(&fleet),
            pushes,
            "the rejected listener was resent"
        );
    };
    let done = tokio::time::timeout(WAIT * 2, checks).await;
    let _ = envoy.child.kill().await;
    done.unwrap_or_else(|_| panic!("partial {mode} test timed out"));
    let _ = std::fs::remove_dir_all(&dir);
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
async fn isolation(mode: &str, api_type: &str) {
    let dir = std::env::temp_dir().join(format!(
        "aether-ads-envoy-isolation-{mode}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (web_port, other_port) = (free_port(), free_port());
    let at = |broken: bool, rev: u32| with_other(&snapshot(web_port, 1, broken), other_port, rev);
    let s1 = at(false, 1);
    let (publish, snapshots) = watch::channel(s1.clone());
    let fleet = Fleet::new();
    let listen = format!("127.0.0.1:{}", free_port());
    let (_stop, _served) = start_xds(&listen, snapshots, fleet.clone()).await;
    let node = format!("isolation-{mode}");
    let mut envoy = spawn_envoy(&dir, &node, api_type, &listen);

    let checks = async {
        eventually("both Gateways served", async || {
            let other = answers(other_port, "other rev 1").await;
            let web = acked(&fleet, &s1, &web());
            match (other, web) {
                (Ok(()), Ok(())) => Ok(()),
                (other, web) => Err(format!("other: {}; web: {}", seen(other), seen(web))),
            }
        })
        .await;
        let mut took = Vec::new();
        for rev in 2..23 {
            let s = at(true, rev);
            let started = std::time::Instant::now();
            publish.send(s.clone()).unwrap();
            let want = format!("other rev {rev}");
            // Event-driven, so the time is Envoy's, not a poll interval's.
            let mut changes = fleet.subscribe();
            let acks = async {
                while fleet.gateway_state(&s, &other()) != AckState::Acked {
                    changes.changed().await.expect("fleet alive");
                }
            };
            if tokio::time::timeout(WAIT, acks).await.is_err() {
                panic!(
                    "timed out waiting for {want} to be ACKed; last seen: {}",
                    describe(&fleet, &s, &other())
                );
            }
            took.push(started.elapsed());
            eventually(&format!("{want} served"), async || {
                answers(other_port, &want).await
            })
            .await;
            let web_state = fleet.gateway_state(&s, &web());
            assert!(
                matches!(&web_state, AckState::Nacked(m) if m.contains(&node)),
                "rev {rev}: the broken Gateway stays rejected: {web_state:?}"
            );
            assert_eq!(
                get(web_port).await.as_deref(),
                Some("rev 1"),
                "web keeps its table"
            );
        }
        took.sort();
        eprintln!(
            "{mode}: 21 changes beside a refused route table, ACKed in median {:?}, max {:?}",
            took[took.len() / 2],
            took[took.len() - 1]
        );
    };
    let done = tokio::time::timeout(WAIT * 4, checks).await;
    let _ = envoy.child.kill().await;
    done.unwrap_or_else(|_| panic!("isolation {mode} test timed out"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_route_table_holds_back_no_other_gateway_sotw() {
    isolation("sotw", "GRPC").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_route_table_holds_back_no_other_gateway_delta() {
    isolation("delta", "DELTA_GRPC").await;
}
