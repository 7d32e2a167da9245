//! Fuzzing translate → build → Envoy: mutated golden inputs
//! (`aether_gateway::fuzz`) that load are translated and built, and every
//! distinct result goes through `envoy --mode validate`. A config Envoy would
//! reject is a bug of translate: what Envoy refuses must be refused there, with
//! a condition on the object naming the reason, so one tenant's input never
//! makes Envoy NACK what others share.
//!
//! ```text
//!  in.yaml ─ mutate ─► load ─► translate ─► build ─► bootstrap ─► envoy --mode validate
//!                      (errors: not for Envoy)      (distinct ones only, two at a time)
//! ```
//!
//! `make test` validates `AETHER_FUZZ_ENVOY_CASES` (default 24) distinct
//! configs, about a second each; a long run sets it to thousands, and
//! `AETHER_FUZZ_ENVOY_SEED` moves on to other inputs. A failing input is
//! written to a scratch file (printed) and becomes a regression case below and
//! a unit test of the translate check that now refuses it.

mod common;

use aether_gateway::{Config, Store, fuzz::mutated_seed, translate};
use common::{envoy_validate, scratch_file};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};
use std::collections::BTreeSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

/// Two validations at a time: the machine is small and each takes about a second.
const PARALLELISM: usize = 2;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The input as Envoy would get it: `None` when it does not load (the
/// loader's fuzz test covers that).
fn bootstrap(text: &str) -> Option<String> {
    let mut store = Store::default();
    store.add_yaml("fuzz.yaml", text).ok()?;
    let out = translate(&store, &Config::default());
    let snapshot = aether_xds::build(&out.ir);
    Some(aether_xds::validation_bootstrap(&snapshot).expect("a built snapshot holds together"))
}

/// Validates each (input, bootstrap) with Envoy; the inputs Envoy rejects,
/// each with where it was written and Envoy's reason.
fn rejected(cases: Vec<(String, String)>) -> Vec<String> {
    let queue = Mutex::new(cases.into_iter().enumerate().collect::<Vec<_>>());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLELISM {
            s.spawn(|| {
                loop {
                    let Some((i, (text, bootstrap))) = queue.lock().unwrap().pop() else {
                        break;
                    };
                    if let Err(e) = envoy_validate(&format!("fuzz-{i}"), &bootstrap) {
                        let input = scratch_file(&format!("rejected-{i}.in.yaml"));
                        std::fs::write(&input, &text).expect("writing the input");
                        let reason: String = e
                            .lines()
                            .filter(|l| l.contains("rror") || l.contains("xception"))
                            .collect::<Vec<_>>()
                            .join("\n");
                        let reason: String = reason.chars().take(800).collect();
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("{}:\n{reason}", input.display()));
                    }
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort();
    failures
}

#[test]
fn what_translate_lets_through_envoy_takes() {
    let want = env_number("AETHER_FUZZ_ENVOY_CASES", 24) as usize;
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&env_number("AETHER_FUZZ_ENVOY_SEED", 0).to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        RunnerConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
    );
    let strategy = mutated_seed();
    let (mut seen, mut cases, mut tried) = (BTreeSet::new(), Vec::new(), 0);
    while cases.len() < want && tried < want * 100 {
        tried += 1;
        let text = strategy.new_tree(&mut runner).expect("an input").current();
        let Some(bootstrap) = bootstrap(&text) else {
            continue;
        };
        let mut hash = DefaultHasher::new();
        bootstrap.hash(&mut hash);
        if seen.insert(hash.finish()) {
            cases.push((text, bootstrap));
        }
    }
    let distinct = cases.len();
    assert!(
        distinct >= want.min(8),
        "only {distinct} distinct configs in {tried} inputs"
    );
    let failures = rejected(cases);
    assert!(
        failures.is_empty(),
        "Envoy rejected {} of {distinct} translated configs:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    eprintln!("translate → envoy --mode validate: {distinct} distinct configs of {tried} inputs");
}

/// What the long runs found Envoy refusing, as edits of a golden input; each
/// now translates to a config Envoy takes (the input refused with a
/// condition), or is refused by the loader as the API server refuses it.
#[test]
fn what_envoy_refused_once_it_takes_now() {
    let found = [
        // A PathPrefix of "5": path_separated_prefix needs "^[^?#]+[^?#/]$".
        ("precedence-exact-vs-prefix", "value: /match/", "value: 5"),
        // A PEM body with 16 characters cut: "Failed to load certificate chain".
        (
            "https-overlapping-hostnames",
            "C2V4YW1wbGUuY29tMAoGCCqGSM49BAMCA0cAMEQCIEz3gSnVjt3E0OuWzPBjKf52",
            "C2V4YW1wbGUuY29tMAoGCCqGSM49gSnVjt3E0OuWzPBjKf52",
        ),
        // A key folded into one line by a plain scalar: NO_START_LINE.
        (
            "https-key-mismatch",
            "tls.key: |",
            "tls.key: RegularExpression",
        ),
        // An endpoint address that is no IP: "malformed IP address".
        ("http-basic", "[\"127.0.0.1\"]", "[\"127.0.0.1*.\"]"),
    ];
    let root = common::workspace_root().join("testdata");
    let mut cases = Vec::new();
    for (case, from, to) in found {
        let seed = std::fs::read_to_string(root.join(case).join("in.yaml")).expect(case);
        assert!(seed.contains(from), "{case}: {from:?} is not in its input");
        let text = seed.replacen(from, to, 1);
        match bootstrap(&text) {
            Some(bootstrap) => cases.push((text, bootstrap)),
            None => {
                let mut store = Store::default();
                let err = store.add_yaml("fuzz.yaml", &text).unwrap_err();
                assert!(
                    err.to_string().contains("is not an IPv4 address"),
                    "{case}: {err}"
                );
            }
        }
    }
    assert_eq!(cases.len(), 3, "three reach Envoy");
    let failures = rejected(cases);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
