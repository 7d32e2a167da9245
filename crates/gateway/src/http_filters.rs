//! An HTTPRoute rule's filters, read: header modifiers, RequestRedirect,
//! URLRewrite, RequestMirror and CORS on the rule; RequestHeaderModifier,
//! ResponseHeaderModifier and URLRewrite on a backendRef.
//!
//! Envoy rewrites a route, not one of its weighted clusters: a backendRef's
//! URLRewrite is served when every backendRef of the rule carries the same one
//! (it is then the rule's rewrite); backendRefs with different rewrites, or one
//! beside the rule's own URLRewrite, make the rule invalid.
//!
//! A filter we do not serve (ExtensionRef, ExternalAuth, or any other filter on
//! a backendRef)
//! makes its rule invalid rather than silently ignored. A mirror whose backend
//! does not resolve is left out, its error reported in ResolvedRefs like any
//! backendRef's.

use crate::backend::{BackendError, BackendRef, Backends, Upstream};
use crate::header::{check_path, modify_headers};
use crate::hostname::{self, Wildcard};
use crate::route::{RedirectSpec, enum_name};
use aether_ir::{Cors, HeaderModifier, PathRewrite, UrlRewrite};
use gateway_api::apis::experimental::httproutes::{
    HttpRouteRulesBackendRefs, HttpRouteRulesBackendRefsFiltersType,
    HttpRouteRulesBackendRefsFiltersUrlRewrite, HttpRouteRulesBackendRefsFiltersUrlRewritePathType,
    HttpRouteRulesFilters, HttpRouteRulesFiltersCors, HttpRouteRulesFiltersRequestMirror,
    HttpRouteRulesFiltersRequestRedirect, HttpRouteRulesFiltersRequestRedirectPathType,
    HttpRouteRulesFiltersType, HttpRouteRulesFiltersUrlRewrite,
    HttpRouteRulesFiltersUrlRewritePathType,
};

/// A header modifier filter (any generated type: they share their fields),
/// merged into `into`.
macro_rules! modify {
    ($filter:expr, $into:expr, $m:expr) => {
        modify_headers(
            $filter,
            $into,
            $m.set
                .iter()
                .flatten()
                .map(|h| (h.name.as_str(), h.value.as_str())),
            $m.add
                .iter()
                .flatten()
                .map(|h| (h.name.as_str(), h.value.as_str())),
            $m.remove.as_deref().unwrap_or_default(),
        )
    };
}

/// What a rule's filters ask for, merged in filter order.
#[derive(Debug, Default)]
pub struct RuleFilters {
    pub request_headers: HeaderModifier,
    pub response_headers: HeaderModifier,
    pub redirect: Option<RedirectSpec>,
    pub rewrite: Option<UrlRewrite>,
    pub mirrors: Vec<crate::route::Mirror>,
    pub cors: Option<Cors>,
}

