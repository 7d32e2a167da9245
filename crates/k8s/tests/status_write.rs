//! The status writer against a real kube-apiserver: server-side apply of every
//! kind, another controller's route parent preserved, our parent removed with its
//! parentRef, no write when nothing changed, a conflicting write refused, and an
//! outage reported (objects named, counted) then healed by the retrying driver.

use aether_gateway::{AckState, Addresses, Config, Served, Store, assemble, translate};
use aether_k8s::leader::always_leader;
use aether_k8s::status::{self, StatusInputs, StatusWriter};
use aether_testkit::{ApiServer, metric_sum};
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::httproutes::HttpRoute;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

const OURS: &str = "gateway.aether.io/edge";
const THEIRS: &str = "example.com/other";

async fn create<K>(api: &Api<K>, value: Value)
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

async fn seed(client: &Client) {
    for ns in ["infra", "apps"] {
        create(
            &Api::<Namespace>::all(client.clone()),
            json!({"metadata": {"name": ns}}),
        )
        .await;
    }
    create(
        &Api::<GatewayClass>::all(client.clone()),
        json!({"metadata": {"name": "aether"}, "spec": {"controllerName": OURS}}),
    )
    .await;
    create(
        &Api::<Gateway>::namespaced(client.clone(), "infra"),
        json!({"metadata": {"name": "web", "namespace": "infra"}, "spec": {
            "gatewayClassName": "aether",
            "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP",
                 "allowedRoutes": {"namespaces": {"from": "All"}}},
                {"name": "http-alt", "port": 8080, "protocol": "HTTP",
                 "allowedRoutes": {"namespaces": {"from": "Same"}}}]}}),
    )
    .await;
    create(
        &Api::<HttpRoute>::namespaced(client.clone(), "apps"),
        json!({"metadata": {"name": "r", "namespace": "apps"}, "spec": {
            "parentRefs": [{"name": "web", "namespace": "infra"},
                           {"name": "elsewhere", "namespace": "infra"}],
            "hostnames": ["www.example.com"],
            "rules": [{"backendRefs": [{"name": "missing", "port": 80}]}]}}),
    )
    .await;
    create(
        &Api::<GrpcRoute>::namespaced(client.clone(), "apps"),
        json!({"metadata": {"name": "g", "namespace": "apps"}, "spec": {
            "parentRefs": [{"name": "web", "namespace": "infra", "sectionName": "http"}],
            "hostnames": ["grpc.example.com"]}}),
    )
    .await;
}

/// Another controller's entry for the Gateway it owns, written the way it would.
async fn write_their_parent(client: &Client, message: &str) {
    let api = Api::<HttpRoute>::namespaced(client.clone(), "apps");
    let current = api.get_status("r").await.unwrap();
    let mut parents: Vec<Value> = current
        .status
        .map(|s| serde_json::to_value(s.parents).unwrap())
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default();
    parents.retain(|p| p["controllerName"] != THEIRS);
    parents.insert(
        0,
        json!({
            "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                          "namespace": "infra", "name": "elsewhere"},
            "controllerName": THEIRS,
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                            "message": message, "observedGeneration": 1,
                            "lastTransitionTime": "2020-01-01T00:00:00Z"}],
        }),
    );
    api.patch_status(
        "r",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"parents": parents}})),
    )
    .await
    .unwrap();
}

/// The store as a fresh list of every kind translation needs here.
async fn load(client: &Client) -> Store {
    let mut store = Store::default();
    let lp = ListParams::default();
    for o in Api::<Namespace>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        store.insert(o);
    }
    for o in Api::<GatewayClass>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        store.insert(o);
    }
    for o in Api::<Gateway>::all(client.clone()).list(&lp).await.unwrap() {
        store.insert(o);
    }
    for o in Api::<HttpRoute>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        store.insert(o);
    }
    for o in Api::<GrpcRoute>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        store.insert(o);
    }
    store
}

fn inputs(store: Store, ack: AckState) -> StatusInputs {
    let config = Config::default();
    let planned = translate(&store, &config).status;
    let plan = assemble(
        &planned,
        |_| Served::whole(ack.clone()),
        &Addresses::Planned,
    );
    StatusInputs {
        plan,
        store: store.into(),
        supported_features: vec!["Gateway".into(), "HTTPRoute".into()],
        controller_name: config.controller_name,
        served: aether_k8s::ServedVersions::all_v1(),
        served_at: None,
    }
}

fn now() -> Time {
    Time(Timestamp::from_second(Timestamp::now().as_second()).unwrap())
}

fn condition<'a>(conditions: &'a Value, type_: &str) -> &'a Value {
    conditions
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} in {conditions}"))
}

