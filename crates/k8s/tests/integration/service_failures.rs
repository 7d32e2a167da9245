//! Edge Service failures against a real kube-apiserver: a Service the API server
//! rejects is reported for its Gateway while the others go through, an outage is
//! reported and healed, and everything works under the deploy RBAC (and no more).

use crate::support::{
    EDGE, addressed, create, edge_services, install_rbac, load, mk_gateway, pass, public_pass,
    seed, service_mode,
};
use aether_gateway::status::condition;
use aether_gateway::translate;
use aether_gateway::vocabulary::gateway::{Reason, Type};
use aether_ir::ObjectRef;
use aether_k8s::service::{ServiceConfig, desired_services, public_name, reconcile, service_name};
use aether_testkit::ApiServer;
use gateway_api::apis::experimental::gateways::Gateway;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

#[tokio::test]
async fn failures_are_reported_per_gateway_and_the_rest_go_through() {
    let mut server = ApiServer::start().await;
    let client = server.client();
    let blocker = given_three_gateways_and_a_headless_service_under_bs_name(&client).await;
    a_rejected_service_is_reported_for_its_gateway_alone(&client, &blocker).await;
    an_outage_fails_every_write_reported_then_heals(&mut server, &client, blocker).await;
}

/// Someone made a headless Service under b's name: its clusterIP (None) and IP
/// families are not ours to change, and a LoadBalancer cannot keep them. Returns
/// that name.
async fn given_three_gateways_and_a_headless_service_under_bs_name(
    client: &kube::Client,
) -> String {
    seed(client, &["infra"]).await;
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), "infra");
    for n in ["a", "b", "c"] {
        create(&gateways, mk_gateway("infra", n, &[("http", "HTTP", 80)])).await;
    }
    let blocker = service_name(&ObjectRef::new("infra", "b"));
    create(
        &Api::<Service>::namespaced(client.clone(), EDGE),
        json!({"metadata": {"name": blocker, "namespace": EDGE},
               "spec": {"clusterIP": "None", "ports": [{"port": 1}]}}),
    )
    .await;
    blocker
}

/// The others go through; b's problem reaches its Gateway's Programmed condition.
async fn a_rejected_service_is_reported_for_its_gateway_alone(
    client: &kube::Client,
    blocker: &String,
) {
    let cfg = ServiceConfig::default();
    let err = pass(client, &cfg)
        .await
        .expect_err("b's Service is rejected");
    assert_eq!(err.errors.keys().collect::<Vec<_>>(), vec![blocker]);
    let mut applied = err.report.applied.clone();
    applied.sort();
    let want: Vec<String> = ["a", "c"]
        .iter()
        .map(|n| service_name(&ObjectRef::new("infra", *n)))
        .collect();
    assert_eq!(applied, want);
    let problems = err.by_gateway();
    let b = ObjectRef::new("infra", "b");
    assert_eq!(problems.keys().collect::<Vec<_>>(), vec![&b]);
    assert!(problems[&b].contains("is invalid"), "{}", problems[&b]);

    let store = load(client).await;
    let planned = translate(&store, &service_mode()).status;
    let plan = addressed(&planned, &store, &problems);
    let programmed = condition(&plan.gateways[&b].conditions, Type::Programmed).unwrap();
    assert_eq!(programmed.reason, Reason::AddressNotAssigned);
    // The API server's reason, as much of it as a status message holds (1 KiB).
    let reason: String = problems[&b].chars().take(200).collect();
    assert!(
        programmed.message.contains(&reason),
        "{}",
        programmed.message
    );
}

/// The blocker goes; an outage makes every write fail, reported, not swallowed.
async fn an_outage_fails_every_write_reported_then_heals(
    server: &mut ApiServer,
    client: &kube::Client,
    blocker: String,
) {
    Api::<Service>::namespaced(client.clone(), EDGE)
        .delete(&blocker, &DeleteParams::default())
        .await
        .unwrap();
    let store = load(client).await;
    let translation = translate(&store, &service_mode());
    let desired = desired_services(&store, &translation.ir, &ServiceConfig::default());
    server.stop_apiserver().await;
    let existing: Vec<Service> = store
        .all::<Service>()
        .values()
        .map(|s| (**s).clone())
        .collect();
    let err = reconcile(client, desired.clone(), &existing, EDGE)
        .await
        .expect_err("the API server is down");
    assert_eq!(err.errors.keys().collect::<Vec<_>>(), vec![&blocker]);
    assert!(err.report.applied.is_empty());
    server.start_apiserver().await;
    let report = reconcile(client, desired, &existing, EDGE).await.unwrap();
    assert_eq!(report.applied, vec![blocker]);
    assert_eq!(edge_services(client).await.len(), 3);
}

#[tokio::test]
async fn the_deploy_rbac_is_enough_to_create_update_and_collect_services() {
    let server = ApiServer::start().await;
    let admin = server.client();
    seed(&admin, &["infra"]).await;
    install_rbac(&admin).await;
    let controller = server.client_as(
        "system:serviceaccount:aether-ingress:aether-edge-controller",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:aether-ingress",
            "system:authenticated",
        ],
    );
    let gateways: Api<Gateway> = Api::namespaced(admin.clone(), "infra");
    for n in ["a", "b"] {
        create(&gateways, mk_gateway("infra", n, &[("http", "HTTP", 80)])).await;
    }
    let cfg = ServiceConfig::default();
    // Reads (Gateways, Services) and writes both as the controller (the writer identity).
    let report = pass(&controller, &cfg)
        .await
        .expect("created under the deploy RBAC");
    assert_eq!(report.applied.len(), 2);
    let grow = json!({"spec": {"listeners": [
        {"name": "http", "protocol": "HTTP", "port": 80},
        {"name": "alt", "protocol": "HTTP", "port": 8080}]}});
    gateways
        .patch("a", &PatchParams::default(), &Patch::Merge(grow))
        .await
        .unwrap();
    gateways
        .delete("b", &DeleteParams::default())
        .await
        .unwrap();
    let report = pass(&controller, &cfg)
        .await
        .expect("updated and collected under the deploy RBAC");
    assert_eq!(
        report.applied,
        vec![service_name(&ObjectRef::new("infra", "a"))]
    );
    assert_eq!(
        report.deleted,
        vec![service_name(&ObjectRef::new("infra", "b"))]
    );

    // The public Services beside the Gateways: made, then collected with b.
    let report = public_pass(&controller, &cfg)
        .await
        .expect("public Services and slices under the deploy RBAC");
    let a_public = public_name(&ObjectRef::new("infra", "a"));
    assert_eq!(
        report.applied,
        vec![
            format!("EndpointSlice infra/{a_public}-ipv4"),
            format!("Service infra/{a_public}"),
        ]
    );

    // And nothing beyond: the controller cannot give a Service a load-balancer
    // address (that is the load balancer's to write).
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.66"}]}}});
    let refused = Api::<Service>::namespaced(controller.clone(), "infra")
        .patch_status(&a_public, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect_err("no Service status writes");
    assert!(matches!(refused, kube::Error::Api(s) if s.code == 403));
}
