//! Gateway address routability in service mode, on a real kube-apiserver: a
//! Gateway whose only address is `Cluster`-scoped gets a ClusterIP Service (no
//! load balancer), and its status reports that Service's ClusterIP with
//! routability `Cluster`, `AddressesAssigned=True`, and `Programmed=True` once
//! its Envoy serves it.

use crate::support::*;
use gateway_api::apis::experimental::gateways::Gateway;
use serde_json::Value;
use std::time::Duration;

const NS: &str = "app";
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn a_cluster_scoped_gateway_reports_its_cluster_ip() {
    in_netns(async {
        let w = given_a_cluster_scoped_gateway_in_service_mode().await;
        let ip = its_service_is_cluster_ip_only(&w).await;
        its_status_reports_that_ip_as_cluster(&w, &ip).await;
    });
}

type World = OneNode;

fn app_yaml() -> String {
    [
        base_yaml(&[NS]),
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: internal, namespace: {NS}}}\nspec:\n  gatewayClassName: aether\n  addresses:\n  - {{type: IPAddress, routability: Cluster}}\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n"
        ),
    ]
    .join("---\n")
}

async fn given_a_cluster_scoped_gateway_in_service_mode() -> World {
    let logs = temp_dir("kube-routability");
    let server = aether_testkit::ApiServer::start().await;
    server.apply(&app_yaml()).await.unwrap();
    let flags = ["--leader-elect=false", "--address-mode", "service"];
    OneNode::start(server, Backend::on(POD_IP, "b0"), &flags, &logs)
}

/// The public Service is type ClusterIP; returns its ClusterIP.
async fn its_service_is_cluster_ip_only(w: &World) -> String {
    let svc = public_services(&w.client, 1, WAIT).await.remove(0);
    let spec = svc.spec.expect("a spec");
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    let ip = spec.cluster_ip.expect("a ClusterIP");
    assert!(ip.starts_with("10.96."), "{ip} in the Service CIDR");
    ip
}

fn condition<'a>(gw: &'a Value, type_: &str) -> Option<&'a Value> {
    gw["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

async fn its_status_reports_that_ip_as_cluster(w: &World, ip: &str) {
    eventually(WAIT, "the ClusterIP reported, programmed", || async {
        let gw = get_json::<Gateway>(&w.client, Some(NS), "internal")
            .await
            .ok_or("no Gateway")?;
        let addresses = &gw["status"]["addresses"];
        let want =
            serde_json::json!([{"type": "IPAddress", "value": ip, "routability": "Cluster"}]);
        let assigned = condition(&gw, "AddressesAssigned").map(|c| (&c["status"], &c["reason"]));
        let programmed = condition(&gw, "Programmed").map(|c| &c["status"]);
        if *addresses == want
            && assigned == Some((&"True".into(), &"AddressesAssigned".into()))
            && programmed == Some(&"True".into())
        {
            Ok(())
        } else {
            Err(format!("{}", gw["status"]))
        }
    })
    .await;
}
