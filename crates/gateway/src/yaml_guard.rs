//! The YAML reader: a guard against hostile YAML and the builder of each
//! document's value, in one pass of a linear event parser.
//!
//! libyaml (under `serde_norway`) is quadratic in flow nesting depth (a 200 KB
//! file of 100k nested `[` took minutes), and building a value expands every
//! alias in full (a 14 KB file whose anchor is aliased thousands of times took
//! hundreds of megabytes). So values are built from a linear event parser that
//! refuses, as it goes:
//!
//! - nesting deeper than [`MAX_DEPTH`] (a Gateway API object nests about ten
//!   levels; the object parser itself gives up past 128), and
//! - a file whose aliases would expand it to more nodes than
//!   [`expansion_budget`] allows: what the text holds without aliases, plus a
//!   margin for the modest reuse a hand-written file has.
//!
//! This parser stops at its own recursion limit long before libyaml would, and
//! that is refused too. Nothing it reads goes on to libyaml unguarded: what it
//! does not take is an error here, with its line — a syntax error, a tag other
//! than the core schema's (`!!str` and friends), a duplicate key, an integer
//! wider than 64 bits, two documents between `---` markers. (Each of these once
//! passed the text on to `serde_norway` unguarded: one `!!str` made a 200 KB
//! nesting bomb cost 34 s of CPU per parse.) Reading values here instead of
//! with libyaml took the parse of 10,000 routes from ~910 ms to the number in
//! benches/README.md.

use granit_parser::{Event, Parser, ScalarStyle};
use serde_norway::{Mapping, Value};
use std::collections::HashMap;

/// Deepest nesting of sequences and mappings a file may have.
pub const MAX_DEPTH: usize = 64;

/// Why a file was refused: its 1-based line, the reason, and whether the text
/// is hostile (nested too deep, an alias bomb) or just not YAML we read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub line: usize,
    pub reason: String,
    pub hostile: bool,
}

impl Refusal {
    fn hostile(line: usize, reason: String) -> Self {
        Refusal {
            line,
            reason,
            hostile: true,
        }
    }

    fn invalid(line: usize, reason: impl Into<String>) -> Self {
        Refusal {
            line,
            reason: reason.into(),
            hostile: false,
        }
    }
}

/// How many nodes a file of `len` bytes may expand to. A node takes at least a
/// byte of text, so a file without aliases never comes near it.
pub fn expansion_budget(len: usize) -> u64 {
    2 * len as u64 + 10_000
}

/// Checks `text`; see the module docs.
pub fn check(text: &str) -> Result<(), Refusal> {
    read(text).try_for_each(|doc| doc.map(drop))
}

/// One document of a file: its text, the 1-based line that text starts on,
/// and its value.
#[derive(Debug)]
pub struct Document<'a> {
    pub first_line: usize,
    pub text: &'a str,
    pub value: Value,
}

/// The documents of `text`, each one's value built in the same pass that
/// guards it: nesting deeper than [`MAX_DEPTH`], or aliases expanding the file
/// past [`expansion_budget`], refuse the file (the first `Err`; a caller stops
/// there). Values are what `serde_norway::from_str::<Value>` gives for the same
/// text (a test holds the two to it), built from a linear parser, one document
/// at a time.
pub fn read(text: &str) -> impl Iterator<Item = Result<Document<'_>, Refusal>> {
    let budget = expansion_budget(text.len());
    read_documents(split(text), budget, budget)
}

/// [`read`] over documents already split from a file (`(first line, text)`,
/// see [`split`]), spending at most `budget` nodes on them together: a file
/// read in parts gives each part its share of the file's budget. `limit` is
/// the file's whole budget, as a refusal states it.
pub fn read_documents(
    docs: Vec<(usize, &str)>,
    budget: u64,
    limit: u64,
) -> impl Iterator<Item = Result<Document<'_>, Refusal>> {
    let mut budget = Budget {
        left: budget,
        limit,
    };
    docs.into_iter().map(move |(first_line, text)| {
        let value = build(text, &mut budget).map_err(|mut r| {
            r.line += first_line - 1;
            r
        })?;
        Ok(Document {
            first_line,
            text,
            value,
        })
    })
}

/// Splits on `---` lines. A line starting with `---` at column 0 can only be a
/// document marker in YAML (block scalars are indented), so this is exact.
/// Content after the marker on its line (`--- {a: 1}`) starts the document.
pub fn split(text: &str) -> Vec<(usize, &str)> {
    let mut docs = Vec::new();
    let (mut start, mut first_line) = (0, 1);
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let is_marker = line.starts_with("---")
            && line[3..]
                .chars()
                .next()
                .is_none_or(|c| c.is_whitespace() || c == '#');
        if is_marker {
            docs.push((first_line, &text[start..offset]));
            start = offset + 3;
            first_line = i + 1;
        }
        offset += line.len();
    }
    docs.push((first_line, &text[start..]));
    docs
}

