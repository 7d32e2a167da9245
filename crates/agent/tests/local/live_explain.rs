//! Live: `aether-edge explain --admin` against a running standalone aether-edge and
//! a real Envoy, each answer checked against what Envoy really answers:
//!
//! - a 404 whose reason is the only route for the host being refused
//!   (NotAllowedByListeners), which that Envoy serves;
//! - a 404 from a NACKed route table: the route is computed, Envoy NACKed it and
//!   still serves the previous table, and explain says so with Envoy's error;
//! - a 404 from an Envoy that is behind (stopped): explain names the node and
//!   the older config it still serves, and once it resumes, that it serves it.

use crate::support::*;
use std::process::Command;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn gateway_yaml(port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: aether}}\nspec: {{controllerName: gateway.aether.io/edge}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: default}}\nspec:\n  gatewayClassName: aether\n  listeners:\n  - {{name: http, protocol: HTTP, port: {port}}}\n"
    )
}

/// An HTTPRoute `name` in `ns` for `host`, `path_type` `path` → `backend`.
fn route_yaml(
    ns: &str,
    name: &str,
    host: &str,
    path_type: &str,
    path: &str,
    backend: &str,
) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: gw, namespace: default}}]\n  hostnames: [{host}]\n  rules:\n  - matches: [{{path: {{type: {path_type}, value: \"{path}\"}}}}]\n    backendRefs: [{{name: {backend}, namespace: default, port: 80}}]\n"
    )
}

struct World {
    dir: std::path::PathBuf,
    logs: std::path::PathBuf,
    gateway: String,
    admin: String,
    agent: Agent,
    envoy: Envoy,
    _backends: Vec<Backend>,
}

fn given_a_served_gateway(tag: &str) -> World {
    let dir = temp_dir(tag);
    let logs = temp_dir(&format!("{tag}-logs"));
    let backends = vec![Backend::start("b0"), Backend::start("b1")];
    let port = free_port();
    std::fs::write(dir.join("gateway.yaml"), gateway_yaml(port)).unwrap();
    let services: String = backends
        .iter()
        .map(|b| b.yaml("default") + "---\n")
        .collect();
    std::fs::write(dir.join("services.yaml"), services).unwrap();
    std::fs::write(
        dir.join("good.yaml"),
        route_yaml("default", "good", "good.test", "PathPrefix", "/", "b0"),
    )
    .unwrap();
    let (xds, admin) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let agent = Agent::start(agent_bin(), &dir, &xds, &admin, &logs, &[]);
    let envoy = envoy("edge-1", &xds, false, &logs);
    let gateway = format!("127.0.0.1:{port}");
    wait_until(WAIT, "good.test served", || {
        let r = http_get(&gateway, "good.test", "/", &[]).ok()?;
        (r.backend() == Some("b0")).then_some(())
    });
    World {
        dir,
        logs,
        gateway,
        admin,
        agent,
        envoy,
        _backends: backends,
    }
}

/// `aether-edge explain GET http://<gateway><path> -H 'Host: host' --admin …`.
fn explain(w: &World, host: &str, path: &str) -> String {
    let out = Command::new(agent_bin())
        .args(["explain", "GET", &format!("http://{}{path}", w.gateway)])
        .args(["-H", &format!("Host: {host}"), "--admin", &w.admin])
        .output()
        .expect("running aether-edge explain");
    assert!(out.status.success(), "explain failed: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A caveat that node edge-1 does not serve the config explained: it serves an
/// older one, or has some of this one's resources not ACKed at all (which of the
/// two depends on how far its ACKs got).
fn names_edge_1_behind(text: &str) -> bool {
    text.contains("! node edge-1 does not serve this config of Gateway default/gw yet")
        || text.contains("! node edge-1 still serves an older config of Gateway default/gw")
}

fn status_of(w: &World, host: &str, path: &str) -> u16 {
    http_get(&w.gateway, host, path, &[])
        .map(|r| r.status)
        .unwrap_or(0)
}

#[test]
fn explain_says_why_envoy_answers_404() {
    let w = given_a_served_gateway("explain");
    a_refused_route_is_named_as_the_reason(&w);
    a_refused_route_is_named_with_envoys_error(&w);
    drop(w.agent);
    let _ = &w.logs;
}

fn a_refused_route_is_named_as_the_reason(w: &World) {
    // The listener allows routes of its own namespace only.
    let other = "apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n---\n".to_string()
        + &route_yaml("other", "remote", "refused.test", "PathPrefix", "/", "b1");
    std::fs::write(w.dir.join("refused.yaml"), other).unwrap();
    let text = wait_until(WAIT, "explain names the refused route", || {
        let t = explain(w, "refused.test", "/");
        t.contains("NotAllowedByListeners").then_some(t)
    });
    println!("{text}");
    assert!(text.contains("→ 404 from Envoy"), "{text}");
    assert!(
        text.contains("a route for this host was refused: NotAllowedByListeners"),
        "{text}"
    );
    assert!(text.contains("HTTPRoute other/remote"), "{text}");
    assert!(text.contains("node edge-1 serves it"), "{text}");
    assert!(
        !text.contains(" ! "),
        "no caveat: Envoy serves this config\n{text}"
    );
    assert_eq!(
        status_of(w, "refused.test", "/"),
        404,
        "what Envoy really answers"
    );
}

/// Translation takes the regex; Envoy's RE2 program for it is over the limit our
/// bootstraps set, so Envoy NACKs the route table and keeps the previous one.
fn a_refused_route_is_named_with_envoys_error(w: &World) {
    let long = format!("/{}", "a".repeat(997));
    std::fs::write(
        w.dir.join("bad.yaml"),
        route_yaml(
            "default",
            "bad",
            "bad.test",
            "RegularExpression",
            "/[a-z]{997}",
            "b1",
        ),
    )
    .unwrap();
    let text = wait_until(WAIT, "explain names the refusal", || {
        let t = explain(w, "bad.test", &long);
        t.contains("refused this route").then_some(t)
    });
    println!("{}", text.replace(&long, "/a…a"));
    assert!(
        text.contains("HTTPRoute default/bad rule 0 match 0 wins"),
        "computed: {text}"
    );
    assert!(
        text.contains("→ forwarded to Service default/b1:80"),
        "{text}"
    );
    assert!(names_edge_1_behind(&text), "{text}");
    assert!(text.contains("HTTPRoute/default/bad: Envoy"), "{text}");
    assert!(text.contains("program size"), "Envoy's own error: {text}");
    assert_eq!(
        status_of(w, "bad.test", &long),
        404,
        "Envoy serves the table without the refused route"
    );
}

#[test]
fn explain_names_an_envoy_that_is_behind() {
    let w = given_a_served_gateway("explain-behind");
    w.envoy.proc.signal("STOP");
    std::fs::write(
        w.dir.join("new.yaml"),
        route_yaml("default", "new", "new.test", "PathPrefix", "/", "b1"),
    )
    .unwrap();
    let text = wait_until(WAIT, "explain sees the new route", || {
        let t = explain(&w, "new.test", "/");
        t.contains("HTTPRoute default/new").then_some(t)
    });
    println!("{text}");
    assert!(names_edge_1_behind(&text), "{text}");
    assert!(
        !text.contains("not attached"),
        "Pending is not a refusal: {text}"
    );
    w.envoy.proc.signal("CONT");
    let text = wait_until(WAIT, "explain sees Envoy caught up", || {
        let t = explain(&w, "new.test", "/");
        t.contains("node edge-1 serves it").then_some(t)
    });
    assert!(!text.contains(" ! "), "{text}");
    wait_until(WAIT, "new.test served", || {
        let r = http_get(&w.gateway, "new.test", "/", &[]).ok()?;
        (r.backend() == Some("b1")).then_some(())
    });
}
