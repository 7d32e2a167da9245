//! HTTPRoute → [`RouteModel`]: matches, filters and backends of each rule.
//!
//! Filters: RequestHeaderModifier, ResponseHeaderModifier, RequestRedirect and
//! URLRewrite are served; any other filter (RequestMirror, CORS, ExtensionRef, or
//! a filter on a backendRef) makes its rule invalid rather than silently ignored.
//! Paths, header names and values, and hostnames in them are checked as Envoy
//! would (see `header.rs`, `hostname.rs`): a bad one drops the rule.

use crate::backend::{Backends, Upstream};
use crate::header::{check_path, header_matches, modify_headers};
use crate::hostname::{self, Wildcard};
use crate::route::{
    self, RedirectSpec, RouteModel, Rule, RuleAction, check_prefix_rewrite, enum_name,
    query_param_matches,
};
use aether_ir::{HeaderModifier, ObjectRef, PathMatch, PathRewrite, RouteMatch, UrlRewrite};
use gateway_api::apis::standard::httproutes::{
    HttpRoute, HttpRouteRules, HttpRouteRulesFilters, HttpRouteRulesFiltersRequestRedirectPathType,
    HttpRouteRulesFiltersType, HttpRouteRulesFiltersUrlRewritePathType, HttpRouteRulesMatches,
    HttpRouteRulesMatchesHeadersType, HttpRouteRulesMatchesPathType,
    HttpRouteRulesMatchesQueryParamsType,
};

pub const KIND: &str = "HTTPRoute";

pub fn model(backends: &Backends<'_>, key: ObjectRef, r: &HttpRoute) -> RouteModel {
    let parents = route::parent_references!(r.spec.parent_refs);
    let mut m = RouteModel::new(KIND, key, &r.metadata, r.spec.hostnames.as_ref(), parents);
    m.read_rules(r.spec.rules.as_ref(), |ns, index, spec, errors| {
        rule(backends, ns, index, spec, errors)
    });
    m
}