struct Budget {
    left: u64,
    limit: u64,
}

impl Budget {
    fn spend(&mut self, nodes: u64, line: usize) -> Result<(), Refusal> {
        self.left = self.left.checked_sub(nodes).ok_or_else(|| {
            Refusal::hostile(
                line,
                format!(
                    "YAML aliases expand this file past {} values; refused \
                     (write the repeated parts out, or split the file)",
                    self.limit
                ),
            )
        })?;
        Ok(())
    }
}

/// An open collection: its anchor, its value so far, the key waiting for its
/// value (mappings), and how many nodes it expands to.
struct Open {
    anchor: usize,
    value: Value,
    key: Option<Value>,
    size: u64,
}

/// The value of one document's text.
fn build(text: &str, budget: &mut Budget) -> Result<Value, Refusal> {
    let too_deep = |line| {
        Refusal::hostile(
            line,
            format!("YAML nested deeper than {MAX_DEPTH} levels; refused"),
        )
    };
    let mut anchored: HashMap<usize, (Value, u64)> = HashMap::new();
    let mut open: Vec<Open> = Vec::new();
    let mut root: Option<Value> = None;
    let mut documents = 0;
    for item in Parser::new_from_str(text) {
        let (event, span) = match item {
            Ok(item) => item,
            Err(e) if e.info().contains("recursion limit") => {
                return Err(too_deep(e.marker().line()));
            }
            Err(e) => {
                return Err(Refusal::invalid(e.marker().line(), e.info()));
            }
        };
        let line = span.start.line();
        let (node, anchor, size) = match event {
            Event::DocumentStart(..) => {
                documents += 1;
                if documents > 1 {
                    return Err(Refusal::invalid(
                        line,
                        "a second document without a `---` line before it",
                    ));
                }
                continue;
            }
            Event::SequenceStart(_, anchor, ref tag) | Event::MappingStart(_, anchor, ref tag) => {
                let sequence = matches!(event, Event::SequenceStart(..));
                if let Some(tag) = tag {
                    let fits = tag.is_yaml_core_schema_tag(if sequence { "seq" } else { "map" });
                    if !fits {
                        return Err(Refusal::invalid(line, unsupported(tag)));
                    }
                }
                budget.spend(1, line)?;
                let value = if sequence {
                    Value::Sequence(Vec::new())
                } else {
                    Value::Mapping(Mapping::new())
                };
                open.push(Open {
                    anchor,
                    value,
                    key: None,
                    size: 1,
                });
                if open.len() > MAX_DEPTH {
                    return Err(too_deep(line));
                }
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(done) = open.pop() else {
                    return Err(Refusal::invalid(
                        line,
                        "a collection closed that never opened",
                    ));
                };
                (done.value, done.anchor, done.size)
            }
            Event::Scalar(v, style, anchor, tag) => {
                budget.spend(1, line)?;
                let plain = matches!(style, ScalarStyle::Plain);
                let value = match &tag {
                    None => scalar(&v, plain),
                    Some(tag) if tag.is_custom() => {
                        return Err(Refusal::invalid(line, unsupported(tag)));
                    }
                    Some(tag) => tagged_scalar(&v, tag),
                };
                let value = value.ok_or_else(|| {
                    let tag = tag.map_or_else(String::new, |t| format!("{} ", t.original()));
                    Refusal::invalid(
                        line,
                        format!(
                            "{tag}`{v}` is not a value of its type (integers have at most 64 bits)"
                        ),
                    )
                })?;
                (value, anchor, 1)
            }
            Event::Alias(id) => {
                let Some((value, size)) = anchored.get(&id) else {
                    return Err(Refusal::invalid(line, "an alias of an unknown anchor"));
                };
                budget.spend(*size, line)?;
                (value.clone(), 0, *size)
            }
            _ => continue,
        };
        if anchor != 0 {
            anchored.insert(anchor, (node.clone(), size));
        }
        let Some(parent) = open.last_mut() else {
            root = Some(node);
            continue;
        };
        parent.size = parent.size.saturating_add(size);
        match &mut parent.value {
            Value::Sequence(items) => items.push(node),
            Value::Mapping(map) => match parent.key.take() {
                None => parent.key = Some(node),
                Some(key) => {
                    if map.contains_key(&key) {
                        return Err(Refusal::invalid(
                            line,
                            format!("duplicate key {}", describe_key(&key)),
                        ));
                    }
                    map.insert(key, node);
                }
            },
            _ => unreachable!("only collections are opened"),
        }
    }
    Ok(root.unwrap_or(Value::Null))
}

