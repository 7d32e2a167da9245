//! What a warm [`Builder`] re-encodes. (That it gives what a fresh build
//! gives, over random edits, is `tests/incremental.rs`.)

use super::*;

/// `routes` routes over two Gateways, each route on one of them and to a
/// Service of its own; `ip` is the endpoint of route 0's Service.
fn ir_of(routes: usize, prefix: &str, ip: &str) -> ir::Ir {
    use aether_testkit::live::{mk_gateway, mk_route};
    let mut docs = vec![
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n".to_string(),
    ];
    for g in 0..2 {
        let listener = format!("{{name: http, protocol: HTTP, port: {}}}", 8000 + g);
        docs.push(mk_gateway("default", &format!("gw-{g}"), &[&listener]));
    }
    for r in 0..routes {
        let p = if r == 3 { prefix } else { "/" };
        let ip = if r == 0 { ip } else { "10.0.0.9" };
        let spec = format!(
            "  parentRefs: [{{name: gw-{g}}}]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: {p}r{r}}}}}]\n    backendRefs: [{{name: svc-{r}, port: 80}}]\n",
            g = r % 2
        );
        docs.push(mk_route(
            "HTTPRoute",
            "default",
            &format!("route-{r}"),
            &spec,
        ));
        docs.push(format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: svc-{r}, namespace: default}}\nspec:\n  ports: [{{name: http, port: 80}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: svc-{r}, namespace: default, labels: {{kubernetes.io/service-name: svc-{r}}}}}\naddressType: IPv4\nports: [{{name: http, port: 8080}}]\nendpoints:\n- addresses: [\"{ip}\"]\n"
        ));
    }
    let mut store = aether_gateway::Store::default();
    store.add_yaml("in.yaml", &docs.join("---\n")).unwrap();
    aether_gateway::translate(&store, &aether_gateway::Config::default()).ir
}

#[test]
fn a_warm_builder_encodes_only_what_changed() {
    let mut b = Builder::default();
    b.build(&ir_of(10, "/", "10.0.0.1"));
    assert_eq!((b.last.clusters_encoded, b.last.gateways_encoded), (10, 2));

    // One route moved: its Gateway alone is encoded again.
    let ir = ir_of(10, "/moved/", "10.0.0.1");
    let warm = b.build(&ir);
    assert_eq!(
        b.last,
        Reuse {
            clusters_reused: 10,
            clusters_encoded: 0,
            gateways_reused: 1,
            gateways_encoded: 1,
        }
    );
    assert_eq!(warm, crate::build(&ir));

    // One endpoint moved: its cluster alone (its EDS version moves, and with
    // it the hash of the Gateway that uses it).
    let ir = ir_of(10, "/moved/", "10.0.0.2");
    let before = warm;
    let warm = b.build(&ir);
    assert_eq!((b.last.clusters_encoded, b.last.gateways_encoded), (1, 0));
    assert_eq!(warm, crate::build(&ir));
    let gw0 = ir::ObjectRef::new("default", "gw-0");
    assert_ne!(warm.gateways[&gw0].hash, before.gateways[&gw0].hash);
}

#[test]
fn a_gateway_is_encoded_again_when_a_cluster_it_names_comes_or_goes() {
    // Not what the translator gives (it defines every cluster it names), but
    // any IR builds as it would from scratch.
    let full = ir_of(4, "/", "10.0.0.1");
    let mut partial = full.clone();
    partial.clusters.retain(|c| !c.name.contains("svc-0"));
    let mut b = Builder::default();
    for ir in [&full, &partial, &full] {
        let warm = b.build(ir);
        assert_eq!(warm, crate::build(ir));
    }
    assert_eq!(b.last.gateways_encoded, 1, "gw-0 names svc-0's cluster");
}
