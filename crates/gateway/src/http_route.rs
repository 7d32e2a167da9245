//! HTTPRoute → [`RouteModel`]: matches, filters and backends of each rule.
//!
//! Filters are read in `http_filters.rs`; one we do not serve (ExtensionRef)
//! makes its rule invalid rather than silently ignored. `sessionPersistence`
//! maps as an XBackend's does (`xbackend/session.rs`: Envoy's stateful
//! session), on a rule with one backend. `timeouts` and `retry.backoff` are
//! Gateway API durations (`duration.rs`).
//! Paths, header names and values, and hostnames in them are checked as Envoy
//! would (see `header.rs`, `hostname.rs`): a bad one drops the rule.

use crate::backend::{Backends, Upstream};
use crate::duration;
use crate::header::{check_match_path, header_matches};
use crate::http_filters::{RuleFilters, backend_filters, rule_rewrite};
use crate::route::{
    self, ForwardSpec, RouteModel, Rule, RuleAction, check_prefix_rewrite, enum_name,
    query_param_matches,
};
use aether_ir::{
    Cluster, Cors, ObjectRef, PathMatch, Retry, RouteMatch, SessionPersistence, Timeouts,
    UrlRewrite,
};
use gateway_api::apis::experimental::httproutes::{
    HttpRoute, HttpRouteRules, HttpRouteRulesMatches, HttpRouteRulesMatchesHeadersType,
    HttpRouteRulesMatchesPathType, HttpRouteRulesMatchesQueryParamsType, HttpRouteRulesRetry,
    HttpRouteRulesSessionPersistence, HttpRouteRulesTimeouts,
};
use std::sync::Arc;

pub const KIND: aether_ir::RouteKind = aether_ir::RouteKind::Http;

pub fn model(backends: &Backends<'_>, key: ObjectRef, r: &HttpRoute) -> RouteModel {
    let parents = route::parent_references!(r.spec.parent_refs);
    let name = key.name.clone();
    let mut m = RouteModel::new(KIND, key, &r.metadata, r.spec.hostnames.as_ref(), parents);
    m.read_rules(r.spec.rules.as_ref(), |ns, index, spec, errors| {
        rule(backends, (ns, &name), index, spec, errors)
    });
    m
}

fn rule(
    backends: &Backends<'_>,
    (ns, name): (&str, &str),
    index: usize,
    spec: &HttpRouteRules,
    errors: &mut Vec<crate::backend::BackendError>,
) -> Result<Rule, String> {
    let matches = match spec.matches.as_deref() {
        None | Some([]) => vec![catch_all()],
        Some(ms) => ms.iter().map(route_match).collect::<Result<_, _>>()?,
    };
    let session = spec
        .session_persistence
        .as_ref()
        .map(|sp| rule_session(ns, name, index, sp))
        .transpose()?;
    let mut filters = RuleFilters::default();
    for f in spec.filters.iter().flatten() {
        filters.apply(f, backends, ns, errors)?;
    }
    let RuleFilters {
        request_headers,
        response_headers,
        redirect,
        rewrite,
        mirrors,
        cors,
    } = filters;
    let action = match (redirect, rewrite) {
        (Some(_), Some(_)) => {
            return Err("RequestRedirect and URLRewrite cannot be combined".into());
        }
        (Some(r), None) => {
            check_prefix_rewrite(&matches, r.path.as_ref())?;
            RuleAction::Redirect(r)
        }
        (None, rewrite) => {
            let forwarding = Forwarding {
                matches: &matches,
                rewrite,
                mirrors,
                cors,
                session,
            };
            RuleAction::Forward(forward(backends, ns, spec, forwarding, errors)?)
        }
    };
    Ok(Rule {
        index,
        matches,
        request_headers,
        response_headers,
        action,
    })
}

/// What a forwarding rule takes from its matches, its filters and its
/// sessionPersistence.
struct Forwarding<'a> {
    matches: &'a [RouteMatch],
    rewrite: Option<UrlRewrite>,
    mirrors: Vec<route::Mirror>,
    cors: Option<Cors>,
    session: Option<SessionPersistence>,
}

/// A rule that forwards: its backendRefs resolved (each with its own header
/// filters), with the rule's rewrite, timeouts, retry, mirrors, CORS and
/// session.
fn forward(
    backends: &Backends<'_>,
    ns: &str,
    spec: &HttpRouteRules,
    forwarding: Forwarding<'_>,
    errors: &mut Vec<crate::backend::BackendError>,
) -> Result<ForwardSpec, String> {
    let Forwarding {
        matches,
        rewrite,
        mirrors,
        cors,
        session,
    } = forwarding;
    let refs = spec.backend_refs.as_deref().unwrap_or_default();
    let with_filters = refs
        .iter()
        .enumerate()
        .map(|(i, b)| backend_filters(i, b))
        .collect::<Result<Vec<_>, String>>()?;
    let rewrite = rule_rewrite(rewrite, &with_filters)?;
    check_prefix_rewrite(
        matches,
        rewrite.as_ref().and_then(|r: &UrlRewrite| r.path.as_ref()),
    )?;
    let refs = refs.iter().zip(&with_filters).map(|(b, f)| {
        let (r, weight) = route::backend_ref!(b);
        (
            r,
            weight,
            (f.request_headers.clone(), f.response_headers.clone()),
        )
    });
    let (valid, invalid_weight) =
        route::resolve_backends_with(backends, KIND, ns, refs, Upstream::Http, errors)?;
    if session.is_some() {
        check_rule_session(&valid)?;
    }
    let any_headers = valid
        .iter()
        .any(|(_, _, (rq, rs))| !rq.is_empty() || !rs.is_empty());
    let mut forward = ForwardSpec {
        invalid_weight,
        rewrite: rewrite.map(Box::new),
        timeouts: timeouts(spec.timeouts.as_deref())?,
        retry: spec.retry.as_deref().map(retry).transpose()?.map(Box::new),
        mirrors,
        cors: cors.map(Box::new),
        session: session.map(Box::new),
        ..ForwardSpec::default()
    };
    forward.backends.reserve_exact(valid.len());
    for (cluster, weight, headers) in valid {
        forward.backends.push((cluster, weight));
        if any_headers {
            forward.backend_headers.push(headers);
        }
    }
    Ok(forward)
}

