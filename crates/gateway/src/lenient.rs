//! Lenient decoding of routes: a rule carrying a value we do not know (an enum
//! value or filter type a newer CRD adds, e.g. redirect scheme `ftp`, path type
//! `ReplacePrefixMatches`, filter `RateLimit`) is dropped, not the route.
//!
//! ```text
//!  value ──decode──► ok ──────────────────────────────────────► route
//!          └─ error at spec.rules[i]… ─► rule i := placeholder, ─┘
//!                                       annotation DROPPED_RULE<i> = why
//! ```
//!
//! The spec (apis/v1/httproute_types.go, on every such enum): unknown values
//! make the route `Accepted=False` with reason `UnsupportedValue`; here, as for
//! any rule we cannot serve, the rule is dropped (`PartiallyInvalid`, or
//! `Accepted=False/UnsupportedValue` when no rule is left), naming the field.
//! The placeholder keeps rule indices stable; the reason travels in an
//! annotation of our in-memory copy only (never written back), and annotations
//! with that prefix on the input are removed first, so nobody else can set one.

use serde::de::DeserializeOwned;
use serde_norway::{Mapping, Value};
use std::collections::BTreeMap;

/// `<prefix><rule index>`: why that rule was dropped while decoding.
pub const DROPPED_RULE: &str = "decode.aether.io/dropped-rule-";

/// At most this many rules are dropped before the object counts as undecodable.
const MAX_DROPPED: usize = 64;

/// Decodes `value` into `T`, dropping rules that do not decode; `value` is left
/// as decoded (placeholders and annotations included). `Err`: the message of
/// an error outside any rule, with its field path.
pub fn decode<T: DeserializeOwned>(value: &mut Value) -> Result<T, String> {
    decode_noting_unknown(value).map(|(typed, _)| typed)
}

/// [`decode`], and in the same pass the fields of `value` that `T` has no
/// place for (`spec.listeners[0].listner`), in document order. A field whose
/// value is null is not one: it means absent.
pub fn decode_noting_unknown<T: DeserializeOwned>(
    value: &mut Value,
) -> Result<(T, Vec<String>), String> {
    strip_own_annotations(value);
    let mut dropped = 0;
    loop {
        let mut ignored = Vec::new();
        let first = serde_ignored::deserialize(&*value, |path| ignored.push(segments(&path)));
        if let Ok(typed) = first {
            return Ok((typed, unknown_paths(value, ignored)));
        }
        // Through text, for an error that names its field path.
        let text = serde_norway::to_string(value).map_err(|e| e.to_string())?;
        let mut ignored = Vec::new();
        let again =
            serde_ignored::deserialize(serde_norway::Deserializer::from_str(&text), |path| {
                ignored.push(segments(&path))
            });
        let message = match again {
            Ok(typed) => return Ok((typed, unknown_paths(value, ignored))),
            Err(e) => without_position(&e.to_string()),
        };
        let Some(index) = rule_of(&message) else {
            return Err(message);
        };
        if dropped == MAX_DROPPED || !replace_rule(value, index) {
            return Err(message);
        }
        dropped += 1;
        annotate(value, index, &format!("unsupported value: {message}"));
    }
}

/// [`decode`] of a JSON value (a watched object): read as it is when it
/// decodes (the API server has validated it), through YAML to drop rules
/// when it does not.
pub fn decode_json<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, String> {
    let own_notes = value["metadata"]["annotations"]
        .as_object()
        .is_some_and(|notes| notes.keys().any(|k| k.starts_with(DROPPED_RULE)));
    if !own_notes && let Ok(typed) = T::deserialize(value) {
        return Ok(typed);
    }
    let mut v = serde_norway::to_value(value).map_err(|e| e.to_string())?;
    decode(&mut v)
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

fn segments(path: &serde_ignored::Path<'_>) -> Vec<Segment> {
    use serde_ignored::Path;
    let mut out = Vec::new();
    let mut at = path;
    loop {
        at = match at {
            Path::Root => break,
            Path::Seq { parent, index } => {
                out.push(Segment::Index(*index));
                parent
            }
            Path::Map { parent, key } => {
                out.push(Segment::Key(key.clone()));
                parent
            }
            Path::Some { parent }
            | Path::NewtypeStruct { parent }
            | Path::NewtypeVariant { parent } => parent,
        };
    }
    out.reverse();
    out
}

/// The ignored paths whose value in `value` is not null, as `a.b[0].c`. The
/// top-level `apiVersion` and `kind` are known (the caller chose `T` by them),
/// though some types skip them.
fn unknown_paths(value: &Value, ignored: Vec<Vec<Segment>>) -> Vec<String> {
    let type_meta =
        |path: &[Segment]| matches!(path, [Segment::Key(k)] if k == "apiVersion" || k == "kind");
    ignored
        .into_iter()
        .filter(|path| !type_meta(path))
        .filter(|path| {
            let found = path.iter().try_fold(value, |v, s| match s {
                Segment::Key(k) => v.get(k.as_str()),
                Segment::Index(i) => v.get(*i),
            });
            !found.is_some_and(Value::is_null)
        })
        .map(|path| {
            let mut text = String::new();
            for s in path {
                match s {
                    Segment::Key(k) if text.is_empty() => text.push_str(&k),
                    Segment::Key(k) => {
                        text.push('.');
                        text.push_str(&k);
                    }
                    Segment::Index(i) => text.push_str(&format!("[{i}]")),
                }
            }
            text
        })
        .collect()
}

/// The rules dropped while decoding, by index, from an object's annotations.
pub fn dropped_rules(annotations: Option<&BTreeMap<String, String>>) -> BTreeMap<usize, String> {
    annotations
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.strip_prefix(DROPPED_RULE)?.parse().ok()?, v.clone())))
        .collect()
}

