//! Mutated golden inputs, for the fuzz tests of the loader and translate
//! (`fuzz_tests.rs`) and of translate → build → `envoy --mode validate` (the
//! xds crate's `fuzz_envoy` test). Feature `fuzz`.
//!
//! Every golden case's input is a seed. A mutation inserts YAML punctuation,
//! tags, anchors and aliases, control characters; deletes or copies a span (a
//! copied line is a duplicate key); or replaces one value with an odd one (a
//! long header value, a name the API server refuses, a port out of range, a
//! regex RE2 refuses), which keeps the text readable so the value reaches
//! translate.

use proptest::prelude::*;

/// A golden input with one to five mutations.
pub fn mutated_seed() -> impl Strategy<Value = String> {
    (
        prop::sample::select(seeds()),
        prop::collection::vec(mutation(), 1..6),
    )
        .prop_map(|(seed, mutations)| mutate(seed, &mutations))
}

/// Values translate must refuse with a condition, or Envoy must take.
fn odd_value() -> impl Strategy<Value = String> {
    let long = |c: char, n: usize| c.to_string().repeat(n);
    prop_oneof![
        prop::sample::select(vec![
            String::new(),
            "\"\"".into(),
            long('v', 300),
            long('v', 4096),
            long('v', 4097),
            long('v', 20_000),
            format!("\"{}\"", long('h', 254)),
            format!("/{}", long('p', 1100)),
            format!("{}.example.com", long('s', 64)),
            "a_b".into(),
            "A-B".into(),
            "a.b".into(),
            "\"a b\"".into(),
            "\"a\\r\\nb\"".into(),
            "\"a\\u0000b\"".into(),
            "\"\\x7f\\x1b\"".into(),
            "\"é\"".into(),
            "\"😀\"".into(),
            "0".into(),
            "-1".into(),
            "65536".into(),
            "4294967296".into(),
            "99999999999999999999".into(),
            "1e9".into(),
            "!!str 80".into(),
            "!!int 8080".into(),
            "'*'".into(),
            "\"*.*\"".into(),
            "\"*.\"".into(),
            "\"[::1]\"".into(),
            "0.0.0.0".into(),
            "\"h:80\"".into(),
            "/".into(),
            "//".into(),
            "/a/../b".into(),
            "/%2F".into(),
            "\"/a?b#c\"".into(),
            "\"(a+)+$\"".into(),
            "\"[\"".into(),
            "\"^/x{1001}$\"".into(),
            "\"\\\\b\"".into(),
            "Content-Length".into(),
            "host".into(),
            "\":authority\"".into(),
            "x-envoy-original-path".into(),
            "Exact".into(),
            "RegularExpression".into(),
            "PathPrefix".into(),
            "ReplacePrefixMatch".into(),
            "\"0s\"".into(),
            "\"1h\"".into(),
            "\"9999999h\"".into(),
            "null".into(),
            "[]".into(),
            "{}".into(),
            "&v x".into(),
            "*v".into(),
        ]),
        "[a-z0-9.:/*-]{1,20}",
        "\\PC{1,8}".prop_map(|s| format!("\"{}\"", s.escape_default())),
    ]
}

/// Every golden case's input (`testdata/*/in.yaml`), in name order.
pub fn seeds() -> Vec<String> {
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

/// One edit of a seed's text.
#[derive(Debug, Clone)]
pub enum Mutation {
    Insert(usize, String),
    Delete(usize, usize),
    Copy {
        from: usize,
        len: usize,
        to: usize,
    },
    /// The value after `key: ` on a line (picked among the lines that have one)
    /// replaced: keeps the YAML readable, so the odd value reaches translate.
    Value(usize, String),
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
        3 => (any::<usize>(), odd_value()).prop_map(|(at, v)| Mutation::Value(at, v)),
        1 => (any::<usize>(), token()).prop_map(|(at, s)| Mutation::Insert(at, s)),
        1 => (any::<usize>(), 0..80usize).prop_map(|(at, n)| Mutation::Delete(at, n)),
        1 => (any::<usize>(), 0..400usize, any::<usize>()).prop_map(|(from, len, to)| Mutation::Copy {
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

/// `text` with `mutations` applied in order.
pub fn mutate(mut text: String, mutations: &[Mutation]) -> String {
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
            Mutation::Value(at, value) => {
                let valued: Vec<(usize, usize)> = text
                    .split_inclusive('\n')
                    .scan(0, |start, line| {
                        let at = *start;
                        *start += line.len();
                        Some((at, line))
                    })
                    .filter_map(|(start, line)| {
                        let colon = line.find(": ")?;
                        let end = line.trim_end_matches(['\n', '\r']).len();
                        (colon + 2 < end).then_some((start + colon + 2, start + end))
                    })
                    .collect();
                if !valued.is_empty() {
                    let (from, to) = valued[at % valued.len()];
                    text.replace_range(from..to, value);
                }
            }
        }
    }
    text
}
