//! A listener's pre-routing ExternalAuth filters → Envoy's ext_authz HTTP
//! filter, run on exactly the virtual hosts of that listener.
//!
//! ```text
//!  HCM (one per HTTP port, one per HTTPS chain)
//!   http_filters: edge_ext_authz_<list>_0 … _n (disabled: true) ─ cors ─ router
//!                   one per filter of each distinct filter list, in list order
//!  RouteConfiguration
//!   virtual host of a filtered listener:
//!     typed_per_filter_config { edge_ext_authz_<list>_i: FilterConfig{disabled: false} }
//!     routes …, then a catch-all 404 (the filters run even when no route matches)
//!   any other virtual host: nothing, so the filters never run there
//! ```
//!
//! HTTP listeners on one port share one connection manager and one route
//! table, a virtual host per hostname: a filter that is off by default and
//! switched on per virtual host runs for one Gateway listener only. `<list>`
//! is a digest of the list's encoded filters, so two listeners with the same
//! list share its filters, lists in a different order get their own, and the
//! names are the same whatever else changes (deterministic).
//!
//! Each filter fails closed: an error reaching the server, or no server at all
//! (a backendRef that does not resolve, a filter we cannot run), answers 500;
//! a denial answers what the server says (403 when it says nothing else). The
//! server's answer may add request headers (all but Host and `:authority`,
//! or the listed ones); the route is matched again after that, once.

use crate::INVALID_BACKEND;
use crate::any::pack;
use aether_ir as ir;
use envoy_types::pb::envoy::config::common::mutation_rules::v3::HeaderMutationRules;
use envoy_types::pb::envoy::config::core::v3::{
    ApiVersion, GrpcService, HttpUri, grpc_service, http_uri,
};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, FilterConfig, Route, RouteMatch, route, route_match,
};
use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3::{
    AuthorizationRequest, AuthorizationResponse, BufferSettings, CheckSettings, ExtAuthz,
    ExtAuthzPerRoute, HttpService, ext_authz, ext_authz_per_route,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    ListStringMatcher, RegexMatcher, StringMatcher, string_matcher::MatchPattern,
};
use envoy_types::pb::envoy::r#type::v3::{HttpStatus, StatusCode};
use envoy_types::pb::google::protobuf::{Any, BoolValue, Duration};
use prost::Message;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};

/// How long the authorization server has to answer.
const TIMEOUT_SECONDS: i64 = 10;

/// Headers of the server's answer never copied into the request: framing and
/// hop-by-hop headers of the server's own response.
const NEVER_COPIED: &str =
    "content-length|content-type|transfer-encoding|connection|keep-alive|upgrade|date|server";

/// The ext_authz filters of a connection manager serving `table`: those of
/// every distinct filter list its virtual hosts carry, off by default.
pub fn http_filters(table: &ir::RouteTable) -> Vec<HttpFilter> {
    let lists: BTreeMap<String, &[ir::ExternalAuth]> = table
        .virtual_hosts
        .iter()
        .filter(|vh| !vh.pre_routing.is_empty())
        .map(|vh| (list_key(&vh.pre_routing), vh.pre_routing.as_slice()))
        .collect();
    lists
        .into_iter()
        .flat_map(|(key, list)| {
            list.iter().enumerate().map(move |(i, a)| HttpFilter {
                name: filter_name(&key, i),
                config_type: Some(http_filter::ConfigType::TypedConfig(pack(&ext_authz(a)))),
                disabled: true,
                ..Default::default()
            })
        })
        .collect()
}

/// A virtual host's switches: its own filters on, in its list's names.
pub fn per_virtual_host(pre_routing: &[ir::ExternalAuth]) -> HashMap<String, Any> {
    if pre_routing.is_empty() {
        return HashMap::new();
    }
    let key = list_key(pre_routing);
    // Envoy refuses a FilterConfig without a config: the plain settings.
    let settings = ExtAuthzPerRoute {
        r#override: Some(ext_authz_per_route::Override::CheckSettings(
            CheckSettings::default(),
        )),
    };
    let on = pack(&FilterConfig {
        config: Some(pack(&settings)),
        disabled: false,
        ..Default::default()
    });
    (0..pre_routing.len())
        .map(|i| (filter_name(&key, i), on.clone()))
        .collect()
}

/// A filtered virtual host's last route: 404 for what no route matches, so
/// its filters (chosen with the route) run on those requests too.
pub fn not_found(vh: &ir::VirtualHost) -> Option<Route> {
    (!vh.pre_routing.is_empty()).then(|| Route {
        name: format!("pre-routing/{}/not-found", vh.name),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        action: Some(route::Action::DirectResponse(DirectResponseAction {
            status: 404,
            ..Default::default()
        })),
        ..Default::default()
    })
}

/// The clusters of the authorization servers a port's filters ask: the
/// Gateway's own (its listener names them, so Envoy must hold them first).
pub fn clusters(port: &ir::Port) -> impl Iterator<Item = String> + '_ {
    port.route_table
        .iter()
        .chain(
            port.tls_chains
                .iter()
                .filter_map(|c| c.route_table.as_ref()),
        )
        .flat_map(|t| &t.virtual_hosts)
        .flat_map(|vh| &vh.pre_routing)
        .filter_map(|a| a.cluster.clone())
}

fn filter_name(list: &str, i: usize) -> String {
    format!("edge_ext_authz_{list}_{i}")
}

