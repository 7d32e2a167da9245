//! Traffic under change: the scenarios of "no request lost to a change", each
//! run on `aether-edge standalone` and a real Envoy with keep-alive clients
//! ([`aether_testkit::live::traffic`]) while its configuration, or the world
//! around it, changes.
//!
//! ```text
//!   clients ─keep-alive─► Envoy :P (HTTP, or HTTPS with Secret `cert`) ─► b0 / b1
//!   HTTP/2 GET, gRPC unary + a held stream ─┘  (gRPC on grpc.example.com) ─► g0 / g1
//!                           ▲ ADS (Delta or SotW)     (+ :P2, Gateway gw2: i, l)
//!   config dir ─► aether-edge standalone (killed and started again: m)
//!     gateway.yaml  GatewayClass + Gateway `gw`: listener `web` on :P (+ `extra` on :P2)
//!                   (+ Gateway `gw2`, listener on :P2: i, l)
//!     services.yaml Services b0, b1 and their EndpointSlices (b0: one slice per
//!                   endpoint process in h, j; in route.yaml in k)
//!     secret.yaml   the listener's certificate (HTTPS)
//!     route.yaml    HTTPRoute `app`: app.example.com, `/` → b0 (and what a change adds)
//!     route2.yaml   HTTPRoute `other`, app.example.com `/other` → b1 (e)
//!     grpc.yaml     GRPCRoute `grpc`, grpc.example.com → g0 (g1 with b1 in a)
//!     gw2.yaml      HTTPRoute `two` on gw2 (i, l)
//! ```
//!
//! The clients ask for `/` on app.example.com. Every change keeps that route
//! served by b0 and/or b1, so no request has a reason to fail, except in h,
//! where a backend process dies without notice: the requests it held when it
//! died are lost, and the default retries must save the rest.

mod world;

use std::time::Duration;

use super::*;
use aether_testkit::live::traffic::{Plan, Row, Scenario, WebSocket, drive, probe};
use world::World;

pub const HOST: &str = "app.example.com";
/// GRPCRoute `grpc`'s host: the HTTP/2 and gRPC clients' (Echo on g0, g1).
pub const GRPC_HOST: &str = "grpc.example.com";

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
    /// b0 is two endpoint processes; one is killed with SIGKILL, nothing else
    /// changes (clients paced, 50 requests/s).
    Kill,
    /// Gateway gw2's own route switches b1 → b0 → b1 … while the clients use gw.
    OtherGateway,
    /// b0's two endpoint processes replaced one at a time by new ones: a new one
    /// added, an old one out of the EndpointSlices, stopped (SIGKILL) 1 s later.
    Rolling,
    /// b0's Service port 80 → 8080 → 80 … and the rule's backendRef port with
    /// it, one file (one apply).
    ServicePort,
    /// gw2's route made one Envoy rejects (a regex over RE2's program size)
    /// with a new one each time, and between them gw's rule switched b0 ↔ b1.
    ForeignNack,
    /// The agent SIGKILLed and started again on the same addresses.
    Restart,
}

/// A scenario: its letter and name, what changes, whether the listener (and
/// the clients) speak TLS, and whether a WebSocket is held open through it.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub name: &'static str,
    pub change: Change,
    pub tls: bool,
    pub websocket: bool,
}

const fn case(name: &'static str, change: Change) -> Case {
    Case {
        name,
        change,
        tls: false,
        websocket: false,
    }
}

pub const SWITCH: Case = case("a backendRef switch", Change::Switch);
pub const SWITCH_TLS: Case = Case {
    tls: true,
    ..case("b backendRef switch, https", Change::Switch)
};
pub const ROTATE: Case = Case {
    tls: true,
    websocket: true,
    ..case("c certificate rotation", Change::Rotate)
};
pub const RULE_BESIDE: Case = case("d rule added/removed beside", Change::RuleBeside);
pub const SECOND_ROUTE: Case = case("e 2nd HTTPRoute, same host", Change::SecondRoute);
pub const SECOND_LISTENER: Case = case("f 2nd listener added/removed", Change::SecondListener);
pub const WEIGHTS: Case = case("g weights b0/b1", Change::Weights);
pub const KILL: Case = case("h backend kill -9, 50 rq/s", Change::Kill);
pub const OTHER_GATEWAY: Case = case("i another Gateway changed", Change::OtherGateway);
pub const ROLLING: Case = case("j endpoints replaced, rolling", Change::Rolling);
pub const SERVICE_PORT: Case = case("k Service port 80/8080", Change::ServicePort);
pub const FOREIGN_NACK: Case = case("l NACK of another Gateway", Change::ForeignNack);
pub const RESTART: Case = case("m agent kill -9, restarted", Change::Restart);

pub const ALL: [Case; 13] = [
    SWITCH,
    SWITCH_TLS,
    ROTATE,
    RULE_BESIDE,
    SECOND_ROUTE,
    SECOND_LISTENER,
    WEIGHTS,
    KILL,
    OTHER_GATEWAY,
    ROLLING,
    SERVICE_PORT,
    FOREIGN_NACK,
    RESTART,
];

impl Case {
    /// `base`, timed for this case: h kills once 1 s in and watches 6 s more
    /// under 50 requests/s (5 clients); j's 6 steps and m's 2 restarts are 1 s
    /// and 2 s apart.
    pub fn plan(&self, base: &Plan) -> Plan {
        let s = Duration::from_secs;
        match self.change {
            Change::Kill => Plan {
                changes: 1,
                interval: s(1),
                settle: s(5),
                clients: 5,
                rate: Some(50),
                ..base.clone()
            },
            Change::Rolling => Plan {
                changes: 6,
                interval: s(1),
                ..base.clone()
            },
            Change::Restart => Plan {
                changes: 2,
                interval: s(2),
                settle: s(2),
                ..base.clone()
            },
            _ => base.clone(),
        }
    }
}

/// Runs `case` on a fresh agent and Envoy (Delta ADS when `delta`): the first
/// version served, then [`drive`] with [`Case::plan`] of `plan`. The logs stay
/// (their directory printed) when the row is not clean.
pub fn run(case: &Case, delta: bool, plan: &Plan) -> Row {
    let plan = case.plan(plan);
    let tag = case.name.split(' ').next().unwrap_or("x");
    let dir = temp_dir(&format!("change-{tag}"));
    let logs = temp_dir(&format!("change-{tag}-logs"));
    let mut world = World::new(*case, &dir, &logs, &plan);
    world.write_first();
    world.start_agent();
    let node = format!("change-{tag}");
    let envoy = envoy(&node, world.xds(), delta, &logs);
    let target = world.target();
    wait_until(Duration::from_secs(30), "the first version served", || {
        let (status, _, _) = probe(&target)?;
        (status == 200).then_some(())
    });
    // Let the first version's resources all land (a cluster warming after its
    // route served a first 200 is not what is measured).
    std::thread::sleep(Duration::from_millis(300));
    let sessions = if case.websocket {
        vec![WebSocket::open(&target, "/ws").expect("a WebSocket through Envoy")]
    } else {
        vec![]
    };
    let mode = if delta { "delta" } else { "sotw" };
    let mut scenario = Scenario {
        name: case.name.to_string(),
        dir: dir.clone(),
        target,
        change: Box::new(|i| world.change(i)),
        sessions,
        grpc_host: Some(GRPC_HOST.to_string()),
    };
    let row = drive(&mut scenario, mode, &plan, &envoy.admin);
    drop(scenario);
    drop(envoy);
    drop(world);
    if row.clean() {
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&logs);
    } else {
        eprintln!("{} ({mode}): logs in {}", case.name, logs.display());
    }
    row
}
