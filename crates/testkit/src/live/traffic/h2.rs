//! HTTP/2 and gRPC clients through Envoy while a scenario changes it: what
//! the HTTP/1.1 clients of client.rs measure, over multiplexed connections.
//!
//! ```text
//!   H2Load::start ─► one runtime thread:
//!     `clients` × HTTP/2 GET /       on app's host   (one connection each, h2c or TLS+ALPN h2)
//!     `clients` × gRPC Echo.Unary    on the gRPC host (one channel each)
//!     1 × gRPC Echo.Stream           a message every 20 ms, held open
//!   every connection made is counted: one more than a client's first is a
//!   connection the server closed (a drain, a GOAWAY)
//! ```

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::Target;
use crate::live::grpc_backend::echo::Ping;
use crate::live::grpc_backend::echo::echo_client::EchoClient;

/// What one kind of call saw.
#[derive(Debug, Clone, Default)]
pub struct Calls {
    pub sent: u64,
    pub ok: u64,
    /// Failed calls by what came back (status, gRPC code, or the error).
    pub failed: BTreeMap<String, u64>,
    /// Connections made; more than the clients: the server closed some.
    pub connections: u64,
    /// The longest wait between two successful calls of one client.
    pub longest_gap: Duration,
    /// Successful calls by the backend that answered (gRPC).
    pub backends: BTreeMap<String, u64>,
}

impl Calls {
    pub fn failed_total(&self) -> u64 {
        self.failed.values().sum()
    }

    fn merge(&mut self, other: Calls) {
        self.sent += other.sent;
        self.ok += other.ok;
        for (k, n) in other.failed {
            *self.failed.entry(k).or_default() += n;
        }
        for (k, n) in other.backends {
            *self.backends.entry(k).or_default() += n;
        }
        self.longest_gap = self.longest_gap.max(other.longest_gap);
    }

    fn answered(&mut self, last: &mut Instant) {
        self.ok += 1;
        self.longest_gap = self.longest_gap.max(last.elapsed());
        *last = Instant::now();
    }
}

/// The server stream held open.
#[derive(Debug, Clone, Default)]
pub struct StreamTally {
    pub messages: u64,
    /// Times it ended or failed (then it was opened again): 0 when it held.
    pub breaks: u64,
    pub last_error: Option<String>,
    pub longest_gap: Duration,
}

/// What the HTTP/2 and gRPC clients saw.
#[derive(Debug, Clone, Default)]
pub struct H2Tally {
    pub clients: u64,
    pub http2: Calls,
    pub grpc: Calls,
    pub stream: StreamTally,
}

impl H2Tally {
    /// Connections the server closed (beyond each client's first).
    pub fn server_closed(&self) -> u64 {
        (self.http2.connections + self.grpc.connections).saturating_sub(2 * self.clients)
    }

    pub fn clean(&self) -> bool {
        self.http2.failed_total() == 0
            && self.grpc.failed_total() == 0
            && self.server_closed() == 0
            && self.stream.breaks == 0
            && self.http2.ok > 0
            && self.grpc.ok > 0
            && self.stream.messages > 0
    }

    /// One line for the table.
    pub fn line(&self) -> String {
        let backends: Vec<String> = self
            .grpc
            .backends
            .iter()
            .map(|(b, n)| format!("{b}:{n}"))
            .collect();
        format!(
            "h2 {}/{} ok, grpc {}/{} ok ({}), {} server-closed, stream {} msgs {} breaks, gap ms h2/grpc/stream {:.0}/{:.0}/{:.0}",
            self.http2.ok,
            self.http2.sent,
            self.grpc.ok,
            self.grpc.sent,
            backends.join(" "),
            self.server_closed(),
            self.stream.messages,
            self.stream.breaks,
            self.http2.longest_gap.as_secs_f64() * 1e3,
            self.grpc.longest_gap.as_secs_f64() * 1e3,
            self.stream.longest_gap.as_secs_f64() * 1e3,
        )
    }
}

/// HTTP/2 and gRPC clients running until [`H2Load::stop`].
pub struct H2Load {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<H2Tally>,
}

