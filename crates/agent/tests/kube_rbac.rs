//! Kubernetes mode as deployed (issue point 5): the agent authenticates as the
//! `aether-edge` ServiceAccount with exactly the RBAC of `deploy/` (a real token, a
//! real authorizer), leader election on, and its Envoy reaches ADS over a Unix
//! socket only. Everything the agent must do — watch, elect, create the Service,
//! write every kind of status (TCPRoute and UDPRoute included) — works under
//! those rights, and nothing is refused.

mod support;

use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use gateway_api::apis::standard::tcproutes::TcpRoute;
use gateway_api::apis::standard::udproutes::UdpRoute;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use support::*;

const NS: &str = "app";

fn deploy(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn app_yaml() -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n  - {{name: tcp, protocol: TCP, port: 9000}}\n  - {{name: udp, protocol: UDP, port: 9053}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r1, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n  - backendRefs: [{{name: b0, port: 80}}]\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: TCPRoute\nmetadata: {{name: t1, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw, sectionName: tcp}}]\n  rules:\n  - backendRefs: [{{name: b0, port: 80}}]\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: UDPRoute\nmetadata: {{name: u1, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw, sectionName: udp}}]\n  rules:\n  - backendRefs: [{{name: b0, port: 80}}]\n"
    )
}

#[test]
fn the_agent_works_with_the_deployed_rbac_and_a_unix_socket() {
    if !isolated() {
        return;
    }
    runtime().block_on(rbac());
}

async fn rbac() {
    let logs = temp_dir("kube-rbac");
    let server = aether_testkit::ApiServer::start().await;
    let client = server.client();
    let c = &client;
    let b0 = Backend::on(POD_IP, "b0");
    for file in ["00-namespace.yaml", "10-rbac.yaml", "20-gatewayclass.yaml"] {
        server.apply(&deploy(file)).await.unwrap();
    }
    server
        .apply(&[app_yaml(), b0.yaml(NS)].join("---\n"))
        .await
        .unwrap();
    let kubeconfig = server
        .service_account_kubeconfig("aether-ingress", "aether-edge")
        .await
        .unwrap();

    // As in the DaemonSet: ADS on a socket in a shared directory, leader election on.
    let socket = format!("unix:{}", logs.join("run/ads.sock").display());
    let admin = format!("127.0.0.1:{}", support::free_port());
    let report = format!("127.0.0.1:{}", support::free_port());
    let mut agent = Proc::spawn(
        "agent-rbac",
        std::process::Command::new(agent_bin())
            .arg("agent")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--namespace", "aether-ingress", "--node-name", "node-a"])
            .args(["--pod-name", "agent-a", "--advertise-address", "127.0.0.1"])
            .args(["--xds-address", &socket, "--admin-address", &admin])
            .args(["--report-address", &report]),
        &logs,
    );
    let _envoy = envoy("node-a", &socket, true, &logs);

    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), "aether-ingress");
    eventually(Duration::from_secs(30), "the Lease held", || {
        let leases = leases.clone();
        async move {
            let l = leases
                .get_opt("aether-edge")
                .await
                .map_err(|e| e.to_string())?;
            let h = l.and_then(|l| l.spec?.holder_identity);
            if h.as_deref() == Some("agent-a") {
                Ok(())
            } else {
                Err(format!("{h:?}"))
            }
        }
    })
    .await;
    let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), "aether-ingress");
    let lp = ListParams::default().labels("aether.io/edge-gateway");
    let svc = eventually(Duration::from_secs(30), "the edge Service", || {
        let (services, lp) = (services.clone(), lp.clone());
        async move {
            let items = services.list(&lp).await.map_err(|e| e.to_string())?.items;
            items.into_iter().next().ok_or_else(|| "none".to_string())
        }
    })
    .await;
    let name = svc.metadata.name.clone().unwrap();
    services
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": POD_IP}]}}})),
        )
        .await
        .unwrap();
    eventually(
        Duration::from_secs(30),
        "Gateway programmed, route accepted",
        || async move {
            let gw = get_json::<Gateway>(c, Some(NS), "gw")
                .await
                .ok_or("no gw")?;
            let r = get_json::<HttpRoute>(c, Some(NS), "r1")
                .await
                .ok_or("no route")?;
            let programmed = status_reason(&gw["status"]["conditions"], "Programmed");
            let accepted = our_parent(&r, "gw", None)
                .and_then(|p| status_reason(&p["conditions"], "Accepted"));
            if programmed == Some(("True".into(), "Programmed".into()))
                && accepted == Some(("True".into(), "Accepted".into()))
            {
                Ok(())
            } else {
                Err(format!("{programmed:?} {accepted:?}"))
            }
        },
    )
    .await;
    // TCPRoute and UDPRoute: watched and their status written under the same rights.
    eventually(
        Duration::from_secs(30),
        "TCPRoute and UDPRoute status",
        || async move {
            let t = get_json::<TcpRoute>(c, Some(NS), "t1")
                .await
                .ok_or("no t1")?;
            let u = get_json::<UdpRoute>(c, Some(NS), "u1")
                .await
                .ok_or("no u1")?;
            match (
                our_parent(&t, "gw", Some("tcp")),
                our_parent(&u, "gw", Some("udp")),
            ) {
                (Some(_), Some(_)) => Ok(()),
                _ => Err(format!("{} {}", t["status"], u["status"])),
            }
        },
    )
    .await;
    let classes: kube::Api<gateway_api::apis::standard::gatewayclasses::GatewayClass> =
        kube::Api::all(client.clone());
    let class = serde_json::to_value(classes.get("aether").await.unwrap()).unwrap();
    assert_eq!(
        status_reason(&class["status"]["conditions"], "Accepted"),
        Some(("True".into(), "Accepted".into()))
    );
    let target = svc.spec.unwrap().ports.unwrap()[0]
        .target_port
        .clone()
        .unwrap();
    let target = match target {
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(t) => t,
        s => panic!("{s:?}"),
    };
    let r = http_get(&format!("{POD_IP}:{target}"), "example.test", "/", &[]).unwrap();
    assert_eq!(r.backend(), Some("b0"), "{r:?}");

    // GC of a deleted Gateway's Service is allowed too.
    let gateways: kube::Api<Gateway> = kube::Api::namespaced(client.clone(), NS);
    gateways.delete("gw", &Default::default()).await.unwrap();
    eventually(Duration::from_secs(30), "the Service deleted", || {
        let services = services.clone();
        let name = name.clone();
        async move {
            match services.get_opt(&name).await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(_) => Err("still there".to_string()),
            }
        }
    })
    .await;
    let log = agent.log_text();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("forbidden") || l.contains("Forbidden"))
        .collect();
    assert!(
        refused.is_empty(),
        "the deployed RBAC refused: {refused:#?}"
    );
    assert!(agent.is_running(), "agent exited:\n{log}");
}
