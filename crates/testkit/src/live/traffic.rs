//! Traffic under change: keep-alive HTTP/1.1 clients (plain or TLS) running
//! through Envoy while a [`Scenario`] rewrites the configuration, and what they
//! lost.
//!
//! ```text
//!   Load::start ─► N client threads, each one persistent connection at a time:
//!                    GET ─► 200 from a backend? ─► ok, its name counted, gap since the last ok
//!                                   non-200     ─► failed (by status and body)
//!                    no answer (EOF, reset)     ─► no_answer + server_closed, reconnect
//!                    `connection: close`        ─► server_closed, reconnect
//!   drive(scenario, plan, envoy admin):
//!     Envoy /stats ─► Load ─► change(0) … change(n-1), `interval` apart ─► settle
//!       ─► Load::stop ─► Tally, and the Envoy counters that moved (the diagnosis)
//! ```
//!
//! A scenario's changes rewrite files with [`write_atomically`] (a temp file
//! renamed into place), so the agent never reads half a file.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::{http_get, read_response};

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

    fn merge(&mut self, other: Tally) {
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

/// Client threads running against a [`Target`] until [`Load::stop`].
pub struct Load {
    stop: Arc<AtomicBool>,
    clients: Vec<JoinHandle<Tally>>,
}

impl Load {
    /// `clients` threads, each sending a request, reading its answer, pausing
    /// `pause`, and again, on one persistent connection (a new one only when the
    /// server ended the last).
    pub fn start(target: &Target, clients: usize, pause: Duration) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let clients = (0..clients)
            .map(|_| {
                let (target, stop) = (target.clone(), stop.clone());
                std::thread::spawn(move || client(&target, &stop, pause))
            })
            .collect();
        Load { stop, clients }
    }

    /// Stops the clients and adds up what they saw.
    pub fn stop(self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        let mut total = Tally::default();
        for c in self.clients {
            total.merge(c.join().expect("a client thread panicked"));
        }
        total
    }
}

/// One request on a fresh connection (closed after): its status, the backend
/// that answered, and the server certificate's hash (TLS).
pub fn probe(target: &Target) -> Option<(u16, Option<String>, Option<u64>)> {
    let (mut conn, cert) = connect(target).ok()?;
    conn.get_mut().write_all(request(target).as_bytes()).ok()?;
    conn.get_mut().flush().ok()?;
    let r = read_response(&mut conn).ok()?;
    let backend = r.backend().map(str::to_string);
    Some((r.status, backend, cert))
}

fn request(target: &Target) -> String {
    format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\ncontent-length: 0\r\n\r\n",
        target.path, target.host
    )
}

fn client(target: &Target, stop: &AtomicBool, pause: Duration) -> Tally {
    let mut t = Tally::default();
    let start = Instant::now();
    let mut last_ok = start;
    let mut conn: Option<BufReader<Stream>> = None;
    let text = request(target);
    while !stop.load(Ordering::Relaxed) {
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match connect(target) {
                Ok((c, cert)) => {
                    t.connections += 1;
                    t.certs.extend(cert);
                    conn.insert(c)
                }
                Err(_) => {
                    t.connect_errors += 1;
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            },
        };
        t.sent += 1;
        let sent = c.get_mut().write_all(text.as_bytes());
        let answer = match sent.and_then(|()| c.get_mut().flush()) {
            Ok(()) => answer(c),
            Err(_) => Answer::Closed,
        };
        match answer {
            Answer::Response(r) => {
                if r.status == 200 {
                    let now = Instant::now();
                    t.ok += 1;
                    t.longest_gap = t.longest_gap.max(now - last_ok);
                    last_ok = now;
                    let backend = r.backend().unwrap_or("?").to_string();
                    *t.backends.entry(backend).or_default() += 1;
                } else {
                    *t.failed.entry(r.status).or_default() += 1;
                    let body: String = r.body.trim().chars().take(40).collect();
                    *t.failures
                        .entry(format!("{} {body}", r.status))
                        .or_default() += 1;
                }
                let close = r
                    .header("connection")
                    .is_some_and(|v| v.eq_ignore_ascii_case("close"));
                if close {
                    t.server_closed += 1;
                    conn = None;
                }
            }
            Answer::Closed => {
                t.no_answer += 1;
                t.server_closed += 1;
                conn = None;
            }
            Answer::TimedOut => {
                t.no_answer += 1;
                conn = None;
            }
        }
        std::thread::sleep(pause);
    }
    t.longest_gap = t.longest_gap.max(last_ok.elapsed());
    t
}

