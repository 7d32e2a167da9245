//! Where the parse of 10,000 routes goes: the event parser alone over the
//! whole file and document by document, the YAML reader (events + values, the
//! guard's limits), and the whole load (values decoded into typed objects,
//! unknown fields, the store).
//!
//! `cargo bench -p aether-benches --bench parse` (add `-- N` for N routes).

use aether_benches::{median_p99, scale_yaml};
use std::time::Instant;

/// The allocator the `aether-edge` binary runs on.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const GATEWAYS: usize = 100;
const RUNS: usize = 7;

fn main() {
    let routes: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000);
    let yaml = scale_yaml(GATEWAYS, routes);
    let docs = yaml.matches("\n---").count() + 1;
    println!(
        "parse of {routes} routes over {GATEWAYS} Gateways ({docs} documents, {} KiB), median of {RUNS} runs (release build)",
        yaml.len() / 1024
    );
    let stage = |name: &str, f: &dyn Fn() -> usize| {
        let mut ms: Vec<f64> = (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        let (median, _) = median_p99(&mut ms);
        println!("{name:<44} {median:>8.1} ms");
        median
    };
    stage("events, one parser over the file", &|| {
        granit_parser::Parser::new_from_str(&yaml).count()
    });
    stage("events, one parser per document", &|| {
        yaml.split("\n---")
            .map(|d| granit_parser::Parser::new_from_str(d).count())
            .sum()
    });
    stage("YAML reader (events + values + limits)", &|| {
        aether_gateway::yaml_guard::read(&yaml).count()
    });
    let load = stage("load (reader + typed decode + store)", &|| {
        let mut store = aether_gateway::Store::default();
        store
            .add_yaml("scale.yaml", &yaml)
            .expect("scale input parses")
    });
    aether_benches::summary(
        "parse",
        &format!("first load of {routes} routes ({docs} documents)"),
        format!("{load:.0} ms"),
        "≤ 300 ms at 10,000",
    );
}
