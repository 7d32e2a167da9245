//! ClusterTrustBundle in Kubernetes mode, on a real kube-apiserver serving
//! `certificates.k8s.io/v1beta1`: a Gateway's frontend validation names a
//! bundle that does not exist yet (its listener says `InvalidCACertificateRef`);
//! once the bundle is created, the agent's watch brings it in and the listener
//! resolves it.

use crate::support::*;
use aether_testkit::live::traffic::{self_signed_cert, tls_secret_yaml};
use gateway_api::apis::experimental::gateways::Gateway;
use std::time::Duration;

const NS: &str = "app";
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn a_bundle_created_later_is_watched_and_resolves_the_listener() {
    in_netns(async {
        let w = given_a_gateway_whose_client_ca_bundle_is_missing().await;
        its_listener_says_the_ca_ref_is_invalid(&w).await;
        the_bundle_created_resolves_it(&w).await;
    });
}

type World = OneNode;

fn mk_gateway_with_bundle_ca() -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\n\
         spec:\n  gatewayClassName: aether\n  tls:\n    frontend:\n      default:\n        validation:\n          caCertificateRefs:\n          - {{group: certificates.k8s.io, kind: ClusterTrustBundle, name: edge-clients}}\n\
         \x20 listeners:\n  - name: https\n    port: 443\n    protocol: HTTPS\n    hostname: example.test\n    tls:\n      certificateRefs:\n      - {{name: cert}}\n"
    )
}

fn mk_bundle(ca_pem: &str) -> String {
    let pem: String = ca_pem.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: certificates.k8s.io/v1beta1\nkind: ClusterTrustBundle\nmetadata: {{name: edge-clients}}\nspec:\n  trustBundle: |\n{pem}"
    )
}

async fn given_a_gateway_whose_client_ca_bundle_is_missing() -> World {
    let logs = temp_dir("kube-trust-bundle");
    let server = aether_testkit::ApiServer::start().await;
    let b0 = Backend::on(POD_IP, "b0");
    let app = [
        base_yaml(&[NS]),
        b0.yaml(NS),
        tls_secret_yaml(NS, "cert", &self_signed_cert("example.test")),
        mk_gateway_with_bundle_ca(),
    ]
    .join("---\n");
    server.apply(&app).await.unwrap();
    OneNode::start(server, b0, &STATIC_AT_POD_IP, &logs)
}

/// The listener's `ResolvedRefs` as (status, reason, message).
async fn listener_refs(w: &World) -> Result<(String, String, String), String> {
    let gw = get_json::<Gateway>(&w.client, Some(NS), "gw")
        .await
        .ok_or("no Gateway")?;
    let conditions = &gw["status"]["listeners"][0]["conditions"];
    let c = conditions
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "ResolvedRefs")
        .ok_or(format!("no ResolvedRefs in {}", gw["status"]))?;
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Ok((s("status"), s("reason"), s("message")))
}

async fn its_listener_says_the_ca_ref_is_invalid(w: &World) {
    eventually(WAIT, "InvalidCACertificateRef", || async {
        let (status, reason, message) = listener_refs(w).await?;
        if status == "False"
            && reason == "InvalidCACertificateRef"
            && message.contains("edge-clients")
        {
            Ok(())
        } else {
            Err(format!("{status} {reason} {message}"))
        }
    })
    .await;
}

async fn the_bundle_created_resolves_it(w: &World) {
    let (ca, _key) = self_signed_cert("edge clients CA");
    w.server.apply(&mk_bundle(&ca)).await.unwrap();
    eventually(WAIT, "ResolvedRefs=True", || async {
        let (status, reason, message) = listener_refs(w).await?;
        if status == "True" {
            Ok(())
        } else {
            Err(format!("{status} {reason} {message}"))
        }
    })
    .await;
}
