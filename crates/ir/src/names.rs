//! Stable, readable Envoy resource names.
//!
//! Kubernetes names never contain `_`, so `_` separates parts unambiguously.

/// The Envoy listener for one port of one Gateway: `edge_ls_<ns>_<gw>_<port>`.
pub fn listener(namespace: &str, gateway: &str, port: u16) -> String {
    format!("edge_ls_{namespace}_{gateway}_{port}")
}

/// The Envoy listener for a UDP port of one Gateway: `edge_ls_<ns>_<gw>_<port>_udp`
/// (a TCP listener may bind the same port number).
pub fn udp_listener(namespace: &str, gateway: &str, port: u16) -> String {
    format!("edge_ls_{namespace}_{gateway}_{port}_udp")
}

/// The cluster of one UDP Service port: `edge_cl_<ns>_<svc>_<port>_udp`.
pub fn udp_cluster(namespace: &str, service: &str, port: u16) -> String {
    format!("edge_cl_{namespace}_{service}_{port}_udp")
}

/// The cluster standing for a UDPRoute's weighted backends (Envoy's UDP proxy
/// routes to one cluster): `edge_cl_udproute_<ns>_<route>`.
pub fn udp_route_cluster(namespace: &str, route: &str) -> String {
    format!("edge_cl_udproute_{namespace}_{route}")
}

/// The route table of an HTTP port: `edge_rt_<ns>_<gw>_<port>`; of one HTTPS
/// listener's filter chain: `edge_rt_<ns>_<gw>_<port>_<listener>`.
pub fn route_table(namespace: &str, gateway: &str, port: u16, listener: Option<&str>) -> String {
    match listener {
        None => format!("edge_rt_{namespace}_{gateway}_{port}"),
        Some(l) => format!("edge_rt_{namespace}_{gateway}_{port}_{l}"),
    }
}

/// The cluster of one Service port: `edge_cl_<ns>_<svc>_<port>`.
pub fn cluster(namespace: &str, service: &str, port: u16) -> String {
    format!("edge_cl_{namespace}_{service}_{port}")
}

/// A TLS cluster as one Gateway uses it, presenting that Gateway's backend
/// client certificate.
pub fn cluster_of_gateway(cluster: &str, gateway_ns: &str, gateway: &str) -> String {
    format!("{cluster}_for_{gateway_ns}_{gateway}")
}

/// The key of one route object in what is served: `<kind>/<namespace>/<name>`.
/// Envoy route names, L4 forwards and TLS chains of that route start with it.
pub fn route_key(kind: &str, namespace: &str, name: &str) -> String {
    format!("{kind}/{namespace}/{name}")
}

/// The route key an Envoy route name (`<kind>/<ns>/<name>/rule/<i>/match/<j>`)
/// starts with; `None` for a name no route owns.
pub fn route_key_of(route_name: &str) -> Option<&str> {
    let mut slashes = route_name.match_indices('/').map(|(i, _)| i);
    let _kind = slashes.next()?;
    let _namespace = slashes.next()?;
    Some(slashes.next().map_or(route_name, |end| &route_name[..end]))
}

/// The name of the virtual host that catches every hostname.
pub const CATCH_ALL_VHOST: &str = "*";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_readable_and_distinct() {
        assert_eq!(listener("infra", "gw", 80), "edge_ls_infra_gw_80");
        assert_eq!(route_table("infra", "gw", 80, None), "edge_rt_infra_gw_80");
        assert_eq!(
            route_table("infra", "gw", 443, Some("https-1")),
            "edge_rt_infra_gw_443_https-1"
        );
        assert_eq!(cluster("app", "web", 8080), "edge_cl_app_web_8080");
        assert_ne!(listener("a-b", "c", 1), listener("a", "b-c", 1));
    }

    #[test]
    fn route_keys_are_the_prefix_of_envoy_route_names() {
        let key = route_key("HTTPRoute", "app", "web");
        assert_eq!(key, "HTTPRoute/app/web");
        assert_eq!(
            route_key_of("HTTPRoute/app/web/rule/0/match/1"),
            Some("HTTPRoute/app/web")
        );
        assert_eq!(route_key_of("TCPRoute/app/echo"), Some("TCPRoute/app/echo"));
        assert_eq!(route_key_of("https"), None);
        assert_eq!(route_key_of("edge/x"), None);
    }
}
