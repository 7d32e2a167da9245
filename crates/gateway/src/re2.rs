//! Regular expressions as Envoy reads them: RE2, not Rust's `regex`.
//!
//! ```text
//!  pattern ─ regex-syntax AST parse ─────────── error ─► does not parse
//!          └ walk every node: does RE2 have it, and read it the same way? ─ no ─► refused
//!               counted repetitions ≤ 1000, and their nested products ≤ 1000 (RE2's limits)
//!               a lower bound of the RE2 program size ≤ 1000 (our bootstraps' error level)
//! ```
//!
//! Refused because RE2 refuses them: flags other than `i m s U`, `\u` escapes, a
//! repetition of a repetition (`a**`), group names other than `[A-Za-z0-9_]+`.
//! Refused because RE2 accepts them with another meaning: `\<` `\>` `\b{start}`
//! and the other word-boundary forms, class set operations (`&&` `--` `~~`) and
//! nested classes (literal text to RE2).
//!
//! Envoy 1.40 runs RE2 in Latin-1 mode (seen with `envoy --mode validate`:
//! `\x{100}` is refused, `(?i)k{997}` costs one instruction per `k`, `\p{Greek}`
//! compiles to nothing). So a Unicode class, an escape past ASCII, and a non-ASCII
//! character in a class, under a repetition or in a case-insensitive pattern
//! would match single bytes, not the character written: refused too.
//!
//! RE2 accepts some things refused here (`\Q…\E`, `\C`, a literal `{`, octal
//! `\12` aside): they are refused on the safe side, never the other way round.
//!
//! The program-size bound counts what RE2 cannot compile away: one instruction
//! per literal, class or `.`, two per capture group, a counted repetition's body
//! once per copy RE2 expands it into, the largest alternative, plus the fail and
//! match instructions. A literal prefix right after `^` or `\A` counts nothing
//! (RE2 matches it outside the program); a pattern with a class that may be
//! empty (`[^\d\D]`) is not bounded at all (RE2 drops what must match it).
//! Envoy's real count is higher, so a pattern just under the limit may still be
//! refused by Envoy.

use regex_syntax::ast::{
    self, AssertionKind, Ast, ClassSet, ClassSetItem, Flag, FlagsItemKind, GroupKind,
    HexLiteralKind, LiteralKind, RepetitionKind, RepetitionRange, Span,
};

/// RE2's limit on a counted repetition, and on the product of nested ones.
pub const MAX_REPEAT: u64 = 1000;

/// The largest RE2 program Envoy accepts in our bootstraps
/// (`re2.max_program_size.error_level`, `aether_xds::bootstrap::MAX_REGEX_PROGRAM_SIZE`).
pub const MAX_PROGRAM_SIZE: u64 = 1000;

/// Why Envoy's RE2 would refuse a pattern, or read it other than it reads here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Re2Error {
    #[error("a pattern is required")]
    Empty,
    #[error("error: {0}")]
    Syntax(String),
    #[error("{0:?} is not an RE2 assertion (RE2 reads it as literal text)")]
    WordBoundary(String),
    #[error("{0:?}: RE2 has no class set operations (it reads &&, -- and ~~ literally)")]
    SetOperation(String),
    #[error("{0:?}: RE2 has no nested classes (it reads [ literally inside a class)")]
    NestedClass(String),
    #[error("flag {0} is not an RE2 flag (RE2 has i, m, s and U)")]
    Flag(char),
    #[error("group name {0:?} is not an RE2 name (ASCII letters, digits and _)")]
    GroupName(String),
    #[error("{0:?}: RE2 has no \\u escapes")]
    UnicodeEscape(String),
    #[error("{0:?} is a backreference, which RE2 does not have")]
    Backreference(String),
    #[error("{0:?} is past ASCII: Envoy's RE2 (Latin-1) reads it as one byte")]
    EscapePastAscii(String),
    #[error("Unicode class {0:?}: Envoy's RE2 (Latin-1) matches bytes, not Unicode characters")]
    UnicodeClass(String),
    #[error("non-ASCII {0:?} {1}: Envoy's RE2 (Latin-1) matches it byte by byte")]
    NonAscii(char, &'static str),
    #[error("{0:?}: RE2 refuses a repetition of a repetition")]
    StackedRepetition(String),
    #[error("{0:?}: RE2 allows at most {MAX_REPEAT} repetitions")]
    RepetitionCount(String),
    #[error(
        "{0:?} inside counted repetitions: the counts multiply to {1}, RE2 allows at most {MAX_REPEAT}"
    )]
    NestedRepetition(String, u64),
    #[error("its RE2 program has at least {0} instructions, Envoy allows {MAX_PROGRAM_SIZE}")]
    ProgramSize(u64),
}

