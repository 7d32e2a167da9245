//! The join on paused time: status follows what a publication left out, read
//! from the publication itself.

use super::*;
use aether_gateway::vocabulary::gateway::{Reason, Type};
use aether_gateway::{Config, status::condition, translate};
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use serde_json::json;

/// One publication: the snapshot of `ir`, the plan, and what it left out.
struct Publication {
    snapshot: Snapshot,
    plan: StatusPlan,
    ir: Arc<Ir>,
    left_out: BTreeMap<ObjectRef, String>,
}

impl Translated for Publication {
    fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }
    fn plan(&self) -> &StatusPlan {
        &self.plan
    }
    fn ir(&self) -> &Arc<Ir> {
        &self.ir
    }
    fn left_out(&self) -> &BTreeMap<ObjectRef, String> {
        &self.left_out
    }
}

fn gw() -> ObjectRef {
    ObjectRef::new("infra", "gw")
}

/// Class `aether`, Gateway `infra/gw` (HTTP 80), and its edge Service with a
/// load-balancer address: nothing but a publication can hold its address back.
fn mk_store(cfg: &ServiceConfig) -> Store {
    let mut store = Store::default();
    let class: GatewayClass = serde_json::from_value(json!({
        "metadata": {"name": "aether"}, "spec": {"controllerName": cfg.controller_name}}))
    .unwrap();
    let gateway: Gateway = serde_json::from_value(json!({
        "metadata": {"namespace": "infra", "name": "gw", "generation": 1},
        "spec": {"gatewayClassName": "aether",
                 "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}))
    .unwrap();
    store.insert(class);
    store.insert(gateway);
    let ir = translate(&store, &Config::default()).ir;
    let records = service::desired_services(&store, &ir, cfg);
    let public = service::desired_public(&store, &records, cfg).services;
    for svc in records {
        store.insert(svc);
    }
    for mut svc in public {
        svc.status = Some(
            serde_json::from_value(json!({
            "loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}))
            .unwrap(),
        );
        store.insert(svc);
    }
    store
}

fn mk_publication(store: &Store, left_out: &[(ObjectRef, &str)]) -> Arc<Publication> {
    let t = translate(store, &Config::default());
    Arc::new(Publication {
        snapshot: aether_xds::build(&t.ir),
        plan: t.status,
        ir: Arc::new(t.ir),
        left_out: left_out
            .iter()
            .map(|(g, m)| (g.clone(), m.to_string()))
            .collect(),
    })
}

/// A running join and its inputs' senders (a dropped sender ends the join, so
/// a test holds them all).
struct Given {
    published: watch::Sender<Option<Arc<Publication>>>,
    problems: watch::Sender<BTreeMap<ObjectRef, String>>,
    _served: watch::Sender<Option<ServedVersions>>,
    inputs: watch::Receiver<Arc<StatusInputs>>,
}

/// The join in service mode on `store`, its first publication leaving nothing out.
fn given_a_join(store: Store, cfg: ServiceConfig) -> Given {
    let index = Arc::new(Index::new([]));
    for obj in store.all::<GatewayClass>().values() {
        index.apply(crate::index::Event::Apply((**obj).clone()));
    }
    for obj in store.all::<Gateway>().values() {
        index.apply(crate::index::Event::Apply((**obj).clone()));
    }
    for obj in store.all::<Service>().values() {
        index.apply(crate::index::Event::Apply((**obj).clone()));
    }
    let (published_tx, published) = watch::channel(Some(mk_publication(&store, &[])));
    let (problems_tx, service_problems) = watch::channel(BTreeMap::new());
    let (served_tx, served) = watch::channel(Some(ServedVersions::default()));
    let inputs = Join {
        index,
        published,
        reports: Reports::default(),
        mode: AddressMode::Service(cfg),
        ready_pods: None,
        service_problems: Some(service_problems),
        served,
        controller_name: "gateway.aether.io/edge".into(),
        supported_features: Vec::new(),
        fleet: None,
    }
    .spawn();
    Given {
        published: published_tx,
        problems: problems_tx,
        _served: served_tx,
        inputs,
    }
}

/// Gateway gw's `Programmed` (reason, message) once the join has caught up.
async fn then_programmed(inputs: &mut watch::Receiver<Arc<StatusInputs>>) -> (Reason, String) {
    tokio::time::sleep(STARTUP_GRACE + SETTLE * 4).await;
    let inputs = inputs.borrow_and_update().clone();
    let status = inputs
        .plan
        .gateways
        .get(&gw())
        .unwrap_or_else(|| panic!("no gw in {:?}", inputs.plan));
    let c = condition(&status.conditions, Type::Programmed).expect("Programmed");
    (c.reason, c.message.clone())
}

#[tokio::test(start_paused = true)]
async fn what_a_publication_left_out_holds_its_gateway_back_with_it() {
    let cfg = ServiceConfig::default();
    let store = mk_store(&cfg);
    let mut g = given_a_join(store.clone(), cfg);
    let (reason, _) = then_programmed(&mut g.inputs).await;
    assert_ne!(reason, Reason::AddressNotAssigned, "the address is there");

    // The next publication lacks gw's port: only the publication says so.
    let why = "listener port 80 has no Envoy port allocated yet";
    g.published
        .send_replace(Some(mk_publication(&store, &[(gw(), why)])));
    let (reason, message) = then_programmed(&mut g.inputs).await;
    assert_eq!(reason, Reason::AddressNotAssigned);
    assert!(message.contains(why), "{message}");

    // The one after has it again.
    g.published.send_replace(Some(mk_publication(&store, &[])));
    let (reason, _) = then_programmed(&mut g.inputs).await;
    assert_ne!(reason, Reason::AddressNotAssigned);
}

#[tokio::test(start_paused = true)]
async fn service_failures_follow_what_the_publication_left_out() {
    let cfg = ServiceConfig::default();
    let store = mk_store(&cfg);
    let mut g = given_a_join(store.clone(), cfg);
    g.published
        .send_replace(Some(mk_publication(&store, &[(gw(), "port 80 left out")])));
    g.problems
        .send_replace([(gw(), "Service refused".to_string())].into());
    let (reason, message) = then_programmed(&mut g.inputs).await;
    assert_eq!(reason, Reason::AddressNotAssigned);
    assert!(
        message.contains("port 80 left out; Service refused"),
        "{message}"
    );
}
