//! What the status scripts (`tests`, `l4_tests`, `identity_tests`, `settled_tests`)
//! share: worlds written as YAML, the inputs a plan of them makes, and the API
//! server's side of our applies played locally.

use super::compute::StatusInputs;
use super::patch::{StatusKind, StatusPatch};
use crate::ServedVersions;
use aether_gateway::{AckState, Addresses, Config, Served, Store, assemble, translate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

pub(super) const OURS: &str = "gateway.aether.io/edge";
pub(super) const THEIRS: &str = "example.com/other";

/// A listener of `protocol` on `port` that admits routes from every namespace;
/// `more` is added to it as is (e.g. `tls: {mode: Passthrough}, `).
pub(super) fn mk_listener(name: &str, port: u16, protocol: &str, more: &str) -> String {
    format!(
        "{{name: {name}, port: {port}, protocol: {protocol}, {more}allowedRoutes: {{namespaces: {{from: All}}}}}}"
    )
}

/// One Gateway API object as a YAML document, `metadata` and `spec` in flow style.
pub(super) fn mk_doc(kind: &str, metadata: &str, spec: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: {kind}\nmetadata: {metadata}\nspec: {spec}\n"
    )
}

/// GatewayClass `aether`, ours, with `metadata`.
pub(super) fn mk_class(metadata: &str) -> String {
    mk_doc(
        "GatewayClass",
        metadata,
        &format!("{{controllerName: {OURS}}}"),
    )
}

/// A Gateway of class `aether` with `metadata` and `listeners`.
pub(super) fn mk_gateway(metadata: &str, listeners: &[String]) -> String {
    let spec = format!(
        "{{gatewayClassName: aether, listeners: [{}]}}",
        listeners.join(", ")
    );
    mk_doc("Gateway", metadata, &spec)
}

/// The documents as one YAML stream.
pub(super) fn mk_world(docs: &[String]) -> String {
    docs.join("---\n")
}

/// Our class, Gateway `infra/web` with one HTTP listener, and `routes`; the
/// class's and the Gateway's metadata as given.
pub(super) fn mk_web_world(class: &str, web: &str, routes: &[String]) -> String {
    let mut docs = vec![
        mk_class(class),
        mk_gateway(web, &[mk_listener("http", 80, "HTTP", "")]),
    ];
    docs.extend_from_slice(routes);
    mk_world(&docs)
}

/// [`mk_web_world`] with two routes in `apps`: HTTPRoute `r` on `web` and on
/// `elsewhere` (not ours) to a missing backend, GRPCRoute `g` on `web`.
pub(super) fn web_world() -> String {
    mk_web_world(
        r#"{name: aether, generation: 3, resourceVersion: "1"}"#,
        r#"{name: web, namespace: infra, generation: 2, resourceVersion: "2"}"#,
        &[
            mk_doc(
                "HTTPRoute",
                r#"{name: r, namespace: apps, generation: 5, resourceVersion: "3"}"#,
                "{parentRefs: [{name: web, namespace: infra}, {name: elsewhere, namespace: infra}], \
                 hostnames: [www.example.com], rules: [{backendRefs: [{name: missing, port: 80}]}]}",
            ),
            mk_doc(
                "GRPCRoute",
                r#"{name: g, namespace: apps, generation: 1, resourceVersion: "4"}"#,
                "{parentRefs: [{name: web, namespace: infra}], hostnames: [grpc.example.com]}",
            ),
        ],
    )
}

pub(super) fn at(secs: i64) -> Time {
    Time(Timestamp::from_second(secs).unwrap())
}

pub(super) fn mk_store(yaml: &str) -> Store {
    let mut store = Store::default();
    store.add_yaml("world.yaml", yaml).expect("world loads");
    store
}

pub(super) fn mk_inputs(store: Store, ack: AckState) -> StatusInputs {
    let config = Config::default();
    let planned = translate(&store, &config).status;
    StatusInputs {
        plan: assemble(
            &planned,
            |_| Served::whole(ack.clone()),
            &Addresses::Planned,
        ),
        store: store.into(),
        supported_features: vec!["HTTPRoute".into(), "Gateway".into(), "GRPCRoute".into()],
        controller_name: config.controller_name,
        served: ServedVersions::all_v1(),
        served_at: None,
    }
}

/// `inputs` with the store as it is now.
pub(super) fn over_store(store: Store, inputs: &StatusInputs) -> StatusInputs {
    StatusInputs {
        store: store.into(),
        ..inputs.clone()
    }
}

/// What the API server does with our apply ([`StatusPatch::apply_to`]).
pub(super) fn apply_locally(store: &mut Store, patch: &StatusPatch) {
    patch.apply_to(store).expect("the status applies");
}

pub(super) fn apply_all(store: &mut Store, patches: &[StatusPatch]) {
    for p in patches {
        apply_locally(store, p);
    }
}

pub(super) fn find<'a>(
    patches: &'a [StatusPatch],
    kind: StatusKind,
    name: &str,
) -> &'a StatusPatch {
    patches
        .iter()
        .find(|p| p.kind == kind && p.object.name == name)
        .unwrap_or_else(|| panic!("no patch for {kind} {name}"))
}
