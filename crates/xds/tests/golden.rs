//! Golden test: every `ir.yaml` (this crate's testdata and the workspace's) builds
//! into the `envoy.yaml` beside it. `UPDATE_GOLDEN=1` rewrites them and deletes any
//! `envoy.yaml` whose `ir.yaml` is gone.

mod common;

use common::{case_dirs, case_name, load_ir, testdata_roots};

#[test]
fn envoy_yaml_matches_golden() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let cases = case_dirs();
    assert!(
        cases.len() >= 6,
        "expected at least this crate's own cases, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    for dir in &cases {
        let ir = load_ir(dir);
        let yaml = aether_xds::to_yaml(&aether_xds::build(&ir))
            .unwrap_or_else(|e| panic!("{}: rendering: {e}", case_name(dir)));
        let golden = dir.join("envoy.yaml");
        if update {
            std::fs::write(&golden, &yaml).expect("writing golden file");
            continue;
        }
        match std::fs::read_to_string(&golden) {
            Ok(expected) if expected == yaml => {}
            Ok(expected) => failures.push(format!(
                "{}: envoy.yaml differs (rerun with UPDATE_GOLDEN=1 and review the diff)\n{}",
                case_name(dir),
                first_difference(&expected, &yaml)
            )),
            Err(_) => failures.push(format!(
                "{}: no envoy.yaml (run with UPDATE_GOLDEN=1)",
                case_name(dir)
            )),
        }
    }
    for root in testdata_roots() {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            if dir.join("envoy.yaml").is_file() && !dir.join("ir.yaml").is_file() {
                if update {
                    std::fs::remove_file(dir.join("envoy.yaml")).expect("deleting stale golden");
                } else {
                    failures.push(format!(
                        "{}: stale envoy.yaml without ir.yaml (UPDATE_GOLDEN=1 deletes it)",
                        dir.display()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("golden: {} cases", cases.len());
}

/// Private keys travel in SDS Secret resources only: in no golden case does a
/// listener, route table, cluster or load assignment hold one.
#[test]
fn no_resource_but_a_secret_holds_a_private_key() {
    use aether_xds::ResourceType;
    let mut with_keys = 0;
    for dir in case_dirs() {
        let snapshot = aether_xds::build(&load_ir(&dir));
        for ty in ResourceType::ALL {
            for r in snapshot.of_type(ty) {
                let holds_key = r
                    .body
                    .value
                    .windows(b"PRIVATE KEY-----".len())
                    .any(|w| w == b"PRIVATE KEY-----");
                if ty == ResourceType::Secret {
                    with_keys += usize::from(holds_key);
                } else {
                    assert!(
                        !holds_key,
                        "{}: {} {} holds a private key",
                        case_name(&dir),
                        ty.short_name(),
                        r.name
                    );
                }
            }
        }
    }
    assert!(with_keys > 0, "no case has a certificate?");
}

/// The first line where the golden file and the fresh output part ways.
fn first_difference(expected: &str, actual: &str) -> String {
    let mut e = expected.lines();
    let mut a = actual.lines();
    for n in 1.. {
        match (e.next(), a.next()) {
            (Some(x), Some(y)) if x == y => continue,
            (None, None) => break,
            (x, y) => {
                return format!(
                    "  line {n}:\n    golden: {}\n    now:    {}",
                    x.unwrap_or("<end of file>"),
                    y.unwrap_or("<end of file>")
                );
            }
        }
    }
    "  (only line endings differ)".to_string()
}

#[test]
fn building_twice_gives_identical_output() {
    for dir in case_dirs() {
        let ir = load_ir(&dir);
        let a = aether_xds::build(&ir);
        let b = aether_xds::build(&ir.clone());
        assert_eq!(a, b, "{}: snapshots differ", case_name(&dir));
        assert_eq!(
            aether_xds::to_yaml(&a).unwrap(),
            aether_xds::to_yaml(&b).unwrap(),
            "{}: YAML differs",
            case_name(&dir)
        );
    }
}

/// What each object of a Gateway reads (its parts) is among the Gateway's
/// members, in every golden case: the status gate counts on it (a Gateway
/// whose members an Envoy holds at their versions serves every route, and a
/// route that reads no member in flight is served as it is now).
#[test]
fn every_part_of_a_gateways_objects_is_one_of_its_members() {
    let mut parts = 0;
    for dir in case_dirs() {
        let snapshot = aether_xds::build(&load_ir(&dir));
        for (gw, resources) in &snapshot.gateways {
            let objects = std::iter::once(("own", &resources.own))
                .chain(resources.routes.iter().map(|(k, p)| (&**k, p)));
            for (object, p) in objects {
                for part in p.parts.keys() {
                    parts += 1;
                    assert!(
                        resources.members.contains(&(part.0, part.1.to_string())),
                        "{}: {gw} {object} reads {part:?}, not one of its members",
                        case_name(&dir)
                    );
                }
            }
        }
    }
    assert!(parts > 100, "the cases have parts to check: {parts}");
}