/// A scalar with a core-schema tag: `!!str` keeps the text, the others must
/// resolve to their own type. `None` otherwise.
fn tagged_scalar(v: &str, tag: &granit_parser::Tag) -> Option<Value> {
    let resolved = scalar(v, true);
    let fits = match tag.core_suffix()? {
        "str" => return Some(Value::String(v.to_string())),
        "null" => matches!(resolved, Some(Value::Null)),
        "bool" => matches!(resolved, Some(Value::Bool(_))),
        "int" => matches!(&resolved, Some(Value::Number(n)) if !n.is_f64()),
        "float" => matches!(resolved, Some(Value::Number(_))),
        _ => false,
    };
    if fits { resolved } else { None }
}

fn unsupported(tag: &granit_parser::Tag) -> String {
    format!(
        "YAML tag `{}` is not supported (Kubernetes objects carry no tags)",
        tag.original()
    )
}

/// A mapping key for a message: a scalar as it is, anything else by its kind.
fn describe_key(key: &Value) -> String {
    match key {
        Value::String(s) => format!("`{}`", s.chars().take(64).collect::<String>()),
        Value::Number(n) => format!("`{n}`"),
        Value::Bool(b) => format!("`{b}`"),
        Value::Null => "`null`".into(),
        _ => "(a collection)".into(),
    }
}

/// A scalar as `serde_norway` resolves it: quoted and block scalars are strings;
/// a plain one is null, a bool, an integer, a float or else a string. `None`
/// for an integer wider than 64 bits.
fn scalar(v: &str, plain: bool) -> Option<Value> {
    if !plain {
        return Some(Value::String(v.to_string()));
    }
    if matches!(v, "" | "~" | "null" | "Null" | "NULL") {
        return Some(Value::Null);
    }
    if let Some(b) = match v {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    } {
        return Some(Value::Bool(b));
    }
    if let Some(n) = unsigned(v) {
        return Some(Value::Number(n.into()));
    }
    if let Some(n) = negative(v) {
        return Some(Value::Number(n.into()));
    }
    let wide = unsigned_radix(v, u128::from_str_radix).is_some()
        || negative_radix(v, i128::from_str_radix).is_some();
    if wide {
        return None;
    }
    if !leading_zero_digits(v)
        && let Some(f) = float(v)
    {
        return Some(Value::Number(f.into()));
    }
    Some(Value::String(v.to_string()))
}

fn unsigned(v: &str) -> Option<u64> {
    unsigned_radix(v, u64::from_str_radix)
}

fn negative(v: &str) -> Option<i64> {
    negative_radix(v, i64::from_str_radix)
}

type Radix<T> = fn(&str, u32) -> Result<T, std::num::ParseIntError>;

/// `+`? then `0x`/`0o`/`0b` digits, or decimal digits (not with a leading zero).
fn unsigned_radix<T>(v: &str, parse: Radix<T>) -> Option<T> {
    let unsigned = v.strip_prefix('+').unwrap_or(v);
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(rest) = unsigned.strip_prefix(prefix) {
            if rest.starts_with(['+', '-']) {
                return None;
            }
            if let Ok(n) = parse(rest, radix) {
                return Some(n);
            }
        }
    }
    if unsigned.starts_with(['+', '-']) || leading_zero_digits(v) {
        return None;
    }
    parse(unsigned, 10).ok()
}

/// `-0x`/`-0o`/`-0b` digits, or a negative decimal.
fn negative_radix<T>(v: &str, parse: Radix<T>) -> Option<T> {
    for (prefix, radix) in [("-0x", 16), ("-0o", 8), ("-0b", 2)] {
        if let Some(rest) = v.strip_prefix(prefix)
            && let Ok(n) = parse(&format!("-{rest}"), radix)
        {
            return Some(n);
        }
    }
    if leading_zero_digits(v) {
        return None;
    }
    parse(v, 10).ok()
}

/// `0123`, `-007`: digits after a leading zero are a string in YAML 1.2.
fn leading_zero_digits(v: &str) -> bool {
    let v = v.strip_prefix(['-', '+']).unwrap_or(v);
    v.len() > 1 && v.starts_with('0') && v[1..].bytes().all(|b| b.is_ascii_digit())
}

fn float(v: &str) -> Option<f64> {
    let unsigned = match v.strip_prefix('+') {
        Some(rest) if rest.starts_with(['+', '-']) => return None,
        Some(rest) => rest,
        None => v,
    };
    match (unsigned, v) {
        (".inf" | ".Inf" | ".INF", _) => return Some(f64::INFINITY),
        (_, "-.inf" | "-.Inf" | "-.INF") => return Some(f64::NEG_INFINITY),
        (_, ".nan" | ".NaN" | ".NAN") => return Some(f64::NAN),
        _ => {}
    }
    unsigned.parse::<f64>().ok().filter(|f| f.is_finite())
}

#[cfg(test)]
#[path = "yaml_guard_tests.rs"]
mod tests;
