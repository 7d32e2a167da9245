//! Incremental == full, end to end: random edit sequences over the objects of
//! every golden case, and each case's own objects arriving and going in random
//! orders; after every edit a warm [`Translator`] and [`Builder`] must give
//! exactly what a fresh translation and build give.

use aether_gateway::incremental::Translator;
use aether_gateway::{Config, Store};
use aether_ir::{Kind, ObjectRef};
use aether_xds::Builder;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Every document of every `testdata/*/in.yaml` that loads on its own: the
/// pool edits draw from (mixing cases makes combinations no case has).
fn pool() -> &'static [String] {
    static POOL: OnceLock<Vec<String>> = OnceLock::new();
    POOL.get_or_init(|| {
        let docs: Vec<String> = cases()
            .iter()
            .flat_map(|(_, docs)| docs.iter().cloned())
            .collect();
        assert!(
            docs.len() > 300,
            "the golden cases give a big pool: {}",
            docs.len()
        );
        docs
    })
}

/// Each golden case (by its directory's name) with its documents that load
/// on their own. The documents of one case refer to each other (a policy, its
/// CA ConfigMap, the Service it targets and the route to it), which random
/// draws from the whole pool rarely bring together.
fn cases() -> &'static [(String, Vec<String>)] {
    static CASES: OnceLock<Vec<(String, Vec<String>)>> = OnceLock::new();
    CASES.get_or_init(|| {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata");
        let mut paths: Vec<_> = std::fs::read_dir(root)
            .expect("testdata")
            .filter_map(|e| Some(e.ok()?.path().join("in.yaml")))
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|case| {
                let text = std::fs::read_to_string(case).unwrap();
                let docs = text
                    .split("\n---")
                    .filter(|doc| {
                        let mut probe = Store::default();
                        probe.add_yaml("doc.yaml", doc).is_ok_and(|n| n == 1)
                    })
                    .map(str::to_string)
                    .collect::<Vec<_>>();
                let name = case
                    .parent()
                    .and_then(|d| d.file_name())
                    .unwrap_or_default();
                (name.to_string_lossy().into_owned(), docs)
            })
            .collect()
    })
}

fn one(doc: &str) -> Store {
    let mut s = Store::default();
    s.add_yaml("doc.yaml", doc).expect("pool documents load");
    s
}

#[derive(Debug, Clone)]
enum Edit {
    /// Insert (or replace) a pool document.
    Put(usize),
    /// Remove the n-th object of the store (modulo its size).
    Remove(usize),
    /// Replace the n-th object with an equal copy: a new object, same content.
    Touch(usize),
    /// Write the n-th object again as a status write comes back from the API
    /// server: a new resourceVersion and, where the kind has one, a status.
    StatusWrite(usize, u16),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        5 => any::<usize>().prop_map(Edit::Put),
        2 => any::<usize>().prop_map(Edit::Remove),
        1 => any::<usize>().prop_map(Edit::Touch),
        1 => (any::<usize>(), any::<u16>()).prop_map(|(n, v)| Edit::StatusWrite(n, v)),
    ]
}

/// The n-th object's kind, key and document, if the store has any.
fn nth(
    store: &Store,
    docs: &BTreeMap<(Kind, ObjectRef), String>,
    n: usize,
) -> Option<(Kind, ObjectRef, String)> {
    let keys = store.keys();
    if keys.is_empty() {
        return None;
    }
    let (kind, key) = keys[n % keys.len()];
    let doc = docs.get(&(kind, key.clone()))?.clone();
    Some((kind, key.clone(), doc))
}

fn apply(store: &mut Store, docs: &mut BTreeMap<(Kind, ObjectRef), String>, e: &Edit) {
    let pool = pool();
    match e {
        Edit::Put(i) => {
            let doc = &pool[i % pool.len()];
            let single = one(doc);
            for (kind, key) in single.keys() {
                docs.insert((kind, key.clone()), doc.clone());
            }
            store.merge(&single);
        }
        Edit::Remove(n) => {
            if let Some((kind, key, _)) = nth(store, docs, *n) {
                assert!(store.remove_kind(kind, &key));
                docs.remove(&(kind, key));
            }
        }
        Edit::Touch(n) => {
            if let Some((_, _, doc)) = nth(store, docs, *n) {
                store.merge(&one(&doc));
            }
        }
        Edit::StatusWrite(n, version) => {
            if let Some((_, _, doc)) = nth(store, docs, *n) {
                let written = status_written(&doc, *version);
                let with_status = format!("{written}\nstatus: {{}}\n");
                let mut s = Store::default();
                if s.add_yaml("doc.yaml", &with_status).is_err() {
                    s = one(&written);
                }
                store.merge(&s);
            }
        }
    }
}

