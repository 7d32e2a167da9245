//! YAML text that every YAML reader takes back the same, Envoy included.
//!
//! serde_norway writes YAML 1.2, where `yes`, `y`, `on` and `off` are plain strings,
//! so it leaves them unquoted. Envoy parses YAML with yaml-cpp, which follows YAML
//! 1.1 and reads them as booleans: a header match on the value `yes` became
//! `exact: true` and Envoy rejected the whole config. This emitter quotes every
//! scalar that is not plainly a string under both versions.
//!
//! ```text
//!  plain     only [A-Za-z0-9_./-], not starting with a digit or `.`/`-`,
//!            and not a YAML 1.1 bool/null word      edge_cl_app_web_8080
//!  '…'       any other single-line printable text   '*', '10.0.0.1', 'yes', '5s'
//!  |         multi-line text with plain lines       PEM certificates and keys
//!  "…"       everything else, JSON-escaped          control characters
//! ```

use serde_norway::Value;

/// Words YAML 1.1 reads as booleans or null (compared case-insensitively).
const YAML11_WORDS: &[&str] = &["y", "n", "yes", "no", "true", "false", "on", "off", "null"];

pub(crate) fn to_string(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Mapping(m) if !m.is_empty() => mapping(&mut out, m, 0),
        Value::Sequence(s) if !s.is_empty() => sequence(&mut out, s, 0),
        other => {
            // Indented even at the top, so that a `---` line cannot end the document.
            out.push_str(&inline(other, 2));
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// A value that fits after `key: ` or `- ` (scalars, empty collections), or `None`
/// for a non-empty collection that needs its own lines.
fn as_inline(value: &Value, indent: usize) -> Option<String> {
    match value {
        Value::Mapping(m) if !m.is_empty() => None,
        Value::Sequence(s) if !s.is_empty() => None,
        other => Some(inline(other, indent)),
    }
}

fn inline(value: &Value, indent: usize) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s, indent),
        Value::Mapping(_) => "{}".to_string(),
        Value::Sequence(_) => "[]".to_string(),
        Value::Tagged(t) => inline(&t.value, indent),
    }
}

fn mapping(out: &mut String, m: &serde_norway::Mapping, indent: usize) {
    for (i, (k, v)) in m.iter().enumerate() {
        // The first entry of a mapping inside a sequence sits on the `- ` line.
        if i > 0 || !out.ends_with("- ") {
            pad(out, indent);
        }
        out.push_str(&inline(k, indent));
        out.push(':');
        match as_inline(v, indent + 2) {
            Some(text) => {
                out.push(' ');
                out.push_str(&text);
                out.push('\n');
            }
            None => {
                out.push('\n');
                block(out, v, indent);
            }
        }
    }
}

/// A nested collection under a mapping key: mappings indent, sequences do not
/// (the `- ` already marks them), as serde_norway lays them out.
fn block(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Mapping(m) => mapping(out, m, indent + 2),
        Value::Sequence(s) => sequence(out, s, indent),
        Value::Tagged(t) => block(out, &t.value, indent),
        _ => unreachable!("only non-empty collections need a block"),
    }
}

fn sequence(out: &mut String, s: &[Value], indent: usize) {
    for item in s {
        pad(out, indent);
        out.push_str("- ");
        match item {
            Value::Mapping(m) if !m.is_empty() => mapping(out, m, indent + 2),
            Value::Sequence(inner) if !inner.is_empty() => {
                out.pop(); // no trailing space after the dash
                out.push('\n');
                sequence(out, inner, indent + 2);
            }
            other => {
                out.push_str(&inline(other, indent + 2));
                out.push('\n');
            }
        }
    }
}

fn string(s: &str, indent: usize) -> String {
    if is_plain(s) {
        return s.to_string();
    }
    if s.chars().all(printable) {
        return format!("'{}'", s.replace('\'', "''"));
    }
    if let Some(text) = literal_block(s, indent) {
        return text;
    }
    serde_json::to_string(s).expect("a string always serializes")
}

fn is_plain(s: &str) -> bool {
    let starts_well = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '/');
    starts_well
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
        && !YAML11_WORDS.iter().any(|w| w.eq_ignore_ascii_case(s))
}

/// Printable on one line for every YAML reader: no control characters, no Unicode
/// line or paragraph separators, no byte order mark.
fn printable(c: char) -> bool {
    !c.is_control() && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')
}

/// `|` (clip), `|-` (strip) or `|+` (keep) literal block, for text whose every line
/// is printable and whose first line does not start with a space.
fn literal_block(s: &str, indent: usize) -> Option<String> {
    let body = s.trim_end_matches('\n');
    let trailing = s.len() - body.len();
    let lines: Vec<&str> = body.split('\n').collect();
    let ok = !body.is_empty()
        && !lines[0].starts_with(' ')
        && lines.iter().all(|l| l.chars().all(printable));
    if !ok {
        return None;
    }
    let chomp = match trailing {
        0 => "-",
        1 => "",
        _ => "+",
    };
    let mut out = format!("|{chomp}");
    for line in &lines {
        out.push('\n');
        if !line.is_empty() {
            pad(&mut out, indent);
            out.push_str(line);
        }
    }
    for _ in 1..trailing {
        out.push('\n');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(v: &Value) {
        let text = to_string(v);
        let back: Value = serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
        assert_eq!(&back, v, "{text}");
    }

    #[test]
    fn yaml11_booleans_and_numbers_stay_strings() {
        for s in [
            "y", "Yes", "NO", "on", "off", "true", "null", "1", "1.5", "5s", "0x1f", "", "~", "-",
            "=", "<<",
        ] {
            let text = to_string(&Value::from(s));
            assert!(
                text.starts_with('\'') || text.starts_with('"'),
                "{s:?} must be quoted, got {text}"
            );
            roundtrip(&Value::from(s));
        }
        assert_eq!(
            to_string(&Value::from("edge_cl_app_web_8080")),
            "edge_cl_app_web_8080\n"
        );
        assert_eq!(to_string(&Value::from("/a/b-c.d")), "/a/b-c.d\n");
        assert_eq!(to_string(&Value::from("it's")), "'it''s'\n");
    }

    #[test]
    fn text_of_every_shape_roundtrips() {
        for s in [
            "-----BEGIN X-----\nabc\n-----END X-----\n",
            "no newline at end\nsecond",
            "two at end\n\n",
            "blank\n\nline\n",
            " leading space\nx\n",
            "tab\there",
            "a: b # c",
            "\u{2028}",
        ] {
            roundtrip(&Value::from(s));
        }
    }

    #[test]
    fn nested_collections_roundtrip() {
        let v: Value = serde_norway::from_str(
            r#"
listeners:
- name: l
  filterChains:
  - filters:
    - typedConfig:
        '@type': t
        empty: {}
        none: []
        list: [[a, b], [c]]
  port: 80
  flag: true
pem: "x\ny\n"
"#,
        )
        .unwrap();
        roundtrip(&v);
        let text = to_string(&v);
        assert!(
            text.starts_with("listeners:\n- name: l\n  filterChains:\n"),
            "{text}"
        );
        assert!(text.contains("pem: |\n  x\n  y\n"), "{text}");
    }
}
