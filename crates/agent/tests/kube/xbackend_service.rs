//! Kubernetes mode, an EndpointSelector XBackend (Gateway API v1.7.0,
//! experimental): the leader keeps exactly one headless Service for it, made
//! from its selector and port and owned by it; a restarted agent finds that one
//! by its ownerReference and makes no second, nor does a follower or the next
//! leader after a failover; a changed selector updates it;
//! switching the XBackend to ExternalHostname, or deleting it, removes it (there
//! is no garbage collector in these tests: the agent does it). A Service the API
//! server refuses (a quota) is a Warning Event on the XBackend.

use crate::support::*;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;
use std::time::Duration;

const NS: &str = "app";
const PORT: u16 = 8080;
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn an_endpoint_selector_xbackend_gets_one_headless_service() {
    in_netns(async {
        let mut w = given_an_xbackend_and_an_agent().await;
        let first = the_leader_creates_one_headless_service(&w).await;
        a_restarted_agent_creates_no_second_one(&mut w, &first).await;
        a_changed_selector_updates_it(&w, &first).await;
        switching_to_external_hostname_removes_it(&w).await;
        deleting_the_xbackend_removes_its_service(&w).await;
        a_refused_service_is_an_event_on_the_xbackend(&w).await;
    });
}

/// Two agents with leader election: a leads and makes the Service; b follows
/// and writes nothing; a dies, b takes over and keeps that one Service.
#[test]
fn a_new_leader_keeps_the_one_service() {
    in_netns(async {
        let logs = temp_dir("kube-xbackend-leader");
        let yaml = [base_yaml(&[NS]), mk_xbackend(NS, "pay", "{app: pay}", PORT)];
        let server = given_cluster(&yaml).await;
        let client = server.client();
        let elected = ["--leader-elect=true", "--address-mode", "static"];
        let mut agents = Vec::new();
        for (node, pod) in [("node-a", "agent-a"), ("node-b", "agent-b")] {
            issue_report_token(&server, node, pod, &logs).await;
            let path = server.kubeconfig_path();
            agents.push(KubeAgent::start(
                agent_bin(),
                node,
                pod,
                path,
                &elected,
                &logs,
            ));
            if pod == "agent-a" {
                until_leader(&client, "agent-a", WAIT).await;
            }
        }
        let one = |s: &[Service]| s.len() == 1;
        let first = until_xbackend_services(&client, NS, "a's Service", WAIT, one).await;
        agents[0].proc.kill();
        until_leader(&client, "agent-b", Duration::from_secs(40)).await;
        wait_until(WAIT, "b publishes", || agents[1].snapshot());
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = xbackend_services_now(&client, NS).await.unwrap();
        assert_eq!(now.len(), 1, "{now:#?}");
        assert_eq!(now[0].metadata.uid, first[0].metadata.uid);
        // Not made and then collected as a duplicate either: b made none.
        let log = agents[1].proc.log_text();
        assert!(!log.contains("XBackend Service created"), "{log}");
    });
}

type World = OneNode;

async fn given_an_xbackend_and_an_agent() -> World {
    let logs = temp_dir("kube-xbackend-service");
    let b0 = Backend::on(POD_IP, "b0");
    let yaml = [base_yaml(&[NS]), mk_xbackend(NS, "pay", "{app: pay}", PORT)];
    let server = given_cluster(&yaml).await;
    OneNode::start(server, b0, &STATIC_AT_POD_IP, &logs)
}

/// The XBackend's uid, as the API server has it.
async fn uid_of_pay(w: &World) -> String {
    let xbackends: kube::Api<gateway_api::apis::experimental::xbackends::XBackend> =
        kube::Api::namespaced(w.client.clone(), NS);
    xbackends.get("pay").await.unwrap().metadata.uid.unwrap()
}

async fn the_leader_creates_one_headless_service(w: &World) -> Service {
    let mut one = until_xbackend_services(&w.client, NS, "one XBackend Service", WAIT, |s| {
        s.len() == 1
    })
    .await;
    let svc = one.remove(0);
    let name = svc.metadata.name.clone().unwrap();
    assert!(
        name.starts_with("pay-") && name.len() == "pay-".len() + 5,
        "{name}"
    );
    let spec = svc.spec.clone().unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(
        spec.selector,
        Some(BTreeMap::from([("app".into(), "pay".into())]))
    );
    let ports = spec.ports.unwrap();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].port, i32::from(PORT));
    assert_eq!(
        ports[0].target_port,
        Some(IntOrString::Int(i32::from(PORT)))
    );
    assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
    let owner = &svc.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str()
        ),
        ("gateway.networking.x-k8s.io/v1alpha1", "XBackend", "pay")
    );
    assert_eq!(owner.uid, uid_of_pay(w).await);
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(false))
    );
    let labels = svc.metadata.labels.clone().unwrap();
    assert_eq!(labels["gateway.aether.io/xbackend"], "pay");
    svc
}

