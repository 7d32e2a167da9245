//! A scenario run under load, and its table row.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::h2::{H2Load, H2Tally};
use super::session::{SessionTally, WebSocket};
use super::{EnvoyStats, Load, Tally, Target, probe};

/// A configuration change to run under traffic: the config directory (its
/// first version already written) and `change(i)`, the i-th edit of its files
/// (or of the world: a process killed, the agent restarted), the sessions
/// held open through it (opened before the first change), and the gRPC host
/// when HTTP/2 and gRPC clients run beside the HTTP/1.1 ones ([`H2Load`]).
pub struct Scenario<'a> {
    pub name: String,
    pub dir: PathBuf,
    pub target: Target,
    pub change: Box<dyn FnMut(usize) + 'a>,
    pub sessions: Vec<WebSocket>,
    pub grpc_host: Option<String>,
}

/// How a scenario runs: `changes` edits `interval` apart under `clients`
/// keep-alive clients, then `settle`. The clients run closed loop, each pausing
/// `pause` between requests, or, with a `rate`, paced: that many requests per
/// second in all ([`Load::paced`]).
#[derive(Debug, Clone)]
pub struct Plan {
    pub changes: usize,
    pub interval: Duration,
    pub settle: Duration,
    pub clients: usize,
    pub pause: Duration,
    pub rate: Option<u32>,
}

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            changes: 10,
            interval: Duration::from_millis(200),
            settle: Duration::from_millis(1000),
            clients: 4,
            pause: Duration::from_millis(1),
            rate: None,
        }
    }
}

/// One scenario's result in one ADS mode.
#[derive(Debug, Clone)]
pub struct Row {
    pub scenario: String,
    pub mode: String,
    pub tally: Tally,
    /// The Envoy stats that moved while the scenario ran.
    pub stats: EnvoyStats,
    /// The server certificate a fresh connection gets after the settle (TLS).
    pub final_cert: Option<u64>,
    /// The sessions held open through the scenario.
    pub sessions: Vec<SessionTally>,
    /// Envoy's own apply time per xDS type ([`super::stats::apply_times`]).
    pub apply: String,
    /// What the HTTP/2 and gRPC clients saw, when they ran.
    pub h2: Option<H2Tally>,
}

/// Runs `scenario` under load through the Envoy whose admin is `envoy_admin`
/// (already serving the scenario's first version).
pub fn drive(scenario: &mut Scenario, mode: &str, plan: &Plan, envoy_admin: &str) -> Row {
    let before = EnvoyStats::read(envoy_admin);
    let load = match plan.rate {
        Some(rate) => Load::paced(&scenario.target, plan.clients, rate),
        None => Load::start(&scenario.target, plan.clients, plan.pause),
    };
    let h2 = scenario
        .grpc_host
        .as_deref()
        .map(|host| H2Load::start(&scenario.target, host, plan.clients.div_ceil(2)));
    std::thread::sleep(plan.interval);
    for i in 0..plan.changes {
        let at = Instant::now();
        (scenario.change)(i);
        std::thread::sleep(plan.interval.saturating_sub(at.elapsed()));
        scenario.sessions.iter_mut().for_each(|s| _ = s.exchange(i));
    }
    std::thread::sleep(plan.settle);
    let at_end = plan.changes;
    scenario
        .sessions
        .iter_mut()
        .for_each(|s| _ = s.exchange(at_end));
    let tally = load.stop();
    let h2 = h2.map(H2Load::stop);
    let stats = EnvoyStats::read(envoy_admin).since(&before);
    let final_cert = probe(&scenario.target).and_then(|(_, _, cert)| cert);
    Row {
        scenario: scenario.name.clone(),
        mode: mode.to_string(),
        tally,
        stats,
        final_cert,
        sessions: scenario.sessions.iter().map(WebSocket::tally).collect(),
        apply: super::stats::apply_times(envoy_admin),
        h2,
    }
}

/// The header of [`Row::line`]s.
pub fn table_header() -> String {
    format!(
        "{:<28} {:<5} {:>7} {:>6} {:>8} {:>8} {:>6} {:>7} {:>8}  backends / certs",
        "scenario", "ads", "sent", "failed", "noanswer", "srvclose", "conns", "connerr", "gap ms"
    )
}

impl Row {
    /// One table line, and below it the failures by answer and the Envoy stats
    /// that moved.
    pub fn line(&self) -> String {
        let t = &self.tally;
        let backends: Vec<String> = t.backends.iter().map(|(b, n)| format!("{b}:{n}")).collect();
        let mut s = format!(
            "{:<28} {:<5} {:>7} {:>6} {:>8} {:>8} {:>6} {:>7} {:>8.0}  {}",
            self.scenario,
            self.mode,
            t.sent,
            t.failed_total(),
            t.no_answer,
            t.server_closed,
            t.connections,
            t.connect_errors,
            t.longest_gap.as_secs_f64() * 1e3,
            backends.join(" "),
        );
        if !t.certs.is_empty() {
            let last_seen = self.final_cert.is_some_and(|c| t.certs.contains(&c));
            let _ = write!(
                s,
                " / {} certs seen{}",
                t.certs.len(),
                if last_seen { "" } else { " (not the last)" }
            );
        }
        for st in &self.sessions {
            let state = if st.open { "open" } else { "CLOSED" };
            let _ = write!(
                s,
                " / {} {}/{} answered, {state}",
                st.name, st.answered, st.exchanges
            );
        }
        for (what, n) in &t.failures {
            let _ = write!(s, "\n    {n} × {what}");
        }
        if let Some(h2) = &self.h2 {
            let _ = write!(s, "\n    {}", h2.line());
            let failures = h2.http2.failed.iter().map(|f| ("h2", f));
            for (kind, (what, n)) in failures.chain(h2.grpc.failed.iter().map(|f| ("grpc", f))) {
                let _ = write!(s, "\n    {n} × {kind} {what}");
            }
            if let Some(e) = &h2.stream.last_error {
                let _ = write!(s, "\n    stream: {e}");
            }
        }
        let diagnosis = self.stats.diagnosis();
        if !diagnosis.is_empty() {
            let _ = write!(s, "\n    envoy: {diagnosis}");
        }
        if !self.apply.is_empty() {
            let _ = write!(s, "\n    envoy apply ms p50/p99/max: {}", self.apply);
        }
        s
    }

    /// Whether no request was lost, no connection closed by the server, and
    /// every session and stream stayed open.
    pub fn clean(&self) -> bool {
        self.tally.lost() == 0
            && self.tally.server_closed == 0
            && self.tally.connect_errors == 0
            && self.sessions.iter().all(|s| s.open)
            && self.h2.as_ref().is_none_or(H2Tally::clean)
    }
}