/// `doc` with `metadata.resourceVersion` set to `version` (the pool's
/// documents write `metadata` as a flow map or a block of two-space lines).
fn status_written(doc: &str, version: u16) -> String {
    let rv = format!("resourceVersion: \"{version}\"");
    let mut out = String::new();
    for line in doc.lines() {
        if let Some(rest) = line.strip_prefix("metadata: {") {
            out += &format!("metadata: {{{rv}, {rest}\n");
        } else if line == "metadata:" {
            out += &format!("metadata:\n  {rv}\n");
        } else {
            out += line;
            out += "\n";
        }
    }
    assert!(out.contains(&rv), "no metadata in {doc}");
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn warm_translate_and_build_give_what_fresh_ones_give(
        start in proptest::collection::vec(any::<usize>(), 0..30),
        edits in proptest::collection::vec(edit(), 1..40),
    ) {
        let config = every_backend();
        let mut store = Store::default();
        let mut docs = BTreeMap::new();
        for i in start {
            apply(&mut store, &mut docs, &Edit::Put(i));
        }
        let mut translator = Translator::new(config.clone());
        let mut builder = Builder::default();
        for step in 0..=edits.len() {
            if step > 0 {
                apply(&mut store, &mut docs, &edits[step - 1]);
            }
            let incremental = translator.translate(&store);
            let full = aether_gateway::translate(&store, &config);
            prop_assert!(
                incremental == full,
                "translation after {} edits ({:?}): incremental != full\n{:#?}\n---\n{:#?}",
                step, &edits[..step], incremental, full
            );
            let warm = builder.build(&incremental.ir);
            let fresh = aether_xds::build(&full.ir);
            prop_assert!(
                warm == fresh,
                "snapshot after {} edits ({:?}): incremental != full",
                step, &edits[..step]
            );
            prop_assert_eq!(
                aether_xds::to_yaml(&warm).unwrap(),
                aether_xds::to_yaml(&fresh).unwrap()
            );
        }
    }
}

/// Each case's documents put one at a time in a random order, then as many
/// random steps that each remove a document if present, else put it back;
/// the translator and builder warm throughout. Every order in which related
/// objects arrive or go (a policy before its CA ConfigMap, a route before its
/// Service) must give what a fresh translation and build give. Seeded: the
/// same orders every run, `ORDERS` of them per case.
#[test]
fn each_cases_objects_in_random_orders_give_what_a_fresh_translation_gives() {
    const ORDERS: u64 = 4;
    let config = every_backend();
    let mut steps_run = 0;
    for (n, (case, docs)) in cases().iter().enumerate() {
        for order in 0..ORDERS {
            let mut seed = (n as u64) << 8 | order;
            let mut next = |n: usize| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 33) as usize % n
            };
            let mut steps: Vec<usize> = (0..docs.len()).collect();
            for i in (1..steps.len()).rev() {
                steps.swap(i, next(i + 1));
            }
            steps.extend((0..docs.len()).map(|_| next(docs.len())));
            let mut store = Store::default();
            let mut translator = Translator::new(config.clone());
            let mut builder = Builder::default();
            let mut done = Vec::new();
            for &i in &steps {
                let single = one(&docs[i]);
                // Each document is one object.
                let removed = single
                    .keys()
                    .into_iter()
                    .any(|(kind, key)| store.remove_kind(kind, key));
                if !removed {
                    store.merge(&single);
                }
                done.push(if removed {
                    -(i as i64) - 1
                } else {
                    i as i64 + 1
                });
                let incremental = translator.translate(&store);
                let full = aether_gateway::translate(&store, &config);
                assert!(
                    incremental == full,
                    "case {case} order {order}, documents put (+n) and removed (-n): {done:?}\nincremental != full\n{:#?}\n---\n{:#?}",
                    incremental.status,
                    full.status
                );
                let warm = builder.build(&incremental.ir);
                let fresh = aether_xds::build(&full.ir);
                assert!(
                    warm == fresh,
                    "case {case} order {order}, documents put (+n) and removed (-n): {done:?}\nwarm build != fresh build"
                );
                steps_run += 1;
            }
        }
    }
    assert!(steps_run > 3_000, "{steps_run} steps");
}

/// Point 1 of the incremental pipeline: new endpoints change EDS, nothing else.
#[test]
fn an_endpoint_slice_change_moves_only_endpoints() {
    let slice = |address: &str| {
        format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: svc-1\n  namespace: default\n  labels: {{kubernetes.io/service-name: svc}}\naddressType: IPv4\nports: [{{name: http, port: 8080}}]\nendpoints: [{{addresses: [\"{address}\"]}}]\n"
        )
    };
    let base = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: default}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {name: http, protocol: HTTP, port: 8080}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: svc, namespace: default}\nspec:\n  ports: [{name: http, port: 80}]\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: default}\nspec:\n  parentRefs: [{name: gw}]\n  rules:\n  - backendRefs: [{name: svc, port: 80}]\n";
    let mut store = Store::default();
    store.add_yaml("base.yaml", base).unwrap();
    store.merge(&one(&slice("10.0.0.1")));
    let mut translator = Translator::new(every_backend());
    let mut builder = Builder::default();
    let before = builder.build(&translator.translate(&store).ir);
    store.merge(&one(&slice("10.0.0.2")));
    let after = builder.build(&translator.translate(&store).ir);
    let versions = |s: &aether_xds::Snapshot, ty| -> Vec<String> {
        s.resources
            .get(&ty)
            .into_iter()
            .flat_map(|m| m.values())
            .map(|r| r.version.clone())
            .collect()
    };
    use aether_xds::ResourceType::*;
    for ty in [Cluster, Listener, Route] {
        assert_eq!(versions(&before, ty), versions(&after, ty), "{ty:?} moved");
    }
    assert_ne!(versions(&before, Endpoint), versions(&after, Endpoint));
    // And what the warm builder kept (parts, fingerprints) is what a fresh
    // build gives.
    let fresh = aether_xds::build(&aether_gateway::translate(&store, &every_backend()).ir);
    assert!(
        after == fresh,
        "warm build != fresh build after the slice changed"
    );
}

/// The translation's settings with every backend kind served (ExternalHostname
/// XBackends too), so warm == fresh covers their clusters.
fn every_backend() -> Config {
    Config {
        external_hostnames: true,
        ..Config::default()
    }
}
