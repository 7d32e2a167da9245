//! The GatewayClass finalizer: while a Gateway names one of our GatewayClasses,
//! the class carries [`FINALIZER`], so `kubectl delete gatewayclass` waits until
//! its last Gateway is gone instead of leaving Gateways whose class no longer
//! exists (the finalizer the Gateway API names for this).
//!
//! ```text
//!  plan: our classes ─┐
//!  store: Gateways ───┼─► changes() ─► class → its finalizer list, where it must change ─► merge patch (leader only)
//!  store: each class's finalizers ─┘
//! ```
//!
//! The write is a JSON merge patch of the whole list with the class's
//! `resourceVersion`: another controller's finalizers are kept, and a class
//! changed meanwhile refuses the write (409); the next pass starts from the
//! class as the watch then shows it. A class being deleted gets no new
//! finalizer (the API server refuses one), only loses ours.

use crate::backoff::{Failed, Writer, run_writer};
use crate::status::StatusInputs;
use aether_gateway::{Kind, Store};
use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::sync::watch;

/// The finalizer a GatewayClass carries while Gateways use it.
pub const FINALIZER: &str = "gateway-exists-finalizer.gateway.networking.k8s.io";

/// One class whose finalizer list must change, and the list to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub class: String,
    /// The class's version as read: the write is refused if it moved on.
    pub resource_version: Option<String>,
    pub finalizers: Vec<String>,
}

/// The finalizer lists to write for `classes` (ours), in class order: the
/// finalizer added where a Gateway names the class, removed where none does.
pub fn changes<'a>(store: &Store, classes: impl IntoIterator<Item = &'a String>) -> Vec<Change> {
    let in_use: BTreeSet<&str> = store
        .all::<Gateway>()
        .values()
        .map(|g| g.spec.gateway_class_name.as_str())
        .collect();
    let mut out = Vec::new();
    for class in classes {
        let Some(obj) = store.get::<GatewayClass>("", class) else {
            continue;
        };
        let list = obj.metadata.finalizers.clone().unwrap_or_default();
        let carries = list.iter().any(|f| f == FINALIZER);
        let wanted = in_use.contains(class.as_str());
        let deleting = obj.metadata.deletion_timestamp.is_some();
        let finalizers = if wanted && !carries && !deleting {
            list.into_iter().chain([FINALIZER.to_string()]).collect()
        } else if !wanted && carries {
            list.into_iter().filter(|f| f != FINALIZER).collect()
        } else {
            continue;
        };
        out.push(Change {
            class: class.clone(),
            resource_version: obj.metadata.resource_version.clone(),
            finalizers,
        });
    }
    out
}

/// Leader only: keeps [`FINALIZER`] on each of our classes exactly while a
/// Gateway uses it; failed writes are retried ([`run_writer`]).
pub async fn run(
    client: kube::Client,
    inputs: watch::Receiver<Arc<StatusInputs>>,
    is_leader: watch::Receiver<bool>,
) {
    run_writer(Finalizers { client, inputs }, is_leader).await
}

struct Finalizers {
    client: kube::Client,
    inputs: watch::Receiver<Arc<StatusInputs>>,
}

impl Writer for Finalizers {
    async fn pass(&mut self, leading: bool) -> Result<(), Failed> {
        let now = self.inputs.borrow_and_update().clone();
        if !leading {
            return Ok(());
        }
        let classes = now.plan.gateway_classes.keys();
        let version = now.served.version(Kind::GatewayClass).unwrap_or("v1");
        let mut result = Ok(());
        for change in changes(&now.store, classes) {
            if let Err(e) = write(&self.client, version, &change).await {
                tracing::warn!(class = %change.class, error = %e, "GatewayClass finalizer not written; retrying");
                result = Err(Failed);
            }
        }
        result
    }

    async fn changed(&mut self) -> bool {
        self.inputs.changed().await.is_ok()
    }
}

async fn write(client: &kube::Client, version: &str, change: &Change) -> Result<(), kube::Error> {
    let kind = Kind::GatewayClass;
    let resource = ApiResource {
        group: kind.spec().group.to_string(),
        version: version.to_string(),
        api_version: kind.api_version(version),
        kind: kind.as_str().to_string(),
        plural: kind.spec().plural.to_string(),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": change.resource_version,
            "finalizers": change.finalizers,
        }
    });
    api.patch(
        &change.class,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mk_store(yaml: &str) -> Store {
        let mut store = Store::default();
        store.add_yaml("world.yaml", yaml).expect("world loads");
        store
    }

    fn mk_class(name: &str, finalizers: &[&str], deleting: bool) -> String {
        let list = finalizers
            .iter()
            .map(|f| format!("\"{f}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let deleted = if deleting {
            "\n  deletionTimestamp: \"2026-12-05T00:00:00Z\""
        } else {
            ""
        };
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: {name}\n  resourceVersion: \"7\"\n  finalizers: [{list}]{deleted}\nspec:\n  controllerName: gateway.aether.io/edge\n---\n"
        )
    }

    fn mk_gateway(name: &str, class: &str) -> String {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: {name}\n  namespace: app\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n---\n"
        )
    }

    fn ours() -> Vec<String> {
        vec!["aether".to_string()]
    }

    #[test]
    fn a_used_class_gets_the_finalizer_beside_another_controllers() {
        let store = mk_store(
            &(mk_class("aether", &["other.example/keep"], false) + &mk_gateway("gw", "aether")),
        );
        let got = changes(&store, &ours());
        assert_eq!(
            got,
            [Change {
                class: "aether".into(),
                resource_version: Some("7".into()),
                finalizers: vec!["other.example/keep".into(), FINALIZER.into()],
            }]
        );
    }

    #[test]
    fn an_unused_class_loses_only_ours() {
        let store = mk_store(
            &(mk_class("aether", &[FINALIZER, "other.example/keep"], false)
                + &mk_gateway("gw", "another-class")),
        );
        let got = changes(&store, &ours());
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].finalizers, ["other.example/keep"]);
    }

    #[test]
    fn nothing_to_write_when_the_finalizer_already_says_it() {
        let used =
            mk_store(&(mk_class("aether", &[FINALIZER], false) + &mk_gateway("gw", "aether")));
        assert_eq!(changes(&used, &ours()), []);
        let unused = mk_store(&mk_class("aether", &[], false));
        assert_eq!(changes(&unused, &ours()), []);
    }

    #[test]
    fn a_class_being_deleted_gets_no_new_finalizer_but_loses_ours_with_its_last_gateway() {
        let in_use = mk_store(&(mk_class("aether", &[], true) + &mk_gateway("gw", "aether")));
        assert_eq!(changes(&in_use, &ours()), []);
        let gone = mk_store(&mk_class("aether", &[FINALIZER], true));
        assert_eq!(changes(&gone, &ours())[0].finalizers, Vec::<String>::new());
    }

    #[test]
    fn only_our_classes_are_touched() {
        let store = mk_store(&(mk_class("theirs", &[], false) + &mk_gateway("gw", "theirs")));
        assert_eq!(changes(&store, &ours()), []);
    }
}
