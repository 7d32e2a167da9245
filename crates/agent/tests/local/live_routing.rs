//! Live: several Gateways and 26 HTTPRoutes with overlapping hostnames and
//! hostname-less routes, served by a real Envoy through aether-edge's ADS; every
//! request is checked against the backend it must reach. Then config changes
//! propagate, and a broken file never takes down what runs (it keeps its last
//! good version) nor holds back another file.

use crate::support::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

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

/// A rule: match `matches` (a YAML flow map), send to `backend`.
fn rule(matches: &str, backend: &str) -> String {
    format!("  - matches: [{matches}]\n") + &to(backend)
}

/// `(name, namespace, hostnames, rule)` of routes on `parent`, as YAML.
fn routes_on(parent: &str, routes: &[(&str, &str, &[&str], String)]) -> String {
    routes
        .iter()
        .map(|(name, ns, hosts, rule)| route(name, ns, parent, hosts, rule))
        .collect()
}

fn main_routes() -> String {
    let api = "path: {type: PathPrefix, value: /api}";
    let (d, none): (&str, &[&str]) = ("default", &[]);
    routes_on(
        MAIN,
        &[
            ("catchall", d, none, prefix("/") + &to("b0")),
            ("api", d, none, prefix("/api") + &to("b1")),
            ("api-v2", d, none, prefix("/api/v2") + &to("b2")),
            (
                "api-exact",
                d,
                none,
                rule("{path: {type: Exact, value: /api/v2/status}}", "b3"),
            ),
            (
                "api-canary",
                d,
                none,
                rule(
                    &format!("{{{api}, headers: [{{name: x-canary, value: \"true\"}}]}}"),
                    "b4",
                ),
            ),
            (
                "api-post",
                d,
                none,
                rule(&format!("{{{api}, method: POST}}"), "b5"),
            ),
            ("a-site", d, &["a.example.com"], prefix("/") + &to("b6")),
            ("a-docs", d, &["a.example.com"], prefix("/docs") + &to("b7")),
            ("wild-site", d, &["*.example.com"], prefix("/") + &to("b8")),
            (
                "search",
                d,
                none,
                rule(
                    "{path: {type: PathPrefix, value: /search}, queryParams: [{name: q, value: x}]}",
                    "b9",
                ),
            ),
            (
                "shop",
                "team-a",
                &["shop.example.com"],
                prefix("/") + &to("b1"),
            ),
            ("abc", d, none, prefix("/abc/") + &to("b2")),
        ],
    )
}

fn hosts_routes() -> String {
    let wild = "{name: gw-hosts, namespace: default, sectionName: wild}";
    let exact = "{name: gw-hosts, namespace: default, sectionName: foo}";
    let (d, none): (&str, &[&str]) = ("default", &[]);
    let mut y = route("r-wild", d, wild, none, &(prefix("/") + &to("b3")));
    y += &route("r-foo", d, exact, none, &(prefix("/") + &to("b4")));
    y + &routes_on(
        HOSTS,
        &[
            ("r-x", d, &["x.example.com"], prefix("/") + &to("b5")),
            ("r-nomatch", d, &["other.org"], prefix("/") + &to("b6")),
            (
                "r-foo-api",
                d,
                &["foo.example.com"],
                prefix("/api") + &to("b6"),
            ),
        ],
    )
}

fn other_routes(one_backend: &str) -> String {
    let (d, none): (&str, &[&str]) = ("default", &[]);
    let redirect = "  - matches: [{path: {type: PathPrefix, value: /old}}]\n    filters:\n    - type: RequestRedirect\n      requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}, statusCode: 301}\n";
    let header = "    filters:\n    - type: ResponseHeaderModifier\n      responseHeaderModifier: {set: [{name: x-route, value: o-header}]}\n";
    let mut y = routes_on(
        OTHER,
        &[
            ("o-1", d, none, prefix("/one") + &to(one_backend)),
            ("o-2", d, none, prefix("/two") + &to("b8")),
            ("o-3", d, &["three.test"], prefix("/") + &to("b9")),
        ],
    );
    // Same match on two routes: the older one wins.
    let (newer, older) = (Some("2024-01-01T00:00:00Z"), Some("2020-01-01T00:00:00Z"));
    y += &route_created(
        "o-newer",
        d,
        newer,
        OTHER,
        none,
        &(prefix("/same") + &to("b1")),
    );
    y += &route_created(
        "o-older",
        d,
        older,
        OTHER,
        none,
        &(prefix("/same") + &to("b0")),
    );
    y + &routes_on(
        OTHER,
        &[
            ("o-redirect", d, none, redirect.to_string()),
            (
                "o-broken",
                d,
                none,
                prefix("/broken") + "    backendRefs: [{name: does-not-exist, port: 80}]\n",
            ),
            ("o-header", d, none, prefix("/hdr") + header + &to("b2")),
        ],
    ) + &route(
        "o-foreign",
        d,
        "{name: gw-foreign}",
        none,
        &(prefix("/") + &to("b3")),
    )
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
    let mut w = given_four_gateways_and_26_routes();
    let cases = mk_cases(w.ports);
    let started = Instant::now();
    converge(&cases, "initial config", &mut w.agent);
    eprintln!("{} cases converged in {:?}", cases.len(), started.elapsed());
    nothing_reaches_another_class_and_filters_apply(&w);
    the_admin_status_is_gated_on_the_ack(&w);
    a_change_propagates(&mut w);
    a_broken_file_keeps_its_last_good_version_and_holds_back_no_other(&mut w, &cases);
    removing_the_broken_file_removes_its_routes(&mut w);
}

