//! IR route tables → Envoy `RouteConfiguration` (RDS).
//!
//! ```text
//!  RouteTable ── VirtualHost (domains, IR order) ── Route (IR = precedence order)
//!                                                    ├─ match: path / headers / :method / query
//!                                                    ├─ action (see `action.rs`)
//!                                                    └─ request/response header modifiers
//! ```
//!
//! The IR has already sorted routes by Gateway API precedence and merged the single
//! `*` virtual host; this module only maps. Host matching ignores the port (a Host
//! of `example.com:8080` matches `example.com`) but never strips it, because
//! backends must see the Host exactly as the client sent it.

use crate::action::{self, Scheme};
use crate::parts::{Fragments, KeyHashes};
use crate::values::{header_matcher, headers_to_add, regex, string_matcher};
use aether_ir as ir;
use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, QueryParameterMatcher, Route, RouteConfiguration, RouteMatch, VirtualHost,
    query_parameter_matcher::QueryParameterMatchSpecifier, route_match::PathSpecifier,
};
use envoy_types::pb::google::protobuf::BoolValue;
use prost::Message;

/// `scheme` is how clients reach this table (`Http` for an HTTP port, `Https` for
/// a TLS chain): a redirect that does not change the scheme keeps it.
pub fn route_configuration(table: &ir::RouteTable, scheme: Scheme) -> RouteConfiguration {
    RouteConfiguration {
        virtual_hosts: table
            .virtual_hosts
            .iter()
            .map(|vh| virtual_host(vh, scheme))
            .collect(),
        ..route_configuration_frame(table)
    }
}

/// The route table without its virtual hosts: what `route_cache.rs` puts
/// around their encodings.
pub(crate) fn route_configuration_frame(table: &ir::RouteTable) -> RouteConfiguration {
    RouteConfiguration {
        name: table.name.clone(),
        // Invalid backends are routed to a cluster that never exists (see
        // `action.rs`); validating clusters would make Envoy reject the table.
        validate_clusters: Some(BoolValue { value: false }),
        ignore_port_in_host_matching: true,
        ..Default::default()
    }
}

/// Per route key, a hash over the Envoy routes that route owns, each with its
/// virtual host's name and domains (see `parts.rs`).
pub fn fragments(rc: &RouteConfiguration) -> KeyHashes {
    let mut f = Fragments::default();
    for vh in &rc.virtual_hosts {
        let domains = vh.domains.join("\n");
        for r in &vh.routes {
            if let Some(key) = ir::names::route_key_of(&r.name) {
                f.add(
                    key,
                    &[vh.name.as_bytes(), domains.as_bytes(), &r.encode_to_vec()],
                );
            }
        }
    }
    f.finish()
}

fn virtual_host(vh: &ir::VirtualHost, scheme: Scheme) -> VirtualHost {
    let mut v = virtual_host_frame(vh);
    let own = std::mem::take(&mut v.routes);
    v.routes = vh.routes.iter().map(|r| route(r, vh, scheme)).collect();
    v.routes.extend(own);
    v
}

/// The virtual host without the Envoy routes of its IR routes, which come
/// first, in IR order, before any route of the frame's own (a pre-routing
/// filter's catch-all 404): what `route_cache.rs` puts around their encodings.
pub(crate) fn virtual_host_frame(vh: &ir::VirtualHost) -> VirtualHost {
    VirtualHost {
        name: vh.name.clone(),
        domains: vh.domains.clone(),
        routes: crate::ext_authz::not_found(vh).into_iter().collect(),
        typed_per_filter_config: crate::ext_authz::per_virtual_host(&vh.pre_routing),
        retry_policy: Some(action::unsent_retry_policy()),
        ..Default::default()
    }
}

/// One IR route's Envoy route; it reads the route, the scheme and its virtual
/// host (see `route_cache.rs` for what a cached encoding is keyed by).
pub(crate) fn route(r: &ir::Route, vh: &ir::VirtualHost, scheme: Scheme) -> Route {
    let cors = match &r.action {
        ir::RouteAction::Forward(ir::Forward { cors: Some(c), .. }) => Some(c),
        _ => None,
    };
    let session = crate::stateful_session::of_route(r);
    Route {
        typed_per_filter_config: cors
            .map(|c| (crate::cors::FILTER.to_string(), crate::cors::policy(c)))
            .into_iter()
            .chain(session.map(|s| {
                let name = crate::stateful_session::FILTER.to_string();
                (name, crate::stateful_session::per_route(s))
            }))
            .collect(),
        name: r.name.clone(),
        r#match: Some(route_match(&r.matcher)),
        action: Some(action::action(r, vh, scheme)),
        request_headers_to_add: headers_to_add(&r.request_headers),
        request_headers_to_remove: r.request_headers.remove.to_vec(),
        response_headers_to_add: headers_to_add(&r.response_headers),
        response_headers_to_remove: r.response_headers.remove.to_vec(),
        ..Default::default()
    }
}

pub(crate) fn route_match(m: &ir::RouteMatch) -> RouteMatch {
    let mut headers: Vec<HeaderMatcher> = Vec::new();
    if let Some(method) = &m.method {
        headers.push(header_matcher(
            ":method",
            &ir::StringMatch::Exact(method.clone()),
        ));
    }
    headers.extend(m.headers.iter().map(|h| header_matcher(&h.name, &h.value)));
    RouteMatch {
        path_specifier: Some(path_specifier(&m.path)),
        headers,
        query_parameters: m
            .query_params
            .iter()
            .map(|q| QueryParameterMatcher {
                name: q.name.clone(),
                query_parameter_match_specifier: Some(QueryParameterMatchSpecifier::StringMatch(
                    string_matcher(&q.value),
                )),
            })
            .collect(),
        ..Default::default()
    }
}

