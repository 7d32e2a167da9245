//! One scenario's world: its config files, backends (threads, or processes for
//! b0 in h and j), ports, and the agent (restarted in m); `change(i)` makes the
//! i-th change of its case.

use std::path::{Path, PathBuf};

use super::super::*;
use super::{Case, Change, GRPC_HOST, HOST};
use aether_testkit::live::GrpcBackend;
use aether_testkit::live::traffic::{
    Plan, Target, self_signed_cert, tls_secret_yaml, write_atomically,
};

/// The weights (b0, b1) of [`Change::Weights`], in turn.
const WEIGHT_STEPS: [(u32, u32); 4] = [(100, 0), (70, 30), (0, 100), (30, 70)];

/// One scenario's files, backends, ports and agent.
pub(super) struct World {
    case: Case,
    dir: PathBuf,
    logs: PathBuf,
    port: u16,
    port2: u16,
    backends: [Backend; 2],
    /// g0 and g1: the gRPC backends of GRPCRoute `grpc` (on GRPC_HOST).
    grpc: [GrpcBackend; 2],
    /// b0's endpoints as processes (h, j), in the order started, and whether
    /// each is in the EndpointSlices.
    children: Vec<(ChildBackend, bool)>,
    /// The listener's certificates (PEM): the first, then one per rotation.
    certs: Vec<(String, String)>,
    xds: String,
    admin: String,
    agent: Option<Agent>,
    restarts: usize,
}

impl World {
    pub(super) fn new(case: Case, dir: &Path, logs: &Path, plan: &Plan) -> World {
        let children = match case.change {
            Change::Kill | Change::Rolling => (0..2)
                .map(|i| (ChildBackend::start(&format!("b0-{i}"), logs), true))
                .collect(),
            _ => vec![],
        };
        let certs = match (case.tls, case.change) {
            (false, _) => 0,
            (true, Change::Rotate) => plan.changes + 1,
            (true, _) => 1,
        };
        World {
            case,
            dir: dir.to_path_buf(),
            logs: logs.to_path_buf(),
            port: free_port(),
            port2: free_port(),
            backends: [Backend::start("b0"), Backend::start("b1")],
            grpc: [GrpcBackend::start("g0"), GrpcBackend::start("g1")],
            children,
            certs: (0..certs).map(|_| self_signed_cert(HOST)).collect(),
            xds: format!("127.0.0.1:{}", free_port()),
            admin: format!("127.0.0.1:{}", free_port()),
            agent: None,
            restarts: 0,
        }
    }

    pub(super) fn target(&self) -> Target {
        Target {
            addr: format!("127.0.0.1:{}", self.port),
            host: HOST.into(),
            path: "/".into(),
            sni: self.case.tls.then(|| HOST.to_string()),
        }
    }

    pub(super) fn xds(&self) -> &str {
        &self.xds
    }

