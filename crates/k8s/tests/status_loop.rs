//! The whole loop against a real kube-apiserver, as the agent wires it: watches
//! feed the index, every change recomputes the assembled plan, the driver writes.
//! It converges (our own writes echoing back through the watch cause no further
//! writes) and an ACK turns into `Programmed=True` on the API server within 1 s.
//! A binary of its own, so that no other test runs beside the one that times.

use aether_gateway::{AckState, Addresses, Config, Served, assemble, translate};
use aether_k8s::Index;
use aether_k8s::leader::always_leader;
use aether_k8s::status::{self, StatusInputs, StatusKind, StatusWriter, WriteResult};
use aether_testkit::ApiServer;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::PostParams;
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

async fn create<K>(api: &Api<K>, value: Value)
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

async fn seed(client: &Client, gateways: usize) {
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": "infra"}}),
    )
    .await;
    create(
        &Api::<GatewayClass>::all(client.clone()),
        json!({"metadata": {"name": "aether"}, "spec": {"controllerName": "gateway.aether.io/edge"}}),
    )
    .await;
    for i in 0..gateways {
        create(
            &Api::<Gateway>::namespaced(client.clone(), "infra"),
            json!({"metadata": {"name": format!("gw{i}"), "namespace": "infra"}, "spec": {
                "gatewayClassName": "aether",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}),
        )
        .await;
        create(
            &Api::<HttpRoute>::namespaced(client.clone(), "infra"),
            json!({"metadata": {"name": format!("r{i}"), "namespace": "infra"}, "spec": {
                "parentRefs": [{"name": format!("gw{i}")}]}}),
        )
        .await;
    }
}

/// Recomputes the assembled plan on every store change or ACK change, as the agent does.
fn publish_inputs(
    index: Arc<Index>,
    mut acked: watch::Receiver<bool>,
) -> watch::Receiver<Arc<StatusInputs>> {
    let (tx, rx) = watch::channel(Arc::new(StatusInputs::default()));
    tokio::spawn(async move {
        let mut generation = index.subscribe();
        loop {
            let ack = if *acked.borrow_and_update() {
                AckState::Acked
            } else {
                AckState::Pending
            };
            if let Some(store) = index.store() {
                // Service address mode: each Gateway has Envoy ports of its own.
                let config = Config {
                    shared_ports: false,
                    ..Config::default()
                };
                let planned = translate(&store, &config).status;
                let served = |_: &_| Served::whole(ack.clone());
                let plan = assemble(&planned, served, &Addresses::Planned);
                tx.send_replace(Arc::new(StatusInputs {
                    plan,
                    store,
                    supported_features: vec!["Gateway".into()],
                    controller_name: config.controller_name,
                    served: aether_k8s::ServedVersions::all_v1(),
                    served_at: None,
                }));
            }
            tokio::select! {
                r = generation.changed() => if r.is_err() { return },
                r = acked.changed() => if r.is_err() { return },
            }
        }
    });
    rx
}

fn writes_ok(writer: &StatusWriter) -> u64 {
    [
        StatusKind::GatewayClass,
        StatusKind::Gateway,
        StatusKind::HttpRoute,
    ]
    .into_iter()
    .map(|kind| writer.metrics().writes(kind, WriteResult::Ok))
    .sum()
}

async fn programmed(api: &Api<Gateway>, name: &str) -> Option<String> {
    let gw = serde_json::to_value(api.get(name).await.ok()?).ok()?;
    gw["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Programmed")
        .and_then(|c| {
            Some(format!(
                "{}/{}",
                c["status"].as_str()?,
                c["reason"].as_str()?
            ))
        })
}

async fn wait_until(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> bool) -> Duration {
    let begin = Instant::now();
    while !check().await {
        assert!(begin.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    begin.elapsed()
}

const N: usize = 20;

#[tokio::test]
async fn the_loop_converges_and_an_ack_shows_within_a_second() {
    let server = ApiServer::start().await;
    let client = server.client();
    seed(&client, N).await;
    let (acked_tx, writer, tasks) = given_the_loop_as_the_agent_wires_it(&client);
    let gateways = Api::<Gateway>::namespaced(client.clone(), "infra");
    every_object_is_written_once_and_the_echoes_write_nothing(&gateways, &writer).await;
    // The fleet ACKs.
    acked_tx.send(true).unwrap();
    programmed_true_is_on_the_api_server_within_a_second(&gateways).await;
    for task in tasks {
        task.abort();
    }
}

/// The watches feed the index; the assembled plan follows it and the ACK switch
/// (returned, off); the driver writes with the returned writer.
fn given_the_loop_as_the_agent_wires_it(
    client: &Client,
) -> (
    watch::Sender<bool>,
    Arc<StatusWriter>,
    [tokio::task::JoinHandle<()>; 2],
) {
    let index = Arc::new(Index::new(aether_k8s::watch::KINDS));
    let (served, _) = watch::channel(None);
    let watches = tokio::spawn(aether_k8s::watch::run(
        client.clone(),
        index.clone(),
        served,
        aether_k8s::watch::REDISCOVER,
    ));
    let (acked_tx, acked) = watch::channel(false);
    let inputs = publish_inputs(index, acked);
    let writer = Arc::new(StatusWriter::default());
    let driver = tokio::spawn(status::run(
        client.clone(),
        inputs,
        always_leader(),
        writer.clone(),
    ));
    (acked_tx, writer, [driver, watches])
}

/// Pending first: every Gateway says so, and every object is written once. Our
/// writes come back through the watch; they cause no further writes.
async fn every_object_is_written_once_and_the_echoes_write_nothing(
    gateways: &Api<Gateway>,
    writer: &StatusWriter,
) {
    let last = format!("gw{}", N - 1);
    wait_until("pending status", Duration::from_secs(20), async || {
        programmed(gateways, &last).await.as_deref() == Some("False/Pending")
    })
    .await;
    wait_until("all written", Duration::from_secs(10), async || {
        writes_ok(writer) >= (1 + 2 * N) as u64
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let settled = writes_ok(writer);
    assert_eq!(settled, (1 + 2 * N) as u64, "one write per object");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(writes_ok(writer), settled, "no write when nothing changed");
    assert!(writer.metrics().unchanged() > 0);
}

async fn programmed_true_is_on_the_api_server_within_a_second(gateways: &Api<Gateway>) {
    let last = format!("gw{}", N - 1);
    let took = wait_until("programmed", Duration::from_secs(5), async || {
        programmed(gateways, &last).await.as_deref() == Some("True/Programmed")
    })
    .await;
    eprintln!("ACK to Programmed=True on {N} Gateways + {N} routes: {took:?}");
    assert!(took < Duration::from_secs(1), "took {took:?}");
    let gw = serde_json::to_value(gateways.get("gw0").await.unwrap()).unwrap();
    assert_eq!(gw["status"]["listeners"][0]["attachedRoutes"], 1);
}
