//! Hostname intersection between a listener and a route.
//!
//! A listener hostname (or none: any host) and a route's hostnames (or none: the
//! listener's) meet in the hostnames the route serves there:
//!
//! ```text
//!  listener          route              result
//!  (none)            foo.example.com    foo.example.com
//!  *.example.com     foo.example.com    foo.example.com   (wildcard spans labels:
//!  *.example.com     a.b.example.com    a.b.example.com    never the bare suffix)
//!  foo.example.com   *.example.com      foo.example.com   (the more specific wins)
//!  *.example.com     *.a.example.com    *.a.example.com
//!  *.example.com     example.com        —                 (no intersection)
//! ```
//!
//! Everything is compared and returned lower-cased.
//!
//! Listener isolation: listeners sharing a port share a route table, but a request
//! belongs to the most specific listener whose hostname matches it (exact, then
//! wildcards with more labels, then none). So a hostname a route would serve on
//! one listener is dropped when a more specific sibling listener claims it
//! ([`isolate`]); otherwise the route would answer for that sibling.
//!
//! Validity ([`check`]): RFC 1123 labels (letters, digits, inner hyphens; 1–63
//! characters each), 253 characters at most, a wildcard only as a leading `*.`
//! where the field allows one (`Hostname`, not `PreciseHostname`). Envoy refuses
//! a route table whose domains or redirect hosts carry CR, LF or NUL.

/// The longest hostname (RFC 1123) and label.
pub const MAX_HOSTNAME: usize = 253;
pub const MAX_LABEL: usize = 63;

/// May the hostname start with `*.`? (`Hostname` yes, `PreciseHostname` no.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wildcard {
    Allowed,
    Refused,
}

/// Why a hostname is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostnameError {
    #[error("it is empty")]
    Empty,
    #[error("it has {0} characters, at most {MAX_HOSTNAME} are allowed")]
    TooLong(usize),
    #[error("label {0:?} has more than {MAX_LABEL} characters")]
    LabelTooLong(String),
    #[error("it has an empty label")]
    EmptyLabel,
    #[error("{0:?} is not allowed (letters, digits, '-' and '.')")]
    Character(char),
    #[error("label {0:?} starts or ends with '-'")]
    Hyphen(String),
    #[error("a wildcard is only allowed as a leading \"*.\"")]
    Wildcard,
    #[error("a wildcard is not allowed here")]
    NoWildcard,
}

/// Checks one hostname as given (either case).
pub fn check(host: &str, wildcard: Wildcard) -> Result<(), HostnameError> {
    if host.is_empty() {
        return Err(HostnameError::Empty);
    }
    if host.len() > MAX_HOSTNAME {
        return Err(HostnameError::TooLong(host.len()));
    }
    let name = match (wildcard_suffix(host), wildcard) {
        (Some(_), Wildcard::Refused) => return Err(HostnameError::NoWildcard),
        (Some(suffix), Wildcard::Allowed) => suffix,
        (None, _) => host,
    };
    for label in name.split('.') {
        if label.is_empty() {
            return Err(HostnameError::EmptyLabel);
        }
        if let Some(c) = label
            .chars()
            .find(|&c| !c.is_ascii_alphanumeric() && c != '-')
        {
            return Err(if c == '*' {
                HostnameError::Wildcard
            } else {
                HostnameError::Character(c)
            });
        }
        if label.len() > MAX_LABEL {
            return Err(HostnameError::LabelTooLong(label.to_string()));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(HostnameError::Hyphen(label.to_string()));
        }
    }
    Ok(())
}

/// [`check`], as a message naming the field and the value.
pub fn checked(what: &str, host: &str, wildcard: Wildcard) -> Result<(), String> {
    check(host, wildcard).map_err(|e| format!("{what} {host:?} is not a valid hostname: {e}"))
}

/// The hostname served when a listener with `listener` hostname carries a route
/// hostname `route`, or `None` when they do not intersect.
pub fn intersect(listener: Option<&str>, route: &str) -> Option<String> {
    let route = route.to_ascii_lowercase();
    let Some(listener) = listener else {
        return Some(route);
    };
    let listener = listener.to_ascii_lowercase();
    match (wildcard_suffix(&listener), wildcard_suffix(&route)) {
        (None, None) => (listener == route).then_some(route),
        (Some(suffix), None) => covers(suffix, &route).then_some(route),
        (None, Some(suffix)) => covers(suffix, &listener).then_some(listener),
        (Some(l), Some(r)) => {
            if l == r || covers(l, r) {
                Some(route)
            } else if covers(r, l) {
                Some(listener)
            } else {
                None
            }
        }
    }
}

/// Every hostname a route serves on a listener: the intersections of its
/// hostnames with the listener's, or the listener's own hostname (`*` for none)
/// when the route names no hostnames. Sorted and deduplicated; empty means the
/// route does not attach to this listener.
pub fn served_hostnames(listener: Option<&str>, route_hostnames: &[String]) -> Vec<String> {
    let mut out: Vec<String> = if route_hostnames.is_empty() {
        vec![listener.map_or_else(|| "*".to_string(), str::to_ascii_lowercase)]
    } else {
        route_hostnames
            .iter()
            .filter_map(|h| intersect(listener, h))
            .collect()
    };
    out.sort();
    out.dedup();
    out
}

