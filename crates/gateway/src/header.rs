//! Header names and values as RFC 7230 §3.2 has them, checked before they reach
//! Envoy (which refuses a whole route table over one CR, LF or NUL).
//!
//! ```text
//!  name  = token = 1*tchar        tchar = ALPHA / DIGIT / !#$%&'*+-.^_`|~
//!  value = *field-content         VCHAR, SP, HTAB, obs-text (bytes ≥ 0x80);
//!                                 no CR, LF, NUL or other control character
//! ```
//!
//! A path is a header value too (`:path`), and so is a query parameter name a
//! token in the Gateway API (`HTTPHeaderName`). Header modifiers cannot touch
//! `host`: Envoy refuses to set, add or remove it (`:`-prefixed names are not
//! tokens anyway); URLRewrite's hostname is the way to change it.
//!
//! Lengths are held to the Gateway API's own bounds (what the API server would
//! refuse): a name 256 bytes, a value 4096, a path 1024. Envoy's are looser
//! (16 KiB for a modified header, 1 KiB for a query parameter name), and past
//! them it refused the whole route table, so one route held back every other
//! route of its Gateway.
//!
//! Also here: a rule's header matches and header modifiers, read into the IR
//! once their names and values pass (an `Err` drops the rule).

/// The longest header (or query parameter) name: the API's `HTTPHeaderName`.
pub const MAX_NAME_BYTES: usize = 256;
/// The longest header value, matched or set: the API's `HTTPHeader.value`.
pub const MAX_VALUE_BYTES: usize = 4096;
/// The longest path, matched or rewritten: the API's `HTTPPathMatch.value`.
pub const MAX_PATH_BYTES: usize = 1024;

use crate::route::string_match;
use aether_ir::{Header, HeaderMatch, HeaderModifier};

/// Why a header name or value cannot be sent to Envoy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("{0} is empty")]
    EmptyName(String),
    #[error("{0} {1:?} is not an HTTP token: {2:?} is not allowed")]
    NotToken(String, String, char),
    #[error("{0} {1:?} is not an HTTP field value: {2:?} is not allowed")]
    NotFieldValue(String, String, char),
    #[error("{0} {1:?}: Envoy does not let header modifiers change host (use URLRewrite hostname)")]
    Host(String, String),
    #[error(
        "{0} {1:?}: a framing or hop-by-hop header is Envoy's to set (changing it hangs \
         requests or drops bodies)"
    )]
    Framing(String, String),
    #[error("{0} is {1} bytes long; at most {2} are allowed")]
    TooLong(String, usize, usize),
}

fn at_most(what: &str, text: &str, max: usize) -> Result<(), HeaderError> {
    if text.len() > max {
        return Err(HeaderError::TooLong(what.into(), text.len(), max));
    }
    Ok(())
}

/// `what` names the field (`header match name`, `RequestHeaderModifier set name`).
pub fn check_name(what: &str, name: &str) -> Result<(), HeaderError> {
    if name.is_empty() {
        return Err(HeaderError::EmptyName(what.to_string()));
    }
    at_most(what, name, MAX_NAME_BYTES)?;
    match name.chars().find(|&c| !is_tchar(c)) {
        Some(c) => Err(HeaderError::NotToken(what.into(), name.into(), c)),
        None => Ok(()),
    }
}

/// Headers that frame a message or belong to one connection (RFC 9110 §7.6.1,
/// RFC 9112 §6): Envoy sets them itself. Set by a filter, a request hung
/// waiting for a body that never came, or a response body vanished.
const FRAMING: [&str; 7] = [
    "connection",
    "content-length",
    "keep-alive",
    "proxy-connection",
    "te",
    "transfer-encoding",
    "upgrade",
];

/// A name a header modifier sets, adds or removes: a token, not `host`, and
/// not a framing or hop-by-hop header.
pub fn check_modified_name(what: &str, name: &str) -> Result<(), HeaderError> {
    check_name(what, name)?;
    if name.eq_ignore_ascii_case("host") {
        return Err(HeaderError::Host(what.into(), name.into()));
    }
    if FRAMING.iter().any(|f| name.eq_ignore_ascii_case(f)) {
        return Err(HeaderError::Framing(what.into(), name.into()));
    }
    Ok(())
}

