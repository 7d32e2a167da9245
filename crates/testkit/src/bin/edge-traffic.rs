//! `edge-traffic`: the traffic kit as a program, for traffic through a real
//! cluster (`conformance/traffic`): the clients run until signalled and print
//! what they saw as JSON; the backend is a pod's program.
//!
//! ```text
//!   edge-traffic load --addr LBIP:80 --host H --grpc-host G   until SIGTERM/SIGINT (or --seconds)
//!     4 × HTTP/1.1 keep-alive (paced), 2 × HTTP/2 GET, 2 × gRPC unary,
//!     1 × gRPC server stream, 1 × WebSocket (a message every 200 ms)
//!     ─► one JSON line on stdout: per kind, and the row of the table
//!   edge-traffic backend [--http ADDR] [--grpc ADDR] [--name NAME]
//!     the kit's HTTP/1.1 + WebSocket echo backend and gRPC Echo backend
//!   edge-traffic probe --addr A --host H [--path P]      one request; exit 0 on a 200
//!   edge-traffic table NAME=FILE...                      median [min–max] per scenario;
//!                                                        exit 1 if a request failed
//! ```
//!
//! Streams reset: the gRPC server stream or the WebSocket ended under the
//! client (it opens them again). Failed: a request answered non-200 or not
//! answered at all, or a connection that could not be made. Server-closed: connections the server ended (HTTP/1.1
//! `connection: close` after a complete answer, HTTP/2 GOAWAY; a close under a
//! request is also a failed request).

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use aether_testkit::live::traffic::{H2Load, H2Tally, Load, Tally, Target, WebSocket, probe};
use aether_testkit::live::{GrpcBackend, serve_forever};
use serde_json::{Value, json};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        eprintln!("usage: edge-traffic load|backend|probe|table ...");
        return ExitCode::from(2);
    };
    let result = match command.as_str() {
        "load" => flags(rest).and_then(|f| load(&f)),
        "backend" => flags(rest).and_then(|f| backend(&f)),
        "probe" => flags(rest).and_then(|f| probe_once(&f)),
        "table" => table(rest),
        other => Err(format!("unknown command {other}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("edge-traffic {command}: {e}");
            ExitCode::FAILURE
        }
    }
}

type Flags = BTreeMap<String, String>;

/// `--name value` pairs.
fn flags(args: &[String]) -> Result<Flags, String> {
    let mut out = Flags::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let name = a.strip_prefix("--").ok_or(format!("not a flag: {a}"))?;
        let value = it.next().ok_or(format!("--{name} needs a value"))?;
        out.insert(name.to_string(), value.clone());
    }
    Ok(out)
}

fn flag<'a>(f: &'a Flags, name: &str, default: &'a str) -> &'a str {
    f.get(name).map(String::as_str).unwrap_or(default)
}

fn number(f: &Flags, name: &str, default: u64) -> Result<u64, String> {
    f.get(name)
        .map(|v| {
            v.parse()
                .map_err(|_| format!("--{name}: not a number: {v}"))
        })
        .unwrap_or(Ok(default))
}

