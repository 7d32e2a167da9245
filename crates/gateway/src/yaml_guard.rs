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

mod scalar;

use granit_parser::{Event, Parser, ScalarStyle};
use scalar::{scalar_value, unsupported};
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
    let mut tree = Tree::default();
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
        if let Some(node) = tree.node(event, line, budget)? {
            tree.place(node, line)?;
        }
    }
    Ok(tree.root.unwrap_or(Value::Null))
}

fn too_deep(line: usize) -> Refusal {
    Refusal::hostile(
        line,
        format!("YAML nested deeper than {MAX_DEPTH} levels; refused"),
    )
}

/// A complete node: its value, its anchor (0: none), how many nodes it
/// expands to.
struct Node {
    value: Value,
    anchor: usize,
    size: u64,
}

/// One document's value as its events build it.
#[derive(Default)]
struct Tree {
    /// Anchored nodes by anchor, with how many nodes each expands to.
    anchored: HashMap<usize, (Value, u64)>,
    /// The collections open, innermost last.
    open: Vec<Open>,
    root: Option<Value>,
    documents: usize,
}

impl Tree {
    /// The node an event completes, if any: a scalar, an alias, a collection
    /// closing. An opening collection is pushed onto the open ones.
    fn node(
        &mut self,
        event: Event<'_>,
        line: usize,
        budget: &mut Budget,
    ) -> Result<Option<Node>, Refusal> {
        let node = match event {
            Event::DocumentStart(..) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(Refusal::invalid(
                        line,
                        "a second document without a `---` line before it",
                    ));
                }
                return Ok(None);
            }
            Event::SequenceStart(_, anchor, ref tag) | Event::MappingStart(_, anchor, ref tag) => {
                let sequence = matches!(event, Event::SequenceStart(..));
                self.open_collection(sequence, anchor, tag.as_deref(), line, budget)?;
                return Ok(None);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(done) = self.open.pop() else {
                    return Err(Refusal::invalid(
                        line,
                        "a collection closed that never opened",
                    ));
                };
                Node {
                    value: done.value,
                    anchor: done.anchor,
                    size: done.size,
                }
            }
            Event::Scalar(v, style, anchor, tag) => {
                budget.spend(1, line)?;
                let plain = matches!(style, ScalarStyle::Plain);
                Node {
                    value: scalar_value(&v, plain, tag.as_deref(), line)?,
                    anchor,
                    size: 1,
                }
            }
            Event::Alias(id) => {
                let Some((value, size)) = self.anchored.get(&id) else {
                    return Err(Refusal::invalid(line, "an alias of an unknown anchor"));
                };
                budget.spend(*size, line)?;
                Node {
                    value: value.clone(),
                    anchor: 0,
                    size: *size,
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(node))
    }

    /// Opens a sequence or mapping (its tag, if any, the core schema's own).
    fn open_collection(
        &mut self,
        sequence: bool,
        anchor: usize,
        tag: Option<&granit_parser::Tag>,
        line: usize,
        budget: &mut Budget,
    ) -> Result<(), Refusal> {
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
        self.open.push(Open {
            anchor,
            value,
            key: None,
            size: 1,
        });
        if self.open.len() > MAX_DEPTH {
            return Err(too_deep(line));
        }
        Ok(())
    }

    /// Puts a complete node where it goes: under its anchor, and into the
    /// innermost open collection (as a key or a value), or as the root.
    fn place(&mut self, node: Node, line: usize) -> Result<(), Refusal> {
        let Node {
            value: node,
            anchor,
            size,
        } = node;
        if anchor != 0 {
            self.anchored.insert(anchor, (node.clone(), size));
        }
        let Some(parent) = self.open.last_mut() else {
            self.root = Some(node);
            return Ok(());
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
        Ok(())
    }
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

#[cfg(test)]
#[path = "yaml_guard_tests.rs"]
mod tests;
