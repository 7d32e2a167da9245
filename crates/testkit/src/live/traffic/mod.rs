//! Traffic under change: keep-alive HTTP/1.1 clients (plain or TLS) running
//! through Envoy while a [`Scenario`] rewrites the configuration, and what they
//! lost.
//!
//! ```text
//!   Load::start / ::paced ─► N client threads, each one persistent connection at a time
//!   (closed loop, or a fixed rate in all; client.rs, over stream.rs):
//!                    GET ─► 200 from a backend? ─► ok, its name counted, gap since the last ok
//!                                   non-200     ─► failed (by status and body)
//!                    no answer (EOF, reset)     ─► no_answer + server_closed, reconnect
//!                    `connection: close`        ─► server_closed, reconnect
//!   drive(scenario, plan, envoy admin):                                   (scenario.rs)
//!     Envoy /stats ─► Load ─► change(0) … change(n-1), `interval` apart ─► settle
//!                             └ each held WebSocket: a message after each (session.rs)
//!       ─► Load::stop ─► Tally, and the Envoy counters that moved (the diagnosis, stats.rs)
//! ```
//!
//! A scenario's changes rewrite files with [`write_atomically`] (a temp file
//! renamed into place), so the agent never reads half a file (files.rs).

mod client;
mod files;
mod h2;
mod scenario;
mod session;
mod stats;
mod stream;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

pub use client::{Load, probe};
pub use files::{self_signed_cert, tls_secret_yaml, write_atomically};
pub use h2::{Calls, H2Load, H2Tally, StreamTally};
pub use scenario::{Plan, Row, Scenario, drive, table_header};
pub use session::{SessionTally, WebSocket};
pub use stats::{DIAGNOSIS, EnvoyStats, apply_times};

/// Where the clients send: Envoy's listener, the Host header, the path, and the
/// TLS server name (HTTPS when set).
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: String,
    pub host: String,
    pub path: String,
    pub sni: Option<String>,
}

/// What a set of clients saw.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Requests written.
    pub sent: u64,
    /// 200s from a backend.
    pub ok: u64,
    /// Non-200 answers by status.
    pub failed: BTreeMap<u16, u64>,
    /// Non-200 answers by `<status> <body>` (the body cut short): Envoy's local
    /// replies say why (`no healthy upstream`, ...).
    pub failures: BTreeMap<String, u64>,
    /// Requests that got no answer at all (the connection closed or reset under
    /// them, or 5 s passed).
    pub no_answer: u64,
    /// Keep-alive connections the server ended: after an answer carrying
    /// `connection: close`, or by closing under a request.
    pub server_closed: u64,
    /// Connections that could not be opened (connect or TLS handshake failed).
    pub connect_errors: u64,
    /// Connections opened (the first one of each client included).
    pub connections: u64,
    /// The longest time one client went without a 200 (from the start of the
    /// load to its end).
    pub longest_gap: Duration,
    /// 200s by the backend that answered.
    pub backends: BTreeMap<String, u64>,
    /// The distinct server certificates seen in TLS handshakes (hashes).
    pub certs: BTreeSet<u64>,
}

impl Tally {
    pub fn failed_total(&self) -> u64 {
        self.failed.values().sum()
    }

    /// Requests lost: non-200 answers and requests without an answer.
    pub fn lost(&self) -> u64 {
        self.failed_total() + self.no_answer
    }

    pub(crate) fn merge(&mut self, other: Tally) {
        self.sent += other.sent;
        self.ok += other.ok;
        for (k, v) in other.failed {
            *self.failed.entry(k).or_default() += v;
        }
        for (k, v) in other.failures {
            *self.failures.entry(k).or_default() += v;
        }
        self.no_answer += other.no_answer;
        self.server_closed += other.server_closed;
        self.connect_errors += other.connect_errors;
        self.connections += other.connections;
        self.longest_gap = self.longest_gap.max(other.longest_gap);
        for (k, v) in other.backends {
            *self.backends.entry(k).or_default() += v;
        }
        self.certs.extend(other.certs);
    }
}
