//! Live: several Gateways and 26 HTTPRoutes with overlapping hostnames and
//! hostname-less routes, served by a real Envoy through aether-edge's ADS; every
//! request is checked against the backend it must reach. Then config changes
//! propagate, and a broken file never takes down what runs (it keeps its last
//! good version) nor holds back another file.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use support::*;

const GATEWAYS: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: aether}
spec: {controllerName: gateway.aether.io/edge}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: not-ours}
spec: {controllerName: example.com/someone-else}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
# team-a's routes may use the backends of default.
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: team-a-to-default, namespace: default}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: team-a}]
  to: [{group: "", kind: Service}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw-main, namespace: default}
spec:
  gatewayClassName: aether
  listeners:
  - {name: http, protocol: HTTP, port: P1, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw-hosts, namespace: default}
spec:
  gatewayClassName: aether
  listeners:
  - {name: wild, protocol: HTTP, port: P2, hostname: "*.example.com"}
  - {name: foo, protocol: HTTP, port: P2, hostname: foo.example.com}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw-other, namespace: default}
spec:
  gatewayClassName: aether
  listeners:
  - {name: http, protocol: HTTP, port: P3}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw-foreign, namespace: default}
spec:
  gatewayClassName: not-ours
  listeners:
  - {name: http, protocol: HTTP, port: P4}
"#;

/// `name hostnames parent match backend` in a compact form, expanded below.
fn route(name: &str, ns: &str, parent: &str, hostnames: &[&str], rule: &str) -> String {
    route_created(name, ns, None, parent, hostnames, rule)
}

fn route_created(
    name: &str,
    ns: &str,
    created: Option<&str>,
    parent: &str,
    hostnames: &[&str],
    rule: &str,
) -> String {
    let created = created
        .map(|t| format!(", creationTimestamp: \"{t}\""))
        .unwrap_or_default();
    let hosts = if hostnames.is_empty() {
        String::new()
    } else {
        format!(
            "  hostnames: [{}]\n",
            hostnames
                .iter()
                .map(|h| format!("\"{h}\""))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {ns}{created}}}\nspec:\n  parentRefs: [{parent}]\n{hosts}  rules:\n{rule}"
    )
}

fn to(backend: &str) -> String {
    format!("    backendRefs: [{{name: {backend}, namespace: default, port: 80}}]\n")
}

fn prefix(p: &str) -> String {
    format!("  - matches: [{{path: {{type: PathPrefix, value: {p}}}}}]\n")
}

const MAIN: &str = "{name: gw-main, namespace: default}";
const HOSTS: &str = "{name: gw-hosts, namespace: default}";
const OTHER: &str = "{name: gw-other, namespace: default}";

fn main_routes() -> String {
    let mut y = String::new();
    y += &route("catchall", "default", MAIN, &[], &(prefix("/") + &to("b0")));
    y += &route("api", "default", MAIN, &[], &(prefix("/api") + &to("b1")));
    y += &route(
        "api-v2",
        "default",
        MAIN,
        &[],
        &(prefix("/api/v2") + &to("b2")),
    );
    y += &route(
        "api-exact",
        "default",
        MAIN,
        &[],
        &("  - matches: [{path: {type: Exact, value: /api/v2/status}}]\n".to_string() + &to("b3")),
    );
    y += &route(
        "api-canary",
        "default",
        MAIN,
        &[],
        &("  - matches: [{path: {type: PathPrefix, value: /api}, headers: [{name: x-canary, value: \"true\"}]}]\n".to_string() + &to("b4")),
    );
    y += &route(
        "api-post",
        "default",
        MAIN,
        &[],
        &("  - matches: [{path: {type: PathPrefix, value: /api}, method: POST}]\n".to_string()
            + &to("b5")),
    );
    y += &route(
        "a-site",
        "default",
        MAIN,
        &["a.example.com"],
        &(prefix("/") + &to("b6")),
    );
    y += &route(
        "a-docs",
        "default",
        MAIN,
        &["a.example.com"],
        &(prefix("/docs") + &to("b7")),
    );
    y += &route(
        "wild-site",
        "default",
        MAIN,
        &["*.example.com"],
        &(prefix("/") + &to("b8")),
    );
    y += &route(
        "search",
        "default",
        MAIN,
        &[],
        &("  - matches: [{path: {type: PathPrefix, value: /search}, queryParams: [{name: q, value: x}]}]\n".to_string() + &to("b9")),
    );
    y += &route(
        "shop",
        "team-a",
        MAIN,
        &["shop.example.com"],
        &(prefix("/") + &to("b1")),
    );
    y += &route("abc", "default", MAIN, &[], &(prefix("/abc/") + &to("b2")));
    y
}

