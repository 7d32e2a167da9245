//! Stable, readable Envoy resource names: one name, one input, whatever the
//! input's names hold. Kubernetes names never contain `_`, but a name is
//! never trusted to be one (standalone YAML is checked by our loader, not by an
//! API server; a tenant whose Service `b_c` in `a` read the same as Service
//! `c` in `a_b` would get the other's traffic). So each part is escaped (see
//! [`part`]) and no part holds `_`; the prefix and the count of parts tell the
//! kinds apart:
//!
//! ```text
//!  listener          edge_ls_<ns>_<gw>_<port>               3 parts
//!  UDP listener      edge_ls_<ns>_<gw>_<port>_udp           4 parts
//!  route table       edge_rt_<ns>_<gw>_<port>[_<listener>]  3 or 4 parts
//!  cluster           edge_cl_<ns>_<svc>_<port>              3 parts
//!  UDP cluster       edge_cl_<ns>_<svc>_<port>_udp          4 parts
//!  ... of a Gateway  <cluster>_for_<ns>_<gw>                6 or 7 parts
//!  UDPRoute cluster  edge_udproute_<ns>_<route>             its own prefix
//!  XBackend cluster  edge_xb_<ns>_<xbackend>_<port>         its own prefix
//!  certificate from Secret app/web            edge_cert_app_web
//!  CA bundle from ConfigMaps app/ca, infra/ca edge_ca_app_ca_infra_ca   (pairs: even part count)
//!  CA bundle known by nothing but its PEM     edge_ca_<sha256 hex>      (one part: odd count)
//!  a part holding `_`, `%`, `/`, ...          each such byte as %XX: `a_b` → a%5Fb
//! ```
//!
//! A valid Kubernetes name escapes to itself, so names read as before.

/// The Envoy listener for one port of one Gateway: `edge_ls_<ns>_<gw>_<port>`.
pub fn listener(namespace: &str, gateway: &str, port: u16) -> String {
    format!("edge_ls_{}_{}_{port}", part(namespace), part(gateway))
}

/// The Envoy listener for a UDP port of one Gateway: `edge_ls_<ns>_<gw>_<port>_udp`
/// (a TCP listener may bind the same port number).
pub fn udp_listener(namespace: &str, gateway: &str, port: u16) -> String {
    format!("{}_udp", listener(namespace, gateway, port))
}

/// The cluster of one UDP Service port: `edge_cl_<ns>_<svc>_<port>_udp`.
pub fn udp_cluster(namespace: &str, service: &str, port: u16) -> String {
    format!("{}_udp", cluster(namespace, service, port))
}

/// The cluster standing for a UDPRoute's weighted backends (Envoy's UDP proxy
/// routes to one cluster): `edge_udproute_<ns>_<route>` (under `edge_cl_`, the
/// UDPRoute `80` in `app` would read as port 80 of Service `app` in `udproute`).
pub fn udp_route_cluster(namespace: &str, route: &str) -> String {
    format!("edge_udproute_{}_{}", part(namespace), part(route))
}

/// The route table of an HTTP port: `edge_rt_<ns>_<gw>_<port>`; of one HTTPS
/// listener's filter chain: `edge_rt_<ns>_<gw>_<port>_<listener>`.
pub fn route_table(namespace: &str, gateway: &str, port: u16, listener: Option<&str>) -> String {
    let table = format!("edge_rt_{}_{}_{port}", part(namespace), part(gateway));
    match listener {
        None => table,
        Some(l) => format!("{table}_{}", part(l)),
    }
}

/// The cluster of one Service port: `edge_cl_<ns>_<svc>_<port>`.
pub fn cluster(namespace: &str, service: &str, port: u16) -> String {
    format!("edge_cl_{}_{}_{port}", part(namespace), part(service))
}

/// The cluster of an XBackend: `edge_xb_<ns>_<name>_<port>` (its own prefix:
/// an XBackend and a Service may share a name).
pub fn xbackend_cluster(namespace: &str, xbackend: &str, port: u16) -> String {
    format!("edge_xb_{}_{}_{port}", part(namespace), part(xbackend))
}

/// A TLS cluster as one Gateway uses it, presenting that Gateway's backend
/// client certificate.
pub fn cluster_of_gateway(cluster: &str, gateway_ns: &str, gateway: &str) -> String {
    format!("{cluster}_for_{}_{}", part(gateway_ns), part(gateway))
}