impl RuleFilters {
    pub fn apply(
        &mut self,
        f: &HttpRouteRulesFilters,
        backends: &Backends<'_>,
        ns: &str,
        errors: &mut Vec<BackendError>,
    ) -> Result<(), String> {
        let missing = || format!("filter {} has no configuration", enum_name(&f.r#type));
        match f.r#type {
            HttpRouteRulesFiltersType::RequestHeaderModifier => {
                let m = f.request_header_modifier.as_ref().ok_or_else(missing)?;
                modify!("RequestHeaderModifier", &mut self.request_headers, m)?;
            }
            HttpRouteRulesFiltersType::ResponseHeaderModifier => {
                let m = f.response_header_modifier.as_ref().ok_or_else(missing)?;
                modify!("ResponseHeaderModifier", &mut self.response_headers, m)?;
            }
            HttpRouteRulesFiltersType::RequestRedirect => {
                let r = f.request_redirect.as_ref().ok_or_else(missing)?;
                self.redirect = Some(redirect(r)?);
            }
            HttpRouteRulesFiltersType::UrlRewrite => {
                let r = f.url_rewrite.as_ref().ok_or_else(missing)?;
                self.rewrite = Some(rewrite(r)?);
            }
            HttpRouteRulesFiltersType::RequestMirror => {
                let m = f.request_mirror.as_ref().ok_or_else(missing)?;
                let fraction = mirror_fraction(m)?;
                let b = &m.backend_ref;
                let r = BackendRef {
                    group: b.group.as_deref(),
                    kind: b.kind.as_deref(),
                    name: &b.name,
                    namespace: b.namespace.as_deref(),
                    port: b.port,
                };
                match backends.resolve(crate::http_route::KIND, ns, r, Upstream::Http) {
                    Ok(cluster) => self.mirrors.push((cluster, fraction)),
                    Err(e) => errors.push(e),
                }
            }
            HttpRouteRulesFiltersType::Cors => {
                let c = f.cors.as_ref().ok_or_else(missing)?;
                if self.cors.is_some() {
                    return Err("a rule takes at most one CORS filter".into());
                }
                self.cors = Some(cors(c)?);
            }
            HttpRouteRulesFiltersType::ExtensionRef | HttpRouteRulesFiltersType::ExternalAuth => {
                return Err(format!("filter {} is not supported", enum_name(&f.r#type)));
            }
        }
        Ok(())
    }
}

/// The filters of one backendRef.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct BackendFilters {
    pub request_headers: HeaderModifier,
    pub response_headers: HeaderModifier,
    pub rewrite: Option<UrlRewrite>,
}

/// The filters of backendRef `i`.
pub fn backend_filters(i: usize, b: &HttpRouteRulesBackendRefs) -> Result<BackendFilters, String> {
    let mut out = BackendFilters::default();
    for f in b.filters.iter().flatten() {
        let missing = || {
            format!(
                "backendRefs[{i}] filter {} has no configuration",
                enum_name(&f.r#type)
            )
        };
        match f.r#type {
            HttpRouteRulesBackendRefsFiltersType::RequestHeaderModifier => {
                let m = f.request_header_modifier.as_ref().ok_or_else(missing)?;
                modify!("RequestHeaderModifier", &mut out.request_headers, m)?;
            }
            HttpRouteRulesBackendRefsFiltersType::ResponseHeaderModifier => {
                let m = f.response_header_modifier.as_ref().ok_or_else(missing)?;
                modify!("ResponseHeaderModifier", &mut out.response_headers, m)?;
            }
            HttpRouteRulesBackendRefsFiltersType::UrlRewrite => {
                let r = f.url_rewrite.as_ref().ok_or_else(missing)?;
                out.rewrite = Some(backend_rewrite(r)?);
            }
            _ => {
                return Err(format!(
                    "filter {} on backendRefs[{i}] is not supported",
                    enum_name(&f.r#type)
                ));
            }
        }
    }
    Ok(out)
}

/// The rule's one URLRewrite: its own, or the one every backendRef carries.
pub fn rule_rewrite(
    own: Option<UrlRewrite>,
    backends: &[BackendFilters],
) -> Result<Option<UrlRewrite>, String> {
    let Some(first) = backends.iter().find_map(|b| b.rewrite.as_ref()) else {
        return Ok(own);
    };
    if own.is_some() {
        return Err("URLRewrite on the rule and on its backendRefs cannot be combined".into());
    }
    if backends.iter().any(|b| b.rewrite.as_ref() != Some(first)) {
        return Err(
            "backendRefs of one rule with different URLRewrite filters are not supported \
             (Envoy rewrites a route, not one of its weighted backends)"
                .into(),
        );
    }
    Ok(Some(first.clone()))
}

fn redirect(r: &HttpRouteRulesFiltersRequestRedirect) -> Result<RedirectSpec, String> {
    let status_code = match r.status_code.unwrap_or(302) {
        c @ (301 | 302 | 303 | 307 | 308) => c as u16,
        other => {
            return Err(format!(
                "redirect statusCode {other} is not supported (301, 302, 303, 307 or 308)"
            ));
        }
    };
    let path = r.path.as_ref().map(|p| match p.r#type {
        HttpRouteRulesFiltersRequestRedirectPathType::ReplaceFullPath => {
            PathRewrite::ReplaceFullPath(p.replace_full_path.clone().unwrap_or_default())
        }
        HttpRouteRulesFiltersRequestRedirectPathType::ReplacePrefixMatch => {
            PathRewrite::ReplacePrefixMatch(p.replace_prefix_match.clone().unwrap_or_default())
        }
    });
    if let Some(h) = &r.hostname {
        hostname::checked("RequestRedirect hostname", h, Wildcard::Refused)?;
    }
    if let Some(PathRewrite::ReplaceFullPath(v) | PathRewrite::ReplacePrefixMatch(v)) = &path {
        check_path("RequestRedirect path", v, false)?;
    }
    let port = match r.port {
        None => None,
        Some(p) => {
            Some(u16::try_from(p).map_err(|_| format!("redirect port {p} is out of range"))?)
        }
    };
    Ok(RedirectSpec {
        scheme: r.scheme.as_ref().map(enum_name),
        hostname: r.hostname.clone(),
        port,
        path,
        status_code,
    })
}

/// A URLRewrite filter (the rule's and a backendRef's generated types have the
/// same fields), checked.
macro_rules! url_rewrite {
    ($r:expr, $path_type:ident) => {{
        let r = $r;
        let path = r.path.as_ref().map(|p| match p.r#type {
            $path_type::ReplaceFullPath => {
                PathRewrite::ReplaceFullPath(p.replace_full_path.clone().unwrap_or_default())
            }
            $path_type::ReplacePrefixMatch => {
                PathRewrite::ReplacePrefixMatch(p.replace_prefix_match.clone().unwrap_or_default())
            }
        });
        if let Some(h) = &r.hostname {
            hostname::checked("URLRewrite hostname", h, Wildcard::Refused)?;
        }
        if let Some(PathRewrite::ReplaceFullPath(v) | PathRewrite::ReplacePrefixMatch(v)) = &path {
            check_path("URLRewrite path", v, false)?;
        }
        Ok(UrlRewrite {
            hostname: r.hostname.clone(),
            path,
        })
    }};
}

fn rewrite(r: &HttpRouteRulesFiltersUrlRewrite) -> Result<UrlRewrite, String> {
    url_rewrite!(r, HttpRouteRulesFiltersUrlRewritePathType)
}

fn backend_rewrite(r: &HttpRouteRulesBackendRefsFiltersUrlRewrite) -> Result<UrlRewrite, String> {
    url_rewrite!(r, HttpRouteRulesBackendRefsFiltersUrlRewritePathType)
}

/// The mirrored share: `percent` (of 100) or `fraction` (numerator over a
/// denominator, 100 when left out); neither: every request.
fn mirror_fraction(m: &HttpRouteRulesFiltersRequestMirror) -> Result<Option<(u32, u32)>, String> {
    let (numerator, denominator) = match (m.percent, &m.fraction) {
        (None, None) => return Ok(None),
        (Some(_), Some(_)) => {
            return Err("RequestMirror takes percent or fraction, not both".into());
        }
        (Some(p), None) => (p, 100),
        (None, Some(f)) => (f.numerator, f.denominator.unwrap_or(100)),
    };
    match (u32::try_from(numerator), u32::try_from(denominator)) {
        (Ok(n), Ok(d)) if d > 0 && n <= d => Ok(Some((n, d))),
        _ => Err(format!(
            "RequestMirror share {numerator}/{denominator} is not between 0 and 1"
        )),
    }
}

fn cors(c: &HttpRouteRulesFiltersCors) -> Result<Cors, String> {
    crate::cors::checked(c)
}