fn hosts_routes() -> String {
    let mut y = String::new();
    let wild = "{name: gw-hosts, namespace: default, sectionName: wild}";
    let exact = "{name: gw-hosts, namespace: default, sectionName: foo}";
    y += &route("r-wild", "default", wild, &[], &(prefix("/") + &to("b3")));
    y += &route("r-foo", "default", exact, &[], &(prefix("/") + &to("b4")));
    y += &route(
        "r-x",
        "default",
        HOSTS,
        &["x.example.com"],
        &(prefix("/") + &to("b5")),
    );
    y += &route(
        "r-nomatch",
        "default",
        HOSTS,
        &["other.org"],
        &(prefix("/") + &to("b6")),
    );
    y += &route(
        "r-foo-api",
        "default",
        HOSTS,
        &["foo.example.com"],
        &(prefix("/api") + &to("b6")),
    );
    y
}

fn other_routes(one_backend: &str) -> String {
    let mut y = String::new();
    y += &route(
        "o-1",
        "default",
        OTHER,
        &[],
        &(prefix("/one") + &to(one_backend)),
    );
    y += &route("o-2", "default", OTHER, &[], &(prefix("/two") + &to("b8")));
    y += &route(
        "o-3",
        "default",
        OTHER,
        &["three.test"],
        &(prefix("/") + &to("b9")),
    );
    // Same match on two routes: the older one wins.
    let (newer, older) = (Some("2024-01-01T00:00:00Z"), Some("2020-01-01T00:00:00Z"));
    y += &route_created(
        "o-newer",
        "default",
        newer,
        OTHER,
        &[],
        &(prefix("/same") + &to("b1")),
    );
    y += &route_created(
        "o-older",
        "default",
        older,
        OTHER,
        &[],
        &(prefix("/same") + &to("b0")),
    );
    y += &route(
        "o-redirect",
        "default",
        OTHER,
        &[],
        "  - matches: [{path: {type: PathPrefix, value: /old}}]\n    filters:\n    - type: RequestRedirect\n      requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}, statusCode: 301}\n",
    );
    y += &route(
        "o-broken",
        "default",
        OTHER,
        &[],
        &(prefix("/broken") + "    backendRefs: [{name: does-not-exist, port: 80}]\n"),
    );
    y += &route(
        "o-header",
        "default",
        OTHER,
        &[],
        &(prefix("/hdr")
            + "    filters:\n    - type: ResponseHeaderModifier\n      responseHeaderModifier: {set: [{name: x-route, value: o-header}]}\n"
            + &to("b2")),
    );
    y += &route(
        "o-foreign",
        "default",
        "{name: gw-foreign}",
        &[],
        &(prefix("/") + &to("b3")),
    );
    y
}

