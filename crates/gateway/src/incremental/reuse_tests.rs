//! Each reuse rule on its own: what keeps a cached result, and each input
//! whose change drops it.

use super::*;
use crate::incremental::identity::same_as;
use crate::store::Store;
use aether_ir::ObjectRef;
use gateway_api::apis::experimental::httproutes::HttpRoute;

const DOCS: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default, resourceVersion: '1'}
spec:
  gatewayClassName: aether
  listeners: [{name: http, protocol: HTTP, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default, resourceVersion: '1'}
spec:
  parentRefs: [{name: gw}]
";

fn store(docs: &str) -> Store {
    let mut s = Store::default();
    s.add_yaml("docs.yaml", docs)
        .expect("the test's documents load");
    s
}

fn gateway(s: &Store) -> Arc<Gateway> {
    s.all::<Gateway>().values().next().unwrap().clone()
}

fn route(s: &Store) -> Shared {
    s.all::<HttpRoute>().values().next().unwrap().clone()
}

fn model(s: &Store) -> Arc<RouteModel> {
    let backends = crate::backend::Backends::new(s);
    let key = ObjectRef::new("default", "r");
    let r = s.all::<HttpRoute>().values().next().unwrap();
    Arc::new(crate::http_route::model(&backends, key, r))
}

#[test]
fn a_route_model_stands_for_the_same_route() {
    let s = store(DOCS);
    let read = RouteRead { source: route(&s) };
    assert!(read.stands(&route(&s), same_as::<HttpRoute>));
    // A status write or a new resourceVersion: the same input.
    let rewritten = store(&DOCS.replace("resourceVersion: '1'", "resourceVersion: '2'"));
    assert!(read.stands(&route(&rewritten), same_as::<HttpRoute>));

    let edited = store(&DOCS.replace("parentRefs: [{name: gw}]", "parentRefs: [{name: other}]"));
    assert!(!read.stands(&route(&edited), same_as::<HttpRoute>));
}

#[test]
fn a_gateway_unit_stands_only_for_the_same_route_models_in_the_same_places() {
    let s = store(DOCS);
    let m = model(&s);
    let read = GatewayRead {
        source: gateway(&s),
        taken: Taken::new(),
        inputs: vec![(m.clone(), 0)],
    };
    assert!(read.unit_stands(&gateway(&s), &Taken::new(), &[(m.clone(), 0)]));
    // The model stands without its inputs; the unit does not.
    assert!(read.model_stands(&gateway(&s), &Taken::new()));
    assert!(!read.unit_stands(&gateway(&s), &Taken::new(), &[]));
    assert!(!read.unit_stands(&gateway(&s), &Taken::new(), &[(m.clone(), 1)]));
    // An equal model is not the same model: it was modeled again.
    assert!(!read.unit_stands(&gateway(&s), &Taken::new(), &[(model(&s), 0)]));

    let mut lost = Taken::new();
    lost.insert(
        (80, crate::port_claims::Transport::Tcp),
        ("0.0.0.0".into(), ObjectRef::new("default", "older")),
    );
    assert!(!read.model_stands(&gateway(&s), &lost));
    let edited = store(&DOCS.replace("port: 80", "port: 81"));
    assert!(!read.model_stands(&gateway(&edited), &Taken::new()));
}