struct World {
    dir: std::path::PathBuf,
    /// The listener ports of gw-main, gw-hosts, gw-other, gw-foreign.
    ports: [u16; 4],
    agent: Agent,
    _envoy: Envoy,
    _backends: BTreeMap<String, Backend>,
}

fn given_four_gateways_and_26_routes() -> World {
    let dir = temp_dir("routing");
    let logs = temp_dir("routing-logs");
    let backends: BTreeMap<String, Backend> = (0..10)
        .map(|i| (format!("b{i}"), Backend::start(&format!("b{i}"))))
        .collect();
    let ports = [free_port(), free_port(), free_port(), free_port()];
    let mut gateways = GATEWAYS.to_string();
    for (i, port) in ports.iter().enumerate() {
        gateways = gateways.replace(&format!("P{}", i + 1), &port.to_string());
    }
    let services: String = backends
        .values()
        .map(|b| b.yaml("default") + "---\n")
        .collect();
    for (file, yaml) in [
        ("00-gateways.yaml", gateways),
        ("01-services.yaml", services),
        ("10-main.yaml", main_routes()),
        ("11-hosts.yml", hosts_routes()),
        ("12-other.yaml", other_routes("b7")),
    ] {
        std::fs::write(dir.join(file), yaml).unwrap();
    }
    let xds = format!("127.0.0.1:{}", free_port());
    let admin = format!("127.0.0.1:{}", free_port());
    let agent = Agent::start(agent_bin(), &dir, &xds, &admin, &logs, &[]);
    let envoy = envoy("routing", &xds, false, &logs);
    World {
        dir,
        ports,
        agent,
        _envoy: envoy,
        _backends: backends,
    }
}

/// A GET on `port` for `host` and `path`, and what must answer it.
fn get(port: u16, host: &str, path: &'static str, want: Want) -> Case {
    Case {
        port,
        method: "GET",
        host: host.to_string(),
        path,
        headers: vec![],
        want,
    }
}

fn mk_cases([p1, p2, p3, _]: [u16; 4]) -> Vec<Case> {
    let c = get;
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
    cases
}

/// Waits until every case holds at once (30 s), the agent running all along.
fn converge(cases: &[Case], what: &str, agent: &mut Agent) {
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
}

fn nothing_reaches_another_class_and_filters_apply(w: &World) {
    let [_, _, p3, p4] = w.ports;
    assert!(http_get(&format!("127.0.0.1:{p4}"), "x", "/", &[]).is_err());
    let r = http_get(&format!("127.0.0.1:{p3}"), "any.test", "/hdr", &[]).unwrap();
    assert_eq!(r.header("x-route"), Some("o-header"));
}

fn the_admin_status_is_gated_on_the_ack(w: &World) {
    let status = wait_until(Duration::from_secs(10), "programmed status", || {
        let s = w.agent.admin_get("/debug/status")?;
        (s.status == 200 && !s.body.contains("Pending")).then_some(s.body)
    });
    assert!(status.contains("gw-main"), "{status}");
    assert!(status.contains("NoMatchingListenerHostname"), "{status}");
}

/// o-1 moves from b7 to b8.
fn a_change_propagates(w: &mut World) {
    let t = Instant::now();
    std::fs::write(w.dir.join("12-other.yaml"), other_routes("b8")).unwrap();
    let moved = get(w.ports[2], "any.test", "/one", Want::Backend("b8"));
    converge(&[moved], "route update", &mut w.agent);
    eprintln!("update propagated in {:?}", t.elapsed());
}

/// Reported with its name and line, the broken file keeps its last good version,
/// and another file still loads.
fn a_broken_file_keeps_its_last_good_version_and_holds_back_no_other(
    w: &mut World,
    cases: &[Case],
) {
    let p3 = w.ports[2];
    let broken = "kind: HTTPRoute\nmetadata: [oops\n";
    std::fs::write(w.dir.join("12-other.yaml"), broken).unwrap();
    wait_until(Duration::from_secs(5), "the load error in the log", || {
        w.agent
            .proc
            .log_text()
            .contains("12-other.yaml:")
            .then_some(())
    });
    let extra = route(
        "o-extra",
        "default",
        OTHER,
        &[],
        &(prefix("/extra") + &to("b9")),
    );
    std::fs::write(w.dir.join("14-extra.yaml"), extra).unwrap();
    let what = "another file loads while one is broken";
    converge(
        &[get(p3, "any.test", "/extra", Want::Backend("b9"))],
        what,
        &mut w.agent,
    );
    let what = "last good config while a file is broken";
    converge(&cases[..24], what, &mut w.agent);
    let what = "the broken file's last good version still serving";
    converge(
        &[get(p3, "any.test", "/one", Want::Backend("b8"))],
        what,
        &mut w.agent,
    );
}

/// gw-other keeps only /extra.
fn removing_the_broken_file_removes_its_routes(w: &mut World) {
    let p3 = w.ports[2];
    std::fs::remove_file(w.dir.join("12-other.yaml")).unwrap();
    let after = [
        get(p3, "any.test", "/one", Want::Status(404)),
        get(p3, "any.test", "/extra", Want::Backend("b9")),
    ];
    converge(&after, "route deletion", &mut w.agent);
}
