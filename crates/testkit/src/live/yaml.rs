//! The objects of a Kubernetes-mode test as YAML one reads at a glance: `mk_*`
//! builders for Gateways and routes; listeners and rules are YAML flow maps.

/// An HTTP listener `http` on port 80.
pub const HTTP_80: &str = "{name: http, protocol: HTTP, port: 80}";

/// Gateway `ns/name` of class `aether` with `listeners` (flow maps).
pub fn mk_gateway(ns: &str, name: &str, listeners: &[&str]) -> String {
    mk_gateway_of("aether", ns, name, listeners)
}

/// Gateway `ns/name` of GatewayClass `class` with `listeners` (flow maps).
pub fn mk_gateway_of(class: &str, ns: &str, name: &str, listeners: &[&str]) -> String {
    let listeners: String = listeners.iter().map(|l| format!("  - {l}\n")).collect();
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n{listeners}"
    )
}

/// A route of `kind` (HTTPRoute, GRPCRoute, TCPRoute, UDPRoute, at v1) `ns/name`
/// whose spec is `spec` (lines indented by two).
pub fn mk_route(kind: &str, ns: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: {kind}\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n{spec}"
    )
}

/// HTTPRoute `ns/name` on Gateway `gw`: path prefix `/<name>` to `backend` port 80.
pub fn mk_prefix_route(ns: &str, name: &str, backend: &str) -> String {
    let rule = format!("{{path: {{type: PathPrefix, value: /{name}}}}}");
    mk_route(
        "HTTPRoute",
        ns,
        name,
        &format!(
            "  parentRefs: [{{name: gw}}]\n  rules:\n  - matches: [{rule}]\n    backendRefs: [{{name: {backend}, port: 80}}]\n"
        ),
    )
}

/// A route of `kind` `ns/name` on `parent` (a parentRef flow map) with one rule
/// sending everything to `backend` port 80.
pub fn mk_route_to(kind: &str, ns: &str, name: &str, parent: &str, backend: &str) -> String {
    mk_route(
        kind,
        ns,
        name,
        &format!(
            "  parentRefs: [{parent}]\n  rules:\n  - backendRefs: [{{name: {backend}, port: 80}}]\n"
        ),
    )
}

/// Service `ns/name` with port `port` (named `http`), and one EndpointSlice per
/// endpoint (`ip`, `port`; ready), named `<name>-<ip>-<port>`: the way one
/// rewrites a Service's endpoints one by one.
pub fn mk_service(ns: &str, name: &str, port: u16, endpoints: &[(&str, u16)]) -> String {
    let service = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  ports:\n  - {{name: http, port: {port}, targetPort: http}}\n"
    );
    let slices = endpoints.iter().map(|(ip, p)| {
        format!(
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-{ip}-{p}\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports:\n- {{name: http, port: {p}}}\nendpoints:\n- addresses: [\"{ip}\"]\n  conditions: {{ready: true}}\n"
        )
    });
    service + &slices.collect::<String>()
}
