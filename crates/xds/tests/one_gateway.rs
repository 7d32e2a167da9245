//! Incremental == full on the topology users run: every route on one shared
//! Gateway, edited one route at a time. The Gateway and the Services stay, so
//! a warm translation takes each unchanged route's entries from the Gateway's
//! table memo and a warm build each unchanged route's encoding: after every
//! edit both must give exactly what a fresh translation and build give.

use aether_gateway::incremental::Translator;
use aether_gateway::{Config, Store};
use aether_xds::Builder;
use proptest::prelude::*;

/// The Gateway (three listeners: two share port 80, one hostname more
/// specific than the other), and the Services routes forward to.
const BASE: &str = r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: aether}
spec: {controllerName: gateway.aether.io/edge}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: aether
  listeners:
  - {name: any, protocol: HTTP, port: 80}
  - {name: wild, protocol: HTTP, port: 80, hostname: "*.example.com"}
  - {name: other, protocol: HTTP, port: 8080, hostname: a.example.com}
---
apiVersion: v1
kind: Service
metadata: {name: svc-0, namespace: default}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: svc-0-1, namespace: default, labels: {kubernetes.io/service-name: svc-0}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: ["10.0.0.1"]
---
apiVersion: v1
kind: Service
metadata: {name: svc-1, namespace: default}
spec:
  ports: [{name: grpc, port: 80, appProtocol: kubernetes.io/h2c}]
"#;

/// One route, drawn from a small space so that edits collide: its name,
/// kind, hostname, parentRef section, path or method, and backend (`svc-2`
/// does not exist).
#[derive(Debug, Clone)]
struct RouteDoc {
    name: u8,
    grpc: bool,
    host: u8,
    section: u8,
    path: u8,
    backend: u8,
    two_rules: bool,
}

fn route_doc() -> impl Strategy<Value = RouteDoc> {
    (
        0..12u8,
        any::<bool>(),
        0..5u8,
        0..4u8,
        0..4u8,
        0..3u8,
        any::<bool>(),
    )
        .prop_map(
            |(name, grpc, host, section, path, backend, two_rules)| RouteDoc {
                name,
                grpc,
                host,
                section,
                path,
                backend,
                two_rules,
            },
        )
}

impl RouteDoc {
    fn yaml(&self) -> String {
        let hostnames = match self.host {
            0 => "[]",
            1 => "[a.example.com]",
            2 => "[b.example.com]",
            3 => "[\"*.example.com\"]",
            _ => "[a.example.com, c.other.org]",
        };
        let section = match self.section {
            0 => String::new(),
            1 => ", sectionName: any".into(),
            2 => ", sectionName: wild".into(),
            _ => ", sectionName: other".into(),
        };
        let backend = format!("[{{name: svc-{}, port: 80}}]", self.backend);
        let (kind, api, matches) = if self.grpc {
            let method = format!("{{method: {{service: echo.Echo, method: M{}}}}}", self.path);
            ("GRPCRoute", "v1", format!("[{method}]"))
        } else {
            let path = format!("{{path: {{type: PathPrefix, value: /p{}}}}}", self.path);
            ("HTTPRoute", "v1", format!("[{path}]"))
        };
        let mut doc = format!(
            "apiVersion: gateway.networking.k8s.io/{api}\nkind: {kind}\nmetadata: {{name: r{}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw{section}}}]\n  hostnames: {hostnames}\n  rules:\n  - matches: {matches}\n    backendRefs: {backend}\n",
            self.name
        );
        if self.two_rules {
            doc += "  - backendRefs: [{name: svc-0, port: 80}]\n";
        }
        doc
    }
}

#[derive(Debug, Clone)]
enum Edit {
    /// Insert or replace a route.
    Put(RouteDoc),
    /// Remove route `r<n>` of either kind.
    Remove(u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => route_doc().prop_map(Edit::Put),
        1 => (0..12u8).prop_map(Edit::Remove),
    ]
}

fn apply(store: &mut Store, edit: &Edit) {
    match edit {
        Edit::Put(doc) => {
            // A route of the other kind under the same name goes: one name,
            // one route, as a user renaming a route's kind would do.
            remove(store, doc.name);
            let mut one = Store::default();
            one.add_yaml("route.yaml", &doc.yaml())
                .expect("route documents load");
            store.merge(&one);
        }
        Edit::Remove(n) => remove(store, *n),
    }
}

fn remove(store: &mut Store, n: u8) {
    let key = aether_ir::ObjectRef::new("default", format!("r{n}"));
    for kind in [aether_ir::Kind::HttpRoute, aether_ir::Kind::GrpcRoute] {
        store.remove_kind(kind, &key);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn one_shared_gateway_edited_route_by_route_warm_equals_fresh(
        start in proptest::collection::vec(route_doc(), 0..12),
        edits in proptest::collection::vec(edit(), 1..30),
    ) {
        let config = Config::default();
        let mut store = Store::default();
        store.add_yaml("base.yaml", BASE).expect("the base loads");
        for doc in start {
            apply(&mut store, &Edit::Put(doc));
        }
        let mut translator = Translator::new(config.clone());
        let mut builder = Builder::default();
        for step in 0..=edits.len() {
            if step > 0 {
                apply(&mut store, &edits[step - 1]);
            }
            let warm = translator.translate(&store);
            let fresh = aether_gateway::translate(&store, &config);
            prop_assert!(
                warm == fresh,
                "translation after {} edits ({:?}): warm != fresh",
                step, &edits[..step]
            );
            let warm = builder.build(&warm.ir);
            let fresh = aether_xds::build(&fresh.ir);
            prop_assert_eq!(
                aether_xds::to_yaml(&warm).unwrap(),
                aether_xds::to_yaml(&fresh).unwrap(),
                "snapshot after {} edits ({:?})", step, &edits[..step]
            );
            prop_assert!(warm == fresh);
            if step > 0 && translator.last.gateways_translated == 1 {
                // Every other route's attachment (one parentRef each) came
                // from the Gateway's memo: only the edited route was made.
                let routes = store
                    .keys()
                    .into_iter()
                    .filter(|(kind, _)| {
                        matches!(kind, aether_ir::Kind::HttpRoute | aether_ir::Kind::GrpcRoute)
                    })
                    .count();
                prop_assert!(
                    translator.last.route_parts_kept >= routes.saturating_sub(1),
                    "{} routes, {:?}", routes, translator.last
                );
            }
            prop_assert!(
                translator.last.gateways_translated <= 1,
                "a route edit translates its one Gateway at most"
            );
        }
    }
}
