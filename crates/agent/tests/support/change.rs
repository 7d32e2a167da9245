//! Traffic under change: the scenarios of "no request lost to a change", each
//! run on `aether-edge standalone` and a real Envoy with keep-alive clients
//! ([`aether_testkit::live::traffic`]) while its configuration changes.
//!
//! ```text
//!   clients ─keep-alive─► Envoy :P (HTTP, or HTTPS with Secret `cert`) ─► b0 / b1
//!                           ▲ ADS (Delta or SotW)
//!   config dir ─► aether-edge standalone
//!     gateway.yaml  GatewayClass + Gateway `gw`: listener `web` on :P (+ `extra` on :P2)
//!     services.yaml Services b0, b1 and their EndpointSlices
//!     secret.yaml   the listener's certificate (HTTPS)
//!     route.yaml    HTTPRoute `app`: app.example.com, `/` → b0 (and what a change adds)
//!     route2.yaml   HTTPRoute `other`, app.example.com `/other` → b1 (scenario e)
//! ```
//!
//! The clients ask for `/` on app.example.com. Every change keeps that route
//! served by b0 and/or b1, so no request has a reason to fail.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use aether_testkit::live::traffic::{
    Plan, Row, Scenario, Target, drive, probe, self_signed_cert, tls_secret_yaml, write_atomically,
};

pub const HOST: &str = "app.example.com";

/// What a scenario changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The rule's backendRef b0 → b1 → b0 … (no cluster for b1 before the first).
    Switch,
    /// The listener's certificate: the Secret rewritten with a new one each time.
    Rotate,
    /// A second rule (`/extra` → b1) added and removed beside the one in use.
    RuleBeside,
    /// A second HTTPRoute on the same hostname (`/other` → b1) added and removed.
    SecondRoute,
    /// A second listener (HTTP, another port) added to and removed from the Gateway.
    SecondListener,
    /// The rule's weights between b0 and b1 (through 100/0 and 0/100).
    Weights,
}

/// A scenario: its letter and name, what changes, and whether the listener
/// (and the clients) speak TLS.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub name: &'static str,
    pub change: Change,
    pub tls: bool,
}

pub const SWITCH: Case = Case {
    name: "a backendRef switch",
    change: Change::Switch,
    tls: false,
};
pub const SWITCH_TLS: Case = Case {
    name: "b backendRef switch, https",
    change: Change::Switch,
    tls: true,
};
pub const ROTATE: Case = Case {
    name: "c certificate rotation",
    change: Change::Rotate,
    tls: true,
};
pub const RULE_BESIDE: Case = Case {
    name: "d rule added/removed beside",
    change: Change::RuleBeside,
    tls: false,
};
pub const SECOND_ROUTE: Case = Case {
    name: "e 2nd HTTPRoute, same host",
    change: Change::SecondRoute,
    tls: false,
};
pub const SECOND_LISTENER: Case = Case {
    name: "f 2nd listener added/removed",
    change: Change::SecondListener,
    tls: false,
};
pub const WEIGHTS: Case = Case {
    name: "g weights b0/b1",
    change: Change::Weights,
    tls: false,
};

pub const ALL: [Case; 7] = [
    SWITCH,
    SWITCH_TLS,
    ROTATE,
    RULE_BESIDE,
    SECOND_ROUTE,
    SECOND_LISTENER,
    WEIGHTS,
];

/// The weights (b0, b1) of [`Change::Weights`], in turn.
const WEIGHT_STEPS: [(u32, u32); 4] = [(100, 0), (70, 30), (0, 100), (30, 70)];

/// Runs `case` on a fresh agent and Envoy (Delta ADS when `delta`): the first
/// version served, then [`drive`]. The logs stay (their directory printed)
/// when the row is not clean.
pub fn run(case: &Case, delta: bool, plan: &Plan) -> Row {
    let tag = case.name.split(' ').next().unwrap_or("x");
    let dir = temp_dir(&format!("change-{tag}"));
    let logs = temp_dir(&format!("change-{tag}-logs"));
    let world = World {
        case: *case,
        dir: dir.clone(),
        port: free_port(),
        port2: free_port(),
        backends: [Backend::start("b0"), Backend::start("b1")],
        certs: if case.tls {
            let n = if case.change == Change::Rotate {
                plan.changes + 1
            } else {
                1
            };
            (0..n).map(|_| self_signed_cert(HOST)).collect()
        } else {
            vec![]
        },
    };
    world.write_first();
    let (xds, admin) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let agent = Agent::start(agent_bin(), &dir, &xds, &admin, &logs, &[]);
    let node = format!("change-{tag}");
    let envoy = envoy(&node, &xds, delta, &logs);
    let target = world.target();
    wait_until(Duration::from_secs(30), "the first version served", || {
        let (status, _, _) = probe(&target)?;
        (status == 200).then_some(())
    });
    // Let the first version's resources all land (a cluster warming after its
    // route served a first 200 is not what is measured).
    std::thread::sleep(Duration::from_millis(300));
    let mode = if delta { "delta" } else { "sotw" };
    let mut scenario = Scenario {
        name: case.name.to_string(),
        dir: dir.clone(),
        target,
        change: Box::new(|i| world.change(i)),
        sessions: vec![],
    };
    let row = drive(&mut scenario, mode, plan, &envoy.admin);
    drop(scenario);
    drop(envoy);
    drop(agent);
    if row.clean() {
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&logs);
    } else {
        eprintln!("{} ({mode}): logs in {}", case.name, logs.display());
    }
    row
}