/// Checks `pattern` the way Envoy's RE2 reads it.
pub fn check(pattern: &str) -> Result<(), Re2Error> {
    if pattern.is_empty() {
        return Err(Re2Error::Empty);
    }
    // Octal on: RE2 has `\0`, `\12`, `\123` (a lone `\1` is refused below).
    let ast = ast::parse::ParserBuilder::new()
        .octal(true)
        .build()
        .parse(pattern)
        .map_err(|e| Re2Error::Syntax(e.kind().to_string()))?;
    let mut walk = Walk {
        pattern,
        non_ascii: None,
        case_insensitive: false,
        may_match_nothing: false,
    };
    let size = walk.node(&ast, 1)?;
    if let Some(c) = walk.non_ascii
        && walk.case_insensitive
    {
        return Err(Re2Error::NonAscii(c, "in a case-insensitive pattern"));
    }
    // The fail instruction every program starts with, and the match.
    let size = size.saturating_add(2);
    if size > MAX_PROGRAM_SIZE && !walk.may_match_nothing {
        return Err(Re2Error::ProgramSize(size));
    }
    Ok(())
}

struct Walk<'p> {
    pattern: &'p str,
    /// A non-ASCII literal outside classes and repetitions: bytes in a row
    /// match it, unless case folding applies to them one by one.
    non_ascii: Option<char>,
    /// Some `i` flag is set somewhere (scoping is not followed: safe side).
    case_insensitive: bool,
    /// Some class may be empty: then no size bound holds.
    may_match_nothing: bool,
}