/// Restarted (a new leader with an empty memory): the same one Service, a few
/// seconds later still.
async fn a_restarted_agent_creates_no_second_one(w: &mut World, first: &Service) {
    w.agent.restart();
    wait_until(WAIT, "the restarted agent publishes", || w.agent.snapshot());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let now = xbackend_services_now(&w.client, NS).await.unwrap();
    assert_eq!(now.len(), 1, "{now:#?}");
    assert_eq!(now[0].metadata.uid, first.metadata.uid);
}

async fn a_changed_selector_updates_it(w: &World, first: &Service) {
    w.server
        .apply(&mk_xbackend(
            NS,
            "pay",
            "{app: pay, track: canary}",
            PORT + 1,
        ))
        .await
        .unwrap();
    let now = until_xbackend_services(&w.client, NS, "the selector and port updated", WAIT, |s| {
        s.len() == 1
            && s[0]
                .spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .map(|l| l.len())
                == Some(2)
            && s[0]
                .spec
                .as_ref()
                .and_then(|s| s.ports.as_ref())
                .map(|p| p[0].port)
                == Some(i32::from(PORT + 1))
    })
    .await;
    assert_eq!(
        now[0].metadata.uid, first.metadata.uid,
        "updated, not replaced by another"
    );
    assert_eq!(
        now[0].spec.as_ref().unwrap().ports.as_ref().unwrap().len(),
        1
    );
}

async fn switching_to_external_hostname_removes_it(w: &World) {
    w.server
        .apply(&mk_external_xbackend(NS, "pay", 443))
        .await
        .unwrap();
    until_xbackend_services(&w.client, NS, "no XBackend Service", WAIT, |s| s.is_empty()).await;
}

async fn deleting_the_xbackend_removes_its_service(w: &World) {
    w.server
        .apply(&mk_xbackend(NS, "pay", "{app: pay}", PORT))
        .await
        .unwrap();
    until_xbackend_services(&w.client, NS, "a Service again", WAIT, |s| s.len() == 1).await;
    let xbackends: kube::Api<gateway_api::apis::experimental::xbackends::XBackend> =
        kube::Api::namespaced(w.client.clone(), NS);
    xbackends.delete("pay", &Default::default()).await.unwrap();
    until_xbackend_services(&w.client, NS, "no XBackend Service", WAIT, |s| s.is_empty()).await;
}

/// A namespace where an admission policy refuses every new Service.
const FULL: &str = "full";

fn mk_refusing_namespace() -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {FULL}}}\n---\n\
         apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: no-services}}\nspec:\n  failurePolicy: Fail\n  matchConstraints:\n    resourceRules:\n    - {{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [services]}}\n  validations:\n  - {{expression: \"false\", message: no Services here}}\n---\n\
         apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: no-services}}\nspec:\n  policyName: no-services\n  validationActions: [Deny]\n  matchResources:\n    namespaceSelector:\n      matchLabels: {{kubernetes.io/metadata.name: {FULL}}}\n"
    )
}

async fn a_refused_service_is_an_event_on_the_xbackend(w: &World) {
    w.server.apply(&mk_refusing_namespace()).await.unwrap();
    // The policy takes effect a moment later.
    let probe = "apiVersion: v1\nkind: Service\nmetadata: {name: probe, namespace: full}\nspec:\n  ports: [{port: 80}]\n";
    eventually(WAIT, "the policy refuses Services", || async {
        match w.server.apply(probe).await {
            Err(_) => Ok(()),
            Ok(_) => {
                let api: kube::Api<Service> = kube::Api::namespaced(w.client.clone(), FULL);
                let _ = api.delete("probe", &Default::default()).await;
                Err("a Service was created".to_string())
            }
        }
    })
    .await;
    w.server
        .apply(&mk_xbackend(FULL, "blocked", "{app: blocked}", PORT))
        .await
        .unwrap();
    until_event(
        &w.client,
        FULL,
        "ServiceNotWritten on XBackend blocked",
        |e| {
            e.reason.as_deref() == Some("ServiceNotWritten")
                && e.type_.as_deref() == Some("Warning")
                && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("XBackend")
                && regarding(e) == Some("blocked")
        },
    )
    .await;
    assert!(
        xbackend_services_now(&w.client, FULL)
            .await
            .unwrap()
            .is_empty()
    );
}
