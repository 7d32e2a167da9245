//! Fuzzing the first input surface: the YAML loader and translate.
//!
//! Every golden case's input (`testdata/*/in.yaml`) is a seed; proptest mutates
//! it ([`crate::fuzz`]: inserted YAML punctuation, tags, anchors and aliases,
//! control characters, deleted and copied spans, odd values). Whatever comes out, loading must return (an
//! object or an error naming the file), never panic, and take well under a
//! second; what loads must translate without panicking, and translate the same
//! twice.
//!
//! `make test` runs it for `AETHER_FUZZ_SECONDS` (default 3); `make fuzz` for ten
//! minutes. A failing input is shrunk and printed; it becomes a regression case
//! in this file.

use crate::fuzz::mutated_seed;
use crate::{Config, Store, translate};
use aether_ir::fuzz::fuzz_for;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::time::{Duration, Instant};

/// Loads and translates one input, checking what must hold of any input.
fn check(text: &str) -> Result<(), TestCaseError> {
    let started = Instant::now();
    let mut store = Store::default();
    let loaded = store.add_yaml("fuzz.yaml", text);
    let took = started.elapsed();
    prop_assert!(
        took < Duration::from_secs(2),
        "loading took {took:?} (a slow parse path?)"
    );
    match loaded {
        Err(e) => prop_assert!(
            e.to_string().starts_with("fuzz.yaml:"),
            "an error names the file: {e}"
        ),
        Ok(_) => {
            let config = Config::default();
            let once = translate(&store, &config);
            let twice = translate(&store, &config);
            prop_assert_eq!(&once.ir, &twice.ir, "translate is deterministic");
            prop_assert_eq!(once.status.to_yaml(), twice.status.to_yaml());
        }
    }
    Ok(())
}

#[test]
fn the_loader_and_translate_survive_mutated_seeds() {
    let strategy = mutated_seed();
    let cases = fuzz_for(strategy, |text| check(&text));
    eprintln!("loader + translate: {cases} mutated inputs");
    assert!(cases > 0);
}

/// Inputs the fuzzer found, kept as regression cases.
#[test]
fn regressions() {
    for text in [
        "",
        "\0",
        "---\n---\n",
        "a: *a\n",
        "[&a [*a]]\n",
        "kind: &k Gateway\n",
    ] {
        check(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    }
}
