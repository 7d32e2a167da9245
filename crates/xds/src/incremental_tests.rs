//! What a warm [`Builder`] re-encodes, and that it gives what a fresh build
//! gives over random edits of one Gateway's many routes (`one_gateway`; over
//! the golden cases' objects, `tests/incremental.rs`).

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

    // One route moved: its Gateway alone is encoded again, and of its five
    // routes only that one.
    let ir = ir_of(10, "/moved/", "10.0.0.1");
    let warm = b.build(&ir);
    assert_eq!(
        b.last,
        Reuse {
            clusters_reused: 10,
            clusters_encoded: 0,
            gateways_reused: 1,
            gateways_encoded: 1,
            routes_reused: 4,
            routes_encoded: 1,
            route_shares_made: 1,
            route_fingerprints_made: 1,
            types_assembled: 1,
            gateway_hashes_made: 1,
        }
    );
    assert_eq!(warm, crate::build(&ir));

    // One endpoint moved: its cluster alone. Its EDS version moves, and the
    // snapshot's; the hash of the Gateway that uses it does not (endpoints
    // count by presence: `ResourceType::any_version_serves`).
    let ir = ir_of(10, "/moved/", "10.0.0.2");
    let before = warm;
    let warm = b.build(&ir);
    assert_eq!((b.last.clusters_encoded, b.last.gateways_encoded), (1, 0));
    assert_eq!(warm, crate::build(&ir));
    let gw0 = ir::ObjectRef::new("default", "gw-0");
    assert_eq!(warm.gateways[&gw0].hash, before.gateways[&gw0].hash);
    assert_ne!(warm.version, before.version);
    // Only the endpoints' map is assembled again, no Gateway hash made
    // again; every other map is the snapshot before's.
    assert_eq!((b.last.types_assembled, b.last.gateway_hashes_made), (1, 0));
    for (ty, by_name) in &warm.resources {
        let shared = std::sync::Arc::ptr_eq(by_name, &before.resources[ty]);
        assert_eq!(shared, *ty != ResourceType::Endpoint, "{ty:?}");
    }
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

/// One Gateway carrying many HTTPRoutes on an HTTP and an HTTPS listener,
/// edited one route, one certificate or one endpoint at a time: a warm
/// builder gives what a fresh build gives, byte for byte, and encodes at most
/// the one IR route that changed, making at most its parts and fingerprint.
mod one_gateway {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::sync::OnceLock;

