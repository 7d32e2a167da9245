//! Where the control plane's memory goes at 10,000 HTTPRoutes over 100
//! Gateways, or on one shared Gateway with a hostname per route
//! (`gateways=1`, the propagation bench's `gateways=1 own-hosts`): the live heap (bytes allocated and not freed, counted by `dhat`)
//! after each stage of a standalone load, and after one-route changes that
//! touch every Gateway once (a cache that kept old generations would grow).
//!
//! The workload is the propagation bench's: one file per Gateway, every route
//! to one shared backend. Stages, each counted on top of the last:
//! store (typed objects), translator caches (route models, Gateway units,
//! IR), builder caches (encoded resources, parts), the published snapshot.
//!
//! Counting every allocation slows the program down: this driver measures
//! bytes, not time.
//!
//! `cargo bench -p aether-benches --bench memory [-- [gateways=1] [dhat-out=FILE] ROUTES]`
//!
//! `dhat-out=FILE` writes the heap profile (for dhat's viewer) with the heap
//! as it stands after the changes, the last publication held: its "at t-end"
//! bytes are what each allocation site holds then.

use std::sync::Arc;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// How the routes are spread: over 100 Gateways sharing 50 hostnames, or all
/// on one Gateway, each route its own hostname.
#[derive(Clone, Copy)]
struct Topology {
    gateways: usize,
}

impl Topology {
    fn own_hosts(self) -> bool {
        self.gateways == 1
    }
}

fn live_mib() -> f64 {
    dhat::HeapStats::get().curr_bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let routes: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(10_000);
    let topology = Topology {
        gateways: if args.iter().any(|a| a == "gateways=1") {
            1
        } else {
            100
        },
    };
    let gateways = topology.gateways;
    let dhat_out = args.iter().find_map(|a| a.strip_prefix("dhat-out="));
    let heap = match dhat_out {
        Some(file) => dhat::Profiler::builder().file_name(file).build(),
        None => dhat::Profiler::builder().testing().build(),
    };
    let files = workload(topology, routes);
    let text_mib = files.iter().map(String::len).sum::<usize>() as f64 / (1024.0 * 1024.0);
    let before = live_mib();

    // One store per file, merged (as the standalone source keeps them).
    let per_file: Vec<aether_gateway::Store> = files
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let mut s = aether_gateway::Store::default();
            s.add_yaml(&format!("file-{i}.yaml"), text)
                .expect("the workload parses");
            s
        })
        .collect();
    drop(files);
    let merged = |per_file: &[aether_gateway::Store]| {
        let mut s = aether_gateway::Store::default();
        for f in per_file {
            s.merge(f);
        }
        Arc::new(s)
    };
    let store = merged(&per_file);
    let after_store = live_mib();
    let mut translator = aether_gateway::incremental::Translator::default();
    let translation = translator.translate(&store);
    let after_translate = live_mib();
    let mut builder = aether_xds::Builder::default();
    let snapshot = Arc::new(builder.build(&translation.ir));
    let after_build = live_mib();
    let mut published = Some((snapshot, translation, store));

    // One route changed on every Gateway in turn; each generation replaces
    // the last, as a publication does.
    let mut per_file = per_file;
    for g in 0..100 {
        let mut one = aether_gateway::Store::default();
        one.add_yaml(
            "change.yaml",
            &route(topology, routes + g, g % gateways, "changed"),
        )
        .expect("the change parses");
        per_file.push(one);
        let store = merged(&per_file);
        let translation = translator.translate(&store);
        let snapshot = Arc::new(builder.build(&translation.ir));
        published = Some((snapshot, translation, store));
    }
    let after_changes = live_mib();
    // The profile's "at t-end" is the heap as it stands here, by allocation site.
    let without_publication = if dhat_out.is_some() {
        drop(heap);
        None
    } else {
        drop(published);
        let live = live_mib();
        drop(heap);
        Some(live)
    };

    let spread = if topology.own_hosts() {
        "on one Gateway, a hostname each".to_string()
    } else {
        format!("over {gateways} Gateways")
    };
    println!("live heap at {routes} HTTPRoutes {spread} (MiB, dhat)");
    println!("  YAML text read                        {text_mib:>7.1}  (freed after parsing)");
    println!(
        "  store (typed objects)                 {:>7.1}",
        after_store - before
    );
    println!(
        "  + translator caches and IR            {:>7.1}",
        after_translate - after_store
    );
    println!(
        "  + builder caches and snapshot         {:>7.1}",
        after_build - after_translate
    );
    println!(
        "  = after the first load                {:>7.1}",
        after_build - before
    );
    println!(
        "  after 100 one-route changes           {:>7.1}",
        after_changes - before
    );
    if let Some(without) = without_publication {
        println!(
            "  of which the last publication alone   {:>7.1}",
            after_changes - without
        );
    }
    aether_benches::summary(
        "memory",
        &format!("{routes} routes {spread}: live heap after load / after 100 changes"),
        format!(
            "{:.1} / {:.1} MiB",
            after_build - before,
            after_changes - before
        ),
        "(RSS ≤ 100 MiB)",
    );
}

/// The propagation bench's files: 100 of routes, each one Gateway's (or all
/// the one Gateway's), and a first holding the GatewayClass, the Gateways and
/// the shared backend.
fn workload(topology: Topology, routes: usize) -> Vec<String> {
    let gateways = topology.gateways;
    let mut first = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: bench, namespace: default}\nspec:\n  ports: [{name: http, port: 80}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: bench-1, namespace: default, labels: {kubernetes.io/service-name: bench}}\naddressType: IPv4\nports: [{name: http, port: 8080}]\nendpoints:\n- addresses: [\"10.0.0.1\"]\n  conditions: {ready: true}\n",
    );
    for g in 0..gateways {
        first.push_str(&format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw-{g}, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: {}}}\n",
            20000 + g
        ));
    }
    let mut files = vec![first];
    for g in 0..gateways.max(100) {
        files.push(
            (g..routes)
                .step_by(gateways.max(100))
                .map(|i| route(topology, i, g % gateways, "base"))
                .collect(),
        );
    }
    files
}

fn route(topology: Topology, i: usize, g: usize, prefix: &str) -> String {
    let host = if topology.own_hosts() { i } else { i % 50 };
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {prefix}{i}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw-{g}}}]\n  hostnames: [\"h{h}.example.com\"]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /{prefix}{i}}}}}]\n    backendRefs: [{{name: bench, port: 80}}]\n",
        h = host
    )
}
