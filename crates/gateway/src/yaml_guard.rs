//! A guard against hostile YAML, run over a file's text before it is parsed.
//!
//! The parser that builds our objects (libyaml, under `serde_yaml`) is quadratic
//! in flow nesting depth (a 200 KB file of 100k nested `[` took minutes), and
//! building a value expands every alias in full (a 14 KB file whose anchor is
//! aliased thousands of times took hundreds of megabytes). So one streaming pass
//! of a linear event parser comes first, keeping no document, and refuses:
//!
//! - nesting deeper than [`MAX_DEPTH`] (a Gateway API object nests about ten
//!   levels; the object parser itself gives up past 128), and
//! - a file whose aliases would expand it to more nodes than
//!   [`expansion_budget`] allows: what the text holds without aliases, plus a
//!   margin for the modest reuse a hand-written file has.
//!
//! This parser stops at its own recursion limit long before the object parser
//! would, and that is refused too. Any other text it cannot read passes
//! through: the object parser then reports the syntax error in its own words,
//! as before.

use granit_parser::{Event, Parser};
use std::collections::HashMap;

/// Deepest nesting of sequences and mappings a file may have.
pub const MAX_DEPTH: usize = 64;

/// Why a file was refused: its 1-based line and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub line: usize,
    pub reason: String,
}

/// How many nodes a file of `len` bytes may expand to. A node takes at least a
/// byte of text, so a file without aliases never comes near it.
pub fn expansion_budget(len: usize) -> u64 {
    2 * len as u64 + 10_000
}

/// Checks `text`; see the module docs.
pub fn check(text: &str) -> Result<(), Refusal> {
    let budget = expansion_budget(text.len());
    // Expanded size of each anchored node, by anchor id.
    let mut anchored: HashMap<usize, u64> = HashMap::new();
    // Open collections: their anchor id and expanded size so far.
    let mut open: Vec<(usize, u64)> = Vec::new();
    let mut total: u64 = 0;
    for item in Parser::new_from_str(text) {
        let (event, span) = match item {
            Ok(item) => item,
            Err(e) if e.info().contains("recursion limit") => {
                return Err(Refusal {
                    line: e.marker().line(),
                    reason: format!("YAML nested deeper than {MAX_DEPTH} levels; refused"),
                });
            }
            Err(_) => return Ok(()),
        };
        let line = span.start.line();
        let node = match event {
            Event::SequenceStart(_, anchor, _) | Event::MappingStart(_, anchor, _) => {
                open.push((anchor, 1));
                if open.len() > MAX_DEPTH {
                    return Err(Refusal {
                        line,
                        reason: format!("YAML nested deeper than {MAX_DEPTH} levels; refused"),
                    });
                }
                total = total.saturating_add(1);
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some((anchor, size)) = open.pop() else {
                    continue;
                };
                if anchor != 0 {
                    anchored.insert(anchor, size);
                }
                // Counted in `total` as it grew; only the parent's size moves.
                if let Some(parent) = open.last_mut() {
                    parent.1 = parent.1.saturating_add(size);
                }
                continue;
            }
            Event::Scalar(_, _, anchor, _) => {
                if anchor != 0 {
                    anchored.insert(anchor, 1);
                }
                1
            }
            Event::Alias(anchor) => anchored.get(&anchor).copied().unwrap_or(1),
            Event::DocumentStart(..) => {
                open.clear();
                continue;
            }
            _ => continue,
        };
        total = total.saturating_add(node);
        if let Some(parent) = open.last_mut() {
            parent.1 = parent.1.saturating_add(node);
        }
        if total > budget {
            return Err(Refusal {
                line,
                reason: format!(
                    "YAML aliases expand this file past {budget} values; refused \
                     (write the repeated parts out, or split the file)"
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
kind: [unclosed
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
}