    pub(super) fn start_agent(&mut self) {
        let agent = Agent::start(
            agent_bin(),
            &self.dir,
            &self.xds,
            &self.admin,
            &self.logs,
            &[],
        );
        self.agent = Some(agent);
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub(super) fn write_first(&self) {
        write(&self.file("services.yaml"), &self.services());
        write(&self.file("gateway.yaml"), &self.gateway(false));
        if self.case.tls {
            write(&self.file("secret.yaml"), &self.secret(0));
        }
        let first = match self.case.change {
            Change::Weights => route(&[rule("/", &[("b0", Some(50)), ("b1", Some(50))])]),
            Change::ServicePort => self.b0_on_port(80),
            _ => route(&[rule("/", &[("b0", None)])]),
        };
        write(&self.file("route.yaml"), &first);
        write(&self.file("grpc.yaml"), &grpc_route("g0"));
        let filler = filler_routes();
        if filler > 0 {
            write(&self.file("filler.yaml"), &filler_yaml(filler));
        }
        if matches!(self.case.change, Change::OtherGateway | Change::ForeignNack) {
            write(
                &self.file("gw2.yaml"),
                &gw2_route(&rule("/", &[("b1", None)])),
            );
        }
    }

    /// The `i`-th change (from 0).
    pub(super) fn change(&mut self, i: usize) {
        let even = i.is_multiple_of(2);
        let other = if even { "b1" } else { "b0" };
        match self.case.change {
            Change::Switch => self.route_to(other),
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
            Change::Kill => self.children[0].0.kill(),
            Change::OtherGateway => {
                let to = if even { "b0" } else { "b1" };
                write_atomically(
                    &self.file("gw2.yaml"),
                    &gw2_route(&rule("/", &[(to, None)])),
                );
            }
            Change::Rolling => self.rolling_step(i),
            Change::ServicePort => {
                let port = if even { 8080 } else { 80 };
                write_atomically(&self.file("route.yaml"), &self.b0_on_port(port));
            }
            Change::ForeignNack if even => {
                // A new rejected version each time: `[a-z]`, `[b-z]`, ...
                let from = char::from(b'a' + (i / 2) as u8);
                let regex = format!("/[{from}-z]{{997}}");
                write_atomically(&self.file("gw2.yaml"), &gw2_route(&regex_rule(&regex)));
            }
            Change::ForeignNack => self.route_to(if (i / 2).is_multiple_of(2) {
                "b1"
            } else {
                "b0"
            }),
            Change::Restart => self.restart_agent(),
        }
    }

    /// Route `app`'s one rule `/` → `to`, and GRPCRoute `grpc` with it (b0 → g0, b1 → g1).
    fn route_to(&self, to: &str) {
        let text = route(&[rule("/", &[(to, None)])]);
        write_atomically(&self.file("route.yaml"), &text);
        if self.case.change == Change::Switch {
            let grpc = to.replacen('b', "g", 1);
            write_atomically(&self.file("grpc.yaml"), &grpc_route(&grpc));
        }
    }

    /// Step `i` of replacing b0's endpoints, three steps each: a new process
    /// started and added; the oldest one still in the slices taken out; 1 s
    /// (the plan's interval) later, that one stopped.
    fn rolling_step(&mut self, i: usize) {
        let old = i / 3;
        match i % 3 {
            0 => {
                let name = format!("b0-{}", self.children.len());
                let new = ChildBackend::start(&name, &self.logs);
                self.children.push((new, true));
            }
            1 => self.children[old].1 = false,
            _ => self.children[old].0.kill(),
        }
        if i % 3 != 2 {
            write_atomically(&self.file("services.yaml"), &self.services());
        }
    }

    /// SIGKILL, then the same command again (its log kept beside).
    fn restart_agent(&mut self) {
        let mut agent = self.agent.take().expect("the agent");
        agent.proc.kill();
        self.restarts += 1;
        let kept = self.logs.join(format!("aether-edge-{}.log", self.restarts));
        let _ = std::fs::rename(&agent.proc.log, kept);
        drop(agent);
        self.start_agent();
    }

    /// Services b0 (unless in route.yaml: k) and b1 with their EndpointSlices;
    /// b0's endpoints the processes in the slices (h, j), else its thread.
    fn services(&self) -> String {
        let b0 = match self.case.change {
            Change::ServicePort => String::new(),
            Change::Kill | Change::Rolling => {
                let endpoints: Vec<(&str, u16)> = self
                    .children
                    .iter()
                    .filter(|(_, in_slice)| *in_slice)
                    .map(|(c, _)| (c.ip.as_str(), c.port))
                    .collect();
                mk_service("default", "b0", 80, &endpoints) + "---\n"
            }
            _ => self.backends[0].yaml("default") + "---\n",
        };
        let grpc = format!(
            "---\n{}---\n{}",
            self.grpc[0].yaml("default"),
            self.grpc[1].yaml("default")
        );
        b0 + &self.backends[1].yaml("default") + &grpc
    }

    /// Service b0 on `port` (its thread backend) and route `app` to it: one file.
    fn b0_on_port(&self, port: u16) -> String {
        let b0 = &self.backends[0];
        let service = mk_service("default", "b0", port, &[(b0.ip.as_str(), b0.port)]);
        let rule = format!(
            "  - matches: [{{path: {{type: PathPrefix, value: \"/\"}}}}]\n    backendRefs: [{{name: b0, port: {port}}}]\n"
        );
        format!("{service}---\n{}", route(&[rule]))
    }

    /// GatewayClass `aether` and Gateway `default/gw`: listener `web` (HTTPS
    /// with Secret `cert` when the case is TLS), and `extra` (HTTP on the
    /// second port) when `extra`; Gateway `gw2` on the second port (i, l).
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
        let second = format!("{{name: extra, protocol: HTTP, port: {}}}", self.port2);
        if extra {
            listeners.push(second.clone());
        }
        let listeners: Vec<&str> = listeners.iter().map(String::as_str).collect();
        let class = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: aether}\nspec: {controllerName: gateway.aether.io/edge}\n";
        let mut text = format!("{class}---\n{}", mk_gateway("default", "gw", &listeners));
        if matches!(self.case.change, Change::OtherGateway | Change::ForeignNack) {
            text = format!("{text}---\n{}", mk_gateway("default", "gw2", &[&second]));
        }
        text
    }

    fn secret(&self, i: usize) -> String {
        tls_secret_yaml("default", "cert", &self.certs[i])
    }
}

/// More routes on the same Gateway, as many as `AETHER_TRAFFIC_ROUTES` says
/// (0 unless set): the shared Gateway whose one route table every change
/// rebuilds (the bench's `routes=N`).
fn filler_routes() -> usize {
    std::env::var("AETHER_TRAFFIC_ROUTES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// `n` HTTPRoutes `f<i>` on `gw`, each for its own host `f<i>.example.com`, to b0.
fn filler_yaml(n: usize) -> String {
    (0..n)
        .map(|i| {
            let spec = format!(
                "  parentRefs: [{{name: gw}}]\n  hostnames: [f{i}.example.com]\n  rules:\n{}",
                rule("/", &[("b0", None)])
            );
            mk_route("HTTPRoute", "default", &format!("f{i}"), &spec) + "---\n"
        })
        .collect()
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

/// GRPCRoute `default/grpc` on `gw` for GRPC_HOST, every method to `to` (port 80).
fn grpc_route(to: &str) -> String {
    let spec = format!(
        "  parentRefs: [{{name: gw}}]\n  hostnames: [{GRPC_HOST}]\n  rules:\n  - backendRefs: [{{name: {to}, port: 80}}]\n"
    );
    mk_route("GRPCRoute", "default", "grpc", &spec)
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

/// A rule for paths matching `regex` to b1: Envoy rejects the route table when
/// the regex's RE2 program is over the bootstrap's limit (translate lets
/// `/[a-z]{997}` through).
fn regex_rule(regex: &str) -> String {
    format!(
        "  - matches: [{{path: {{type: RegularExpression, value: \"{regex}\"}}}}]\n    backendRefs: [{{name: b1, port: 80}}]\n"
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

/// HTTPRoute `default/two` on Gateway gw2, for any host, with `rule`.
fn gw2_route(rule: &str) -> String {
    let spec = format!("  parentRefs: [{{name: gw2}}]\n  rules:\n{rule}");
    mk_route("HTTPRoute", "default", "two", &spec)
}