impl Walk<'_> {
    fn text(&self, span: &Span) -> String {
        self.pattern[span.start.offset..span.end.offset].to_string()
    }

    /// Validates `ast`; returns a lower bound of its RE2 instructions. `repeat`
    /// is the product of the counted repetitions around it.
    fn node(&mut self, ast: &Ast, repeat: u64) -> Result<u64, Re2Error> {
        match ast {
            Ast::Empty(_) => Ok(0),
            Ast::Flags(f) => self.flags(&f.flags).map(|()| 0),
            Ast::Literal(l) => self.literal(l, false).map(|()| 1),
            Ast::Dot(_) | Ast::ClassPerl(_) => Ok(1),
            Ast::Assertion(a) => match a.kind {
                AssertionKind::StartLine
                | AssertionKind::EndLine
                | AssertionKind::StartText
                | AssertionKind::EndText
                | AssertionKind::WordBoundary
                | AssertionKind::NotWordBoundary => Ok(0),
                _ => Err(Re2Error::WordBoundary(self.text(&a.span))),
            },
            Ast::ClassUnicode(c) => Err(Re2Error::UnicodeClass(self.text(&c.span))),
            Ast::ClassBracketed(c) => {
                let plain = self.class_set(&c.kind)?;
                // A negated class of literals and ranges (all ASCII) keeps the
                // bytes past ASCII; with named classes inside it may be empty
                // (`[^\d\D]`), and RE2 then drops whatever must match it.
                self.may_match_nothing |= c.negated && !plain;
                Ok(1)
            }
            Ast::Repetition(r) => self.repetition(r, repeat),
            Ast::Group(g) => {
                let extra = match &g.kind {
                    GroupKind::CaptureIndex(_) => 2,
                    GroupKind::CaptureName { name, .. } => {
                        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
                        if !name.name.chars().all(word) {
                            return Err(Re2Error::GroupName(name.name.clone()));
                        }
                        2
                    }
                    GroupKind::NonCapturing(flags) => {
                        self.flags(flags)?;
                        0
                    }
                };
                Ok(self.node(&g.ast, repeat)?.saturating_add(extra))
            }
            Ast::Alternation(a) => {
                let mut largest = 0;
                for branch in &a.asts {
                    largest = largest.max(self.node(branch, repeat)?);
                }
                Ok(largest)
            }
            Ast::Concat(c) => {
                let mut total = 0u64;
                let mut anchored = false;
                let mut leading = true;
                for item in &c.asts {
                    let size = self.node(item, repeat)?;
                    if leading {
                        if let Ast::Assertion(a) = item
                            && matches!(a.kind, AssertionKind::StartText | AssertionKind::StartLine)
                        {
                            anchored = true;
                            continue;
                        }
                        if zero_width(item) || (anchored && literal_only(item)) {
                            continue;
                        }
                        leading = false;
                    }
                    total = total.saturating_add(size);
                }
                Ok(total)
            }
        }
    }

    fn repetition(&mut self, r: &ast::Repetition, repeat: u64) -> Result<u64, Re2Error> {
        match &*r.ast {
            Ast::Repetition(_) => return Err(Re2Error::StackedRepetition(self.text(&r.span))),
            Ast::Literal(l) if !l.c.is_ascii() => {
                return Err(Re2Error::NonAscii(l.c, "under a repetition"));
            }
            _ => {}
        }
        // How many copies of the body RE2 expands the repetition into, and the
        // count its limits apply to.
        let (copies, counted) = match &r.op.kind {
            RepetitionKind::ZeroOrOne | RepetitionKind::ZeroOrMore | RepetitionKind::OneOrMore => {
                (1, None)
            }
            RepetitionKind::Range(RepetitionRange::Exactly(n)) => (*n, Some(*n)),
            RepetitionKind::Range(RepetitionRange::AtLeast(n)) => ((*n).max(1), Some(*n)),
            RepetitionKind::Range(RepetitionRange::Bounded(_, m)) => (*m, Some(*m)),
        };
        let mut inner_repeat = repeat;
        if let Some(count) = counted.map(u64::from) {
            if count > MAX_REPEAT {
                return Err(Re2Error::RepetitionCount(self.text(&r.op.span)));
            }
            if count > 0 {
                inner_repeat = repeat.saturating_mul(count);
                if inner_repeat > MAX_REPEAT {
                    return Err(Re2Error::NestedRepetition(self.text(&r.span), inner_repeat));
                }
            }
        }
        Ok(self
            .node(&r.ast, inner_repeat)?
            .saturating_mul(u64::from(copies)))
    }

    fn flags(&mut self, flags: &ast::Flags) -> Result<(), Re2Error> {
        let mut negated = false;
        for item in &flags.items {
            match &item.kind {
                FlagsItemKind::Negation => negated = true,
                FlagsItemKind::Flag(Flag::CaseInsensitive) => self.case_insensitive |= !negated,
                FlagsItemKind::Flag(
                    Flag::MultiLine | Flag::DotMatchesNewLine | Flag::SwapGreed,
                ) => {}
                FlagsItemKind::Flag(Flag::Unicode) => return Err(Re2Error::Flag('u')),
                FlagsItemKind::Flag(Flag::CRLF) => return Err(Re2Error::Flag('R')),
                FlagsItemKind::Flag(Flag::IgnoreWhitespace) => return Err(Re2Error::Flag('x')),
            }
        }
        Ok(())
    }

    fn literal(&mut self, l: &ast::Literal, in_class: bool) -> Result<(), Re2Error> {
        match &l.kind {
            LiteralKind::HexFixed(HexLiteralKind::UnicodeShort | HexLiteralKind::UnicodeLong)
            | LiteralKind::HexBrace(HexLiteralKind::UnicodeShort | HexLiteralKind::UnicodeLong) => {
                Err(Re2Error::UnicodeEscape(self.text(&l.span)))
            }
            LiteralKind::Octal if l.span.end.offset - l.span.start.offset == 2 && l.c != '\0' => {
                Err(Re2Error::Backreference(self.text(&l.span)))
            }
            LiteralKind::HexFixed(_) | LiteralKind::HexBrace(_) | LiteralKind::Octal
                if !l.c.is_ascii() =>
            {
                Err(Re2Error::EscapePastAscii(self.text(&l.span)))
            }
            _ if !l.c.is_ascii() => {
                if in_class {
                    return Err(Re2Error::NonAscii(l.c, "in a class"));
                }
                self.non_ascii.get_or_insert(l.c);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Validates a class; `true` when it holds only literals and ranges.
    fn class_set(&mut self, set: &ClassSet) -> Result<bool, Re2Error> {
        match set {
            ClassSet::BinaryOp(op) => Err(Re2Error::SetOperation(self.text(&op.span))),
            ClassSet::Item(item) => self.class_item(item),
        }
    }

    fn class_item(&mut self, item: &ClassSetItem) -> Result<bool, Re2Error> {
        match item {
            ClassSetItem::Empty(_) => Ok(true),
            ClassSetItem::Literal(l) => self.literal(l, true).map(|()| true),
            ClassSetItem::Range(r) => {
                self.literal(&r.start, true)?;
                self.literal(&r.end, true).map(|()| true)
            }
            ClassSetItem::Ascii(_) | ClassSetItem::Perl(_) => Ok(false),
            ClassSetItem::Unicode(u) => Err(Re2Error::UnicodeClass(self.text(&u.span))),
            ClassSetItem::Bracketed(b) => Err(Re2Error::NestedClass(self.text(&b.span))),
            ClassSetItem::Union(u) => {
                let mut plain = true;
                for item in &u.items {
                    plain &= self.class_item(item)?;
                }
                Ok(plain)
            }
        }
    }
}

fn zero_width(ast: &Ast) -> bool {
    matches!(ast, Ast::Empty(_) | Ast::Flags(_) | Ast::Assertion(_))
}

/// Only literal text (RE2 may take it into the required prefix after `^`).
fn literal_only(ast: &Ast) -> bool {
    match ast {
        Ast::Empty(_) | Ast::Flags(_) | Ast::Literal(_) => true,
        Ast::Group(g) => literal_only(&g.ast),
        Ast::Repetition(r) => literal_only(&r.ast),
        Ast::Concat(c) => c.asts.iter().all(literal_only),
        _ => false,
    }
}

#[cfg(test)]
#[path = "re2_tests.rs"]
mod tests;
