//! Live: a Gateway listener's pre-routing ExternalAuth filter, through a real
//! Envoy served by `aether-edge standalone`.
//!
//! ```text
//!  client ─Host auth.example.com─► Envoy :P ─ ext_authz ─► AuthServer (x-allow: yes → 200 + x-user: alice,
//!                                                │                   else 403)
//!                                                └─ then routing: x-user: alice → "vip", else "web"
//!  client ─Host open.example.com─► the same port, another listener: no check
//!  client ─Host ext.example.com──► a listener with an ExtensionRef: not accepted, 500
//!  client ─any Host─► Envoy :P2 (hostname-less listener) ─ ext_authz over gRPC ─► GrpcAuthServer (same rule)
//! ```

use crate::support::*;
use std::time::Duration;

fn edge_yaml(
    (port, grpc_port): (u16, u16),
    (authz, grpc_authz): (&AuthServer, &GrpcAuthServer),
    web: &Backend,
    vip: &Backend,
) -> String {
    let filtered = "{type: ExternalAuth, externalAuth: {protocol: HTTP, backendRef: {name: authz, port: 80}, \
                    http: {allowedHeaders: [x-allow], allowedResponseHeaders: [x-user]}}}";
    let grpc = "{type: ExternalAuth, externalAuth: {protocol: GRPC, backendRef: {name: authz-grpc, port: 80}}}";
    let extension =
        "{type: ExtensionRef, extensionRef: {group: example.com, kind: Claims, name: tenant}}";
    [
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n".to_string(),
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  \
             - {{name: filtered, protocol: HTTP, port: {port}, hostname: auth.example.com, filters: {{requests: [{filtered}]}}}}\n  \
             - {{name: open, protocol: HTTP, port: {port}, hostname: open.example.com}}\n  \
             - {{name: extension, protocol: HTTP, port: {port}, hostname: ext.example.com, filters: {{requests: [{extension}]}}}}\n  \
             - {{name: grpc, protocol: HTTP, port: {grpc_port}, filters: {{requests: [{grpc}]}}}}\n"
        ),
        authz.yaml("default", "authz"),
        grpc_authz.yaml("default", "authz-grpc"),
        web.yaml("default"),
        vip.yaml("default"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: default}\nspec:\n  parentRefs: [{name: edge}]\n  rules:\n  \
         - matches: [{headers: [{name: x-user, value: alice}]}]\n    backendRefs: [{name: vip, port: 80}]\n  \
         - backendRefs: [{name: web, port: 80}]\n".to_string(),
    ]
    .join("---\n")
}

#[test]
fn a_listener_filter_checks_every_request_of_its_listener_before_routing_and_no_other() {
    let (dir, logs) = (temp_dir("filters"), temp_dir("filters-logs"));
    let (authz, grpc_authz) = (AuthServer::start(), GrpcAuthServer::start());
    let (web, vip) = (Backend::start("web"), Backend::start("vip"));
    let (port, grpc_port) = (free_port(), free_port());
    let yaml = edge_yaml((port, grpc_port), (&authz, &grpc_authz), &web, &vip);
    std::fs::write(dir.join("edge.yaml"), yaml).unwrap();
    let (xds, admin) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let agent = Agent::start(agent_bin(), &dir, &xds, &admin, &logs, &[]);
    let _envoy = envoy("filters", &xds, true, &logs);
    let addr = format!("127.0.0.1:{port}");
    let get = |host: &str, headers: &[(&str, &str)]| http_get(&addr, host, "/", headers).ok();

    // Allowed: the server's x-user reaches routing, which runs after the check.
    wait_until(Duration::from_secs(30), "an allowed request", || {
        let r = get("auth.example.com", &[("x-allow", "yes")])?;
        (r.backend() == Some("vip")).then_some(())
    });
    // Denied before routing: the server's 403, whatever the request claims.
    let before = authz.checks();
    let denied = get("auth.example.com", &[("x-user", "alice")]).unwrap();
    assert_eq!((denied.status, denied.body.as_str()), (403, "denied"));
    assert_eq!(authz.checks(), before + 1);
    let bare = get("auth.example.com", &[]).map(|r| r.status);
    assert_eq!(bare, Some(403));

    // The other listener of the same port and Envoy listener: never checked.
    let before = authz.checks();
    for _ in 0..3 {
        let open = get("open.example.com", &[]).unwrap();
        assert_eq!(open.backend(), Some("web"), "{open:?}");
    }
    assert_eq!(authz.checks(), before, "open.example.com was not checked");

    // An ExtensionRef we cannot run: not accepted, and its hostname fails
    // closed (never served by a sibling listener's routes).
    // Over gRPC, on a listener of its own port: the same judgement.
    let grpc_addr = format!("127.0.0.1:{grpc_port}");
    let get_grpc =
        |headers: &[(&str, &str)]| http_get(&grpc_addr, "any.example.com", "/", headers).ok();
    wait_until(
        Duration::from_secs(30),
        "an allowed request over gRPC",
        || (get_grpc(&[("x-allow", "yes")])?.backend() == Some("vip")).then_some(()),
    );
    let before = grpc_authz.checks();
    let denied = get_grpc(&[("x-user", "alice")]).unwrap();
    assert_eq!((denied.status, denied.body.as_str()), (403, "denied"));
    assert_eq!(grpc_authz.checks(), before + 1);

    let ext = get("ext.example.com", &[("x-allow", "yes")]).unwrap();
    assert_eq!(ext.status, 500, "{ext:?}");
    let status = agent.admin_get("/debug/status").unwrap().body;
    assert!(
        status.contains("reason: UnsupportedValue")
            && status.contains("filters.requests[0]: ExtensionRef example.com/Claims tenant"),
        "{status}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&logs);
}