/// One scenario's files, backends and ports.
struct World {
    case: Case,
    dir: PathBuf,
    port: u16,
    port2: u16,
    backends: [Backend; 2],
    /// The listener's certificates (PEM): the first, then one per rotation.
    certs: Vec<(String, String)>,
}

impl World {
    fn target(&self) -> Target {
        Target {
            addr: format!("127.0.0.1:{}", self.port),
            host: HOST.into(),
            path: "/".into(),
            sni: self.case.tls.then(|| HOST.to_string()),
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn write_first(&self) {
        let services: String = self
            .backends
            .iter()
            .map(|b| b.yaml("default") + "---\n")
            .collect();
        write(&self.file("services.yaml"), &services);
        write(&self.file("gateway.yaml"), &self.gateway(false));
        if self.case.tls {
            write(&self.file("secret.yaml"), &self.secret(0));
        }
        let first = if self.case.change == Change::Weights {
            route(&[rule("/", &[("b0", Some(50)), ("b1", Some(50))])])
        } else {
            route(&[rule("/", &[("b0", None)])])
        };
        write(&self.file("route.yaml"), &first);
    }

    /// The `i`-th change (from 0).
    fn change(&self, i: usize) {
        let even = i.is_multiple_of(2);
        match self.case.change {
            Change::Switch => {
                let to = if even { "b1" } else { "b0" };
                write_atomically(
                    &self.file("route.yaml"),
                    &route(&[rule("/", &[(to, None)])]),
                );
            }
            Change::Rotate => write_atomically(&self.file("secret.yaml"), &self.secret(i + 1)),
            Change::RuleBeside => {
                let mut rules = vec![rule("/", &[("b0", None)])];
                if even {
                    rules.push(rule("/extra", &[("b1", None)]));
                }
                write_atomically(&self.file("route.yaml"), &route(&rules));
            }
            Change::SecondRoute => {
                let path = self.file("route2.yaml");
                if even {
                    write_atomically(&path, &other_route());
                } else {
                    std::fs::remove_file(&path).unwrap();
                }
            }
            Change::SecondListener => {
                write_atomically(&self.file("gateway.yaml"), &self.gateway(even));
            }
            Change::Weights => {
                let (w0, w1) = WEIGHT_STEPS[i % WEIGHT_STEPS.len()];
                let rules = [rule("/", &[("b0", Some(w0)), ("b1", Some(w1))])];
                write_atomically(&self.file("route.yaml"), &route(&rules));
            }
        }
    }

    /// GatewayClass `aether` and Gateway `default/gw`: listener `web` (HTTPS
    /// with Secret `cert` when the case is TLS), and `extra` (HTTP on the
    /// second port) when `extra`.
    fn gateway(&self, extra: bool) -> String {
        let web = if self.case.tls {
            format!(
                "{{name: web, protocol: HTTPS, port: {}, tls: {{certificateRefs: [{{name: cert}}]}}}}",
                self.port
            )
        } else {
            format!("{{name: web, protocol: HTTP, port: {}}}", self.port)
        };
        let mut listeners = vec![web];
        if extra {
            listeners.push(format!(
                "{{name: extra, protocol: HTTP, port: {}}}",
                self.port2
            ));
        }
        let listeners: Vec<&str> = listeners.iter().map(String::as_str).collect();
        let class = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n";
        format!("{class}---\n{}", mk_gateway("default", "gw", &listeners))
    }

    fn secret(&self, i: usize) -> String {
        tls_secret_yaml("default", "cert", &self.certs[i])
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// HTTPRoute `default/app` on `gw` for app.example.com with `rules` (each from [`rule`]).
fn route(rules: &[String]) -> String {
    let spec = format!(
        "  parentRefs: [{{name: gw}}]\n  hostnames: [{HOST}]\n  rules:\n{}",
        rules.concat()
    );
    mk_route("HTTPRoute", "default", "app", &spec)
}

/// A rule for path prefix `prefix` to `backends` (name, weight if any), port 80.
fn rule(prefix: &str, backends: &[(&str, Option<u32>)]) -> String {
    let refs: Vec<String> = backends
        .iter()
        .map(|(name, weight)| match weight {
            Some(w) => format!("{{name: {name}, port: 80, weight: {w}}}"),
            None => format!("{{name: {name}, port: 80}}"),
        })
        .collect();
    format!(
        "  - matches: [{{path: {{type: PathPrefix, value: \"{prefix}\"}}}}]\n    backendRefs: [{}]\n",
        refs.join(", ")
    )
}

/// HTTPRoute `default/other`, the second one on app.example.com: `/other` → b1.
fn other_route() -> String {
    let spec = format!(
        "  parentRefs: [{{name: gw}}]\n  hostnames: [{HOST}]\n  rules:\n{}",
        rule("/other", &[("b1", None)])
    );
    mk_route("HTTPRoute", "default", "other", &spec)
}