/// How specific the route's own hostname is that makes it serve `served` on a
/// listener with `listener` hostname (GatewayRouteHostnameIntersectionPrecedence):
/// routes whose hostnames intersect the listener's to the same name are ordered
/// by the hostnames they were given, not by that intersection — an exact name
/// before a wildcard, then more characters first. A route without hostnames
/// counts as naming `served` itself. Greater is more specific.
pub fn route_hostname_rank(
    served: &str,
    listener: Option<&str>,
    route_hostnames: &[String],
) -> (bool, usize) {
    let rank = |h: &str| (wildcard_suffix(h).is_none(), h.len());
    if route_hostnames.is_empty() {
        return rank(served);
    }
    route_hostnames
        .iter()
        .filter(|h| intersect(listener, h).as_deref() == Some(served))
        .map(|h| rank(h))
        .max()
        .unwrap_or_else(|| rank(served))
}

/// How specific a listener hostname is: none < wildcard (more labels first) < exact.
pub fn specificity(listener: Option<&str>) -> (u8, usize) {
    match listener {
        None => (0, 0),
        Some(h) => match wildcard_suffix(h) {
            Some(suffix) => (1, suffix.split('.').count()),
            None => (2, 0),
        },
    }
}

/// Would a listener with this hostname take requests for `host` (an exact name,
/// or every name under a wildcard)?
pub fn listener_claims(listener: Option<&str>, host: &str) -> bool {
    let Some(listener) = listener else {
        return true;
    };
    let listener = listener.to_ascii_lowercase();
    match (wildcard_suffix(&listener), wildcard_suffix(host)) {
        (None, None) => listener == host,
        (None, Some(_)) => false,
        (Some(suffix), None) => covers(suffix, host),
        (Some(l), Some(h)) => l == h || covers(l, h),
    }
}

/// Drops the hostnames that a more specific sibling listener (on the same port)
/// claims from those served on `listener`.
pub fn isolate<'a>(
    served: Vec<String>,
    listener: Option<&str>,
    siblings: impl Iterator<Item = Option<&'a str>> + Clone,
) -> Vec<String> {
    let own = specificity(listener);
    served
        .into_iter()
        .filter(|host| {
            !siblings
                .clone()
                .any(|s| specificity(s) > own && listener_claims(s, host))
        })
        .collect()
}

/// `*.example.com` → `Some("example.com")`.
fn wildcard_suffix(host: &str) -> Option<&str> {
    host.strip_prefix("*.")
}

