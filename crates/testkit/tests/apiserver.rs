//! The kit against the real binaries: CRDs usable, credentials right (admin, RBAC-limited
//! impersonation, kubeconfig for child processes), outage and recovery, and no process or
//! directory left behind after drop, a panic, or a SIGKILL of the test process.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aether_testkit::ApiServer;
use futures::StreamExt;
use gateway_api::apis::experimental::gateways::Gateway;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::json;

fn namespace(name: &str) -> Namespace {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

fn gateway(ns: &str, name: &str) -> Gateway {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "gatewayClassName": "aether-edge",
            "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP"},
                {"name": "http-alt", "port": 8080, "protocol": "HTTP", "hostname": "a.example.com"},
            ],
        },
    }))
    .unwrap()
}

async fn create_namespace(client: &Client, name: &str) {
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace(name))
        .await
        .unwrap();
}

#[tokio::test]
async fn gateway_round_trips_and_credentials_work() {
    let server = ApiServer::start().await;
    let client = server.client();
    create_namespace(&client, "edge").await;
    let read = the_real_crd_defaults_and_validates_a_gateway(&client).await;
    exactly_the_pinned_gateway_api_crds_are_installed(&client).await;
    the_kubeconfig_file_alone_is_enough_for_a_child_process(&server, &read).await;
    rbac_and_tokens_are_enforced(&server).await;
}

/// Returns the Gateway as read back.
async fn the_real_crd_defaults_and_validates_a_gateway(client: &Client) -> Gateway {
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), "edge");
    gateways
        .create(&PostParams::default(), &gateway("edge", "gw"))
        .await
        .unwrap();
    let read = gateways.get("gw").await.unwrap();
    let listeners: Vec<(String, i32, Option<String>)> = read
        .spec
        .listeners
        .iter()
        .map(|l| (l.name.clone(), l.port, l.hostname.clone()))
        .collect();
    assert_eq!(
        listeners,
        [
            ("http".into(), 80, None),
            ("http-alt".into(), 8080, Some("a.example.com".into()))
        ]
    );
    // Defaulted by the CRD schema: proof that the real CRD served the request.
    let from = read.spec.listeners[0]
        .allowed_routes
        .as_ref()
        .and_then(|a| a.namespaces.as_ref())
        .and_then(|n| n.from.as_ref())
        .map(|f| format!("{f:?}"));
    assert_eq!(from.as_deref(), Some("Same"));
    // The CRD schema's validation is live too: a listener port of 0 is refused.
    let mut bad = gateway("edge", "bad");
    bad.spec.listeners[0].port = 0;
    let err = gateways.create(&PostParams::default(), &bad).await;
    assert!(err.is_err(), "port 0 accepted: {err:?}");
    read
}

/// All carrying the bundle version the conformance module pins (the CRDs come
/// from its module dir, `.../gateway-api@<version>/config/crd/experimental`).
async fn exactly_the_pinned_gateway_api_crds_are_installed(client: &Client) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let mut names: Vec<String> = crds
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    names.sort();
    assert!(names.contains(&"httproutes.gateway.networking.k8s.io".to_string()));
    assert!(
        names.iter().all(|n| n.contains(".gateway.networking.")),
        "{names:?}"
    );
    let dir = aether_testkit::gateway_api_crd_dir().await.unwrap();
    let pinned = dir
        .to_string_lossy()
        .split("gateway-api@")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .map(str::to_string);
    for crd in &crds {
        let bundle = crd
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("gateway.networking.k8s.io/bundle-version"));
        assert_eq!(bundle.cloned(), pinned, "{}", dir.display());
    }
}

/// Server, CA and token: a client made from the file reads what was written.
async fn the_kubeconfig_file_alone_is_enough_for_a_child_process(
    server: &ApiServer,
    read: &Gateway,
) {
    let kubeconfig = Kubeconfig::read_from(server.kubeconfig_path()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    assert_eq!(
        config.cluster_url.to_string().trim_end_matches('/'),
        server.url()
    );
    let from_file = Client::try_from(config).unwrap();
    let seen = Api::<Gateway>::namespaced(from_file, "edge")
        .get("gw")
        .await
        .unwrap();
    assert_eq!(seen.metadata.uid, read.metadata.uid);
}

/// An identity without bindings is forbidden; a wrong token is rejected (the CA
/// and URL are right, so only the token is at fault).
async fn rbac_and_tokens_are_enforced(server: &ApiServer) {
    let nobody = server.client_as("system:serviceaccount:edge:nobody", &[]);
    match Api::<Gateway>::namespaced(nobody, "edge")
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("expected 403, got {other:?}"),
    }
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.root_cert = None;
    config.accept_invalid_certs = true;
    config.auth_info.token = Some("not-the-token".to_string().into());
    let stranger = Client::try_from(config).unwrap();
    match Api::<Namespace>::all(stranger)
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 401, "{status:?}"),
        other => panic!("expected 401, got {other:?}"),
    }
}

