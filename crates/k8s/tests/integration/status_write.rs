//! The status writer against a real kube-apiserver: server-side apply of every
//! kind, another controller's route parent preserved, our parent removed with its
//! parentRef, no write when nothing changed, a conflicting write refused, and an
//! outage reported (objects named, counted) then healed by the retrying driver.
//!
//! One API server: the scenarios run in order, each on the objects the one before
//! left (its writes, their entry, a route moved away, a listener removed).

use crate::support::{create, create_class, create_namespaces, list_into};
use aether_gateway::{AckState, Addresses, Config, Served, Store, assemble, translate};
use aether_k8s::leader::always_leader;
use aether_k8s::status::{self, StatusInputs, StatusKind, StatusWriter, WriteResult};
use aether_testkit::{ApiServer, parent_controllers};
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

const OURS: &str = "gateway.aether.io/edge";
const THEIRS: &str = "example.com/other";

async fn seed(client: &Client) {
    create_namespaces(client, &["infra", "apps"]).await;
    create_class(client).await;
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
    list_into::<Namespace>(client, &mut store).await;
    list_into::<GatewayClass>(client, &mut store).await;
    list_into::<Gateway>(client, &mut store).await;
    list_into::<HttpRoute>(client, &mut store).await;
    list_into::<GrpcRoute>(client, &mut store).await;
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

/// The API server with the seed and their entry, and one writer for every scenario
/// (its counters add up across them).
struct World {
    server: ApiServer,
    client: Client,
    writer: Arc<StatusWriter>,
    gateways: Api<Gateway>,
    routes: Api<HttpRoute>,
}

async fn given_the_seed_and_their_entry() -> World {
    let server = ApiServer::start().await;
    let client = server.client();
    seed(&client).await;
    write_their_parent(&client, "theirs").await;
    World {
        gateways: Api::namespaced(client.clone(), "infra"),
        routes: Api::namespaced(client.clone(), "apps"),
        writer: Arc::new(StatusWriter::new(Duration::from_secs(5), 4)),
        client,
        server,
    }
}

/// The patches of `ack` for the store as the API server has it now.
async fn patches_now(w: &World, ack: AckState) -> Vec<aether_k8s::status::StatusPatch> {
    w.writer
        .patches(&inputs(load(&w.client).await, ack), &now())
}

/// Writing `patches` fails (`why` it must), with `object` (`"<kind> <ns>/<name>"`)
/// the one failure, and an error that says `says`.
async fn then_the_batch_fails(
    w: &World,
    patches: Vec<aether_k8s::status::StatusPatch>,
    why: &str,
    object: &str,
    says: &str,
) {
    let err = w.writer.write(&w.client, patches).await.expect_err(why);
    let failed: Vec<String> = err
        .failures
        .iter()
        .map(|f| format!("{} {}", f.kind, f.object))
        .collect();
    assert_eq!(failed, vec![object]);
    assert!(err.to_string().contains(says), "{err}");
}

#[tokio::test]
async fn status_is_applied_merged_retried_and_reported() {
    let mut w = given_the_seed_and_their_entry().await;
    let before = the_first_write_applies_every_object_of_ours_as_one_batch(&w).await;
    then_class_and_gateway_status_are_as_planned(&w).await;
    then_route_status_is_ours_beside_theirs(&w).await;
    nothing_is_written_when_the_server_has_the_plan(&w, before).await;
    a_stale_write_is_refused_instead_of_erasing_theirs(&w).await;
    our_entry_goes_with_its_parent_ref(&w).await;
    a_listener_leaving_the_spec_leaves_status(&w).await;
    let store = an_outage_names_and_counts_every_failed_object(&mut w).await;
    the_driver_retries_until_the_server_is_back(&mut w, store).await;
}

/// Returns the store it was computed from.
async fn the_first_write_applies_every_object_of_ours_as_one_batch(w: &World) -> Store {
    let before = load(&w.client).await;
    let patches = w
        .writer
        .patches(&inputs(before.clone(), AckState::Acked), &now());
    assert_eq!(patches.len(), 4, "{patches:#?}");
    let report = w
        .writer
        .write(&w.client, patches)
        .await
        .expect("first batch");
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
    before
}

async fn then_class_and_gateway_status_are_as_planned(w: &World) {
    let class = status_of(&Api::<GatewayClass>::all(w.client.clone()), "aether").await;
    assert_eq!(
        class["supportedFeatures"],
        json!([{"name": "Gateway"}, {"name": "HTTPRoute"}])
    );
    assert_eq!(
        condition(&class["conditions"], "Accepted")["status"],
        "True"
    );
    let gw = status_of(&w.gateways, "web").await;
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
}

async fn then_route_status_is_ours_beside_theirs(w: &World) {
    let grpc = status_of(&Api::<GrpcRoute>::namespaced(w.client.clone(), "apps"), "g").await;
    assert_eq!(parent_controllers(&grpc), vec![(OURS.into(), "web".into())]);
    assert_eq!(grpc["parents"][0]["parentRef"]["sectionName"], "http");
    assert_eq!(
        condition(&grpc["parents"][0]["conditions"], "Accepted")["status"],
        "True"
    );
    let route = status_of(&w.routes, "r").await;
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
}

/// The server's copy is what we planned: nothing to write, whether the store still
/// lags behind our writes (`before`) or has caught up.
async fn nothing_is_written_when_the_server_has_the_plan(w: &World, before: Store) {
    assert!(
        w.writer
            .patches(&inputs(before, AckState::Acked), &now())
            .is_empty()
    );
    assert!(patches_now(w, AckState::Acked).await.is_empty());
}

/// Another controller changes its entry after we read the route: our write,
/// computed from the older copy, is refused; from fresh state it goes through.
async fn a_stale_write_is_refused_instead_of_erasing_theirs(w: &World) {
    let stale = load(&w.client).await;
    write_their_parent(&w.client, "theirs, updated").await;
    let pending = w.writer.patches(&inputs(stale, AckState::Pending), &now());
    then_the_batch_fails(
        w,
        pending,
        "the route write must conflict",
        "HTTPRoute apps/r",
        "409",
    )
    .await;
    let fresh = patches_now(w, AckState::Pending).await;
    w.writer
        .write(&w.client, fresh)
        .await
        .expect("retry from fresh state");
    let route = status_of(&w.routes, "r").await;
    assert_eq!(
        route["parents"][0]["conditions"][0]["message"],
        "theirs, updated"
    );
    let accepted = condition(&route["parents"][1]["conditions"], "Accepted");
    assert_eq!(
        (&accepted["status"], &accepted["reason"]),
        (&json!("False"), &json!("Pending"))
    );
}

/// The route stops naming our Gateway: our entry goes, theirs stays.
async fn our_entry_goes_with_its_parent_ref(w: &World) {
    let elsewhere = json!({"spec": {"parentRefs": [{"name": "elsewhere", "namespace": "infra"}]}});
    w.routes
        .patch("r", &PatchParams::default(), &Patch::Merge(elsewhere))
        .await
        .unwrap();
    let patches = patches_now(w, AckState::Pending).await;
    // Only the route: the Gateway, still pending, already counts 0 routes.
    assert_eq!(patches.len(), 1, "{patches:#?}");
    w.writer.write(&w.client, patches).await.expect("removal");
    let route = status_of(&w.routes, "r").await;
    assert_eq!(
        parent_controllers(&route),
        vec![(THEIRS.into(), "elsewhere".into())]
    );
}

/// The apply no longer names a listener gone from the spec, so the API server drops
/// it from status (a map we own by key), leaving the other as it was.
async fn a_listener_leaving_the_spec_leaves_status(w: &World) {
    let remove = json!([{"op": "remove", "path": "/spec/listeners/1"}]);
    w.gateways
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(remove).unwrap()),
        )
        .await
        .unwrap();
    let patches = patches_now(w, AckState::Pending).await;
    let kinds: Vec<String> = patches
        .iter()
        .map(|p| format!("{} {}", p.kind, p.object))
        .collect();
    assert!(
        kinds.contains(&"Gateway infra/web".to_string()),
        "{kinds:?}"
    );
    w.writer
        .write(&w.client, patches)
        .await
        .expect("listener removal");
    let gw = status_of(&w.gateways, "web").await;
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
}