fn rule(
    backends: &Backends<'_>,
    ns: &str,
    index: usize,
    spec: &HttpRouteRules,
    errors: &mut Vec<crate::backend::BackendError>,
) -> Result<Rule, String> {
    let matches = match spec.matches.as_deref() {
        None | Some([]) => vec![catch_all()],
        Some(ms) => ms.iter().map(route_match).collect::<Result<_, _>>()?,
    };
    let mut request_headers = HeaderModifier::default();
    let mut response_headers = HeaderModifier::default();
    let mut redirect = None;
    let mut rewrite = None;
    for f in spec.filters.iter().flatten() {
        apply_filter(
            f,
            &mut request_headers,
            &mut response_headers,
            &mut redirect,
            &mut rewrite,
        )?;
    }
    let refs = spec.backend_refs.as_deref().unwrap_or_default();
    if refs
        .iter()
        .any(|b| b.filters.as_ref().is_some_and(|f| !f.is_empty()))
    {
        return Err("filters on backendRefs are not supported".into());
    }
    let action = match (redirect, rewrite) {
        (Some(_), Some(_)) => {
            return Err("RequestRedirect and URLRewrite cannot be combined".into());
        }
        (Some(r), None) => {
            check_prefix_rewrite(&matches, r.path.as_ref())?;
            RuleAction::Redirect(r)
        }
        (None, rewrite) => {
            check_prefix_rewrite(
                &matches,
                rewrite.as_ref().and_then(|r: &UrlRewrite| r.path.as_ref()),
            )?;
            let refs = route::backend_refs!(refs);
            let (backends, invalid_weight) =
                route::resolve_backends(backends, KIND, ns, refs, Upstream::Http, errors)?;
            RuleAction::Forward {
                backends,
                invalid_weight,
                rewrite,
            }
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
                    check_path("path value", value, false)?;
                    PathMatch::Exact(value.into())
                }
                Some(HttpRouteRulesMatchesPathType::RegularExpression) => {
                    route::check_regex("path", value)?;
                    PathMatch::RegularExpression(value.into())
                }
                Some(HttpRouteRulesMatchesPathType::PathPrefix) | None => {
                    check_path("path value", value, true)?;
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

fn apply_filter(
    f: &HttpRouteRulesFilters,
    request_headers: &mut HeaderModifier,
    response_headers: &mut HeaderModifier,
    redirect: &mut Option<RedirectSpec>,
    rewrite: &mut Option<UrlRewrite>,
) -> Result<(), String> {
    let missing = || format!("filter {} has no configuration", enum_name(&f.r#type));
    match f.r#type {
        HttpRouteRulesFiltersType::RequestHeaderModifier => {
            let m = f.request_header_modifier.as_ref().ok_or_else(missing)?;
            modify_headers(
                "RequestHeaderModifier",
                request_headers,
                m.set
                    .iter()
                    .flatten()
                    .map(|h| (h.name.as_str(), h.value.as_str())),
                m.add
                    .iter()
                    .flatten()
                    .map(|h| (h.name.as_str(), h.value.as_str())),
                m.remove.as_deref().unwrap_or_default(),
            )?;
        }
        HttpRouteRulesFiltersType::ResponseHeaderModifier => {
            let m = f.response_header_modifier.as_ref().ok_or_else(missing)?;
            modify_headers(
                "ResponseHeaderModifier",
                response_headers,
                m.set
                    .iter()
                    .flatten()
                    .map(|h| (h.name.as_str(), h.value.as_str())),
                m.add
                    .iter()
                    .flatten()
                    .map(|h| (h.name.as_str(), h.value.as_str())),
                m.remove.as_deref().unwrap_or_default(),
            )?;
        }
        HttpRouteRulesFiltersType::RequestRedirect => {
            let r = f.request_redirect.as_ref().ok_or_else(missing)?;
            let status_code = match r.status_code.unwrap_or(302) {
                c @ (301 | 302) => c as u16,
                other => {
                    return Err(format!(
                        "redirect statusCode {other} is not supported (301 or 302)"
                    ));
                }
            };
            let path = r.path.as_ref().map(|p| match p.r#type {
                HttpRouteRulesFiltersRequestRedirectPathType::ReplaceFullPath => {
                    PathRewrite::ReplaceFullPath(p.replace_full_path.clone().unwrap_or_default())
                }
                HttpRouteRulesFiltersRequestRedirectPathType::ReplacePrefixMatch => {
                    PathRewrite::ReplacePrefixMatch(
                        p.replace_prefix_match.clone().unwrap_or_default(),
                    )
                }
            });
            if let Some(h) = &r.hostname {
                hostname::checked("RequestRedirect hostname", h, Wildcard::Refused)?;
            }
            if let Some(PathRewrite::ReplaceFullPath(v) | PathRewrite::ReplacePrefixMatch(v)) =
                &path
            {
                check_path("RequestRedirect path", v, false)?;
            }
            let port = match r.port {
                None => None,
                Some(p) => Some(
                    u16::try_from(p).map_err(|_| format!("redirect port {p} is out of range"))?,
                ),
            };
            *redirect = Some(RedirectSpec {
                scheme: r.scheme.as_ref().map(enum_name),
                hostname: r.hostname.clone(),
                port,
                path,
                status_code,
            });
        }
        HttpRouteRulesFiltersType::UrlRewrite => {
            let r = f.url_rewrite.as_ref().ok_or_else(missing)?;
            let path = r.path.as_ref().map(|p| match p.r#type {
                HttpRouteRulesFiltersUrlRewritePathType::ReplaceFullPath => {
                    PathRewrite::ReplaceFullPath(p.replace_full_path.clone().unwrap_or_default())
                }
                HttpRouteRulesFiltersUrlRewritePathType::ReplacePrefixMatch => {
                    PathRewrite::ReplacePrefixMatch(
                        p.replace_prefix_match.clone().unwrap_or_default(),
                    )
                }
            });
            if let Some(h) = &r.hostname {
                hostname::checked("URLRewrite hostname", h, Wildcard::Refused)?;
            }
            if let Some(PathRewrite::ReplaceFullPath(v) | PathRewrite::ReplacePrefixMatch(v)) =
                &path
            {
                check_path("URLRewrite path", v, false)?;
            }
            *rewrite = Some(UrlRewrite {
                hostname: r.hostname.clone(),
                path,
            });
        }
        _ => return Err(format!("filter {} is not supported", enum_name(&f.r#type))),
    }
    Ok(())
}
