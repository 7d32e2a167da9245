//! GRPCRoute → [`RouteModel`]. A gRPC method is the HTTP/2 path
//! `/<service>/<method>`, so method matches become path matches:
//!
//! ```text
//!  Exact service+method   → Exact  /svc/Method      (anchored: Echo ≠ EchoTwo)
//!  Exact service only     → Prefix /svc             (element-wise)
//!  Exact method only      → Regex  /[^/]+/Method
//!  RegularExpression S, M → Regex  /S/M             (missing side: [^/]+)
//!  no method              → Prefix /
//! ```
//!
//! Backends always speak h2c. Header modifier filters are served; others make the
//! rule invalid.

use crate::backend::{Backends, Upstream};
use crate::header::{check_path, header_matches, modify_headers};
use crate::route::{self, ForwardSpec, RouteModel, Rule, RuleAction, enum_name};
use aether_ir::{HeaderModifier, ObjectRef, PathMatch, RouteMatch, Timeouts};
use gateway_api::apis::standard::grpcroutes::{
    GrpcRoute, GrpcRouteRules, GrpcRouteRulesFiltersType, GrpcRouteRulesMatches,
    GrpcRouteRulesMatchesHeadersType, GrpcRouteRulesMatchesMethodType,
};

pub const KIND: aether_ir::RouteKind = aether_ir::RouteKind::Grpc;

pub fn model(backends: &Backends<'_>, key: ObjectRef, r: &GrpcRoute) -> RouteModel {
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
    spec: &GrpcRouteRules,
    errors: &mut Vec<crate::backend::BackendError>,
) -> Result<Rule, String> {
    let matches = match spec.matches.as_deref() {
        None | Some([]) => vec![method_match(&GrpcRouteRulesMatches::default())?],
        Some(ms) => ms.iter().map(method_match).collect::<Result<_, _>>()?,
    };
    let (request_headers, response_headers) = header_filters(spec)?;
    let refs = spec.backend_refs.as_deref().unwrap_or_default();
    if refs
        .iter()
        .any(|b| b.filters.as_ref().is_some_and(|f| !f.is_empty()))
    {
        return Err("filters on backendRefs are not supported".into());
    }
    let refs = route::backend_refs!(refs);
    let (backends, invalid_weight) =
        route::resolve_backends(backends, KIND, ns, refs, Upstream::Grpc, errors)?;
    Ok(Rule {
        index,
        matches,
        request_headers,
        response_headers,
        action: RuleAction::Forward(ForwardSpec {
            backends,
            invalid_weight,
            // GRPCRoute has no timeouts, and gRPC streams are long: Envoy's
            // default route timeout (15 s) cut every server stream at 15 s.
            timeouts: Timeouts {
                request_ms: Some(0),
                backend_request_ms: None,
            },
            ..ForwardSpec::default()
        }),
    })
}

/// The rule's request and response header modifiers: the only filters a
/// GRPCRoute rule may have here.
fn header_filters(spec: &GrpcRouteRules) -> Result<(HeaderModifier, HeaderModifier), String> {
    let mut request_headers = HeaderModifier::default();
    let mut response_headers = HeaderModifier::default();
    for f in spec.filters.iter().flatten() {
        match f.r#type {
            GrpcRouteRulesFiltersType::RequestHeaderModifier => {
                let m = f
                    .request_header_modifier
                    .as_ref()
                    .ok_or("RequestHeaderModifier is empty")?;
                modify_headers(
                    "RequestHeaderModifier",
                    &mut request_headers,
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
            GrpcRouteRulesFiltersType::ResponseHeaderModifier => {
                let m = f
                    .response_header_modifier
                    .as_ref()
                    .ok_or("ResponseHeaderModifier is empty")?;
                modify_headers(
                    "ResponseHeaderModifier",
                    &mut response_headers,
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
            _ => return Err(format!("filter {} is not supported", enum_name(&f.r#type))),
        }
    }
    Ok((request_headers, response_headers))
}

fn method_match(m: &GrpcRouteRulesMatches) -> Result<RouteMatch, String> {
    let method = m.method.as_ref();
    let service = method
        .and_then(|x| x.service.as_deref())
        .filter(|s| !s.is_empty());
    let name = method
        .and_then(|x| x.method.as_deref())
        .filter(|s| !s.is_empty());
    let regex = matches!(
        method.and_then(|x| x.r#type.as_ref()),
        Some(GrpcRouteRulesMatchesMethodType::RegularExpression)
    );
    let path = if regex {
        let re = format!(
            "/{}/{}",
            service.unwrap_or("[^/]+"),
            name.unwrap_or("[^/]+")
        );
        route::check_regex("method", &re)?;
        PathMatch::RegularExpression(re)
    } else {
        match (service, name) {
            (Some(s), Some(n)) => {
                let path = format!("/{s}/{n}");
                check_path("method", &path, false)?;
                PathMatch::Exact(path)
            }
            (Some(s), None) => {
                let path = format!("/{s}");
                check_path("method service", &path, true)?;
                route::prefix(&path)
            }
            (None, Some(n)) => {
                let re = format!("/[^/]+/{}", regex_syntax::escape(n));
                route::check_regex("method", &re)?;
                PathMatch::RegularExpression(re)
            }
            (None, None) => PathMatch::Prefix("/".into()),
        }
    };
    let headers = header_matches(m.headers.iter().flatten().map(|h| {
        let regex = matches!(
            h.r#type,
            Some(GrpcRouteRulesMatchesHeadersType::RegularExpression)
        );
        (h.name.as_str(), regex, h.value.as_str())
    }))?;
    Ok(RouteMatch {
        path,
        method: None,
        headers,
        query_params: vec![],
    })
}