/// Every failed object is named and counted; returns the store of the failed plan.
async fn an_outage_names_and_counts_every_failed_object(w: &mut World) -> Store {
    let store = load(&w.client).await;
    w.server.stop_apiserver().await;
    let failing = w.writer.patches(
        &inputs(
            store.clone(),
            AckState::Nacked(aether_ir::Rejection::new(
                "node-a",
                "CDS version 0123456789ab: bad cluster",
            )),
        ),
        &now(),
    );
    assert!(!failing.is_empty());
    let failed = "Gateway infra/web";
    then_the_batch_fails(w, failing, "API server down", failed, failed).await;
    let metrics = w.writer.metrics();
    assert!(gateway_writes(w, WriteResult::Error) >= 1, "{metrics:?}");
    assert!(metrics.batches_failed() >= 2, "{metrics:?}");
    store
}

/// The driver keeps retrying through the outage, and the write lands once the API
/// server is back.
async fn the_driver_retries_until_the_server_is_back(w: &mut World, store: Store) {
    let inputs = inputs(
        store,
        AckState::Nacked(aether_ir::Rejection::new(
            "node-a",
            "CDS version 0123456789ab: bad cluster",
        )),
    );
    let (_tx, rx) = watch::channel(Arc::new(inputs));
    let driver = tokio::spawn(status::run(
        w.client.clone(),
        rx,
        always_leader(),
        w.writer.clone(),
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let errors_during_outage = gateway_writes(w, WriteResult::Error);
    assert!(
        errors_during_outage >= 3,
        "the driver kept retrying: {errors_during_outage}"
    );
    w.server.start_apiserver().await;
    let begin = Instant::now();
    loop {
        if let Ok(gw) = w.gateways.get("web").await {
            let gw = serde_json::to_value(gw).unwrap()["status"].clone();
            let programmed = condition(&gw["conditions"], "Programmed");
            if programmed["reason"] == "Invalid" {
                let message = programmed["message"].as_str().unwrap();
                assert!(message.contains("bad cluster"), "{message}");
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
    let metrics = w.writer.metrics();
    assert!(gateway_writes(w, WriteResult::Ok) >= 3, "{metrics:?}");
    assert!(metrics.unchanged() >= 1, "{metrics:?}");
}

/// Gateway status writes with `result`, as the writer counted them.
fn gateway_writes(w: &World, result: WriteResult) -> u64 {
    w.writer.metrics().writes(StatusKind::Gateway, result)
}
