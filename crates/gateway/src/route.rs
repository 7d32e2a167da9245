//! The route model shared by HTTPRoute and GRPCRoute.
//!
//! Both kinds are read into one [`RouteModel`]: defaulted parentRefs, lower-cased
//! hostnames, and rules whose matches are already IR matches and whose backends
//! are already clusters. What depends on the listener (hostnames served, the
//! redirect port) is decided later, when routes are placed into route tables.
//!
//! A rule that cannot be served (an invalid regex, an unsupported filter, a
//! header name or value Envoy would refuse, weights that do not fit) is dropped
//! with a message: some rules dropped → `PartiallyInvalid`, all dropped →
//! `Accepted=False`, both with reason `UnsupportedValue`. An invalid hostname
//! makes the whole route `Accepted=False/UnsupportedValue`: dropping only that
//! hostname could leave a route without hostnames, which serves every host.

use crate::backend::{BackendError, BackendRef, Backends, Upstream};
use crate::header;
use crate::hostname::{self, Wildcard};
use crate::precedence::RouteOrigin;
use crate::status::{Condition, Identity, ParentReference, RouteCondition, set_condition};
use crate::vocabulary::route::{Reason, Type};
use aether_ir::{
    Cluster, Cors, HeaderModifier, ObjectRef, PathMatch, PathRewrite, QueryParamMatch, Retry,
    RouteKind, RouteMatch, StringMatch, Timeouts, UrlRewrite,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One HTTPRoute or GRPCRoute, read.
#[derive(Debug, Clone)]
pub struct RouteModel {
    /// `Kind/namespace/name` ([`names::route_key`](aether_ir::names::route_key)),
    /// made once per model: listener statuses list it for every change.
    pub name: Arc<str>,
    /// uid and generation: whose status this route's is.
    pub of: Identity,
    /// Its kind, key and creation time ([`RouteModel::kind`],
    /// [`RouteModel::key`]): what orders it after its rivals of equal
    /// precedence, shared by every precedence entry of it.
    pub origin: Arc<RouteOrigin>,
    /// Lower-cased, as given; the valid ones only.
    pub hostnames: Vec<String>,
    /// Why other hostnames are not valid (the route is then not accepted).
    pub invalid_hostnames: Vec<String>,
    /// Shared with the statuses on each parent.
    pub parent_refs: Vec<Arc<ParentReference>>,
    /// The valid rules only.
    pub rules: Vec<Rule>,
    /// Why other rules were dropped.
    pub invalid_rules: Vec<String>,
    /// Every backendRef that did not resolve, in rule and ref order.
    pub backend_errors: Vec<BackendError>,
    /// Rules that did not decode (see `lenient.rs`), by index: why.
    pub undecodable: BTreeMap<usize, String>,
}

#[derive(Debug, Clone)]
pub struct Rule {
    /// The rule's position in the route (for names and precedence).
    pub index: usize,
    /// At least one (no matches = PathPrefix `/`).
    pub matches: Vec<RouteMatch>,
    pub request_headers: HeaderModifier,
    pub response_headers: HeaderModifier,
    pub action: RuleAction,
}

#[derive(Debug, Clone)]
pub enum RuleAction {
    /// Forward to the valid backends; an empty list with no invalid weight (no
    /// backendRefs, or all weights 0) answers 500 like all-invalid.
    Forward(ForwardSpec),
    Redirect(RedirectSpec),
}

/// A forwarding rule: its valid backends and what happens on the way to them.
#[derive(Debug, Clone, Default)]
pub struct ForwardSpec {
    pub backends: Vec<(Arc<Cluster>, u32)>,
    pub invalid_weight: u32,
    /// The header filters of each entry of `backends`, in the same order;
    /// empty when no backendRef has any.
    pub backend_headers: Vec<(HeaderModifier, HeaderModifier)>,
    pub rewrite: Option<Box<UrlRewrite>>,
    pub timeouts: Timeouts,
    pub retry: Option<Box<Retry>>,
    /// RequestMirror filters whose backend resolved: the cluster and the
    /// mirrored share (numerator, denominator).
    pub mirrors: Vec<Mirror>,
    pub cors: Option<Box<Cors>>,
    /// The rule's own `sessionPersistence` (HTTPRoute); an XBackend's comes
    /// with its cluster.
    pub session: Option<Box<aether_ir::SessionPersistence>>,
    /// TLSRoute only: the backends and the invalid weight as a Terminate
    /// listener sends to them (TLS again where a BackendTLSPolicy says so);
    /// `None` when they are `backends` and `invalid_weight` as they are.
    pub terminated: Option<Box<ResolvedBackends>>,
}

/// A RequestMirror filter whose backend resolved: the cluster and the
/// mirrored share (numerator, denominator), if not all.
pub type Mirror = (Arc<Cluster>, Option<(u32, u32)>);

/// A RequestRedirect filter before the port rules (which need the listener).
#[derive(Debug, Clone)]
pub struct RedirectSpec {
    pub scheme: Option<String>,
    pub hostname: Option<String>,
    pub port: Option<u16>,
    pub path: Option<PathRewrite>,
    pub status_code: u16,
}

/// A route's parentRefs with group and kind defaulted, as status echoes them.
/// (HTTPRoute and GRPCRoute have distinct generated types with the same fields.)
#[macro_export]
macro_rules! parent_references {
    ($refs:expr) => {
        $refs
            .iter()
            .flatten()
            .map(|p| {
                $crate::status::ParentReference::defaulted(
                    p.group.as_deref(),
                    p.kind.as_deref(),
                    p.namespace.as_deref(),
                    &p.name,
                    p.section_name.as_deref(),
                    p.port,
                )
            })
            .collect::<Vec<_>>()
    };
}
pub use crate::parent_references;

/// A rule's backendRefs as ([`BackendRef`], weight) pairs: every route kind's
/// generated backendRef type has these fields.
macro_rules! backend_refs {
    ($refs:expr) => {
        $refs.iter().map(|b| $crate::route::backend_ref!(b))
    };
}
pub(crate) use backend_refs;

/// One backendRef (of any route kind's generated type) as ([`BackendRef`], weight).
macro_rules! backend_ref {
    ($b:expr) => {
        (
            $crate::backend::BackendRef {
                group: $b.group.as_deref(),
                kind: $b.kind.as_deref(),
                name: &$b.name,
                namespace: $b.namespace.as_deref(),
                port: $b.port,
            },
            $b.weight,
        )
    };
}
pub(crate) use backend_ref;

impl RouteModel {
    /// A route with no rules read yet.
    pub fn new(
        kind: RouteKind,
        key: ObjectRef,
        meta: &ObjectMeta,
        hostnames: Option<&Vec<String>>,
        parent_refs: Vec<ParentReference>,
    ) -> Self {
        let mut valid = Vec::new();
        let mut invalid_hostnames = Vec::new();
        for (i, h) in hostnames.into_iter().flatten().enumerate() {
            match hostname::checked(&format!("spec.hostnames[{i}]"), h, Wildcard::Allowed) {
                Ok(()) => valid.push(h.to_ascii_lowercase()),
                Err(why) => invalid_hostnames.push(why),
            }
        }
        RouteModel {
            name: aether_ir::names::route_key(kind, &key.namespace, &key.name).into(),
            of: Identity::of(meta),
            origin: Arc::new(RouteOrigin {
                created: meta.creation_timestamp.clone(),
                route: key,
                kind,
            }),
            hostnames: valid,
            invalid_hostnames,
            parent_refs: parent_refs.into_iter().map(Arc::new).collect(),
            rules: vec![],
            invalid_rules: vec![],
            backend_errors: vec![],
            undecodable: crate::lenient::dropped_rules(meta.annotations.as_ref()),
        }
    }

    /// HTTPRoute, GRPCRoute, TLSRoute, ...
    pub fn kind(&self) -> RouteKind {
        self.origin.kind
    }

    /// Its namespace and name.
    pub fn key(&self) -> &ObjectRef {
        &self.origin.route
    }

    /// Older first: by creationTimestamp (none last), then namespace/name.
    pub fn age(&self) -> (bool, Option<&Time>, &ObjectRef) {
        let created = self.origin.created.as_ref();
        (created.is_none(), created, self.key())
    }

    /// Drops the spare capacity of its lists: a cache keeps thousands of
    /// models, each list grown by pushes to four slots or more.
    pub fn shrink_to_fit(&mut self) {
        self.hostnames.shrink_to_fit();
        self.invalid_hostnames.shrink_to_fit();
        self.parent_refs.shrink_to_fit();
        self.rules.shrink_to_fit();
        for rule in &mut self.rules {
            rule.matches.shrink_to_fit();
        }
        self.invalid_rules.shrink_to_fit();
        self.backend_errors.shrink_to_fit();
    }

    /// Reads every rule (a missing or empty list is one catch-all rule, as the API
    /// server defaults it), keeping the valid ones and why the others were dropped.
    pub fn read_rules<R: Default>(
        &mut self,
        rules: Option<&Vec<R>>,
        mut read: impl FnMut(&str, usize, &R, &mut Vec<BackendError>) -> Result<Rule, String>,
    ) {
        let default_rules = vec![R::default()];
        let rules = rules.filter(|r| !r.is_empty()).unwrap_or(&default_rules);
        // Exactly: a pushed-to Vec of 400-byte rules starts at four.
        self.rules.reserve_exact(rules.len());
        for (index, spec) in rules.iter().enumerate() {
            if let Some(why) = self.undecodable.get(&index) {
                self.invalid_rules.push(format!("rule {index}: {why}"));
                continue;
            }
            let namespace = &self.origin.route.namespace;
            match read(namespace, index, spec, &mut self.backend_errors) {
                Ok(rule) => self.rules.push(rule),
                Err(why) => self.invalid_rules.push(format!("rule {index}: {why}")),
            }
        }
    }

    /// Accepted/ResolvedRefs/PartiallyInvalid for a parent where the route
    /// attached (listener checks passed). Returns the conditions and whether the
    /// route is Accepted there.
    pub fn attached_conditions(&self) -> (Vec<RouteCondition>, bool) {
        let g = self.of.generation;
        let mut c = Vec::new();
        let refused = if !self.invalid_hostnames.is_empty() {
            Some(self.invalid_hostnames.join("; "))
        } else if self.rules.is_empty() && !self.invalid_rules.is_empty() {
            Some(format!("no valid rules: {}", self.invalid_rules.join("; ")))
        } else {
            None
        };
        let accepted = refused.is_none();
        if let Some(message) = refused {
            set_condition(
                &mut c,
                Condition::new(Type::Accepted, false, Reason::UnsupportedValue, message, g),
            );
        } else {
            set_condition(
                &mut c,
                Condition::new(
                    Type::Accepted,
                    true,
                    Reason::Accepted,
                    "route is accepted",
                    g,
                ),
            );
            if !self.invalid_rules.is_empty() {
                set_condition(
                    &mut c,
                    Condition::new(
                        Type::PartiallyInvalid,
                        true,
                        Reason::UnsupportedValue,
                        // The spec: the message starts with "Dropped Rule".
                        format!(
                            "Dropped Rule{}: {}",
                            if self.invalid_rules.len() == 1 {
                                ""
                            } else {
                                "s"
                            },
                            self.invalid_rules.join("; ")
                        ),
                        g,
                    ),
                );
            }
        }
        set_condition(&mut c, self.resolved_refs());
        (c, accepted)
    }

    /// ResolvedRefs: the first failing backendRef's reason, every failure in the message.
    pub fn resolved_refs(&self) -> RouteCondition {
        let kind = (Type::ResolvedRefs, Reason::ResolvedRefs);
        let message = |e: &crate::backend::BackendError| e.to_string();
        let g = self.of.generation;
        crate::status::resolved_refs(kind, &self.backend_errors, |e| e.reason(), message, g)
    }
}

/// A rule's backends: the valid ones with their weights (weight 0 dropped) and
/// the summed weight of the invalid ones.
pub type ResolvedBackends = (Vec<(Arc<Cluster>, u32)>, u32);

/// [`ResolvedBackends`], each valid backend with its backendRef's payload.
pub type ResolvedWith<P> = (Vec<(Arc<Cluster>, u32, P)>, u32);

/// Resolves a rule's backendRefs, errors appended to `errors`. `Err`: the rule
/// is invalid, a weight is negative or the weights sum past `u32::MAX` (Envoy
/// refuses the route table).
pub fn resolve_backends<'a>(
    backends: &Backends<'_>,
    kind: RouteKind,
    route_ns: &str,
    refs: impl Iterator<Item = (BackendRef<'a>, Option<i32>)>,
    upstream: Upstream,
    errors: &mut Vec<BackendError>,
) -> Result<ResolvedBackends, String> {
    let refs = refs.map(|(r, w)| (r, w, ()));
    let (valid, invalid_weight) =
        resolve_backends_with(backends, kind, route_ns, refs, upstream, errors)?;
    Ok((
        valid.into_iter().map(|(c, w, ())| (c, w)).collect(),
        invalid_weight,
    ))
}

/// [`resolve_backends`], each backendRef carrying a payload (its filters) that
/// stays with it when it resolves.
pub fn resolve_backends_with<'a, P>(
    backends: &Backends<'_>,
    kind: RouteKind,
    route_ns: &str,
    refs: impl Iterator<Item = (BackendRef<'a>, Option<i32>, P)>,
    upstream: Upstream,
    errors: &mut Vec<BackendError>,
) -> Result<ResolvedWith<P>, String> {
    let refs: Vec<(BackendRef<'a>, u32, P)> = refs
        .enumerate()
        .map(|(i, (r, weight, payload))| {
            let weight = weight.unwrap_or(1);
            u32::try_from(weight)
                .map(|w| (r, w, payload))
                .map_err(|_| format!("backendRefs[{i}] weight {weight} is negative"))
        })
        .collect::<Result<_, _>>()?;
    let total: u64 = refs.iter().map(|(_, w, _)| u64::from(*w)).sum();
    if total > u64::from(u32::MAX) {
        return Err(format!(
            "backendRefs weights sum to {total}, more than {}",
            u32::MAX
        ));
    }
    let mut valid = Vec::with_capacity(refs.len());
    let mut invalid_weight = 0u32;
    for (r, weight, payload) in refs {
        match backends.resolve(kind, route_ns, r, upstream) {
            Ok(cluster) if weight > 0 => valid.push((cluster, weight, payload)),
            Ok(_) => {}
            Err(e) => {
                invalid_weight += weight;
                errors.push(e);
            }
        }
    }
    // Envoy picks one of a rule's backends before a session can steer the
    // request: a session to one of several backends would not hold.
    if valid.len() > 1
        && let Some((c, ..)) = valid.iter().find(|(c, ..)| c.session.is_some())
    {
        return Err(format!(
            "backendRefs split requests between {} backends and XBackend {} has \
             sessionPersistence, which cannot hold when the backend is picked per \
             request: give it a rule of its own",
            valid.len(),
            c.service
        ));
    }
    Ok((valid, invalid_weight))
}

/// Checks a regular expression the way Envoy's RE2 reads it (see `re2.rs`).
pub fn check_regex(what: &str, re: &str) -> Result<(), String> {
    crate::re2::check(re).map_err(|e| format!("{what} regular expression {re:?} is invalid: {e}"))
}

/// A PathPrefix value, element-wise: trailing slashes dropped except for `/`.
pub fn prefix(value: &str) -> PathMatch {
    let trimmed = value.trim_end_matches('/');
    PathMatch::Prefix(if trimmed.is_empty() {
        "/".into()
    } else {
        trimmed.into()
    })
}

pub fn string_match(what: &str, regex: bool, value: &str) -> Result<StringMatch, String> {
    if regex {
        check_regex(what, value)?;
        Ok(StringMatch::RegularExpression(value.to_string()))
    } else {
        Ok(StringMatch::Exact(value.to_string()))
    }
}

/// Query param matches: names exact (case-sensitive), first of duplicates kept.
pub fn query_param_matches<'a>(
    params: impl Iterator<Item = (&'a str, bool, &'a str)>,
) -> Result<Vec<QueryParamMatch>, String> {
    let mut out: Vec<QueryParamMatch> = Vec::new();
    for (name, regex, value) in params {
        // The API types the name as an HTTPHeaderName.
        header::check_name("query param match name", name).map_err(|e| e.to_string())?;
        if out.iter().any(|q| q.name == name) {
            continue;
        }
        // The API's HTTPQueryParamMatch.value.
        const MAX_VALUE_BYTES: usize = 1024;
        if value.len() > MAX_VALUE_BYTES {
            return Err(format!(
                "query param {name} value is {} bytes long; at most {MAX_VALUE_BYTES} are allowed",
                value.len()
            ));
        }
        let value = string_match(&format!("query param {name}"), regex, value)?;
        out.push(QueryParamMatch {
            name: name.to_string(),
            value,
        });
    }
    Ok(out)
}

/// The matched prefix can only be replaced when every match is a PathPrefix.
pub fn check_prefix_rewrite(
    matches: &[RouteMatch],
    path: Option<&PathRewrite>,
) -> Result<(), String> {
    if matches!(path, Some(PathRewrite::ReplacePrefixMatch(_)))
        && matches
            .iter()
            .any(|m| !matches!(m.path, PathMatch::Prefix(_)))
    {
        return Err("ReplacePrefixMatch needs PathPrefix matches".into());
    }
    Ok(())
}

/// The serialized name of a generated enum value (`GET`, `https`, `Exact`).
pub fn enum_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_element_wise() {
        assert_eq!(prefix("/"), PathMatch::Prefix("/".into()));
        assert_eq!(prefix("/abc/"), PathMatch::Prefix("/abc".into()));
        assert_eq!(prefix("/abc//"), PathMatch::Prefix("/abc".into()));
        assert_eq!(prefix("/abc"), PathMatch::Prefix("/abc".into()));
    }

    #[test]
    fn query_param_names_are_tokens() {
        let one = |name| query_param_matches([(name, false, "1")].into_iter());
        assert!(one("page").is_ok());
        assert_eq!(
            one("a b").unwrap_err(),
            r#"query param match name "a b" is not an HTTP token: ' ' is not allowed"#
        );
        assert!(one("").is_err());
    }

    #[test]
    fn weights_are_not_negative_and_fit_u32() {
        let store = crate::Store::default();
        let backends = Backends::new(&store);
        let resolve = |weights: &[Option<i32>]| {
            let refs = weights.iter().map(|w| {
                let r = BackendRef {
                    group: None,
                    kind: None,
                    name: "missing",
                    namespace: None,
                    port: Some(80),
                };
                (r, *w)
            });
            let mut errors = Vec::new();
            let got = resolve_backends(
                &backends,
                RouteKind::Http,
                "apps",
                refs,
                Upstream::Http,
                &mut errors,
            );
            (got, errors.len())
        };
        assert_eq!(
            resolve(&[Some(-1)]),
            (Err("backendRefs[0] weight -1 is negative".into()), 0)
        );
        assert_eq!(
            resolve(&[Some(1), Some(i32::MIN)]).0,
            Err(format!("backendRefs[1] weight {} is negative", i32::MIN))
        );
        let max = Some(i32::MAX);
        assert_eq!(
            resolve(&[max, max, Some(2)]),
            (
                Err("backendRefs weights sum to 4294967296, more than 4294967295".into()),
                0
            )
        );
        // Exactly u32::MAX fits (all invalid here: their share answers 500).
        assert_eq!(resolve(&[max, max, Some(1)]), (Ok((vec![], u32::MAX)), 3));
        assert_eq!(resolve(&[None, Some(0)]), (Ok((vec![], 1)), 2));
    }
}