#[derive(Debug, Clone, PartialEq)]
enum Want {
    Backend(&'static str),
    Status(u16),
    Redirect(u16, String),
}

struct Case {
    port: u16,
    method: &'static str,
    host: String,
    path: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    want: Want,
}

fn check(case: &Case) -> Result<(), String> {
    let addr = format!("127.0.0.1:{}", case.port);
    let r = http_request(&addr, case.method, &case.host, case.path, &case.headers)
        .map_err(|e| format!("{e}"))?;
    let got = match (&case.want, r.status) {
        (Want::Backend(_), 200) => Want::Backend(
            ["b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9"]
                .into_iter()
                .find(|b| Some(*b) == r.backend())
                .unwrap_or("?"),
        ),
        (Want::Redirect(_, want_loc), s @ (301 | 302)) => {
            if r.header("location") == Some(want_loc.as_str()) {
                Want::Redirect(s, want_loc.clone())
            } else {
                return Err(format!("location {:?}", r.header("location")));
            }
        }
        (_, s) => Want::Status(s),
    };
    if got == case.want {
        Ok(())
    } else {
        Err(format!("got {got:?} ({} {:?})", r.status, r.body))
    }
}

#[test]
fn gateways_and_routes_reach_the_right_backends_and_follow_changes() {
    let dir = temp_dir("routing");
    let logs = temp_dir("routing-logs");
    let backends: BTreeMap<String, Backend> = (0..10)
        .map(|i| (format!("b{i}"), Backend::start(&format!("b{i}"))))
        .collect();
    let (p1, p2, p3, p4) = (free_port(), free_port(), free_port(), free_port());
    let gateways = GATEWAYS
        .replace("P1", &p1.to_string())
        .replace("P2", &p2.to_string())
        .replace("P3", &p3.to_string())
        .replace("P4", &p4.to_string());
    std::fs::write(dir.join("00-gateways.yaml"), gateways).unwrap();
    let services: String = backends
        .values()
        .map(|b| b.yaml("default") + "---\n")
        .collect();
    std::fs::write(dir.join("01-services.yaml"), services).unwrap();
    std::fs::write(dir.join("10-main.yaml"), main_routes()).unwrap();
    std::fs::write(dir.join("11-hosts.yml"), hosts_routes()).unwrap();
    std::fs::write(dir.join("12-other.yaml"), other_routes("b7")).unwrap();

    let xds = format!("127.0.0.1:{}", free_port());
    let admin = format!("127.0.0.1:{}", free_port());
    let mut agent = standalone(&dir, &xds, &admin, &logs, &[]);
    let _envoy = envoy("routing", &xds, false, &logs);

    let c = |port: u16, host: &str, path: &'static str, want: Want| Case {
        port,
        method: "GET",
        host: host.to_string(),
        path,
        headers: vec![],
        want,
    };
    let h1 = |h: &str| format!("{h}:{p1}");
    let mut cases = vec![
        c(p1, "anything.test", "/", Want::Backend("b0")),
        c(p1, &h1("anything.test"), "/x/y", Want::Backend("b0")),
        c(p1, "anything.test", "/api", Want::Backend("b1")),
        c(p1, "anything.test", "/api/v1", Want::Backend("b1")),
        c(p1, "anything.test", "/apix", Want::Backend("b0")),
        c(p1, "anything.test", "/api/v2/x", Want::Backend("b2")),
        c(p1, "anything.test", "/api/v2/status", Want::Backend("b3")),
        c(p1, "anything.test", "/abc", Want::Backend("b2")),
        c(p1, "anything.test", "/abc/", Want::Backend("b2")),
        c(p1, "anything.test", "/abc/def", Want::Backend("b2")),
        c(p1, "anything.test", "/abcd", Want::Backend("b0")),
        c(p1, &h1("a.example.com"), "/", Want::Backend("b6")),
        c(p1, "a.example.com", "/docs/intro", Want::Backend("b7")),
        c(p1, "b.example.com", "/", Want::Backend("b8")),
        c(p1, "deep.b.example.com", "/", Want::Backend("b8")),
        c(p1, "shop.example.com", "/cart", Want::Backend("b1")),
        c(p1, "anything.test", "/search?q=x", Want::Backend("b9")),
        c(p1, "anything.test", "/search?q=y", Want::Backend("b0")),
        c(p2, "bar.example.com", "/", Want::Backend("b3")),
        c(p2, "foo.example.com", "/", Want::Backend("b4")),
        c(p2, "foo.example.com", "/api/x", Want::Backend("b6")),
        c(p2, "x.example.com", "/", Want::Backend("b5")),
        c(p2, "other.org", "/", Want::Status(404)),
        c(p2, "example.com", "/", Want::Status(404)),
        c(p3, "any.test", "/one", Want::Backend("b7")),
        c(p3, "any.test", "/two/2", Want::Backend("b8")),
        c(p3, "three.test", "/", Want::Backend("b9")),
        c(p3, "any.test", "/", Want::Status(404)),
        c(p3, "any.test", "/same", Want::Backend("b0")),
        c(p3, "any.test", "/broken", Want::Status(500)),
        c(p3, "any.test", "/hdr", Want::Backend("b2")),
        // No scheme or port in the filter: Location keeps the listener's port.
        c(
            p3,
            "any.test",
            "/old/page",
            Want::Redirect(301, format!("http://any.test:{p3}/new/page")),
        ),
    ];
    cases.push(Case {
        headers: vec![("x-canary", "true")],
        ..c(p1, "anything.test", "/api/x", Want::Backend("b4"))
    });
    cases.push(Case {
        method: "POST",
        headers: vec![("x-canary", "true")],
        ..c(p1, "anything.test", "/api/x", Want::Backend("b5"))
    });