pub fn check_value(what: &str, value: &str) -> Result<(), HeaderError> {
    at_most(what, value, MAX_VALUE_BYTES)?;
    let field_content = |c: char| c == '\t' || !c.is_ascii() || (' '..='~').contains(&c);
    match value.chars().find(|&c| !field_content(c)) {
        Some(c) => Err(HeaderError::NotFieldValue(what.into(), value.into(), c)),
        None => Ok(()),
    }
}

/// Header matches: names lower-cased, only the first of duplicate names kept.
/// Names are tokens, exact values field values.
pub fn header_matches<'a>(
    headers: impl Iterator<Item = (&'a str, bool, &'a str)>,
) -> Result<Vec<HeaderMatch>, String> {
    let mut out: Vec<HeaderMatch> = Vec::new();
    for (name, regex, value) in headers {
        check_name("header match name", name).map_err(|e| e.to_string())?;
        let name = name.to_ascii_lowercase();
        if out.iter().any(|h| h.name == name) {
            continue;
        }
        if regex {
            at_most(
                &format!("header match {name} regex"),
                value,
                MAX_VALUE_BYTES,
            )
            .map_err(|e| e.to_string())?;
        } else {
            check_value(&format!("header match {name} value"), value).map_err(|e| e.to_string())?;
        }
        let value = string_match(&format!("header {name}"), regex, value)?;
        out.push(HeaderMatch { name, value });
    }
    Ok(out)
}

/// Adds a header modifier filter's set/add/remove to `into`, once every name is
/// a token other than `host` and every value a field value. `filter` names the
/// filter in messages.
pub fn modify_headers<'a>(
    filter: &str,
    into: &mut HeaderModifier,
    set: impl Iterator<Item = (&'a str, &'a str)>,
    add: impl Iterator<Item = (&'a str, &'a str)>,
    remove: &[String],
) -> Result<(), String> {
    let set = checked_headers(filter, "set", set)?;
    let add = checked_headers(filter, "add", add)?;
    for name in remove {
        check_modified_name(&format!("{filter} remove name"), name).map_err(|e| e.to_string())?;
    }
    into.set.extend(set);
    into.add.extend(add);
    into.remove.extend(remove.iter().cloned());
    Ok(())
}

fn checked_headers<'a>(
    filter: &str,
    op: &str,
    pairs: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<Vec<Header>, String> {
    pairs
        .map(|(name, value)| {
            check_modified_name(&format!("{filter} {op} name"), name)
                .and_then(|()| check_value(&format!("{filter} {op} {name} value"), value))
                .map_err(|e| e.to_string())?;
            Ok(Header {
                name: name.to_string(),
                value: value.to_string(),
            })
        })
        .collect()
}

/// A path in a match or a path modifier: a header value (`:path`). A prefix
/// cannot hold `?` or `#` (Envoy's `path_separated_prefix` refuses them).
pub fn check_path(what: &str, value: &str, prefix: bool) -> Result<(), String> {
    at_most(what, value, MAX_PATH_BYTES).map_err(|e| e.to_string())?;
    check_value(what, value).map_err(|e| e.to_string())?;
    if prefix && let Some(c) = value.chars().find(|c| matches!(c, '?' | '#')) {
        return Err(format!(
            "{what} {value:?} holds {c:?}, which a path prefix cannot"
        ));
    }
    Ok(())
}

