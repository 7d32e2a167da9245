//! [`super`]: hostile YAML refused, what libyaml would take unguarded refused
//! here, and values read as `serde_norway` reads them.

use super::*;
use std::time::Instant;

#[test]
fn ordinary_objects_pass() {
    let text = "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, labels: {a: b}}
spec:
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    filters: &f [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: a, value: b}]}}]
  - filters: *f
---
kind: Service
";
    assert_eq!(check(text), Ok(()));
}

#[test]
fn deep_nesting_is_refused_fast_with_its_line() {
    let text = format!("a:\n  b: {}\n", "[".repeat(100_000));
    let start = Instant::now();
    let refusal = check(&text).expect_err("refused");
    assert_eq!(refusal.line, 2, "{refusal:?}");
    assert!(refusal.reason.contains("deeper than 64"), "{refusal:?}");
    // Linear: far from the minutes the object parser takes on this.
    assert!(start.elapsed().as_secs() < 5, "{:?}", start.elapsed());
    let block: String = (0..70)
        .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
        .collect();
    assert!(check(&block).is_err(), "block nesting counts too");
    let fine: String = (0..30)
        .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
        .collect();
    assert_eq!(check(&fine), Ok(()));
}

#[test]
fn an_alias_bomb_is_refused() {
    // Each level aliases the one before ten times: 10^9 values from 1 KB.
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let p = format!("*a{}", i - 1);
        text.push_str(&format!("a{i}: &a{i} [{}]\n", vec![p; 10].join(", ")));
    }
    let refusal = check(&text).expect_err("refused");
    assert!(refusal.reason.contains("aliases expand"), "{refusal:?}");
    assert!(refusal.line > 1 && refusal.line <= 10, "{refusal:?}");
}

#[test]
fn one_anchor_aliased_thousands_of_times_is_refused() {
    let mut text = String::from("base: &b {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7}\nl:\n");
    for _ in 0..5_000 {
        text.push_str("- *b\n");
    }
    assert!(check(&text).is_err());
    // A few reuses are fine.
    let few = "base: &b {a: 1, b: 2}\nl: [*b, *b, *b]\n";
    assert_eq!(check(few), Ok(()));
}

/// Every golden input, document by document: the value built here is the
/// one `serde_norway` builds, and the documents are where they were.
#[test]
fn the_golden_inputs_read_as_serde_norway_reads_them() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata");
    let mut built = 0;
    for dir in std::fs::read_dir(root).unwrap().flatten() {
        let Ok(text) = std::fs::read_to_string(dir.path().join("in.yaml")) else {
            continue;
        };
        for doc in read(&text) {
            let doc = doc.unwrap();
            let theirs: Value = serde_norway::from_str(doc.text).unwrap();
            assert_eq!(
                doc.value,
                theirs,
                "{}:{}",
                dir.path().display(),
                doc.first_line
            );
            built += 1;
        }
    }
    assert!(built > 300, "{built} documents");
}

#[test]
fn what_libyaml_would_read_unguarded_is_an_error_here() {
    for (text, reason) in [
        ("a: !custom x\n", "YAML tag `!custom` is not supported"),
        ("a: !!binary eA==\n", "YAML tag `!!binary` is not supported"),
        ("a: !!int x\n", "`x` is not a value of its type"),
        ("a: 1\na: 2\n", "duplicate key `a`"),
        (
            "n: 340282366920938463463374607431768211455\n",
            "at most 64 bits",
        ),
        ("a: [unclosed\n", "unclosed bracket"),
        ("a: 1\n...\nb: 2\n", "a second document"),
    ] {
        let refusal = read(text).next().unwrap().unwrap_err();
        assert!(refusal.reason.contains(reason), "{text}: {refusal:?}");
        assert!(!refusal.hostile, "{text}: {refusal:?}");
    }
    // The bypasses of old: a tag or a duplicate key, then a bomb behind it.
    let deep = format!("t: !!str x\nk: {}\n", "[".repeat(100_000));
    let refusal = read(&deep).next().unwrap().unwrap_err();
    assert!(
        refusal.hostile && refusal.reason.contains("nested deeper"),
        "{refusal:?}"
    );
    let mut bomb = String::from("t: !!str x\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        bomb.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let refusal = read(&bomb).next().unwrap().unwrap_err();
    assert!(
        refusal.hostile && refusal.reason.contains("aliases expand"),
        "{refusal:?}"
    );
}

#[test]
fn core_schema_tags_read_as_their_type() {
    let doc = read("a: !!str 123\nb: !!int 7\nc: !!bool true\nd: !!map {e: !!null ~}\n")
        .next()
        .unwrap()
        .unwrap();
    let want: Value = serde_norway::from_str("{a: '123', b: 7, c: true, d: {e: null}}").unwrap();
    assert_eq!(doc.value, want);
}

#[test]
fn documents_are_split_on_their_markers() {
    let docs: Vec<_> = read("a: 1\n--- {b: 2}\n---\n# only a comment\n")
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        docs.iter().map(|d| d.first_line).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(
        docs[1].value,
        serde_norway::from_str::<Value>("{b: 2}").unwrap()
    );
    assert_eq!(docs[2].value, Value::Null);
}

proptest::proptest! {
    /// Plain scalars resolve as `serde_norway` resolves them: null, bools,
    /// integers in every radix, floats, leading zeros, or strings.
    #[test]
    fn plain_scalars_resolve_as_serde_norway_does(v in "[-+]?(0[xob])?[0-9a-fA-F._eE+~]{0,6}|null|Null|TRUE|False|~|\\.inf|-\\.Inf|\\.nan|[0-9]{1,25}") {
        let theirs: Result<Value, _> = serde_norway::from_str(&format!("k: {v}\n"));
        let ours = read(&format!("k: {v}\n")).next().unwrap().map(|d| d.value);
        if let (Ok(theirs), Ok(ours)) = (theirs, ours) {
            let (t, o) = (&theirs["k"], &ours["k"]);
            // NaN is not equal to itself.
            let both_nan = t.as_f64().is_some_and(f64::is_nan) && o.as_f64().is_some_and(f64::is_nan);
            proptest::prop_assert!(both_nan || t == o, "{:?}: serde_norway {:?}, ours {:?}", v, t, o);
        }
    }
}