/// A rule's `sessionPersistence` (the same API type as an XBackend's); the
/// default cookie name is the rule's own.
fn rule_session(
    ns: &str,
    name: &str,
    index: usize,
    sp: &HttpRouteRulesSessionPersistence,
) -> Result<SessionPersistence, String> {
    let sp = serde_json::to_value(sp)
        .and_then(serde_json::from_value)
        .map_err(|e| format!("sessionPersistence: {e}"))?;
    let of = ObjectRef::new(ns, format!("{KIND}/{name}/rule/{index}"));
    crate::xbackend::session::session(&of, &sp).map_err(|(_, why)| why)
}

/// A rule's session holds only on its one backend (Envoy picks the backend
/// before the session can steer), and only one session may steer it.
fn check_rule_session<P>(valid: &[(Arc<Cluster>, u32, P)]) -> Result<(), String> {
    match valid {
        [(c, ..)] if c.session.is_some() => Err(format!(
            "sessionPersistence is set on the rule and on its XBackend {}: one of them must go",
            c.service
        )),
        [] | [_] => Ok(()),
        more => Err(format!(
            "sessionPersistence cannot hold on a rule that splits requests between {} \
             backends (Envoy picks the backend before the session)",
            more.len()
        )),
    }
}

/// `retry`: codes among the 4xx/5xx the spec allows, attempts 0 or more (the
/// API sets no maximum; 0 disables retries, the rule's and our default ones
/// alike), backoff a Gateway API duration.
fn retry(spec: &HttpRouteRulesRetry) -> Result<Retry, String> {
    let attempts = match spec.attempts {
        None => None,
        Some(n) => Some(
            u32::try_from(n)
                .map_err(|_| format!("retry.attempts {n} is not between 0 and {}", u32::MAX))?,
        ),
    };
    let mut codes = Vec::new();
    for &c in spec.codes.iter().flatten() {
        match u32::try_from(c) {
            Ok(c @ 400..=599) => codes.push(c),
            _ => return Err(format!("retry.codes {c} is not an HTTP error status")),
        }
    }
    codes.sort_unstable();
    codes.dedup();
    let backoff_ms = spec
        .backoff
        .as_deref()
        .map(|b| duration::parse_ms(b).map_err(|e| format!("retry.backoff {e}")))
        .transpose()?;
    Ok(Retry {
        attempts,
        backoff_ms,
        codes,
    })
}

/// `timeouts`: each a Gateway API duration; a backend request may not outlast
/// the request it serves.
fn timeouts(spec: Option<&HttpRouteRulesTimeouts>) -> Result<Timeouts, String> {
    let Some(spec) = spec else {
        return Ok(Timeouts::default());
    };
    let parse = |what: &str, v: Option<&String>| {
        v.map(|v| duration::parse_ms(v).map_err(|e| format!("timeouts.{what} {e}")))
            .transpose()
    };
    let t = Timeouts {
        request_ms: parse("request", spec.request.as_ref())?,
        backend_request_ms: parse("backendRequest", spec.backend_request.as_ref())?,
    };
    if let (Some(request), Some(backend)) = (t.request_ms, t.backend_request_ms)
        && request > 0
        && backend > request
    {
        return Err(format!(
            "timeouts.backendRequest ({}) must not be longer than timeouts.request ({})",
            spec.backend_request.as_deref().unwrap_or_default(),
            spec.request.as_deref().unwrap_or_default(),
        ));
    }
    Ok(t)
}

fn catch_all() -> RouteMatch {
    RouteMatch {
        path: PathMatch::Prefix("/".into()),
        method: None,
        headers: vec![],
        query_params: vec![],
    }
}

fn route_match(m: &HttpRouteRulesMatches) -> Result<RouteMatch, String> {
    let path = match &m.path {
        None => PathMatch::Prefix("/".into()),
        Some(p) => {
            let value = p.value.as_deref().unwrap_or("/");
            match p.r#type {
                Some(HttpRouteRulesMatchesPathType::Exact) => {
                    check_match_path(value, false)?;
                    PathMatch::Exact(value.into())
                }
                Some(HttpRouteRulesMatchesPathType::RegularExpression) => {
                    route::check_regex("path", value)?;
                    PathMatch::RegularExpression(value.into())
                }
                Some(HttpRouteRulesMatchesPathType::PathPrefix) | None => {
                    check_match_path(value, true)?;
                    route::prefix(value)
                }
            }
        }
    };
    let headers = header_matches(m.headers.iter().flatten().map(|h| {
        let regex = matches!(
            h.r#type,
            Some(HttpRouteRulesMatchesHeadersType::RegularExpression)
        );
        (h.name.as_str(), regex, h.value.as_str())
    }))?;
    let query_params = query_param_matches(m.query_params.iter().flatten().map(|q| {
        let regex = matches!(
            q.r#type,
            Some(HttpRouteRulesMatchesQueryParamsType::RegularExpression)
        );
        (q.name.as_str(), regex, q.value.as_str())
    }))?;
    Ok(RouteMatch {
        path,
        method: m.method.as_ref().map(enum_name),
        headers,
        query_params,
    })
}
