//! The GatewayClass finalizer as deployed (the deploy/ RBAC, leader election
//! on), on a real kube-apiserver: while a Gateway names our class, the class
//! carries `gateway-exists-finalizer.gateway.networking.k8s.io`, so deleting
//! the class waits until its last Gateway is gone.

use crate::support::*;
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use kube::api::DeleteParams;
use std::time::Duration;

const NS: &str = "app";
const WAIT: Duration = Duration::from_secs(30);
const FINALIZER: &str = "gateway-exists-finalizer.gateway.networking.k8s.io";

#[test]
fn deleting_a_class_in_use_waits_for_its_last_gateway() {
    in_netns(async {
        let w = given_a_gateway_of_our_class().await;
        the_class_carries_the_finalizer(&w).await;
        deleting_the_class_leaves_it_terminating(&w).await;
        the_class_goes_with_its_last_gateway(&w).await;
    });
}

type World = OneNode<Proc>;

async fn given_a_gateway_of_our_class() -> World {
    let b0 = Backend::on(POD_IP, "b0");
    let app = [
        format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n"),
        mk_gateway(NS, "gw", &[HTTP_80]),
        b0.yaml(NS),
    ];
    OneNode::deployed("kube-class-finalizer", &app.join("---\n"), b0).await
}

fn classes(w: &World) -> kube::Api<GatewayClass> {
    kube::Api::all(w.client.clone())
}

/// The class's finalizers and whether it is being deleted; `None` once gone.
async fn class_state(w: &World) -> Option<(Vec<String>, bool)> {
    let class = classes(w).get_opt("aether").await.ok()??;
    let finalizers = class.metadata.finalizers.unwrap_or_default();
    Some((finalizers, class.metadata.deletion_timestamp.is_some()))
}

async fn the_class_carries_the_finalizer(w: &World) {
    eventually(WAIT, "the finalizer on the class", || async {
        match class_state(w).await {
            Some((f, false)) if f.iter().any(|f| f == FINALIZER) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// Deleted while the Gateway still names it: the class stays, terminating,
/// finalizer kept, for as long as we look.
async fn deleting_the_class_leaves_it_terminating(w: &World) {
    classes(w)
        .delete("aether", &DeleteParams::default())
        .await
        .expect("delete the class");
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        match class_state(w).await {
            Some((f, true)) if f.iter().any(|f| f == FINALIZER) => {}
            other => panic!("the class should be terminating with our finalizer: {other:?}"),
        }
    }
}

async fn the_class_goes_with_its_last_gateway(w: &World) {
    let gateways: kube::Api<Gateway> = kube::Api::namespaced(w.client.clone(), NS);
    gateways
        .delete("gw", &DeleteParams::default())
        .await
        .expect("delete the Gateway");
    eventually(WAIT, "the class gone", || async {
        match class_state(w).await {
            None => Ok(()),
            Some(s) => Err(format!("{s:?}")),
        }
    })
    .await;
}