impl H2Load {
    /// `clients` HTTP/2 clients asking `target` for its path, as many gRPC
    /// clients calling `Echo.Unary` on `grpc_host`, and one `Echo.Stream`,
    /// all through `target.addr` (TLS when `target.sni`).
    pub fn start(target: &Target, grpc_host: &str, clients: usize) -> H2Load {
        H2Load::with_pause(target, grpc_host, clients, Duration::from_millis(1))
    }

    /// As [`H2Load::start`], each client pausing `pause` after each answer
    /// (a lighter load, for a long run on a shared machine).
    pub fn with_pause(target: &Target, grpc_host: &str, clients: usize, pause: Duration) -> H2Load {
        let stop = Arc::new(AtomicBool::new(false));
        let (target, grpc_host, flag) = (target.clone(), grpc_host.to_string(), stop.clone());
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(run(target, grpc_host, clients, pause, flag))
        });
        H2Load { stop, thread }
    }

    pub fn stop(self) -> H2Tally {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the HTTP/2 clients")
    }
}

async fn run(
    target: Target,
    grpc_host: String,
    clients: usize,
    pause: Duration,
    stop: Arc<AtomicBool>,
) -> H2Tally {
    let http2: Vec<_> = (0..clients)
        .map(|_| tokio::spawn(http2_client(target.clone(), pause, stop.clone())))
        .collect();
    let grpc: Vec<_> = (0..clients)
        .map(|_| {
            let (target, host) = (target.clone(), grpc_host.clone());
            tokio::spawn(grpc_client(target, host, pause, stop.clone()))
        })
        .collect();
    let stream = tokio::spawn(grpc_stream(target.clone(), grpc_host, stop));
    let mut tally = H2Tally {
        clients: clients as u64,
        ..H2Tally::default()
    };
    for t in http2 {
        let calls = t.await.expect("an HTTP/2 client");
        tally.http2.connections += calls.connections;
        tally.http2.merge(calls);
    }
    for t in grpc {
        let calls = t.await.expect("a gRPC client");
        tally.grpc.connections += calls.connections;
        tally.grpc.merge(calls);
    }
    tally.stream = stream.await.expect("the gRPC stream");
    tally
}

async fn http2_client(target: Target, pause: Duration, stop: Arc<AtomicBool>) -> Calls {
    let mut calls = Calls::default();
    let mut last = Instant::now();
    let mut sender: Option<hyper::client::conn::http2::SendRequest<String>> = None;
    let uri = format!("http://{}{}", target.host, target.path);
    while !stop.load(Ordering::Relaxed) {
        let ready = match sender.as_mut() {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        if !ready {
            calls.connections += 1;
            match http2_connect(&target).await {
                Ok(s) => sender = Some(s),
                Err(e) => {
                    *calls.failed.entry(format!("connect: {e}")).or_default() += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            }
        }
        let Some(s) = sender.as_mut() else { continue };
        let request = http::Request::get(&uri)
            .body(String::new())
            .expect("a request");
        calls.sent += 1;
        // The whole answer, body included: a stream dropped unread is reset
        // by the client, and Envoy closes a connection whose streams are
        // mostly reset early (its defence against rapid resets).
        let answer = async {
            let response = s.send_request(request).await?;
            let status = response.status();
            http_body_util::BodyExt::collect(response.into_body()).await?;
            Ok::<_, hyper::Error>(status)
        };
        match tokio::time::timeout(Duration::from_secs(5), answer).await {
            Ok(Ok(status)) if status == 200 => calls.answered(&mut last),
            Ok(Ok(status)) => *calls.failed.entry(format!("{status}")).or_default() += 1,
            Ok(Err(e)) => {
                *calls.failed.entry(format!("no answer: {e}")).or_default() += 1;
                sender = None;
            }
            Err(_) => {
                *calls.failed.entry("no answer in 5 s".into()).or_default() += 1;
                sender = None;
            }
        }
        tokio::time::sleep(pause).await;
    }
    calls
}

async fn http2_connect(
    target: &Target,
) -> std::io::Result<hyper::client::conn::http2::SendRequest<String>> {
    let conn = Conn::open(&target.addr, target.sni.as_deref()).await?;
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(conn))
            .await
            .map_err(std::io::Error::other)?;
    tokio::spawn(connection);
    Ok(sender)
}

/// A gRPC channel to `host` through `target.addr`, counting its connections.
fn channel(target: &Target, host: &str, connections: Arc<AtomicU64>) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{host}"))
        .expect("a gRPC endpoint")
        .timeout(Duration::from_secs(5))
        .connect_with_connector_lazy(Connector {
            addr: target.addr.clone(),
            // TLS names the gRPC host, as a client of that host would.
            sni: target.sni.as_ref().map(|_| host.to_string()),
            connections,
        })
}