/// The path of an HTTPRoute match (Exact or PathPrefix), held to the API's own
/// validation (the CRD's CEL rules on `HTTPPathMatch`): absolute; no `//`,
/// `/./`, `/../`, `%2f` or `#`; not ending in `/.` or `/..`; only the
/// characters of a URI path, `%` only as an escape. Envoy refuses a prefix
/// that does not start with `/` (`path_separated_prefix` needs `/x` at least).
pub fn check_match_path(value: &str, prefix: bool) -> Result<(), String> {
    check_path("path value", value, prefix)?;
    let refused = |why: &str| Err(format!("path value {value:?} {why}"));
    if !value.starts_with('/') {
        return refused("must be an absolute path (start with '/')");
    }
    if let Some(part) = ["//", "/./", "/../", "%2f", "%2F", "#"]
        .into_iter()
        .find(|p| value.contains(p))
    {
        return refused(&format!("must not contain {part:?}"));
    }
    if value.ends_with("/.") || value.ends_with("/..") {
        return refused("must not end with '/.' or '/..'");
    }
    let bytes = value.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'%' {
            let escape = bytes.get(i + 1..i + 3);
            if !escape.is_some_and(|e| e.iter().all(u8::is_ascii_hexdigit)) {
                return refused("has a '%' that is not a %XX escape");
            }
            i += 3;
            continue;
        }
        if !(c.is_ascii_alphanumeric() || b"-/._~!$&'()*+,;=:@".contains(&c)) {
            return refused(&format!(
                "holds {:?}, which a URI path cannot (escape it as %XX)",
                value[i..].chars().next().unwrap_or_default()
            ));
        }
        i += 1;
    }
    Ok(())
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aether_ir::StringMatch;

    #[test]
    fn duplicate_header_names_keep_the_first() {
        let got = header_matches(
            [
                ("X-A", false, "1"),
                ("x-a", false, "2"),
                ("x-b", true, "v.*"),
            ]
            .into_iter(),
        )
        .unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].value, StringMatch::Exact("1".into()));
        assert_eq!(got[1].name, "x-b");
        assert!(header_matches([("x", true, "(")].into_iter()).is_err());
    }

    #[test]
    fn header_matches_refuse_what_envoy_refuses() {
        let one = |name, regex, value| header_matches([(name, regex, value)].into_iter());
        assert_eq!(
            one("x", false, "a\r\nb").unwrap_err(),
            r#"header match x value "a\r\nb" is not an HTTP field value: '\r' is not allowed"#
        );
        assert!(
            one("x y", false, "1")
                .unwrap_err()
                .contains(r#"name "x y""#)
        );
        assert!(one("x\0", false, "1").is_err());
        assert!(one("x", true, "\\b{start}").is_err());
        // A regex is checked as a regex: `\r` in a pattern is two characters.
        assert!(one("x", true, "a\\r").is_ok());
    }

    #[test]
    fn header_modifiers_refuse_what_envoy_refuses() {
        let run = |set: &[(&str, &str)], add: &[(&str, &str)], remove: &[&str]| {
            let mut into = HeaderModifier::default();
            let remove: Vec<String> = remove.iter().map(|s| s.to_string()).collect();
            modify_headers(
                "RequestHeaderModifier",
                &mut into,
                set.iter().copied(),
                add.iter().copied(),
                &remove,
            )
            .map(|()| into)
        };
        let ok = run(&[("x-a", "1")], &[("x-b", "2")], &["x-c"]).unwrap();
        assert_eq!((ok.set.len(), ok.add.len(), ok.remove.len()), (1, 1, 1));
        assert_eq!(
            run(&[("x-a", "1\r\nx-evil: 1")], &[], &[]).unwrap_err(),
            r#"RequestHeaderModifier set x-a value "1\r\nx-evil: 1" is not an HTTP field value: '\r' is not allowed"#
        );
        assert!(
            run(&[], &[("x a", "1")], &[])
                .unwrap_err()
                .contains("add name")
        );
        assert!(
            run(&[], &[], &["x\nb"])
                .unwrap_err()
                .contains("remove name")
        );
        assert!(
            run(&[("Host", "evil")], &[], &[])
                .unwrap_err()
                .contains("host")
        );
        assert!(run(&[], &[], &["host"]).is_err());
        assert!(
            run(&[], &[("", "1")], &[])
                .unwrap_err()
                .contains("is empty")
        );
    }

    /// Past the API's bounds (and Envoy's, which refused the whole table): a
    /// 20 KB header name or value, a 2 KB query parameter name.
    #[test]
    fn lengths_are_held_to_the_apis_bounds() {
        let long = |n: usize| "a".repeat(n);
        assert!(check_name("n", &long(MAX_NAME_BYTES)).is_ok());
        assert!(matches!(
            check_name("n", &long(20_000)),
            Err(HeaderError::TooLong(_, 20_000, MAX_NAME_BYTES))
        ));
        assert!(check_value("v", &long(MAX_VALUE_BYTES)).is_ok());
        let err = check_value("v", &long(20_000)).unwrap_err().to_string();
        assert_eq!(err, "v is 20000 bytes long; at most 4096 are allowed");
        assert!(check_path("p", &format!("/{}", long(2000)), true).is_err());
        let set = [("x-a", long(20_000))];
        let mut into = HeaderModifier::default();
        let set = set.iter().map(|(n, v)| (*n, v.as_str()));
        assert!(
            modify_headers(
                "RequestHeaderModifier",
                &mut into,
                set,
                std::iter::empty(),
                &[]
            )
            .is_err()
        );
        let regex = header_matches([("x-a", true, long(5000).as_str())].into_iter());
        assert!(regex.is_err());
        let query =
            crate::route::query_param_matches([(long(2000).as_str(), false, "v")].into_iter());
        assert!(query.unwrap_err().contains("at most 256"));
    }

    #[test]
    fn match_paths_are_held_to_the_apis_validation() {
        for ok in ["/", "/a", "/a/b/", "/a%20b", "/~user/x.y", "/a:b@c;d=e"] {
            assert_eq!(check_match_path(ok, true), Ok(()), "{ok}");
            assert_eq!(check_match_path(ok, false), Ok(()), "{ok}");
        }
        // "5" as a prefix: Envoy refused the whole route table (found by the
        // translate → Envoy fuzz test).
        for bad in [
            "5", "a/b", "", "//a", "/a/./b", "/a/../b", "/a%2fb", "/a%2F", "/a#b", "/a/.", "/a/..",
            "/a%", "/a%g0", "/a b", "/é", "/a\"b",
        ] {
            assert!(check_match_path(bad, true).is_err(), "{bad:?}");
            assert!(check_match_path(bad, false).is_err(), "{bad:?}");
        }
        assert!(check_match_path("/a?b", true).is_err());
    }

    #[test]
    fn modifiers_leave_framing_and_hop_by_hop_headers_alone() {
        for name in [
            "Content-Length",
            "transfer-encoding",
            "Connection",
            "Upgrade",
            "TE",
        ] {
            let err = check_modified_name("RequestHeaderModifier set name", name).unwrap_err();
            assert!(matches!(err, HeaderError::Framing(..)), "{name}: {err}");
        }
        assert!(check_modified_name("set", "x-content-length").is_ok());
    }

    #[test]
    fn names_are_tokens() {
        for good in ["x-request-id", "X_B", "a!#$%&'*+-.^_`|~9"] {
            assert_eq!(check_name("name", good), Ok(()), "{good}");
        }
        assert_eq!(
            check_name("name", "x y"),
            Err(HeaderError::NotToken("name".into(), "x y".into(), ' '))
        );
        for bad in [
            "x\r\ny",
            "x\0",
            ":authority",
            "a:b",
            "é",
            "a\"",
            "(x)",
            "a\t",
        ] {
            assert!(check_name("name", bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            check_name("name", ""),
            Err(HeaderError::EmptyName("name".into()))
        );
    }

    #[test]
    fn values_are_field_content() {
        for good in ["", "a b\tc", "~!\"(),/:;<=>?@[\\]{}", "caf\u{e9}", "日本"] {
            assert_eq!(check_value("value", good), Ok(()), "{good:?}");
        }
        assert_eq!(
            check_value("value", "a\r\nb"),
            Err(HeaderError::NotFieldValue(
                "value".into(),
                "a\r\nb".into(),
                '\r'
            ))
        );
        for bad in ["a\nb", "\0", "a\u{7f}", "\u{1b}[31m", "a\u{b}"] {
            assert!(check_value("value", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn modifiers_leave_host_alone() {
        assert_eq!(check_modified_name("set", "x-host"), Ok(()));
        assert_eq!(
            check_modified_name("set", "Host"),
            Err(HeaderError::Host("set".into(), "Host".into()))
        );
        assert!(check_modified_name("remove", "host").is_err());
        assert!(check_modified_name("remove", "a b").is_err());
    }

    #[test]
    fn messages_escape_control_characters() {
        let e = check_value("RequestHeaderModifier set x-a value", "a\r\nb").unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"RequestHeaderModifier set x-a value "a\r\nb" is not an HTTP field value: '\r' is not allowed"#
        );
    }
}