/// `spec.rules[3].filters[0]...: ...` → 3.
fn rule_of(message: &str) -> Option<usize> {
    let rest = message.strip_prefix("spec.rules[")?;
    let (index, _) = rest.split_once(']')?;
    index.parse().ok()
}

fn placeholder() -> Value {
    let mut m = Mapping::new();
    m.insert("backendRefs".into(), Value::Sequence(vec![]));
    Value::Mapping(m)
}

/// Replaces rule `index` with the placeholder; false if there is no such rule
/// or it already is one (the error is not the rule's).
fn replace_rule(value: &mut Value, index: usize) -> bool {
    let Some(rule) = value
        .get_mut("spec")
        .and_then(|s| s.get_mut("rules"))
        .and_then(Value::as_sequence_mut)
        .and_then(|rules| rules.get_mut(index))
    else {
        return false;
    };
    if *rule == placeholder() {
        return false;
    }
    *rule = placeholder();
    true
}

fn annotations(value: &mut Value) -> Option<&mut Mapping> {
    let meta = value
        .as_mapping_mut()?
        .entry("metadata".into())
        .or_insert(Value::Mapping(Mapping::new()));
    let meta = meta.as_mapping_mut()?;
    let notes = meta
        .entry("annotations".into())
        .or_insert(Value::Mapping(Mapping::new()));
    if notes.is_null() {
        *notes = Value::Mapping(Mapping::new());
    }
    notes.as_mapping_mut()
}

fn annotate(value: &mut Value, index: usize, why: &str) {
    if let Some(notes) = annotations(value) {
        notes.insert(format!("{DROPPED_RULE}{index}").into(), why.into());
    }
}

fn strip_own_annotations(value: &mut Value) {
    let has_notes = value
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .is_some_and(Value::is_mapping);
    if let (true, Some(notes)) = (has_notes, annotations(value)) {
        notes.retain(|k, _| !k.as_str().is_some_and(|k| k.starts_with(DROPPED_RULE)));
    }
}

/// serde_norway mentions positions inside the text it parsed, which is ours.
fn without_position(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gateway_api::apis::experimental::httproutes::HttpRoute;

    fn mk(yaml: &str) -> Value {
        serde_norway::from_str(yaml).unwrap()
    }

    const ROUTE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: r
  annotations: {"decode.aether.io/dropped-rule-0": "forged"}
spec:
  parentRefs: [{name: gw}]
  rules:
  - backendRefs: [{name: web, port: 80}]
  - filters: [{type: RequestRedirect, requestRedirect: {scheme: ftp}}]
  - matches: [{path: {type: ReplacePrefixMatches, value: /x}}]
  - filters: [{type: RateLimit}]
"#;

    #[test]
    fn rules_with_unknown_values_are_dropped_and_named() {
        let mut v = mk(ROUTE);
        let r: HttpRoute = decode(&mut v).expect("the route decodes");
        let dropped = dropped_rules(r.metadata.annotations.as_ref());
        assert_eq!(
            dropped.keys().copied().collect::<Vec<_>>(),
            vec![1, 2, 3],
            "{dropped:?}"
        );
        assert!(
            dropped[&1].contains("spec.rules[1].filters[0].requestRedirect.scheme"),
            "{}",
            dropped[&1]
        );
        assert!(dropped[&1].contains("ftp"), "{}", dropped[&1]);
        assert!(
            dropped[&2].contains("ReplacePrefixMatches"),
            "{}",
            dropped[&2]
        );
        assert!(dropped[&3].contains("RateLimit"), "{}", dropped[&3]);
        assert_eq!(r.spec.rules.as_ref().unwrap().len(), 4, "indices kept");
    }

    #[test]
    fn an_error_outside_the_rules_is_an_error() {
        let mut v = mk(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}\nspec: {parentRefs: 7}\n",
        );
        let err = decode::<HttpRoute>(&mut v).unwrap_err();
        assert!(err.contains("spec.parentRefs"), "{err}");
    }
}