#[tokio::test]
async fn api_server_outage_and_recovery_on_the_same_port() {
    let mut server = ApiServer::start().await;
    let client = server.client();
    let url = server.url();
    create_namespace(&client, "before").await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let old_version = namespaces
        .list_metadata(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let (mut seen, watch) = watch_namespace_names(&namespaces);
    wait_for_name(&mut seen, "before").await;
    a_stopped_api_server_answers_nothing_and_etcd_compacts(&mut server, &namespaces, &old_version)
        .await;
    it_restarts_on_the_same_port_with_the_data(&mut server, &client, &url).await;
    a_watch_resumed_from_before_the_compaction_is_gone(&namespaces, &old_version).await;
    // ...and the watcher, which went through all of it, sees what came after.
    wait_for_name(&mut seen, "after").await;
    watch.abort();
}

/// A kube-runtime watcher running across the outage, reporting the names it sees.
fn watch_namespace_names(
    namespaces: &Api<Namespace>,
) -> (
    tokio::sync::mpsc::UnboundedReceiver<String>,
    tokio::task::JoinHandle<()>,
) {
    let (seen_tx, seen) = tokio::sync::mpsc::unbounded_channel();
    let stream = watcher(namespaces.clone(), watcher::Config::default()).default_backoff();
    let watch = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            if let Ok(watcher::Event::Apply(ns) | watcher::Event::InitApply(ns)) = event {
                let _ = seen_tx.send(ns.metadata.name.unwrap_or_default());
            }
        }
    });
    (seen, watch)
}

async fn a_stopped_api_server_answers_nothing_and_etcd_compacts(
    server: &mut ApiServer,
    namespaces: &Api<Namespace>,
    old_version: &str,
) {
    server.stop_apiserver().await;
    assert!(
        namespaces.get("before").await.is_err(),
        "the API server answered while stopped"
    );
    assert_eq!(server.pids().len(), 2, "etcd + watchdog only");
    server.stop_apiserver().await; // idempotent
    let compacted = server.compact_etcd().await.unwrap();
    assert!(compacted > old_version.parse::<i64>().unwrap());
}

/// The same client object works again, and etcd kept the data (the CRDs too).
async fn it_restarts_on_the_same_port_with_the_data(
    server: &mut ApiServer,
    client: &Client,
    url: &str,
) {
    server.start_apiserver().await;
    assert_eq!(server.url(), url);
    Api::<Namespace>::all(client.clone())
        .get("before")
        .await
        .unwrap();
    create_namespace(client, "after").await;
    Api::<Gateway>::namespaced(client.clone(), "after")
        .create(&PostParams::default(), &gateway("after", "gw"))
        .await
        .unwrap();
}

/// 410 Gone, as after a real watch expiry.
async fn a_watch_resumed_from_before_the_compaction_is_gone(
    namespaces: &Api<Namespace>,
    old_version: &str,
) {
    let expired = match namespaces.watch(&WatchParams::default(), old_version).await {
        Err(kube::Error::Api(status)) => status.code,
        Ok(events) => match std::pin::pin!(events).next().await {
            Some(Ok(WatchEvent::Error(status))) => status.code,
            other => panic!("expected a 410 watch error, got {other:?}"),
        },
        Err(other) => panic!("expected 410, got {other:?}"),
    };
    assert_eq!(expired, 410);
}

async fn wait_for_name(seen: &mut tokio::sync::mpsc::UnboundedReceiver<String>, name: &str) {
    let found = async {
        while let Some(got) = seen.recv().await {
            if got == name {
                return;
            }
        }
        panic!("watcher ended before {name} was seen");
    };
    // Generous: the watcher's backoff grows during the outage.
    tokio::time::timeout(Duration::from_secs(60), found)
        .await
        .unwrap_or_else(|_| panic!("{name} not seen by the watcher within 60 s"));
}