    // Converge: every case holds at once.
    let started = Instant::now();
    let converge = |cases: &[Case], what: &str, agent: &mut Agent| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let failures: Vec<String> = cases
                .iter()
                .filter_map(|k| {
                    check(k)
                        .err()
                        .map(|e| format!("{} {}{} on :{} → {e}", k.method, k.host, k.path, k.port))
                })
                .collect();
            if failures.is_empty() {
                return;
            }
            assert!(
                agent.proc.is_running(),
                "aether-edge exited:\n{}",
                agent.proc.log_text()
            );
            if Instant::now() > deadline {
                panic!(
                    "{what}: {} of {} cases fail:\n{}\n--- aether-edge log ---\n{}",
                    failures.len(),
                    cases.len(),
                    failures.join("\n"),
                    agent.proc.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    converge(&cases, "initial config", &mut agent);
    eprintln!("{} cases converged in {:?}", cases.len(), started.elapsed());

    // Nothing reaches a Gateway of another class.
    assert!(http_get(&format!("127.0.0.1:{p4}"), "x", "/", &[]).is_err());
    let r = http_get(&format!("127.0.0.1:{p3}"), "any.test", "/hdr", &[]).unwrap();
    assert_eq!(r.header("x-route"), Some("o-header"));

    // The status the admin endpoint reports is gated on Envoy's ACK.
    let status = wait_until(Duration::from_secs(10), "programmed status", || {
        let s = agent.admin_get("/debug/status")?;
        (s.status == 200 && !s.body.contains("Pending")).then_some(s.body)
    });
    assert!(status.contains("gw-main"), "{status}");
    assert!(status.contains("NoMatchingListenerHostname"), "{status}");

    // A change propagates: o-1 moves from b7 to b8.
    let t = Instant::now();
    std::fs::write(dir.join("12-other.yaml"), other_routes("b8")).unwrap();
    converge(
        &[c(p3, "any.test", "/one", Want::Backend("b8"))],
        "route update",
        &mut agent,
    );
    eprintln!("update propagated in {:?}", t.elapsed());

    // A file that breaks is reported with its name and line and keeps its last
    // good version; it holds back no other file.
    std::fs::write(
        dir.join("12-other.yaml"),
        "kind: HTTPRoute\nmetadata: [oops\n",
    )
    .unwrap();
    wait_until(Duration::from_secs(5), "the load error in the log", || {
        agent
            .proc
            .log_text()
            .contains("12-other.yaml:")
            .then_some(())
    });
    std::fs::write(
        dir.join("14-extra.yaml"),
        route(
            "o-extra",
            "default",
            OTHER,
            &[],
            &(prefix("/extra") + &to("b9")),
        ),
    )
    .unwrap();
    converge(
        &[c(p3, "any.test", "/extra", Want::Backend("b9"))],
        "another file loads while one is broken",
        &mut agent,
    );
    converge(
        &cases[..24],
        "last good config while a file is broken",
        &mut agent,
    );
    converge(
        &[c(p3, "any.test", "/one", Want::Backend("b8"))],
        "the broken file's last good version still serving",
        &mut agent,
    );

    // Removing the broken file removes its routes: gw-other keeps only /extra.
    std::fs::remove_file(dir.join("12-other.yaml")).unwrap();
    converge(
        &[
            c(p3, "any.test", "/one", Want::Status(404)),
            c(p3, "any.test", "/extra", Want::Backend("b9")),
        ],
        "route deletion",
        &mut agent,
    );
    drop(backends);
}