/// Does `*.suffix` cover `host`? At least one label must precede the suffix.
fn covers(suffix: &str, host: &str) -> bool {
    host.strip_suffix(suffix)
        .and_then(|rest| rest.strip_suffix('.'))
        .is_some_and(|label| !label.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_table() {
        use HostnameError as E;
        let long_label = "a".repeat(64);
        let labels_300 = vec!["a"; 300].join(".");
        let chars_254 = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(62)
        );
        let chars_253 = &chars_254[1..];
        let cases: &[(&str, Wildcard, Result<(), E>)] = &[
            ("foo.example.com", Wildcard::Refused, Ok(())),
            ("Foo.Example.COM", Wildcard::Refused, Ok(())),
            ("a-b.c0", Wildcard::Refused, Ok(())),
            ("localhost", Wildcard::Refused, Ok(())),
            ("*.example.com", Wildcard::Allowed, Ok(())),
            (chars_253, Wildcard::Refused, Ok(())),
            ("*.example.com", Wildcard::Refused, Err(E::NoWildcard)),
            ("*", Wildcard::Allowed, Err(E::Wildcard)),
            ("foo.*.com", Wildcard::Allowed, Err(E::Wildcard)),
            ("*foo.com", Wildcard::Allowed, Err(E::Wildcard)),
            ("", Wildcard::Allowed, Err(E::Empty)),
            ("a\r\nb.com", Wildcard::Allowed, Err(E::Character('\r'))),
            ("a\0.com", Wildcard::Allowed, Err(E::Character('\0'))),
            ("a b.com", Wildcard::Allowed, Err(E::Character(' '))),
            ("a_b.com", Wildcard::Allowed, Err(E::Character('_'))),
            ("a:80", Wildcard::Allowed, Err(E::Character(':'))),
            (
                "caf\u{e9}.com",
                Wildcard::Allowed,
                Err(E::Character('\u{e9}')),
            ),
            ("example.com.", Wildcard::Allowed, Err(E::EmptyLabel)),
            ("a..b", Wildcard::Allowed, Err(E::EmptyLabel)),
            ("-a.com", Wildcard::Allowed, Err(E::Hyphen("-a".into()))),
            ("a-.com", Wildcard::Allowed, Err(E::Hyphen("a-".into()))),
            (
                &long_label,
                Wildcard::Allowed,
                Err(E::LabelTooLong(long_label.clone())),
            ),
            (&labels_300, Wildcard::Allowed, Err(E::TooLong(599))),
            (&chars_254, Wildcard::Refused, Err(E::TooLong(254))),
        ];
        for (host, wildcard, want) in cases {
            assert_eq!(&check(host, *wildcard), want, "{host:?}");
        }
    }

    #[test]
    fn checked_names_field_and_value() {
        assert_eq!(
            checked("RequestRedirect hostname", "a\r\nb", Wildcard::Refused),
            Err(r#"RequestRedirect hostname "a\r\nb" is not a valid hostname: '\r' is not allowed (letters, digits, '-' and '.')"#.to_string())
        );
    }

    #[test]
    fn intersection_table() {
        let cases: &[(Option<&str>, &str, Option<&str>)] = &[
            (None, "foo.example.com", Some("foo.example.com")),
            (None, "*.example.com", Some("*.example.com")),
            (None, "Foo.Example.COM", Some("foo.example.com")),
            (
                Some("foo.example.com"),
                "foo.example.com",
                Some("foo.example.com"),
            ),
            (
                Some("FOO.example.com"),
                "foo.EXAMPLE.com",
                Some("foo.example.com"),
            ),
            (Some("foo.example.com"), "bar.example.com", None),
            (
                Some("*.example.com"),
                "foo.example.com",
                Some("foo.example.com"),
            ),
            (
                Some("*.example.com"),
                "foo.bar.example.com",
                Some("foo.bar.example.com"),
            ),
            (Some("*.example.com"), "example.com", None),
            (Some("*.example.com"), "fooexample.com", None),
            (
                Some("foo.example.com"),
                "*.example.com",
                Some("foo.example.com"),
            ),
            (
                Some("a.b.example.com"),
                "*.example.com",
                Some("a.b.example.com"),
            ),
            (Some("example.com"), "*.example.com", None),
            (
                Some("*.example.com"),
                "*.example.com",
                Some("*.example.com"),
            ),
            (
                Some("*.example.com"),
                "*.foo.example.com",
                Some("*.foo.example.com"),
            ),
            (
                Some("*.foo.example.com"),
                "*.example.com",
                Some("*.foo.example.com"),
            ),
            (Some("*.example.com"), "*.example.org", None),
            (Some("*.example.com"), "*.myexample.com", None),
        ];
        for (listener, route, want) in cases {
            assert_eq!(
                intersect(*listener, route).as_deref(),
                *want,
                "listener {listener:?} route {route}"
            );
        }
    }

    #[test]
    fn isolation_table() {
        let siblings = [
            None,
            Some("*.example.com"),
            Some("*.foo.example.com"),
            Some("abc.foo.example.com"),
        ];
        let on = |listener: Option<&str>, hosts: &[&str]| {
            let served = hosts.iter().map(|h| h.to_string()).collect();
            isolate(served, listener, siblings.iter().copied())
        };
        // The catch-all listener keeps only what no other listener claims.
        assert_eq!(
            on(
                None,
                &[
                    "bar.com",
                    "x.example.com",
                    "*.example.com",
                    "abc.foo.example.com"
                ]
            ),
            vec!["bar.com"]
        );
        // *.example.com gives up names under *.foo.example.com and the exact listener.
        assert_eq!(
            on(
                Some("*.example.com"),
                &[
                    "x.example.com",
                    "x.foo.example.com",
                    "*.foo.example.com",
                    "abc.foo.example.com"
                ]
            ),
            vec!["x.example.com"]
        );
        assert_eq!(
            on(
                Some("*.foo.example.com"),
                &["x.foo.example.com", "abc.foo.example.com"]
            ),
            vec!["x.foo.example.com"]
        );
        assert_eq!(
            on(Some("abc.foo.example.com"), &["abc.foo.example.com"]),
            vec!["abc.foo.example.com"]
        );
    }

    #[test]
    fn specificity_orders_listeners() {
        assert!(specificity(None) < specificity(Some("*.com")));
        assert!(specificity(Some("*.example.com")) < specificity(Some("*.foo.example.com")));
        assert!(specificity(Some("*.foo.example.com")) < specificity(Some("example.com")));
    }

    #[test]
    fn routes_without_hostnames_take_the_listeners() {
        assert_eq!(served_hostnames(None, &[]), vec!["*"]);
        assert_eq!(
            served_hostnames(Some("*.Example.com"), &[]),
            vec!["*.example.com"]
        );
    }

    #[test]
    fn served_hostnames_are_sorted_deduplicated_and_may_be_empty() {
        let hosts = vec![
            "b.example.com".to_string(),
            "A.example.com".to_string(),
            "a.example.com".to_string(),
            "other.org".to_string(),
        ];
        assert_eq!(
            served_hostnames(Some("*.example.com"), &hosts),
            vec!["a.example.com", "b.example.com"]
        );
        assert!(served_hostnames(Some("x.org"), &hosts).is_empty());
    }
}
