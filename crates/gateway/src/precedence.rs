//! Gateway API route precedence, as one sort key.
//!
//! Envoy takes the first route of a virtual host that matches, so every match of
//! every rule of every route sharing the virtual host is sorted by one key
//! (HTTPRouteRule.Matches in the spec):
//!
//! ```text
//!  0. the route's own hostname that gave this virtual host: exact before
//!     wildcard, then longer first (see `hostname::route_hostname_rank`)
//!  1. path type: Exact < PathPrefix < RegularExpression
//!  2. longer path value first (characters)
//!  3. a method match before none
//!  4. more header matches first
//!  5. more query param matches first
//!  ── ties ──
//!  6. older route (creationTimestamp; a route without one sorts after all that have one)
//!  7. namespace/name alphabetically (then kind)
//!  8. rule order within the route, then match order within the rule
//! ```
//!
//! Regular expressions cannot be ordered by specificity; they go after exact and
//! prefix matches, as other implementations do.

use aether_ir::{ObjectRef, PathMatch, RouteKind, RouteMatch};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::cmp::Reverse;
use std::sync::Arc;

/// Which route a match comes from, for the tie-breaks.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RouteOrigin {
    /// `None` sorts after every timestamp.
    pub created: Option<Time>,
    pub route: ObjectRef,
    /// GRPCRoute or HTTPRoute.
    pub kind: RouteKind,
}

/// Smaller sorts first (higher precedence).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Precedence {
    hostname: Reverse<(bool, usize)>,
    path_type: u8,
    path_len: Reverse<usize>,
    has_method: Reverse<bool>,
    headers: Reverse<usize>,
    query_params: Reverse<usize>,
    created_missing: bool,
    /// Shared with the route's model (compared by value).
    origin: Arc<RouteOrigin>,
    rule: usize,
    match_index: usize,
}

