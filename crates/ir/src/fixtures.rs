//! Small IRs for the other crates' unit tests (feature `fixtures`): Gateways
//! `infra/<name>` with one HTTP port 80 whose one virtual host (`*`) holds
//! HTTPRoute rules, each forwarding to a Service cluster `app/<name>:80`.

use crate::{
    BackendKind, Cluster, Discovery, Endpoint, EndpointsFrom, Forward, Gateway, ObjectRef,
    PathMatch, Port, PortProtocol, Route, RouteAction, RouteMatch, RouteTable, UpstreamProtocol,
    VirtualHost, WeightedBackend, names,
};

/// The rule of HTTPRoute `app/<route>` matching the path prefix `path`,
/// forwarding to cluster `app/<cluster>:80`.
pub fn forward_route(route: &str, path: &str, cluster: &str) -> Route {
    Route {
        name: format!("HTTPRoute/app/{route}/rule/0/match/0"),
        matcher: RouteMatch {
            path: PathMatch::Prefix(path.into()),
            method: None,
            headers: vec![],
            query_params: vec![],
        },
        action: RouteAction::Forward(Forward {
            backends: vec![WeightedBackend::new(names::cluster("app", cluster, 80), 1)],
            invalid_weight: 0,
            rewrite: None,
            ..Default::default()
        }),
        request_headers: Default::default(),
        response_headers: Default::default(),
    }
}

/// Gateway `infra/<name>` at 10.0.0.1: port 80, HTTP, its route table holding
/// `routes` in one virtual host for every domain.
pub fn http_gateway(name: &str, routes: Vec<Route>) -> Gateway {
    Gateway {
        namespace: "infra".into(),
        name: name.into(),
        addresses: vec!["10.0.0.1".into()],
        ports: vec![Port {
            port: 80,
            protocol: PortProtocol::Http,
            listener_name: names::listener("infra", name, 80),
            route_table: Some(RouteTable {
                name: names::route_table("infra", name, 80, None),
                virtual_hosts: vec![std::sync::Arc::new(VirtualHost {
                    pre_routing: Vec::new(),
                    name: "*".into(),
                    domains: vec!["*".into()],
                    routes: routes.into_iter().map(std::sync::Arc::new).collect(),
                })],
            }),
            tls_chains: vec![],
            forward: None,
        }],
    }
}

/// Service `app/<name>` port 80 over HTTP/1.1 (EDS), one endpoint at
/// `address`:8080.
pub fn service_cluster(name: &str, address: &str) -> Cluster {
    Cluster {
        name: names::cluster("app", name, 80),
        service: ObjectRef::new("app", name),
        port: 80,
        protocol: UpstreamProtocol::Http1,
        endpoints: vec![Endpoint {
            address: address.into(),
            port: 8080,
            weight: 0,
        }],
        endpoints_from: EndpointsFrom::PortNamed {
            service: ObjectRef::new("app", name),
            name: String::new(),
        },
        tls: None,
        backend_kind: BackendKind::Service,
        discovery: Discovery::Eds,
        session: None,
    }
}