enum Answer {
    Response(super::Response),
    /// The server closed or reset the connection before answering.
    Closed,
    TimedOut,
}

fn answer(c: &mut BufReader<Stream>) -> Answer {
    use std::io::ErrorKind::{TimedOut, WouldBlock};
    match c.fill_buf() {
        Ok([]) => return Answer::Closed,
        Ok(_) => {}
        Err(e) if matches!(e.kind(), WouldBlock | TimedOut) => return Answer::TimedOut,
        Err(_) => return Answer::Closed,
    }
    match read_response(c) {
        Ok(r) => Answer::Response(r),
        Err(e) if matches!(e.kind(), WouldBlock | TimedOut) => Answer::TimedOut,
        Err(_) => Answer::Closed,
    }
}

/// A client connection: plain TCP or TLS over it.
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// A connection to `target`, its TLS handshake done (then also the hash of the
/// certificate the server presented).
fn connect(target: &Target) -> std::io::Result<(BufReader<Stream>, Option<u64>)> {
    let tcp = TcpStream::connect(&target.addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    tcp.set_nodelay(true)?;
    let Some(sni) = &target.sni else {
        return Ok((BufReader::new(Stream::Plain(tcp)), None));
    };
    let name = ServerName::try_from(sni.clone()).map_err(std::io::Error::other)?;
    let mut tls =
        rustls::ClientConnection::new(tls_config(), name).map_err(std::io::Error::other)?;
    let mut tcp = tcp;
    while tls.is_handshaking() {
        tls.complete_io(&mut tcp)?;
    }
    let cert = tls.peer_certificates().and_then(|c| c.first()).map(|c| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        c.as_ref().hash(&mut h);
        h.finish()
    });
    let stream = Stream::Tls(Box::new(rustls::StreamOwned::new(tls, tcp)));
    Ok((BufReader::new(stream), cert))
}

/// HTTP/1.1 over TLS, any server certificate accepted (the test made it; the
/// clients record which one they saw).
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .expect("ring supports the default TLS versions")
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Arc::new(config)
        })
        .clone()
}

/// Accepts any certificate, but checks the handshake's signatures with it.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Envoy's counters and gauges (admin `/stats`), by name.
#[derive(Debug, Clone, Default)]
pub struct EnvoyStats(pub BTreeMap<String, i64>);

/// The Envoy stats that explain lost requests and closed connections. A `*`
/// matches any part of a name; `http.admin.*` (our own reads) never counts.
pub const DIAGNOSIS: &[&str] = &[
    "http.*.no_cluster",
    "http.*.no_route",
    "cluster.*.upstream_cx_none_healthy",
    "http.*.downstream_rq_5xx",
    "http.*.downstream_cx_drain_close",
    "cluster_manager.cluster_added",
    "cluster_manager.cluster_modified",
    "cluster_manager.cluster_removed",
    "cluster_manager.cds.update_success",
    "cluster_manager.cds.update_rejected",
    "http.*.rds.*.update_success",
    "http.*.rds.*.update_rejected",
    "listener_manager.listener_added",
    "listener_manager.listener_modified",
    "listener_manager.listener_in_place_updated",
    "listener_manager.listener_removed",
    "listener_manager.lds.update_success",
    "listener_manager.lds.update_rejected",
    "sds.*.update_success",
];

impl EnvoyStats {
    /// Envoy's stats now, from its admin at `admin`.
    pub fn read(admin: &str) -> EnvoyStats {
        let r = http_get(admin, "localhost", "/stats", &[]).expect("Envoy admin /stats");
        let stats = r
            .body
            .lines()
            .filter_map(|l| {
                let (name, value) = l.split_once(": ")?;
                Some((name.to_string(), value.trim().parse().ok()?))
            })
            .collect();
        EnvoyStats(stats)
    }

    /// What moved from `before` to `self`: the differences that are not 0.
    pub fn since(&self, before: &EnvoyStats) -> EnvoyStats {
        let names: BTreeSet<&String> = self.0.keys().chain(before.0.keys()).collect();
        EnvoyStats(
            names
                .into_iter()
                .filter_map(|n| {
                    let d = self.0.get(n).unwrap_or(&0) - before.0.get(n).unwrap_or(&0);
                    (d != 0).then(|| (n.clone(), d))
                })
                .collect(),
        )
    }

    /// The sum of the stats matching `pattern` (`*` for any part of a name).
    pub fn sum(&self, pattern: &str) -> i64 {
        self.0
            .iter()
            .filter(|(n, _)| !n.starts_with("http.admin.") && glob(pattern, n))
            .map(|(_, v)| v)
            .sum()
    }