/// The first 12 hex digits of a digest over the list's encoded filters.
fn list_key(list: &[ir::ExternalAuth]) -> String {
    let mut h = Sha256::new();
    for a in list {
        let encoded = ext_authz(a).encode_to_vec();
        h.update((encoded.len() as u64).to_be_bytes());
        h.update(&encoded);
    }
    hex::encode(h.finalize())[..12].to_string()
}

fn ext_authz(a: &ir::ExternalAuth) -> ExtAuthz {
    let timeout = Some(Duration {
        seconds: TIMEOUT_SECONDS,
        nanos: 0,
    });
    let services = match (a.protocol, &a.cluster) {
        (ir::ExternalAuthProtocol::Grpc, Some(cluster)) => {
            ext_authz::Services::GrpcService(GrpcService {
                timeout,
                target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                    grpc_service::EnvoyGrpc {
                        cluster_name: cluster.clone(),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            })
        }
        (_, cluster) => {
            // No server: a cluster that never exists, so every check errs (500).
            let cluster = cluster.as_deref().unwrap_or(INVALID_BACKEND);
            ext_authz::Services::HttpService(HttpService {
                server_uri: Some(HttpUri {
                    uri: format!("http://{cluster}"),
                    timeout,
                    http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(
                        cluster.to_string(),
                    )),
                }),
                path_prefix: a.path_prefix.clone(),
                authorization_request: Some(AuthorizationRequest::default()),
                authorization_response: Some(AuthorizationResponse {
                    allowed_upstream_headers: Some(copied_headers(&a.allowed_response_headers)),
                    ..Default::default()
                }),
                ..Default::default()
            })
        }
    };
    ExtAuthz {
        services: Some(services),
        transport_api_version: ApiVersion::V3 as i32,
        failure_mode_allow: false,
        status_on_error: Some(HttpStatus {
            code: StatusCode::InternalServerError as i32,
        }),
        with_request_body: (a.max_body_bytes > 0).then_some(BufferSettings {
            max_request_bytes: a.max_body_bytes,
            allow_partial_message: false,
            ..Default::default()
        }),
        allowed_headers: (!a.allowed_headers.is_empty()).then(|| ListStringMatcher {
            patterns: a.allowed_headers.iter().map(|h| exact(h)).collect(),
        }),
        // Headers the server adds may change which route matches.
        clear_route_cache: true,
        decoder_header_mutation_rules: Some(HeaderMutationRules {
            // Never Host, `:authority` or another pseudo-header.
            disallow_system: Some(BoolValue { value: true }),
            disallow_expression: Some(RegexMatcher {
                regex: format!("^({NEVER_COPIED})$"),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The server's answer headers copied into the request: the listed ones, or
/// (none listed) every one the mutation rules let through.
fn copied_headers(listed: &[String]) -> ListStringMatcher {
    let patterns = if listed.is_empty() {
        vec![StringMatcher {
            match_pattern: Some(MatchPattern::SafeRegex(RegexMatcher {
                regex: ".*".into(),
                ..Default::default()
            })),
            ..Default::default()
        }]
    } else {
        listed.iter().map(|h| exact(h)).collect()
    };
    ListStringMatcher { patterns }
}

fn exact(header: &str) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(MatchPattern::Exact(header.to_string())),
        ignore_case: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mk_auth(cluster: &str) -> ir::ExternalAuth {
        ir::ExternalAuth {
            protocol: ir::ExternalAuthProtocol::Http,
            cluster: Some(cluster.into()),
            path_prefix: String::new(),
            allowed_headers: vec![],
            allowed_response_headers: vec![],
            max_body_bytes: 0,
        }
    }

    fn mk_vhost(name: &str, pre_routing: Vec<ir::ExternalAuth>) -> std::sync::Arc<ir::VirtualHost> {
        std::sync::Arc::new(ir::VirtualHost {
            name: name.into(),
            domains: vec![name.into()],
            routes: vec![],
            pre_routing,
        })
    }

    #[test]
    fn one_filter_per_distinct_list_each_off_and_switched_on_by_its_vhosts_alone() {
        let (a, b) = (mk_auth("a"), mk_auth("b"));
        let table = ir::RouteTable {
            name: "t".into(),
            virtual_hosts: vec![
                mk_vhost("*", vec![]),
                mk_vhost("x.example.com", vec![a.clone(), b.clone()]),
                mk_vhost("y.example.com", vec![a.clone(), b.clone()]),
                mk_vhost("z.example.com", vec![b.clone(), a.clone()]),
            ],
        };
        let filters = http_filters(&table);
        assert_eq!(filters.len(), 4, "[a, b] shared, [b, a] its own");
        assert!(filters.iter().all(|f| f.disabled));
        let x = per_virtual_host(&table.virtual_hosts[1].pre_routing);
        let z = per_virtual_host(&table.virtual_hosts[3].pre_routing);
        assert_eq!(x, per_virtual_host(&table.virtual_hosts[2].pre_routing));
        assert!(x.keys().all(|k| !z.contains_key(k)));
        assert!(per_virtual_host(&[]).is_empty());
        // Within a list, the filters run in list order.
        let key = list_key(&[a, b]);
        let names: Vec<&str> = filters.iter().map(|f| f.name.as_str()).collect();
        let at = |i| {
            names
                .iter()
                .position(|n| *n == filter_name(&key, i))
                .unwrap()
        };
        assert!(at(0) < at(1));
    }
}
