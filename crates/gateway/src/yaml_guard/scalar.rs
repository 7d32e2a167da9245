//! Scalars as `serde_norway` resolves them (YAML 1.2 core schema): plain
//! ones to null, bool, integer, float or string; tagged ones to their tag's
//! type, or refused.

use super::Refusal;
use serde_norway::Value;

/// A scalar's value: resolved when plain and untagged, as its core-schema tag
/// says when tagged; refused when it is not a value of its type.
pub(super) fn scalar_value(
    v: &str,
    plain: bool,
    tag: Option<&granit_parser::Tag>,
    line: usize,
) -> Result<Value, Refusal> {
    let value = match tag {
        None => scalar(v, plain),
        Some(tag) if tag.is_custom() => {
            return Err(Refusal::invalid(line, unsupported(tag)));
        }
        Some(tag) => tagged_scalar(v, tag),
    };
    value.ok_or_else(|| {
        let tag = tag.map_or_else(String::new, |t| format!("{} ", t.original()));
        Refusal::invalid(
            line,
            format!("{tag}`{v}` is not a value of its type (integers have at most 64 bits)"),
        )
    })
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

pub(super) fn unsupported(tag: &granit_parser::Tag) -> String {
    format!(
        "YAML tag `{}` is not supported (Kubernetes objects carry no tags)",
        tag.original()
    )
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