/// The SDS secret of a certificate (chain and private key) read from the
/// Secret `secret` (`namespace/name`): `edge_cert_<ns>_<name>`. Every listener
/// and cluster presenting it names this one secret; a rotation changes its
/// content, never its name.
pub fn certificate(secret: &str) -> String {
    match secret.split_once('/') {
        Some((ns, name)) => format!("edge_cert_{}_{}", part(ns), part(name)),
        // One part, so never equal to a `namespace/name` one.
        None => format!("edge_cert_{}", part(secret)),
    }
}

/// The SDS secret of a CA bundle read from these ConfigMaps, in order:
/// `edge_ca_<ns>_<name>[_<ns>_<name>…]`; `None` with no sources (see
/// [`ca_bundle_by_digest`]).
pub fn ca_bundle(sources: &[crate::ObjectRef]) -> Option<String> {
    if sources.is_empty() {
        return None;
    }
    let mut name = "edge_ca".to_string();
    for s in sources {
        name.push('_');
        name.push_str(&part(&s.namespace));
        name.push('_');
        name.push_str(&part(&s.name));
    }
    Some(name)
}

/// The SDS secret of a CA bundle with no sources, by the hex digest of its
/// PEM: `edge_ca_<hex>`, one part where [`ca_bundle`] has an even count.
pub fn ca_bundle_by_digest(hex: &str) -> String {
    format!("edge_ca_{}", part(hex))
}

/// One part of a name: ASCII letters, digits, `-` and `.` as they are, every
/// other byte as `%XX` (so `_` separates parts and `%` only escapes): distinct
/// parts, distinct escapes.
pub fn part(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for b in part.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'.' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The key of one route object in what is served: `<kind>/<namespace>/<name>`.
/// Envoy route names, L4 forwards and TLS chains of that route start with it.
pub fn route_key(kind: crate::RouteKind, namespace: &str, name: &str) -> String {
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
        assert_eq!(xbackend_cluster("app", "web", 443), "edge_xb_app_web_443");
        assert_ne!(listener("a-b", "c", 1), listener("a", "b-c", 1));
    }

    /// Names that `_` joins would confuse stay apart, kind by kind.
    #[test]
    fn names_are_one_per_input_whatever_the_input() {
        let names = [
            cluster("a", "b_c", 80),
            cluster("a_b", "c", 80),
            cluster("udproute", "app", 80),
            udp_route_cluster("app", "80"),
            udp_cluster("a", "b", 80),
            cluster("a", "b_80", 0),
            cluster_of_gateway(&cluster("a", "b", 80), "c_d", "e"),
            cluster_of_gateway(&cluster("a", "b", 80), "c", "d_e"),
            listener("a_b", "c", 80),
            listener("a", "b_c", 80),
            udp_listener("a", "b", 80),
            route_table("a", "b", 80, Some("c_d")),
            route_table("a", "b_80_c", 80, None),
            route_table("ns", "gw", 443, Some("set-ns/set/https")),
        ];
        let distinct: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
        assert_eq!(cluster("a", "b_c", 80), "edge_cl_a_b%5Fc_80");
        assert_eq!(udp_route_cluster("app", "dns"), "edge_udproute_app_dns");
    }

    #[test]
    fn secret_names_are_readable_and_one_per_input() {
        use crate::ObjectRef;
        assert_eq!(certificate("app/web"), "edge_cert_app_web");
        assert_eq!(
            ca_bundle(&[ObjectRef::new("app", "ca"), ObjectRef::new("infra", "ca")]).as_deref(),
            Some("edge_ca_app_ca_infra_ca")
        );
        assert_eq!(ca_bundle(&[]), None);
        // Inputs that plain `_` joins would confuse.
        assert_eq!(certificate("a_b/c"), "edge_cert_a%5Fb_c");
        let names = [
            certificate("a_b/c"),
            certificate("a/b_c"),
            certificate("a/b/c"),
            certificate("a%2Fb/c"),
            certificate("a_b_c"),
            certificate("a/b_c/"),
        ];
        let distinct: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
        let bundles = [
            ca_bundle(&[ObjectRef::new("a", "b_c_d")]),
            ca_bundle(&[ObjectRef::new("a", "b"), ObjectRef::new("c", "d")]),
            ca_bundle(&[ObjectRef::new("a_b", "c_d")]),
            Some(ca_bundle_by_digest("a")),
            Some(ca_bundle_by_digest("a_b")),
        ];
        let distinct: std::collections::BTreeSet<&Option<String>> = bundles.iter().collect();
        assert_eq!(distinct.len(), bundles.len(), "{bundles:?}");
        assert_eq!(part("%"), "%25");
    }

    #[test]
    fn route_keys_are_the_prefix_of_envoy_route_names() {
        let key = route_key(crate::RouteKind::Http, "app", "web");
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
