//! Session persistence (an XBackend's `sessionPersistence`) → Envoy's stateful
//! session HTTP filter, switched on per route.
//!
//! ```text
//!  HCM of a route table with a persistent route
//!   http_filters: … ─ cors ─ envoy.filters.http.stateful_session (disabled) ─ router
//!  Route forwarding to a persistent backend
//!   typed_per_filter_config { envoy.filters.http.stateful_session:
//!     FilterConfig { disabled: false, config: StatefulSessionPerRoute {
//!       cookie: envoy.http.stateful_session.cookie {name, path, ttl}
//!     | header: envoy.http.stateful_session.header {name} } } }
//! ```
//!
//! The session state is the chosen endpoint's address, encoded by Envoy into
//! the cookie (or header) of the first answer; a later request carrying it
//! goes to that endpoint while it is in the cluster, and is load balanced
//! again (and given a new cookie) when it is gone: never strict, a session
//! outlives no endpoint. A route table without a persistent route has no such
//! filter at all, so nothing changes for it.

use crate::any::pack;
use aether_ir as ir;
use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
use envoy_types::pb::envoy::config::route::v3::FilterConfig;
use envoy_types::pb::envoy::extensions::filters::http::stateful_session::v3::{
    StatefulSession, StatefulSessionPerRoute, stateful_session_per_route,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::extensions::http::stateful_session::cookie::v3::CookieBasedSessionState;
use envoy_types::pb::envoy::extensions::http::stateful_session::header::v3::HeaderBasedSessionState;
use envoy_types::pb::envoy::r#type::http::v3::Cookie;
use envoy_types::pb::google::protobuf::{Any, Duration};

/// The filter's name in the HTTP filter chain, and the key of per-route configs.
pub const FILTER: &str = "envoy.filters.http.stateful_session";

const COOKIE_STATE: &str = "envoy.http.stateful_session.cookie";
const HEADER_STATE: &str = "envoy.http.stateful_session.header";

/// The session of a route, if it forwards to a persistent backend.
pub fn of_route(r: &ir::Route) -> Option<&ir::SessionPersistence> {
    match &r.action {
        ir::RouteAction::Forward(f) => f.session.as_deref(),
        _ => None,
    }
}

/// The filter of a connection manager serving `table`, off until a route
/// switches it on; `None` when no route of the table is persistent.
pub fn http_filter(table: &ir::RouteTable) -> Option<HttpFilter> {
    let any = table
        .virtual_hosts
        .iter()
        .flat_map(|vh| &vh.routes)
        .any(|r| of_route(r).is_some());
    any.then(|| HttpFilter {
        name: FILTER.to_string(),
        config_type: Some(http_filter::ConfigType::TypedConfig(pack(
            &StatefulSession::default(),
        ))),
        disabled: true,
        ..Default::default()
    })
}

/// A persistent route's switch: the filter on, with its session state.
pub fn per_route(session: &ir::SessionPersistence) -> Any {
    let session_state = match session {
        ir::SessionPersistence::Cookie {
            name,
            path,
            ttl_seconds,
        } => TypedExtensionConfig {
            name: COOKIE_STATE.to_string(),
            typed_config: Some(pack(&CookieBasedSessionState {
                cookie: Some(Cookie {
                    name: name.clone(),
                    // 0s: a session cookie, without Max-Age.
                    ttl: Some(Duration {
                        seconds: i64::try_from(ttl_seconds.unwrap_or(0)).unwrap_or(i64::MAX),
                        nanos: 0,
                    }),
                    path: path.clone(),
                    attributes: vec![],
                }),
            })),
        },
        ir::SessionPersistence::Header { name } => TypedExtensionConfig {
            name: HEADER_STATE.to_string(),
            typed_config: Some(pack(&HeaderBasedSessionState { name: name.clone() })),
        },
    };
    let per_route = StatefulSessionPerRoute {
        r#override: Some(stateful_session_per_route::Override::StatefulSession(
            StatefulSession {
                session_state: Some(session_state),
                ..Default::default()
            },
        )),
    };
    pack(&FilterConfig {
        config: Some(pack(&per_route)),
        disabled: false,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn decode(any: &Any) -> StatefulSession {
        let fc = FilterConfig::decode(any.value.as_slice()).unwrap();
        assert!(!fc.disabled);
        let per_route = StatefulSessionPerRoute::decode(fc.config.unwrap().value.as_slice());
        match per_route.unwrap().r#override {
            Some(stateful_session_per_route::Override::StatefulSession(s)) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_permanent_cookie_carries_its_ttl_and_a_session_cookie_none() {
        for (ttl, seconds) in [(Some(3600), 3600), (None, 0)] {
            let s = decode(&per_route(&ir::SessionPersistence::Cookie {
                name: "sticky".into(),
                path: "/app".into(),
                ttl_seconds: ttl,
            }));
            assert!(!s.strict, "a gone endpoint is load balanced again");
            let state = s.session_state.unwrap();
            assert_eq!(state.name, COOKIE_STATE);
            let cookie =
                CookieBasedSessionState::decode(state.typed_config.unwrap().value.as_slice())
                    .unwrap()
                    .cookie
                    .unwrap();
            assert_eq!(
                (cookie.name.as_str(), cookie.path.as_str()),
                ("sticky", "/app")
            );
            assert_eq!(cookie.ttl.unwrap().seconds, seconds);
        }
    }

    #[test]
    fn a_header_session_names_its_header() {
        let s = decode(&per_route(&ir::SessionPersistence::Header {
            name: "x-session".into(),
        }));
        let state = s.session_state.unwrap();
        assert_eq!(state.name, HEADER_STATE);
        let h = HeaderBasedSessionState::decode(state.typed_config.unwrap().value.as_slice());
        assert_eq!(h.unwrap().name, "x-session");
    }

    #[test]
    fn only_a_table_with_a_persistent_route_gets_the_filter_off_by_default() {
        let mut table = ir::RouteTable {
            name: "t".into(),
            virtual_hosts: vec![],
        };
        assert!(http_filter(&table).is_none());
        table
            .virtual_hosts
            .push(std::sync::Arc::new(ir::VirtualHost {
                name: "*".into(),
                domains: vec!["*".into()],
                routes: vec![std::sync::Arc::new(ir::Route {
                    name: "HTTPRoute/app/web/rule/0/match/0".into(),
                    matcher: ir::RouteMatch::prefix("/"),
                    action: ir::RouteAction::Forward(ir::Forward {
                        session: Some(Box::new(ir::SessionPersistence::Header {
                            name: "x".into(),
                        })),
                        ..Default::default()
                    }),
                    request_headers: ir::HeaderModifier::default(),
                    response_headers: ir::HeaderModifier::default(),
                })],
                pre_routing: vec![],
            }));
        let f = http_filter(&table).unwrap();
        assert!(f.disabled);
        assert_eq!(f.name, FILTER);
    }
}
