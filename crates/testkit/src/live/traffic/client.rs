//! Keep-alive clients and what they saw: [`Load`], closed loop or paced, and
//! [`probe`].
//!
//! Closed loop: each client sends as soon as its last answer came and its pause
//! passed (as much traffic as Envoy takes). Paced: each client sends on a fixed
//! schedule, the clients' schedules interleaved, so the load is a fixed rate
//! whatever the answers take; a client still waits for its answer before the
//! next request (HTTP/1.1, one request at a time per connection), and a slot it
//! missed that way is skipped, not sent late (`sent` shows it).

use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::stream::{Stream, connect};
use super::{Tally, Target};
use crate::live::{Response, read_response};

/// Client threads running against a [`Target`] until [`Load::stop`].
pub struct Load {
    stop: Arc<AtomicBool>,
    clients: Vec<JoinHandle<Tally>>,
}

/// When a client sends its next request.
#[derive(Debug, Clone, Copy)]
enum Pace {
    /// `pause` after the last answer.
    Pause(Duration),
    /// Every `period`, from `start`.
    Every { start: Instant, period: Duration },
}

impl Pace {
    /// Sleeps until the next send, from the moment `now` the last answer came.
    fn wait(&self, now: Instant) {
        match *self {
            Pace::Pause(pause) => std::thread::sleep(pause),
            Pace::Every { start, period } => {
                let slots = (now - start).as_nanos() / period.as_nanos() + 1;
                let next = start + period * u32::try_from(slots).unwrap_or(u32::MAX);
                std::thread::sleep(next - now);
            }
        }
    }
}

impl Load {
    /// `clients` threads, each sending a request, reading its answer, pausing
    /// `pause`, and again, on one persistent connection (a new one only when the
    /// server ended the last).
    pub fn start(target: &Target, clients: usize, pause: Duration) -> Load {
        Load::spawn(target, (0..clients).map(|_| Pace::Pause(pause)))
    }

    /// `clients` threads sending `rate` requests per second in all, each on one
    /// persistent connection, client k's slots `k / rate` after the last one's.
    pub fn paced(target: &Target, clients: usize, rate: u32) -> Load {
        let period = Duration::from_secs(1) * clients as u32 / rate;
        let start = Instant::now();
        let step = Duration::from_secs(1) / rate;
        let paces = (0..clients as u32).map(|k| Pace::Every {
            start: start + step * k,
            period,
        });
        Load::spawn(target, paces)
    }

    fn spawn(target: &Target, paces: impl Iterator<Item = Pace>) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let clients = paces
            .map(|pace| {
                let (target, stop) = (target.clone(), stop.clone());
                std::thread::spawn(move || {
                    if let Pace::Every { start, .. } = pace {
                        std::thread::sleep(start.saturating_duration_since(Instant::now()));
                    }
                    client(&target, &stop, pace)
                })
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

fn client(target: &Target, stop: &AtomicBool, pace: Pace) -> Tally {
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
        pace.wait(Instant::now());
    }
    t.longest_gap = t.longest_gap.max(last_ok.elapsed());
    t
}

enum Answer {
    Response(Response),
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