    /// Two certificates the HTTPS listener's Secret takes turns at.
    fn certificates() -> &'static [(String, String); 2] {
        static CERTS: OnceLock<[(String, String); 2]> = OnceLock::new();
        CERTS.get_or_init(|| {
            let make = || aether_testkit::live::traffic::self_signed_cert("one.example");
            [make(), make()]
        })
    }

    /// An HTTPRoute with one rule and one match, each field an index into a
    /// few choices (few, so that routes tie on precedence and vhosts fill).
    #[derive(Debug, Clone)]
    struct Spec {
        path: usize,
        host: usize,
        backend: usize,
        filter: usize,
        /// Its parentRef's sectionName: none (both listeners), http, https.
        listener: usize,
        /// Seconds into its creation minute: the precedence tie-break.
        age: u8,
    }

    /// What the routes live in: which certificate the HTTPS listener's
    /// Secret holds, and the last octet of each Service's endpoint.
    #[derive(Debug, Clone, Default)]
    struct World {
        certificate: usize,
        endpoints: [u8; 3],
    }

    const PATHS: [&str; 4] = ["/", "/a", "/a/b", "/b"];
    /// `None`: the route names no hostname (the `*` virtual host).
    const HOSTS: [Option<&str>; 3] = [None, Some("one.example"), Some("*.example")];
    const FILTERS: usize = 3;
    const SECTIONS: [&str; 3] = ["", ", sectionName: http", ", sectionName: https"];

    fn spec() -> impl Strategy<Value = Spec> {
        (
            0..PATHS.len(),
            0..HOSTS.len(),
            0..4usize,
            0..FILTERS,
            0..SECTIONS.len(),
            0..60u8,
        )
            .prop_map(|(path, host, backend, filter, listener, age)| Spec {
                path,
                host,
                backend,
                filter,
                listener,
                age,
            })
    }

    #[derive(Debug, Clone)]
    enum Edit {
        /// The n-th route (modulo) takes another spec: its match, hostname,
        /// backend or filter, or only its age (precedence alone).
        Change(usize, Spec),
        /// The n-th route ties differently: only its age moves.
        Reorder(usize, u8),
        Add(Spec),
        Remove(usize),
        /// The HTTPS listener's certificate rotates: every route on it is
        /// served with the new one only once Envoy has it.
        Rotate,
        /// A Service's endpoint moves (its cluster's EDS alone).
        Endpoint(usize, u8),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            4 => (any::<usize>(), spec()).prop_map(|(n, s)| Edit::Change(n, s)),
            2 => (any::<usize>(), 0..60u8).prop_map(|(n, a)| Edit::Reorder(n, a)),
            2 => spec().prop_map(Edit::Add),
            2 => any::<usize>().prop_map(Edit::Remove),
            1 => Just(Edit::Rotate),
            1 => (0..3usize, 1..200u8).prop_map(|(s, ip)| Edit::Endpoint(s, ip)),
        ]
    }

    fn route_yaml(id: usize, s: &Spec) -> String {
        let hostnames = HOSTS[s.host]
            .map(|h| format!("  hostnames: [\"{h}\"]\n"))
            .unwrap_or_default();
        let matches = format!(
            "  - matches: [{{path: {{type: PathPrefix, value: \"{}\"}}}}]\n",
            PATHS[s.path]
        );
        // svc-3 does not exist: an unresolved backend.
        let backend = format!("    backendRefs: [{{name: svc-{}, port: 80}}]\n", s.backend);
        let rule = match s.filter {
            0 => backend,
            1 => format!(
                "    filters: [{{type: RequestHeaderModifier, requestHeaderModifier: {{set: [{{name: x-route, value: \"{id}\"}}]}}}}]\n{backend}"
            ),
            // A redirect keeping the host: it reads the virtual host's domains.
            _ => "    filters: [{type: RequestRedirect, requestRedirect: {statusCode: 302, path: {type: ReplaceFullPath, replaceFullPath: /elsewhere}}}]\n".to_string(),
        };
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: route-{id}, namespace: default, creationTimestamp: \"2026-01-01T00:00:{:02}Z\"}}\nspec:\n  parentRefs: [{{name: gw{}}}]\n{hostnames}  rules:\n{matches}{rule}",
            s.age, SECTIONS[s.listener]
        )
    }

    fn ir_of(routes: &BTreeMap<usize, Spec>, world: &World) -> ir::Ir {
        use aether_testkit::live::mk_gateway;
        let https =
            "{name: https, protocol: HTTPS, port: 8443, tls: {certificateRefs: [{name: cert}]}}";
        let certificate = &certificates()[world.certificate];
        let mut docs = vec![
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n".to_string(),
            mk_gateway("default", "gw", &["{name: http, protocol: HTTP, port: 8000}", https]),
            aether_testkit::live::traffic::tls_secret_yaml("default", "cert", certificate),
        ];
        for (s, ip) in world.endpoints.iter().enumerate() {
            docs.push(format!(
                "apiVersion: v1\nkind: Service\nmetadata: {{name: svc-{s}, namespace: default}}\nspec:\n  ports: [{{name: http, port: 80}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: svc-{s}, namespace: default, labels: {{kubernetes.io/service-name: svc-{s}}}}}\naddressType: IPv4\nports: [{{name: http, port: 8080}}]\nendpoints:\n- addresses: [\"10.0.0.{ip}\"]\n"
            ));
        }
        docs.extend(routes.iter().map(|(id, s)| route_yaml(*id, s)));
        let mut store = aether_gateway::Store::default();
        store.add_yaml("in.yaml", &docs.join("---\n")).unwrap();
        aether_gateway::translate(&store, &aether_gateway::Config::default()).ir
    }

    fn nth(routes: &BTreeMap<usize, Spec>, n: usize) -> Option<usize> {
        (!routes.is_empty()).then(|| *routes.keys().nth(n % routes.len()).unwrap())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn warm_equals_fresh_route_by_route(
            start in proptest::collection::vec(spec(), 10..50),
            edits in proptest::collection::vec(edit(), 1..30),
        ) {
            let mut routes: BTreeMap<usize, Spec> = start.into_iter().enumerate().collect();
            let mut world = World::default();
            let mut next = routes.len();
            let mut b = Builder::default();
            b.build(&ir_of(&routes, &world));
            for (step, e) in edits.iter().enumerate() {
                match e.clone() {
                    Edit::Change(n, s) => {
                        if let Some(id) = nth(&routes, n) {
                            routes.insert(id, s);
                        }
                    }
                    Edit::Reorder(n, age) => {
                        if let Some(id) = nth(&routes, n) {
                            routes.get_mut(&id).unwrap().age = age;
                        }
                    }
                    Edit::Add(s) => {
                        routes.insert(next, s);
                        next += 1;
                    }
                    Edit::Remove(n) => {
                        if let Some(id) = nth(&routes, n) {
                            routes.remove(&id);
                        }
                    }
                    Edit::Rotate => world.certificate = 1 - world.certificate,
                    Edit::Endpoint(s, ip) => world.endpoints[s] = ip,
                }
                let ir = ir_of(&routes, &world);
                let warm = b.build(&ir);
                let fresh = crate::build(&ir);
                prop_assert!(warm == fresh, "after {} edits {:?}: warm != fresh", step + 1, &edits[..=step]);
                prop_assert_eq!(crate::to_yaml(&warm).unwrap(), crate::to_yaml(&fresh).unwrap());
                // A route is encoded in each table it is in; a change that
                // keeps its Envoy routes can still move its fragment (its
                // virtual host's domains), a removal none.
                let (most, parts) = match e {
                    Edit::Reorder(..) | Edit::Remove(_) | Edit::Endpoint(..) => (0, 0),
                    Edit::Rotate => (0, routes.len() * 2),
                    _ => (2, 2),
                };
                prop_assert!(
                    b.last.routes_encoded <= most,
                    "after {:?}: {} routes encoded", e, b.last.routes_encoded
                );
                prop_assert!(
                    b.last.route_shares_made <= parts && b.last.route_fingerprints_made <= parts,
                    "after {:?}: {:?}", e, b.last
                );
            }
        }
    }
}
