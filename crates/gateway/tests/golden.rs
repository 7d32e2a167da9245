//! Golden tests: every `testdata/<case>/in.yaml` translates to the `ir.yaml` and
//! `status.yaml` beside it. `UPDATE_GOLDEN=1 cargo test -p aether-gateway --test
//! golden` rewrites them (and deletes our outputs of cases whose `in.yaml` is gone).
//! `envoy.yaml` files belong to the xds build tests and are never touched here.

use aether_gateway::{Config, Store, translate};
use aether_ir::{Ir, RouteAction, names};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

const OUTPUTS: [&str; 2] = ["ir.yaml", "status.yaml"];

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// The translation's settings for a case: the defaults, or as its optional
/// `config.yaml` says (`allowExternalHostnameBackends: true`, the agent's
/// `--allow-external-hostname-backends`; nothing else).
fn config(case: &Path) -> Config {
    let mut config = Config::default();
    let Ok(text) = fs::read_to_string(case.join("config.yaml")) else {
        return config;
    };
    let settings: std::collections::BTreeMap<String, bool> = serde_norway::from_str(&text)
        .unwrap_or_else(|e| panic!("{}/config.yaml: {e}", case.display()));
    for (key, on) in settings {
        match key.as_str() {
            "allowExternalHostnameBackends" => config.external_hostnames = on,
            other => panic!("{}/config.yaml: unknown setting {other}", case.display()),
        }
    }
    config
}

fn render(case: &Path) -> [String; 2] {
    let text = fs::read_to_string(case.join("in.yaml")).expect("read in.yaml");
    let mut store = Store::default();
    store
        .add_yaml("in.yaml", &text)
        .unwrap_or_else(|e| panic!("{}: {e}", case.display()));
    let config = config(case);
    let t = translate(&store, &config);
    check_invariants(case, &t.ir);
    let again = translate(&store, &config);
    assert_eq!(
        t,
        again,
        "{}: translation is not deterministic",
        case.display()
    );
    [
        serde_norway::to_string(&t.ir).expect("IR serializes"),
        t.status.to_yaml(),
    ]
}

/// What must hold for every IR, whatever the case.
fn check_invariants(case: &Path, ir: &Ir) {
    let clusters: BTreeSet<&str> = ir.clusters.iter().map(|c| c.name.as_str()).collect();
    for gw in &ir.gateways {
        assert!(
            !gw.addresses.is_empty(),
            "{}: Gateway without address",
            case.display()
        );
        let tables = gw.ports.iter().flat_map(|p| {
            p.route_table
                .iter()
                .chain(p.tls_chains.iter().filter_map(|c| c.route_table.as_ref()))
        });
        for table in tables {
            let catch_all = table
                .virtual_hosts
                .iter()
                .filter(|v| v.domains.iter().any(|d| d == names::CATCH_ALL_VHOST))
                .count();
            assert_eq!(
                catch_all,
                1,
                "{}: {} needs exactly one `*`",
                case.display(),
                table.name
            );
            let domains: Vec<&String> = table
                .virtual_hosts
                .iter()
                .flat_map(|v| &v.domains)
                .collect();
            let unique: BTreeSet<&String> = domains.iter().copied().collect();
            assert_eq!(
                domains.len(),
                unique.len(),
                "{}: duplicate domain",
                case.display()
            );
            for route in table.virtual_hosts.iter().flat_map(|v| &v.routes) {
                if let RouteAction::Forward(f) = &route.action {
                    assert!(!f.backends.is_empty() || f.invalid_weight > 0);
                    for b in &f.backends {
                        assert!(
                            clusters.contains(b.cluster.as_str()),
                            "{}: missing cluster {}",
                            case.display(),
                            b.cluster
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn golden() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let mut dirs: Vec<PathBuf> = fs::read_dir(testdata())
        .expect("testdata/ exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut cases = 0;
    let mut failures = Vec::new();
    for dir in &dirs {
        if !dir.join("in.yaml").exists() {
            if update {
                for out in OUTPUTS {
                    let _ = fs::remove_file(dir.join(out));
                }
            }
            continue;
        }
        cases += 1;
        let rendered = render(dir);
        for (name, got) in OUTPUTS.iter().zip(rendered) {
            let path = dir.join(name);
            if update {
                fs::write(&path, &got).expect("write golden");
                continue;
            }
            let want = fs::read_to_string(&path).unwrap_or_default();
            if want != got {
                let line = want
                    .lines()
                    .zip(got.lines())
                    .position(|(a, b)| a != b)
                    .map_or(want.lines().count().min(got.lines().count()) + 1, |i| i + 1);
                failures.push(format!(
                    "{} differs from line {line} (UPDATE_GOLDEN=1 to accept)",
                    path.display()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "golden mismatches:\n{}",
        failures.join("\n")
    );
    assert!(
        cases >= 40,
        "expected at least 40 golden cases, found {cases}"
    );
}
