//! Fuzzing the first input surface: the YAML loader and translate.
//!
//! Every golden case's input (`testdata/*/in.yaml`) is a seed; proptest mutates
//! it (inserted YAML punctuation, anchors and aliases, control characters,
//! deleted and copied spans). Whatever comes out, loading must return (an
//! object or an error naming the file), never panic, and take well under a
//! second; what loads must translate without panicking, and translate the same
//! twice.
//!
//! `make test` runs it for `AETHER_FUZZ_SECONDS` (default 3); `make fuzz` for ten
//! minutes. A failing input is shrunk and printed; it becomes a regression case
//! in this file.

use crate::{Config, Store, translate};
use aether_ir::fuzz::fuzz_for;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::time::{Duration, Instant};

fn seeds() -> Vec<String> {
    let testdata = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let mut seeds: Vec<(std::path::PathBuf, String)> = std::fs::read_dir(&testdata)
        .expect("testdata")
        .filter_map(|e| {
            let path = e.ok()?.path().join("in.yaml");
            Some((path.clone(), std::fs::read_to_string(path).ok()?))
        })
        .collect();
    seeds.sort();
    assert!(seeds.len() > 20, "seed corpus in {}", testdata.display());
    seeds.into_iter().map(|(_, text)| text).collect()
}

#[derive(Debug, Clone)]
enum Mutation {
    Insert(usize, String),
    Delete(usize, usize),
    Copy { from: usize, len: usize, to: usize },
}

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "\n",
            "- ",
            ": ",
            "[",
            "]",
            "{",
            "}",
            ",",
            "'",
            "\"",
            "&a ",
            "*a",
            "<<: *a",
            "\t",
            "\0",
            "\r\n",
            "---\n",
            "#",
            "|",
            ">-",
            "!!str ",
            "!!int ",
            "!!binary ",
            "!!map ",
            "!tag ",
            "...\n",
            "?",
            "%YAML 1.1\n",
            "name: ",
            "namespace: ",
            "kind: Gateway\n",
            "port: ",
            "value: ",
            "type: ",
            "RegularExpression",
            "999999999999",
            "-1",
            "null",
            "~",
            "\u{feff}",
            "*.",
            ".*",
        ])
        .prop_map(str::to_string),
        "[ -~]{0,12}",
        "\\PC{0,4}",
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), token()).prop_map(|(at, s)| Mutation::Insert(at, s)),
        (any::<usize>(), 0..80usize).prop_map(|(at, n)| Mutation::Delete(at, n)),
        (any::<usize>(), 0..400usize, any::<usize>()).prop_map(|(from, len, to)| Mutation::Copy {
            from,
            len,
            to
        }),
    ]
}

/// The nearest char boundary at or before `at % (len + 1)`.
fn boundary(text: &str, at: usize) -> usize {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn mutate(mut text: String, mutations: &[Mutation]) -> String {
    for m in mutations {
        match m {
            Mutation::Insert(at, s) => {
                let at = boundary(&text, *at);
                text.insert_str(at, s);
            }
            Mutation::Delete(at, n) => {
                let from = boundary(&text, *at);
                let to = boundary(&text, from + n.min(&(text.len() - from)));
                text.replace_range(from..to.max(from), "");
            }
            Mutation::Copy { from, len, to } => {
                let from = boundary(&text, *from);
                let end = boundary(&text, from + len.min(&(text.len() - from)));
                let piece = text[from..end.max(from)].to_string();
                let to = boundary(&text, *to);
                text.insert_str(to, &piece);
            }
        }
    }
    text
}

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
    let seeds = seeds();
    let strategy = (
        prop::sample::select(seeds),
        prop::collection::vec(mutation(), 1..6),
    )
        .prop_map(|(seed, mutations)| mutate(seed, &mutations));
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