fn target(f: &Flags) -> Result<Target, String> {
    Ok(Target {
        addr: f.get("addr").ok_or("--addr is required")?.clone(),
        host: flag(f, "host", "app.example").to_string(),
        path: flag(f, "path", "/").to_string(),
        sni: None,
    })
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

fn load(f: &Flags) -> Result<(), String> {
    let target = target(f)?;
    let grpc_host = flag(f, "grpc-host", "grpc.example").to_string();
    let clients = number(f, "clients", 4)? as usize;
    let rate = number(f, "rate", 200)? as u32;
    let pause = Duration::from_millis(number(f, "h2-pause-ms", 20)?);
    let seconds = number(f, "seconds", 0)?;
    let ws_path = flag(f, "websocket-path", "/ws").to_string();

    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let http1 = Load::paced(&target, clients, rate);
    let h2 = H2Load::with_pause(&target, &grpc_host, clients.div_ceil(2), pause);
    let ws = {
        let (target, stop) = (target.clone(), stop.clone());
        std::thread::spawn(move || websocket(&target, &ws_path, &stop))
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
        let timer = async {
            if seconds > 0 {
                tokio::time::sleep(Duration::from_secs(seconds)).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            () = timer => {}
        }
    });
    stop.store(true, Ordering::Relaxed);
    let http1 = http1.stop();
    let h2 = h2.stop();
    let ws = ws.join().map_err(|_| "the WebSocket client panicked")?;
    let report = report(started.elapsed(), &http1, &h2, &ws);
    println!("{report}");
    eprintln!("{}", line(&report["row"]));
    Ok(())
}

/// What the held WebSocket saw.
#[derive(Default)]
struct WsTally {
    exchanges: u64,
    answered: u64,
    /// Times it closed under the client (then opened again).
    breaks: u64,
    failed_opens: u64,
    longest_gap: Duration,
}

/// One WebSocket held open, a message every 200 ms; opened again when it breaks.
fn websocket(target: &Target, path: &str, stop: &AtomicBool) -> WsTally {
    let mut t = WsTally::default();
    let mut last = Instant::now();
    let mut ws: Option<WebSocket> = None;
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let Some(s) = ws.as_mut() else {
            match WebSocket::open(target, path) {
                Ok(s) => ws = Some(s),
                Err(_) => {
                    t.failed_opens += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            continue;
        };
        i += 1;
        t.exchanges += 1;
        if s.exchange(i) {
            t.answered += 1;
            t.longest_gap = t.longest_gap.max(last.elapsed());
            last = Instant::now();
        } else {
            t.breaks += 1;
            ws = None;
            continue;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    t.longest_gap = t.longest_gap.max(last.elapsed());
    t
}

fn report(elapsed: Duration, http1: &Tally, h2: &H2Tally, ws: &WsTally) -> Value {
    let calls = |c: &aether_testkit::live::traffic::Calls| {
        json!({
            "sent": c.sent, "ok": c.ok, "failed": c.failed_total(), "failures": c.failed,
            "connections": c.connections, "longest_gap_ms": ms(c.longest_gap), "backends": c.backends,
        })
    };
    // A connection that could not be made is a request that could not be sent.
    let failed =
        http1.lost() + http1.connect_errors + h2.http2.failed_total() + h2.grpc.failed_total();
    let sent = http1.sent + h2.http2.sent + h2.grpc.sent;
    let gap = http1
        .longest_gap
        .max(h2.http2.longest_gap)
        .max(h2.grpc.longest_gap);
    json!({
        "seconds": elapsed.as_secs_f64(),
        "http1": {
            "sent": http1.sent, "ok": http1.ok, "failed": http1.failed_total(),
            "failures": http1.failures, "no_answer": http1.no_answer,
            "server_closed": http1.server_closed, "connect_errors": http1.connect_errors,
            "connections": http1.connections, "longest_gap_ms": ms(http1.longest_gap),
            "backends": http1.backends,
        },
        "http2": calls(&h2.http2),
        "grpc": calls(&h2.grpc),
        "server_closed_h2_grpc": h2.server_closed(),
        "grpc_stream": {
            "messages": h2.stream.messages, "breaks": h2.stream.breaks,
            "last_error": h2.stream.last_error, "longest_gap_ms": ms(h2.stream.longest_gap),
        },
        "websocket": {
            "exchanges": ws.exchanges, "answered": ws.answered, "breaks": ws.breaks,
            "failed_opens": ws.failed_opens, "longest_gap_ms": ms(ws.longest_gap),
        },
        "row": {
            "sent": sent,
            "failed": failed,
            "server_closed": http1.server_closed + h2.server_closed(),
            "streams_reset": h2.stream.breaks + ws.breaks,
            "longest_gap_ms": ms(gap),
            "stream_gap_ms": ms(h2.stream.longest_gap.max(ws.longest_gap)),
        },
    })
}

const COLUMNS: [&str; 6] = [
    "sent",
    "failed",
    "server_closed",
    "streams_reset",
    "longest_gap_ms",
    "stream_gap_ms",
];

fn line(row: &Value) -> String {
    COLUMNS
        .iter()
        .map(|c| format!("{c}={}", row[c]))
        .collect::<Vec<_>>()
        .join(" ")
}

fn backend(f: &Flags) -> Result<(), String> {
    let name = f
        .get("name")
        .cloned()
        .or_else(|| std::env::var("POD_NAME").ok())
        .unwrap_or_else(|| "backend".into());
    let grpc = flag(f, "grpc", "0.0.0.0:9090");
    let _grpc = GrpcBackend::on(grpc, &name).map_err(|e| format!("gRPC on {grpc}: {e}"))?;
    let http = flag(f, "http", "0.0.0.0:8080");
    let listener = std::net::TcpListener::bind(http).map_err(|e| format!("HTTP on {http}: {e}"))?;
    eprintln!("backend {name}: HTTP/1.1 + WebSocket echo on {http}, gRPC Echo on {grpc}");
    serve_forever(&listener, &name);
    Ok(())
}

fn probe_once(f: &Flags) -> Result<(), String> {
    let target = target(f)?;
    match probe(&target) {
        Some((200, backend, _)) => {
            println!("200 {}", backend.unwrap_or_default());
            Ok(())
        }
        Some((status, _, _)) => Err(format!("answered {status}")),
        None => Err("no answer".into()),
    }
}

/// `NAME=FILE...`: each file one run's JSON; per NAME the median and the
/// range of each column over its runs.
fn table(args: &[String]) -> Result<(), String> {
    let mut runs: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for a in args {
        let (name, file) = a.split_once('=').ok_or(format!("not NAME=FILE: {a}"))?;
        let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
        let v: Value = serde_json::from_str(text.trim()).map_err(|e| format!("{file}: {e}"))?;
        if !runs.contains_key(name) {
            order.push(name.to_string());
        }
        runs.entry(name.to_string())
            .or_default()
            .push(v["row"].clone());
    }
    println!(
        "| scenario | runs | {} |",
        COLUMNS.map(|c| c.replace('_', " ")).join(" | ")
    );
    println!("|---|---|{}", "---|".repeat(COLUMNS.len()));
    for name in order {
        let rows = &runs[&name];
        let cells: Vec<String> = COLUMNS
            .iter()
            .map(|c| {
                let mut v: Vec<u64> = rows.iter().filter_map(|r| r[c].as_u64()).collect();
                v.sort_unstable();
                match (v.first(), v.last()) {
                    (Some(lo), Some(hi)) if lo != hi => format!("{} [{lo}–{hi}]", v[v.len() / 2]),
                    (Some(lo), _) => lo.to_string(),
                    _ => "-".into(),
                }
            })
            .collect();
        println!("| {name} | {} | {} |", rows.len(), cells.join(" | "));
    }
    let failed: u64 = runs
        .values()
        .flatten()
        .filter_map(|r| r["failed"].as_u64())
        .sum();
    match failed {
        0 => Ok(()),
        n => Err(format!("{n} requests failed")),
    }
}