/// Running, as opposed to gone or a zombie waiting for a reaper that is not us.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name: "pid (comm) S ...".
        Ok(stat) => stat
            .rsplit(") ")
            .next()
            .is_some_and(|rest| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

async fn wait_gone(pids: &[u32], dir: &Path, within: Duration) {
    // AETHER_TESTKIT_KEEP=1 keeps directories on purpose (for their logs).
    let keep = std::env::var_os("AETHER_TESTKIT_KEEP").is_some();
    let begin = Instant::now();
    while pids.iter().any(|p| alive(*p)) || (dir.exists() && !keep) {
        assert!(
            begin.elapsed() < within,
            "left behind: pids {:?} alive, dir {} exists: {}",
            pids.iter().filter(|p| alive(**p)).collect::<Vec<_>>(),
            dir.display(),
            dir.exists()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn parallel_servers_are_independent_and_drop_leaves_nothing() {
    let (a, b) = tokio::join!(ApiServer::start(), ApiServer::start());
    assert_ne!(a.url(), b.url());
    assert_ne!(a.dir(), b.dir());
    create_namespace(&a.client(), "only-in-a").await;
    let in_b = Api::<Namespace>::all(b.client())
        .get_opt("only-in-a")
        .await
        .unwrap();
    assert!(in_b.is_none(), "servers share state");

    for server in [a, b] {
        let pids = server.pids();
        assert_eq!(pids.len(), 3);
        assert!(pids.iter().all(|p| alive(*p)));
        let dir = server.dir().to_path_buf();
        drop(server);
        // Drop kills and reaps synchronously: nothing to wait for.
        wait_gone(&pids, &dir, Duration::ZERO).await;
    }
}

#[tokio::test]
async fn a_panicking_test_leaves_nothing() {
    let (tx, rx) = std::sync::mpsc::channel::<(Vec<u32>, PathBuf)>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let server = ApiServer::start().await;
            tx.send((server.pids(), server.dir().to_path_buf()))
                .unwrap();
            panic!("test failure while the server runs");
        })
    });
    assert!(thread.join().is_err(), "the thread should have panicked");
    let (pids, dir) = rx.recv().unwrap();
    wait_gone(&pids, &dir, Duration::ZERO).await;
}

/// Run by `a_killed_test_process_leaves_nothing` in a child test process, which it then
/// SIGKILLs: no unwinding, no Drop; only the watchdog can clean up.
#[tokio::test]
#[ignore = "helper run in a child process by a_killed_test_process_leaves_nothing"]
async fn watchdog_child() {
    if std::env::var_os("AETHER_TESTKIT_WATCHDOG_CHILD").is_none() {
        return;
    }
    let server = ApiServer::start().await;
    let pids: Vec<String> = server.pids().iter().map(u32::to_string).collect();
    println!("SERVER {} {}", server.dir().display(), pids.join(" "));
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[tokio::test]
async fn a_killed_test_process_leaves_nothing() {
    use std::io::BufRead;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "watchdog_child", "--ignored", "--nocapture"])
        .env("AETHER_TESTKIT_WATCHDOG_CHILD", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let line = tokio::task::spawn_blocking(move || {
        stdout
            .lines()
            .map_while(Result::ok)
            .find(|l| l.starts_with("SERVER "))
    })
    .await
    .unwrap()
    .expect("the child printed its server");
    let mut words = line.split_whitespace().skip(1);
    let dir = PathBuf::from(words.next().unwrap());
    let pids: Vec<u32> = words.map(|w| w.parse().unwrap()).collect();
    assert_eq!(pids.len(), 3);
    assert!(pids.iter().all(|p| alive(*p)) && dir.exists());

    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The watchdog wakes on EOF of its stdin; the kernel needs a moment to tear down.
    wait_gone(&pids, &dir, Duration::from_secs(5)).await;
}

/// Other tests may share one server across threads (e.g. in a `static` or an `Arc`).
#[test]
fn api_server_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ApiServer>();
}

/// `start_without` leaves the named CRDs out (a test installs its own versions
/// of them) and keeps every other; a name that is not a pinned CRD is refused,
/// not silently ignored.
#[tokio::test]
async fn start_without_leaves_out_exactly_the_named_crds() {
    let udp = "udproutes.gateway.networking.k8s.io";
    let server = ApiServer::start_without(&[udp]).await;
    let api = Api::<CustomResourceDefinition>::all(server.client());
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert!(!names.iter().any(|n| n == udp), "{names:?}");
    assert!(
        names
            .iter()
            .any(|n| n == "tcproutes.gateway.networking.k8s.io"),
        "{names:?}"
    );
    drop(server);
    let refused = ApiServer::try_start_without(&["nothing.example.com"]).await;
    assert!(
        matches!(refused, Err(aether_testkit::Error::NoCrds(_))),
        "{refused:?}"
    );
}