async fn grpc_client(
    target: Target,
    host: String,
    pause: Duration,
    stop: Arc<AtomicBool>,
) -> Calls {
    let connections = Arc::new(AtomicU64::new(0));
    let mut client = EchoClient::new(channel(&target, &host, connections.clone()));
    let mut calls = Calls::default();
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        calls.sent += 1;
        match client.unary(Ping { interval_ms: 0 }).await {
            Ok(pong) => {
                calls.answered(&mut last);
                *calls.backends.entry(pong.into_inner().backend).or_default() += 1;
            }
            Err(status) => {
                let what = format!("{:?} {}", status.code(), status.message());
                *calls.failed.entry(what).or_default() += 1;
            }
        }
        tokio::time::sleep(pause).await;
    }
    calls.connections = connections.load(Ordering::Relaxed);
    calls
}

async fn grpc_stream(target: Target, host: String, stop: Arc<AtomicBool>) -> StreamTally {
    let mut client = EchoClient::new(channel(&target, &host, Arc::new(AtomicU64::new(0))));
    let mut tally = StreamTally::default();
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let mut stream = match client.stream(Ping { interval_ms: 20 }).await {
            Ok(s) => s.into_inner(),
            Err(status) => {
                tally.breaks += 1;
                tally.last_error = Some(format!("{:?} {}", status.code(), status.message()));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        loop {
            if stop.load(Ordering::Relaxed) {
                return tally;
            }
            let next = tokio::select! {
                m = stream.message() => m,
                () = tokio::time::sleep(Duration::from_millis(100)) => continue,
            };
            match next {
                Ok(Some(_)) => {
                    tally.messages += 1;
                    tally.longest_gap = tally.longest_gap.max(last.elapsed());
                    last = Instant::now();
                }
                Ok(None) => {
                    tally.breaks += 1;
                    tally.last_error = Some("the server ended the stream".into());
                    break;
                }
                Err(status) => {
                    tally.breaks += 1;
                    tally.last_error = Some(format!("{:?} {}", status.code(), status.message()));
                    break;
                }
            }
        }
    }
    tally
}

/// Connects gRPC channels to one address whatever their URI says (the URI
/// gives the `:authority`, the route's host).
#[derive(Clone)]
struct Connector {
    addr: String,
    sni: Option<String>,
    connections: Arc<AtomicU64>,
}

type Connecting = Pin<Box<dyn Future<Output = std::io::Result<TokioIo<Conn>>> + Send>>;

impl tower_service::Service<http::Uri> for Connector {
    type Response = TokioIo<Conn>;
    type Error = std::io::Error;
    type Future = Connecting;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Uri) -> Connecting {
        let this = self.clone();
        Box::pin(async move {
            this.connections.fetch_add(1, Ordering::Relaxed);
            Conn::open(&this.addr, this.sni.as_deref())
                .await
                .map(TokioIo::new)
        })
    }
}

/// A client connection for HTTP/2: TCP, or TLS offering only `h2`.
enum Conn {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Conn {
    async fn open(addr: &str, sni: Option<&str>) -> std::io::Result<Conn> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let Some(sni) = sni else {
            return Ok(Conn::Plain(tcp));
        };
        let name = ServerName::try_from(sni.to_string()).map_err(std::io::Error::other)?;
        let tls = tokio_rustls::TlsConnector::from(super::stream::tls_config(b"h2"))
            .connect(name, tcp)
            .await?;
        Ok(Conn::Tls(Box::new(tls)))
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