async fn status_of<K>(api: &Api<K>, name: &str) -> Value
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    serde_json::to_value(api.get(name).await.unwrap()).unwrap()["status"].clone()
}

fn parent_controllers(status: &Value) -> Vec<(String, String)> {
    status["parents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["controllerName"].as_str().unwrap().into(),
                p["parentRef"]["name"].as_str().unwrap().into(),
            )
        })
        .collect()
}

#[tokio::test]
async fn status_is_applied_merged_retried_and_reported() {
    let mut server = ApiServer::start().await;
    let client = server.client();
    seed(&client).await;
    write_their_parent(&client, "theirs").await;
    let writer = StatusWriter::new(Duration::from_secs(5), 4);
    let gateways = Api::<Gateway>::namespaced(client.clone(), "infra");
    let routes = Api::<HttpRoute>::namespaced(client.clone(), "apps");

    // First write: every object of ours, applied as one batch.
    let before = load(&client).await;
    let patches = writer.patches(&inputs(before.clone(), AckState::Acked), &now());
    assert_eq!(patches.len(), 4, "{patches:#?}");
    let report = writer.write(&client, patches).await.expect("first batch");
    let written: Vec<String> = report
        .written
        .iter()
        .map(|(k, o)| format!("{k} {o}"))
        .collect();
    assert_eq!(
        written,
        vec![
            "GatewayClass /aether",
            "Gateway infra/web",
            "HTTPRoute apps/r",
            "GRPCRoute apps/g"
        ]
    );

    let class = status_of(&Api::<GatewayClass>::all(client.clone()), "aether").await;
    assert_eq!(
        class["supportedFeatures"],
        json!([{"name": "Gateway"}, {"name": "HTTPRoute"}])
    );
    assert_eq!(
        condition(&class["conditions"], "Accepted")["status"],
        "True"
    );
    let gw = status_of(&gateways, "web").await;
    let programmed = condition(&gw["conditions"], "Programmed");
    assert_eq!(
        (&programmed["status"], &programmed["observedGeneration"]),
        (&json!("True"), &json!(1))
    );
    let listeners: Vec<(&str, i64)> = gw["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["name"].as_str().unwrap(),
                l["attachedRoutes"].as_i64().unwrap(),
            )
        })
        .collect();
    // `http-alt` admits routes from its own namespace only.
    assert_eq!(listeners, vec![("http", 2), ("http-alt", 0)]);
    assert_eq!(
        gw["listeners"][0]["supportedKinds"][0],
        json!({"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"})
    );
    let grpc = status_of(&Api::<GrpcRoute>::namespaced(client.clone(), "apps"), "g").await;
    assert_eq!(parent_controllers(&grpc), vec![(OURS.into(), "web".into())]);
    assert_eq!(grpc["parents"][0]["parentRef"]["sectionName"], "http");
    assert_eq!(
        condition(&grpc["parents"][0]["conditions"], "Accepted")["status"],
        "True"
    );
    let route = status_of(&routes, "r").await;
    assert_eq!(
        parent_controllers(&route),
        vec![
            (THEIRS.into(), "elsewhere".into()),
            (OURS.into(), "web".into())
        ]
    );
    assert_eq!(
        route["parents"][0]["conditions"][0]["message"], "theirs",
        "their entry untouched"
    );
    let ours = &route["parents"][1];
    assert_eq!(
        condition(&ours["conditions"], "ResolvedRefs")["reason"],
        "BackendNotFound"
    );
    assert_eq!(
        condition(&ours["conditions"], "Accepted")["observedGeneration"],
        1
    );

    // The server's copy is what we planned: nothing to write, whether the store
    // still lags behind our writes or has caught up.
    assert!(
        writer
            .patches(&inputs(before, AckState::Acked), &now())
            .is_empty()
    );
    assert!(
        writer
            .patches(&inputs(load(&client).await, AckState::Acked), &now())
            .is_empty()
    );

    // Another controller changes its entry after we read the route: our write,
    // computed from the older copy, is refused instead of erasing theirs.
    let stale = load(&client).await;
    write_their_parent(&client, "theirs, updated").await;
    let pending = writer.patches(&inputs(stale, AckState::Pending), &now());
    let err = writer
        .write(&client, pending)
        .await
        .expect_err("the route write must conflict");
    let failed: Vec<String> = err
        .failures
        .iter()
        .map(|f| format!("{} {}", f.kind, f.object))
        .collect();
    assert_eq!(failed, vec!["HTTPRoute apps/r"]);
    assert!(err.to_string().contains("409"), "{err}");
    // From fresh state it goes through, and their update survives.
    let fresh = writer.patches(&inputs(load(&client).await, AckState::Pending), &now());
    writer
        .write(&client, fresh)
        .await
        .expect("retry from fresh state");
    let route = status_of(&routes, "r").await;
    assert_eq!(
        route["parents"][0]["conditions"][0]["message"],
        "theirs, updated"
    );
    let accepted = condition(&route["parents"][1]["conditions"], "Accepted");
    assert_eq!(
        (&accepted["status"], &accepted["reason"]),
        (&json!("False"), &json!("Pending"))
    );

    // The route stops naming our Gateway: our entry goes, theirs stays.
    routes
        .patch(
            "r",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"parentRefs": [{"name": "elsewhere", "namespace": "infra"}]}}),
            ),
        )
        .await
        .unwrap();
    let patches = writer.patches(&inputs(load(&client).await, AckState::Pending), &now());
    // Only the route: the Gateway, still pending, already counts 0 routes.
    assert_eq!(patches.len(), 1, "{patches:#?}");
    writer.write(&client, patches).await.expect("removal");
    let route = status_of(&routes, "r").await;
    assert_eq!(
        parent_controllers(&route),
        vec![(THEIRS.into(), "elsewhere".into())]
    );

    // A listener leaves the spec: the apply no longer names it, so the API server
    // drops it from status (a map we own by key), leaving the other as it was.
    gateways
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([
                {"op": "remove", "path": "/spec/listeners/1"}]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    let patches = writer.patches(&inputs(load(&client).await, AckState::Pending), &now());
    let kinds: Vec<String> = patches
        .iter()
        .map(|p| format!("{} {}", p.kind, p.object))
        .collect();
    assert!(
        kinds.contains(&"Gateway infra/web".to_string()),
        "{kinds:?}"
    );
    writer
        .write(&client, patches)
        .await
        .expect("listener removal");
    let gw = status_of(&gateways, "web").await;
    let names: Vec<&str> = gw["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["http"]);
    assert_eq!(
        condition(&gw["conditions"], "Accepted")["observedGeneration"],
        2
    );

    // Outage: every failed object is named and counted, and the driver retries
    // until the API server is back.
    let store = load(&client).await;
    server.stop_apiserver().await;
    let failing = writer.patches(
        &inputs(store.clone(), AckState::Nacked("bad cluster".into())),
        &now(),
    );
    assert!(!failing.is_empty());
    let err = writer
        .write(&client, failing)
        .await
        .expect_err("API server down");
    let named: Vec<String> = err
        .failures
        .iter()
        .map(|f| format!("{} {}", f.kind, f.object))
        .collect();
    assert_eq!(named, vec!["Gateway infra/web"]);
    assert!(err.to_string().contains("Gateway infra/web"), "{err}");
    let metrics = writer.render_metrics();
    assert!(
        metric_sum(
            &metrics,
            "aether_edge_status_writes_total",
            &["kind=\"Gateway\"", "result=\"error\""],
        ) >= 1
    );
    assert!(metric_sum(&metrics, "aether_edge_status_batches_failed_total", &[]) >= 2);

    let (_tx, rx) = watch::channel(Arc::new(inputs(
        store,
        AckState::Nacked("bad cluster".into()),
    )));
    let writer = Arc::new(writer);
    let driver = tokio::spawn(status::run(
        client.clone(),
        rx,
        always_leader(),
        writer.clone(),
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let errors_during_outage = metric_sum(
        &writer.render_metrics(),
        "aether_edge_status_writes_total",
        &["kind=\"Gateway\"", "result=\"error\""],
    );
    assert!(
        errors_during_outage >= 3,
        "the driver kept retrying: {errors_during_outage}"
    );
    server.start_apiserver().await;
    let begin = Instant::now();
    loop {
        if let Ok(gw) = gateways.get("web").await {
            let gw = serde_json::to_value(gw).unwrap()["status"].clone();
            let programmed = condition(&gw["conditions"], "Programmed");
            if programmed["reason"] == "Invalid" {
                assert!(
                    programmed["message"]
                        .as_str()
                        .unwrap()
                        .contains("bad cluster")
                );
                break;
            }
        }
        assert!(
            begin.elapsed() < Duration::from_secs(20),
            "the retry never landed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    driver.abort();
    let metrics = writer.render_metrics();
    assert!(
        metric_sum(
            &metrics,
            "aether_edge_status_writes_total",
            &["kind=\"Gateway\"", "result=\"ok\""],
        ) >= 3
    );
    assert!(metric_sum(&metrics, "aether_edge_status_unchanged_total", &[]) >= 1);
}
