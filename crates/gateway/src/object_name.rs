//! Object names as the API server validates them.
//!
//! In Kubernetes the API server refuses a Service named `b_c`; standalone YAML
//! reaches us unchecked, so the loader applies the same rules. Envoy names are
//! injective whatever they are given (`aether_ir::names`), but a name only a
//! cluster would refuse must not be served either:
//!
//! ```text
//!  Namespace, metadata.namespace    RFC 1123 label      a-z 0-9 '-', ≤ 63, alphanumeric ends
//!  Service                          RFC 1035 label      the same, starting with a letter
//!  every other kind                 RFC 1123 subdomain  labels joined by '.', ≤ 253
//! ```

use aether_ir::Kind;

/// Why a name is not one the API server would take, in its own words;
/// `Ok` for a valid name of an object of `kind`.
pub fn check(kind: Option<Kind>, name: &str) -> Result<(), &'static str> {
    match kind {
        Some(Kind::Namespace) => label(name),
        Some(Kind::Service) => dns1035_label(name),
        _ => subdomain(name),
    }
}

/// A namespace (`metadata.namespace`) is an RFC 1123 label.
pub fn check_namespace(namespace: &str) -> Result<(), &'static str> {
    label(namespace)
}

const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric \
     characters or '-', start and end with an alphanumeric character, and be at most 63 \
     characters long";
const DNS1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters \
     or '-', start with an alphabetic character, end with an alphanumeric character, and be \
     at most 63 characters long";
const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
     alphanumeric characters, '-' or '.', start and end with an alphanumeric character, and \
     be at most 253 characters long";

/// Letters, digits and inner `-`, of any length (a subdomain's parts are not
/// held to 63 characters: only its whole length is bounded).
fn is_word(s: &str) -> bool {
    let b = s.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-';
    let end = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    b.iter().all(inner) && end(b.first()) && end(b.last())
}

fn is_label(s: &str) -> bool {
    s.len() <= 63 && is_word(s)
}

fn label(s: &str) -> Result<(), &'static str> {
    if is_label(s) { Ok(()) } else { Err(LABEL) }
}

fn dns1035_label(s: &str) -> Result<(), &'static str> {
    if is_label(s) && s.as_bytes()[0].is_ascii_lowercase() {
        Ok(())
    } else {
        Err(DNS1035)
    }
}

fn subdomain(s: &str) -> Result<(), &'static str> {
    if s.len() <= 253 && s.split('.').all(is_word) {
        Ok(())
    } else {
        Err(SUBDOMAIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_as_the_api_server_checks_them() {
        for ok in ["web", "a-b", "web.example", "0abc"] {
            assert_eq!(check(Some(Kind::HttpRoute), ok), Ok(()), "{ok}");
        }
        for bad in ["b_c", "B", "a/b", "a b", "a\u{7}", "-a", "a-", "a..b", ""] {
            assert!(check(Some(Kind::HttpRoute), bad).is_err(), "{bad:?}");
            assert!(check(Some(Kind::Service), bad).is_err(), "{bad:?}");
            assert!(check_namespace(bad).is_err(), "{bad:?}");
        }
        // One 253-character part is a valid subdomain (and a valid Gateway name).
        assert!(check(Some(Kind::Gateway), &"a".repeat(253)).is_ok());
        assert!(check(Some(Kind::HttpRoute), &"a".repeat(254)).is_err());
        assert!(
            check(Some(Kind::Service), "0abc").is_err(),
            "a DNS-1035 label starts with a letter"
        );
        assert!(check(Some(Kind::Service), "web.example").is_err());
        assert!(check(Some(Kind::Namespace), &"a".repeat(64)).is_err());
        assert!(check_namespace("a.b").is_err());
    }
}