    /// `pattern=value` for each of [`DIAGNOSIS`] that is not 0.
    pub fn diagnosis(&self) -> String {
        DIAGNOSIS
            .iter()
            .filter_map(|p| {
                let v = self.sum(p);
                (v != 0).then(|| format!("{p}={v}"))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters.
fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// A configuration change to run under traffic: the config directory (its
/// first version already written) and `change(i)`, the i-th edit of its files.
pub struct Scenario<'a> {
    pub name: String,
    pub dir: PathBuf,
    pub target: Target,
    pub change: Box<dyn FnMut(usize) + 'a>,
}

/// How a scenario runs: `changes` edits `interval` apart under `clients`
/// keep-alive clients (each pausing `pause` between requests), then `settle`.
#[derive(Debug, Clone)]
pub struct Plan {
    pub changes: usize,
    pub interval: Duration,
    pub settle: Duration,
    pub clients: usize,
    pub pause: Duration,
}

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            changes: 10,
            interval: Duration::from_millis(200),
            settle: Duration::from_millis(1000),
            clients: 4,
            pause: Duration::from_millis(1),
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
}

/// Runs `scenario` under load through the Envoy whose admin is `envoy_admin`
/// (already serving the scenario's first version).
pub fn drive(scenario: &mut Scenario, mode: &str, plan: &Plan, envoy_admin: &str) -> Row {
    let before = EnvoyStats::read(envoy_admin);
    let load = Load::start(&scenario.target, plan.clients, plan.pause);
    std::thread::sleep(plan.interval);
    for i in 0..plan.changes {
        let at = Instant::now();
        (scenario.change)(i);
        std::thread::sleep(plan.interval.saturating_sub(at.elapsed()));
    }
    std::thread::sleep(plan.settle);
    let tally = load.stop();
    let stats = EnvoyStats::read(envoy_admin).since(&before);
    let final_cert = probe(&scenario.target).and_then(|(_, _, cert)| cert);
    Row {
        scenario: scenario.name.clone(),
        mode: mode.to_string(),
        tally,
        stats,
        final_cert,
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
        for (what, n) in &t.failures {
            let _ = write!(s, "\n    {n} × {what}");
        }
        let diagnosis = self.stats.diagnosis();
        if !diagnosis.is_empty() {
            let _ = write!(s, "\n    envoy: {diagnosis}");
        }
        s
    }

    /// Whether no request was lost and no connection closed by the server.
    pub fn clean(&self) -> bool {
        self.tally.lost() == 0 && self.tally.server_closed == 0 && self.tally.connect_errors == 0
    }
}

/// Writes `text` to `path` the way a careful program replaces a file: into a
/// temp file beside it (a dot file no `*.yaml` glob matches), renamed over it.
pub fn write_atomically(path: &Path, text: &str) {
    let name = path.file_name().unwrap().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A fresh self-signed certificate for `cn` (also its SAN), EC P-256, as PEM
/// (certificate, key), made with the `openssl` command.
pub fn self_signed_cert(cn: &str) -> (String, String) {
    let dir = super::temp_dir("cert");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let out = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", &format!("/CN={cn}")])
        .args(["-addext", &format!("subjectAltName=DNS:{cn}")])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("the `openssl` command, to make a certificate");
    assert!(out.status.success(), "openssl req: {out:?}");
    let pem = (
        std::fs::read_to_string(&cert).unwrap(),
        std::fs::read_to_string(&key).unwrap(),
    );
    let _ = std::fs::remove_dir_all(dir);
    pem
}

/// A `kubernetes.io/tls` Secret `ns/name` holding `cert` and `key` (PEM).
pub fn tls_secret_yaml(ns: &str, name: &str, (cert, key): &(String, String)) -> String {
    let indent = |pem: &str| {
        pem.lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}}}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        indent(cert),
        indent(key)
    )
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs() {
        assert!(glob("http.*.no_cluster", "http.edge_ls_x.no_cluster"));
        assert!(!glob("http.*.no_cluster", "http.edge_ls_x.no_cluster_x"));
        assert!(glob(
            "http.*.rds.*.update_success",
            "http.a.rds.edge_rt_b.update_success"
        ));
        assert!(glob(
            "cluster_manager.cluster_added",
            "cluster_manager.cluster_added"
        ));
        assert!(!glob(
            "cluster_manager.cluster_added",
            "cluster_manager.cluster_added2"
        ));
    }
}