impl Precedence {
    /// `hostname`: the rank of the route's own hostname on this virtual host
    /// (`hostname::route_hostname_rank`).
    pub fn new(
        hostname: (bool, usize),
        m: &RouteMatch,
        origin: Arc<RouteOrigin>,
        rule: usize,
        match_index: usize,
    ) -> Self {
        let (path_type, path_len) = match &m.path {
            PathMatch::Exact(p) => (0, p.len()),
            PathMatch::Prefix(p) => (1, p.len()),
            PathMatch::RegularExpression(p) => (2, p.len()),
        };
        Precedence {
            hostname: Reverse(hostname),
            path_type,
            path_len: Reverse(path_len),
            has_method: Reverse(m.method.is_some()),
            headers: Reverse(m.headers.len()),
            query_params: Reverse(m.query_params.len()),
            created_missing: origin.created.is_none(),
            origin,
            rule,
            match_index,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aether_ir::{HeaderMatch, QueryParamMatch, StringMatch};

    fn m(path: PathMatch) -> RouteMatch {
        RouteMatch {
            path,
            method: None,
            headers: vec![],
            query_params: vec![],
        }
    }

    fn origin(ns: &str, name: &str, created: Option<&str>) -> Arc<RouteOrigin> {
        Arc::new(RouteOrigin {
            created: created.map(|t| Time(t.parse().unwrap())),
            route: ObjectRef::new(ns, name),
            kind: RouteKind::Http,
        })
    }

    /// One hostname rank for every key that is not about hostnames.
    const H: (bool, usize) = (true, 11);

    fn key(m: &RouteMatch) -> Precedence {
        Precedence::new(H, m, origin("a", "r", None), 0, 0)
    }

    fn header(n: &str) -> HeaderMatch {
        HeaderMatch {
            name: n.into(),
            value: StringMatch::Exact("v".into()),
        }
    }

    #[test]
    fn match_specificity_table() {
        // Each pair: (higher precedence, lower precedence).
        let exact = m(PathMatch::Exact("/a".into()));
        let long_prefix = m(PathMatch::Prefix("/a/b/c".into()));
        let short_prefix = m(PathMatch::Prefix("/a".into()));
        let regex = m(PathMatch::RegularExpression("/a/.*/b/c/d/e".into()));
        let mut with_method = short_prefix.clone();
        with_method.method = Some("GET".into());
        let mut two_headers = short_prefix.clone();
        two_headers.headers = vec![header("x"), header("y")];
        let mut one_header = short_prefix.clone();
        one_header.headers = vec![header("x")];
        let mut one_query = short_prefix.clone();
        one_query.query_params = vec![QueryParamMatch {
            name: "q".into(),
            value: StringMatch::Exact("1".into()),
        }];
        let mut method_only = short_prefix.clone();
        method_only.method = Some("GET".into());
        let mut headers_no_method = short_prefix.clone();
        headers_no_method.headers = vec![header("a"), header("b"), header("c")];
        let pairs = [
            (&exact, &long_prefix, "exact before any prefix"),
            (&long_prefix, &short_prefix, "longer prefix first"),
            (&short_prefix, &regex, "prefix before regex"),
            (&exact, &regex, "exact before regex"),
            (&with_method, &short_prefix, "method before none"),
            (
                &method_only,
                &headers_no_method,
                "method outranks header count",
            ),
            (&two_headers, &one_header, "more headers first"),
            (&one_header, &one_query, "headers outrank query params"),
            (&one_query, &short_prefix, "more query params first"),
        ];
        for (hi, lo, why) in pairs {
            assert!(key(hi) < key(lo), "{why}");
        }
    }

    #[test]
    fn tie_breaks_table() {
        let p = m(PathMatch::Prefix("/".into()));
        let old = Precedence::new(H, &p, origin("z", "z", Some("2020-01-01T00:00:00Z")), 0, 0);
        let new = Precedence::new(H, &p, origin("a", "a", Some("2021-01-01T00:00:00Z")), 0, 0);
        let none = Precedence::new(H, &p, origin("a", "a", None), 0, 0);
        assert!(old < new, "older route first, whatever its name");
        assert!(new < none, "a route without timestamp goes last");
        let a = Precedence::new(H, &p, origin("ns", "a", None), 5, 5);
        let b = Precedence::new(H, &p, origin("ns", "b", None), 0, 0);
        assert!(a < b, "namespace/name before rule order");
        let r0 = Precedence::new(H, &p, origin("ns", "a", None), 0, 1);
        let r1 = Precedence::new(H, &p, origin("ns", "a", None), 1, 0);
        assert!(r0 < r1, "rule order, then match order");
        let m0 = Precedence::new(H, &p, origin("ns", "a", None), 1, 0);
        assert!(m0 < Precedence::new(H, &p, origin("ns", "a", None), 1, 1));
    }

    #[test]
    fn the_routes_own_hostname_outranks_the_match_and_the_age() {
        use crate::hostname::route_hostname_rank;
        let listener = Some("abc.example.com");
        let exact = route_hostname_rank("abc.example.com", listener, &["abc.example.com".into()]);
        let wild = route_hostname_rank("abc.example.com", listener, &["*.example.com".into()]);
        let old = origin("ns", "old", Some("2020-01-01T00:00:00Z"));
        let new = origin("ns", "new", Some("2021-01-01T00:00:00Z"));
        let short = m(PathMatch::Prefix("/path".into()));
        let long = m(PathMatch::Prefix("/path/prefix".into()));
        assert!(
            Precedence::new(exact, &short, new.clone(), 0, 0)
                < Precedence::new(wild, &long, old.clone(), 0, 0),
            "an exact route hostname before a wildcard one, whatever the path or age"
        );
        // On a `*.example.com` listener both serve `*.example.com`.
        let wider = route_hostname_rank("*.example.com", Some("*.example.com"), &["*.com".into()]);
        let narrower = route_hostname_rank(
            "*.example.com",
            Some("*.example.com"),
            &["*.example.com".into()],
        );
        assert!(narrower > wider, "the longer wildcard is more specific");
        // Without hostnames a route counts as naming what it serves: the same
        // rank as a route naming it exactly, so the match decides between them.
        assert_eq!(route_hostname_rank("abc.example.com", listener, &[]), exact);
        // Of a route's hostnames, the most specific one that gives the host.
        let both = route_hostname_rank(
            "abc.example.com",
            listener,
            &[
                "*.example.com".into(),
                "abc.example.com".into(),
                "x.example.org".into(),
            ],
        );
        assert_eq!(both, exact);
    }
}