/// Gateway API path matches in Envoy's terms. `PathPrefix` is element-wise, which is
/// exactly `path_separated_prefix` — except that Envoy rejects a trailing `/` there,
/// and the root prefix `/` (which matches everything) is a plain `prefix`.
pub(crate) fn path_specifier(path: &ir::PathMatch) -> PathSpecifier {
    match path {
        ir::PathMatch::Exact(p) => PathSpecifier::Path(p.clone()),
        ir::PathMatch::Prefix(p) => {
            let trimmed = p.trim_end_matches('/');
            if trimmed.is_empty() {
                PathSpecifier::Prefix("/".to_string())
            } else {
                PathSpecifier::PathSeparatedPrefix(trimmed.to_string())
            }
        }
        ir::PathMatch::RegularExpression(r) => PathSpecifier::SafeRegex(regex(r)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::core::v3::header_value_option::HeaderAppendAction;
    use envoy_types::pb::envoy::config::route::v3::header_matcher::HeaderMatchSpecifier;
    use envoy_types::pb::envoy::config::route::v3::route::Action;
    use envoy_types::pb::envoy::r#type::matcher::v3::{
        StringMatcher, string_matcher::MatchPattern,
    };

    #[test]
    fn the_default_retries_ride_on_the_virtual_host_not_on_each_route() {
        let forward = |retry| {
            std::sync::Arc::new(ir::Route {
                name: "r".into(),
                matcher: ir::RouteMatch::prefix("/"),
                action: ir::RouteAction::Forward(ir::Forward {
                    retry,
                    ..Default::default()
                }),
                request_headers: Default::default(),
                response_headers: Default::default(),
            })
        };
        let vh = ir::VirtualHost {
            name: "vh".into(),
            domains: vec!["vh".into()],
            routes: vec![forward(None), forward(Some(Box::new(ir::Retry::default())))],
            pre_routing: vec![],
        };
        let v = virtual_host(&vh, Scheme::Http);
        assert_eq!(v.retry_policy, Some(action::unsent_retry_policy()));
        let policies: Vec<bool> = v
            .routes
            .iter()
            .map(|r| match &r.action {
                Some(Action::Route(a)) => a.retry_policy.is_some(),
                other => panic!("not forwarded: {other:?}"),
            })
            .collect();
        assert_eq!(
            policies,
            [false, true],
            "only a rule's own retries are per route"
        );
    }

    #[test]
    fn path_matches_map_to_envoy_specifiers() {
        assert_eq!(
            path_specifier(&ir::PathMatch::Exact("/exact".into())),
            PathSpecifier::Path("/exact".into())
        );
        assert_eq!(
            path_specifier(&ir::PathMatch::Prefix("/".into())),
            PathSpecifier::Prefix("/".into())
        );
        assert_eq!(
            path_specifier(&ir::PathMatch::Prefix("/abc".into())),
            PathSpecifier::PathSeparatedPrefix("/abc".into())
        );
        // Envoy rejects a trailing slash in path_separated_prefix.
        assert_eq!(
            path_specifier(&ir::PathMatch::Prefix("/abc/".into())),
            PathSpecifier::PathSeparatedPrefix("/abc".into())
        );
        assert_eq!(
            path_specifier(&ir::PathMatch::RegularExpression("^/v[0-9]+$".into())),
            PathSpecifier::SafeRegex(regex("^/v[0-9]+$"))
        );
    }

    #[test]
    fn method_headers_and_query_params_become_matchers() {
        let m = route_match(&ir::RouteMatch {
            path: ir::PathMatch::Prefix("/".into()),
            method: Some("POST".into()),
            headers: vec![
                ir::HeaderMatch {
                    name: "version".into(),
                    value: ir::StringMatch::Exact("two".into()),
                },
                ir::HeaderMatch {
                    name: "color".into(),
                    value: ir::StringMatch::RegularExpression("red|blue".into()),
                },
            ],
            query_params: vec![ir::QueryParamMatch {
                name: "animal".into(),
                value: ir::StringMatch::Exact("whale".into()),
            }],
        });
        let names: Vec<&str> = m.headers.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, vec![":method", "version", "color"]);
        assert_eq!(
            m.headers[0].header_match_specifier,
            Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
                match_pattern: Some(MatchPattern::Exact("POST".into())),
                ignore_case: false
            }))
        );
        assert_eq!(
            m.headers[2].header_match_specifier,
            Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
                match_pattern: Some(MatchPattern::SafeRegex(regex("red|blue"))),
                ignore_case: false
            }))
        );
        assert_eq!(m.query_parameters.len(), 1);
        assert_eq!(m.query_parameters[0].name, "animal");
    }

    #[test]
    fn header_modifiers_set_overwrites_and_add_appends() {
        let h = |n: &str, v: &str| ir::Header {
            name: n.into(),
            value: v.into(),
        };
        let opts = headers_to_add(&ir::HeaderModifier {
            set: vec![h("x-set", "1")].into(),
            add: vec![h("x-add", "2")].into(),
            remove: vec!["x-remove".into()].into(),
        });
        let got: Vec<(String, i32)> = opts
            .iter()
            .map(|o| (o.header.as_ref().unwrap().key.clone(), o.append_action))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "x-set".to_string(),
                    HeaderAppendAction::OverwriteIfExistsOrAdd as i32
                ),
                (
                    "x-add".to_string(),
                    HeaderAppendAction::AppendIfExistsOrAdd as i32
                ),
            ]
        );
    }
}
